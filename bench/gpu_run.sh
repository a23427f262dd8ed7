#!/usr/bin/env bash
# One call on a GPU machine: install the CUDA wheel that CI built (make cuda-wheel: dist-cuda/,
# cp310-abi3, against torch 2.14.1+cu130 for sm_80 and sm_90), unchanged, under whatever torch
# the machine has (>= 2.11), run the whole test suite (CUDA tests included) against it,
# then the GPU benchmarks. Results land in bench/results/ and, when $OUT is set, are copied
# there too. dist-cuda/ is git-ignored: send it along (the device tool's `carry`).
#   bash bench/gpu_run.sh            # install + tests + benchmarks
#   WHEEL=path.whl bash bench/gpu_run.sh
#   SKIP_BENCH=1 bash bench/gpu_run.sh
#   LM_MEDIUM=1 bash bench/gpu_run.sh  # adds the PTB medium-config quality run
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PYTHONUNBUFFERED=1
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
WHEEL=${WHEEL:-$(ls dist-cuda/fastsoftmax-*.whl 2>/dev/null | head -1)}
[ -n "$WHEEL" ] && [ -f "$WHEEL" ] \
  || { echo "gpu_run: no CUDA wheel in dist-cuda/: run make cuda-wheel and carry dist-cuda" >&2; exit 1; }
# A venv over the machine's packages (its torch), so that the wheel goes in without
# touching them; --no-deps: the wheel is checked against the torch that is there.
VENV=${GPU_VENV:-/tmp/fastsoftmax-gpu-venv}
rm -rf "$VENV"
python -m venv --system-site-packages "$VENV" || exit 1
PY=$VENV/bin/python
$PY -m pip install -q --no-index pytest scipy 2>/dev/null || true
$PY -m pip install -q --no-deps "$WHEEL" || exit 1
# The fused peers Liger-Kernel 0.8.5 and Cut Cross-Entropy 25.1.1 (bench/fused_peers.py) from
# wheels carried in dist-peers/ (git-ignored; the machine has no network): on the host,
#   pip download --no-deps liger-kernel==0.8.5 cut-cross-entropy==25.1.1 -d dist-peers
# Without them their rows are skipped with the reason.
if ls dist-peers/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps dist-peers/*.whl || echo "gpu_run: peer wheels did not install"
fi
# The tests and benchmarks run from a copy outside the checkout: they put their root on
# sys.path, and the checkout's fastsoftmax/ (no compiled extension) would shadow the wheel.
WORK=${GPU_WORK:-/tmp/fastsoftmax-gpu-run}
rm -rf "$WORK" && mkdir -p "$WORK" && cp -a tests bench tools pyproject.toml "$WORK/"
cd "$WORK"
$PY -c "import fastsoftmax, torch; print(fastsoftmax.__file__, fastsoftmax.build_info()); \
assert fastsoftmax.build_info()['cuda'] and torch.cuda.is_available()" || exit 1
status=0
$PY -m pytest -q -x tests 2>&1 | tee /tmp/gpu-tests.log | tail -40 || status=1
# ../shared does not travel to the GPU machine: copy the corpora into .device-data/ (git-
# ignored) and send it along with the checkout.
[ -d "$ROOT/.device-data" ] && export FASTSOFTMAX_DATA=$ROOT/.device-data
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  run() { echo "== $*"; "$@" || status=1; }
  # The device's copy bandwidth and every docs/benchmarks.md row's bound at it (bench/bound_model.py).
  run "$PY" bench/bound_model.py --measure | tee bench/results/bound-model-cuda.txt
  run "$PY" bench/bench_sampler.py --device cuda
  run "$PY" bench/bench_losses.py --device cuda  # with torch.compile, Liger and CCE peers
  # CCE's headline: exact full softmax at V = 256k, D = 2304, N = 8192, bf16, in ms and GB.
  run "$PY" bench/bench_cce_headline.py --device cuda
  run "$PY" bench/bench_word2vec.py --device cuda --no-gensim
  run "$PY" bench/bench_lm.py speed --device cuda
  run "$PY" bench/bench_seq2seq.py --device cuda --bench date tatoeba
  # PTB medium (2x650, 39 epochs, tied), full and sampled side by side: long, so opt-in.
  [ "${LM_MEDIUM:-0}" = 1 ] && run "$PY" bench/bench_lm.py quality --config medium \
    --heads full sampled --jobs 2 --device cuda
fi
mkdir -p "$ROOT/bench/results"
cp -a bench/results/. "$ROOT/bench/results/" 2>/dev/null || true
cd "$ROOT"
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT/results"
  cp bench/results/*cuda* bench/results/*H100* bench/results/*H200* "$OUT/results/" 2>/dev/null || true
  cp /tmp/gpu-tests.log "$OUT/" 2>/dev/null || true
fi
exit $status
