#!/usr/bin/env bash
# One call on a GPU machine: build against the machine's CUDA torch, run the
# whole test suite (CUDA tests included), then the GPU benchmarks. Results land in
# bench/results/ and, when $OUT is set, are copied there too.
#   bash bench/gpu_run.sh            # build + tests + benchmarks
#   SKIP_BENCH=1 bash bench/gpu_run.sh
#   LM_MEDIUM=1 bash bench/gpu_run.sh  # adds the PTB medium-config quality run
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 FORCE_CUDA=1 MAX_JOBS=${MAX_JOBS:-16}
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
python -m pip install -q --no-index pytest scipy 2>/dev/null || true
python setup.py -q build_ext --inplace 2>&1 | grep -E "error|warning: " | head -50
python -c "import fastsoftmax; print(fastsoftmax.build_info())" || exit 1
status=0
python -m pytest -q -x tests 2>&1 | tee /tmp/gpu-tests.log | tail -40 || status=1
# ../shared does not travel to the GPU machine: copy the corpora into .device-data/ (git-
# ignored) and send it along with the checkout.
[ -d .device-data ] && export FASTSOFTMAX_DATA=$PWD/.device-data
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  run() { echo "== $*"; "$@" || status=1; }
  # The device's copy bandwidth and every docs/benchmarks.md row's bound at it (bench/bound_model.py).
  run python bench/bound_model.py --measure | tee bench/results/bound-model-cuda.txt
  run python bench/bench_sampler.py --device cuda
  run python bench/bench_losses.py --device cuda
  run python bench/bench_word2vec.py --device cuda --no-gensim
  run python bench/bench_lm.py speed --device cuda
  run python bench/bench_seq2seq.py --device cuda --bench date tatoeba
  # PTB medium (2x650, 39 epochs, tied), full and sampled side by side: long, so opt-in.
  [ "${LM_MEDIUM:-0}" = 1 ] && run python bench/bench_lm.py quality --config medium \
    --heads full sampled --jobs 2 --device cuda
fi
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT/results"
  cp bench/results/*cuda* bench/results/*H100* bench/results/*H200* "$OUT/results/" 2>/dev/null || true
  cp /tmp/gpu-tests.log "$OUT/" 2>/dev/null || true
fi
exit $status
