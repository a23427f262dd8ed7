#!/usr/bin/env bash
# One call on a GPU machine, sized to fit a ten-minute command: install the CUDA wheel that CI
# built (make cuda-wheel: dist-cuda/, cp310-abi3, against torch 2.14.1+cu130 for sm_80 and
# sm_90), unchanged, under whatever torch the machine has (>= 2.11); run the CUDA tests against
# it; then the GPU benchmarks and the word2vec scaling and hs=1 quality runs. Every step runs
# under its own time limit, so a slow one costs its limit and no more, and the log says which.
#   bash bench/gpu_run.sh                  # install + CUDA tests + benchmarks
#   WHEEL=path.whl bash bench/gpu_run.sh
#   SKIP_BENCH=1 bash bench/gpu_run.sh     # install + tests only
#   ALL_TESTS=1 bash bench/gpu_run.sh      # the whole suite, not only the CUDA tests
#   LIMIT_SCALE=2 bash bench/gpu_run.sh    # double every step's time limit
#   LM_MEDIUM=1 bash bench/gpu_run.sh      # adds the PTB medium-config quality run (long)
#   W2V_ONLY=1 bash bench/gpu_run.sh       # install + CUDA tests + the word2vec rows only
#   W2V_THREADS=1 ...                      # adds word2vec quality at 1-16 CPU threads (long)
#   OWED=1 bash bench/gpu_run.sh           # install + the CUDA, fused and sync-free tests + the
#                                          # rows the training-step and fused-softmax work still
#                                          # owes (about 7 minutes, for a 15-minute loan)
# Sent along with the checkout (all git-ignored, so name them in the device tool's `carry`):
#   dist-cuda/     the wheel (make cuda-wheel)
#   dist-peers/    Liger-Kernel and Cut Cross-Entropy (the machine has no network):
#                  pip download --no-deps liger-kernel==0.8.5 cut-cross-entropy==25.1.1 -d dist-peers
#   .device-data/  the corpora the benchmarks read (a copy of ../shared/data's wikitext-2, ptb
#                  and word-similarity)
# Results land in bench/results/; with $OUT set, the log and a tarball of bench/results go there.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PYTHONUNBUFFERED=1
PYTHON=${PYTHON:-python3}
LOG=${OUT:+$OUT/gpu-run.log}
LOG=${LOG:-/tmp/gpu-run.log}
exec > >(tee "$LOG") 2>&1
status=0
scale=${LIMIT_SCALE:-1}
# step LIMIT CMD...: run CMD for at most LIMIT seconds (times LIMIT_SCALE), log its time and status.
step() {
  local limit=$(( $1 * scale )) start=$SECONDS rc; shift
  echo "== [$limit s] $*"
  timeout -k 5 "$limit" "$@"; rc=$?
  echo "== rc $rc after $(( SECONDS - start )) s$([ $rc = 124 ] && echo ', stopped at its time limit')"
  [ $rc = 0 ] || status=1
}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
$PYTHON -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, \
'cuda', torch.version.cuda, torch.cuda.get_device_name(), 'cpus', __import__('os').cpu_count())"
WHEEL=${WHEEL:-$(ls dist-cuda/fastsoftmax-*.whl 2>/dev/null | head -1)}
[ -n "$WHEEL" ] && [ -f "$WHEEL" ] \
  || { echo "gpu_run: no CUDA wheel in dist-cuda/: run make cuda-wheel and carry dist-cuda"; exit 1; }
# Installed into a target folder over the machine's own packages (its torch), --no-deps: the
# wheel is checked against the torch that is there. (A venv made from a venv's python would
# not see that venv's packages.)
SITE=${GPU_SITE:-/tmp/fastsoftmax-gpu-site}
rm -rf "$SITE"
$PYTHON -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$WHEEL" || exit 1
if ls dist-peers/*.whl >/dev/null 2>&1; then
  $PYTHON -m pip install -q --no-index --no-deps --no-compile --target "$SITE" dist-peers/*.whl \
    || echo "gpu_run: peer wheels did not install: their rows are skipped"
fi
export PYTHONPATH=$SITE
# The tests and benchmarks run from a copy outside the checkout: they put their root on
# sys.path, and the checkout's fastsoftmax/ (no compiled extension) would shadow the wheel.
WORK=${GPU_WORK:-/tmp/fastsoftmax-gpu-run}
rm -rf "$WORK" && mkdir -p "$WORK" && cp -a tests bench tools docs README.md pyproject.toml "$WORK/"
cd "$WORK"
$PYTHON -c "import fastsoftmax, torch; print(fastsoftmax.__file__, fastsoftmax.build_info()); \
assert fastsoftmax.build_info()['cuda'] and torch.cuda.is_available()" || exit 1
PY=$PYTHON
[ -d "$ROOT/.device-data" ] && export FASTSOFTMAX_DATA=$ROOT/.device-data
if [ "${OWED:-0}" = 1 ]; then
  # The fused softmax natively, the sync-free steps, the unique sampler, then the owed rows.
  step 90 $PY -m pytest -q -p no:cacheprovider -rfE -k "cuda or gpu" tests
  step 90 $PY -m pytest -q -p no:cacheprovider -rfE tests/test_fused_softmax.py \
    tests/test_sync_free.py tests/test_unique_sampling.py
  step 60 $PY bench/bench_cce_headline.py --device cuda
  step 45 $PY bench/bench_cce_headline.py --device cuda --shape 8192,100000,1024
  step 60 $PY bench/bench_cce_headline.py --device cuda --shape 8192,800000,1024
  step 60 $PY bench/bench_sampler.py --device cuda --unique 8192 --vocab 1000000 --repeats 3 \
    --budget 4
  step 60 $PY bench/bench_lm.py speed --device cuda --datasets wikitext-2 synthetic-800k
  step 45 $PY bench/bench_lm.py breakdown --device cuda --datasets synthetic-800k \
    --heads full sampled neg --grads dense sparse --warmup 3 --steps 10
  step 90 $PY bench/bench_losses.py --device cuda --cases eval --repeat 3 --warmup 1 --no-compile
  SKIP_BENCH=1
elif [ "${ALL_TESTS:-0}" = 1 ]; then
  step 540 $PY -m pytest -q -p no:cacheprovider -rfE tests
else
  # The tests parametrized over "cuda" (tests/conftest.py DEVICES) and the CUDA-only ones.
  step 90 $PY -m pytest -q -p no:cacheprovider -rfE -k "cuda or gpu" tests
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  # The device's copy bandwidth and matmul rate, and every row's bound at them.
  [ "${W2V_ONLY:-0}" = 1 ] || step 25 $PY bench/bound_model.py --measure
  w2v="$PY bench/bench_word2vec.py --no-gensim"
  # word2vec, negative sampling: the GPU against the CPU's cores, 5 epochs, three seeds each
  # (one epoch of WikiText-2 is too little for negative sampling to score on WS-353).
  step 60 $w2v --device cuda --models sg,cbow --epochs 5 --seeds 1,2,3
  step 60 $w2v --threads "$(nproc)" --models sg,cbow --epochs 5 --seeds 1,2,3
  # gensim with as many workers, the same seeds: the third column of the word2vec table.
  step 90 $PY bench/bench_word2vec.py --threads "$(nproc)" --models sg,cbow --epochs 5 \
    --seeds 1,2,3 --gensim-only
  # hs=1 alone, lockstep rounds on CUDA against the CPU's cores.
  step 40 $w2v --device cuda --models sg,cbow --epochs 5 --seeds 1,2,3 --hs 1 --negative 0
  step 60 $w2v --threads "$(nproc)" --models sg,cbow --epochs 5 --seeds 1,2,3 --hs 1 \
    --negative 0
  # The CPU's quality against its thread count (16 real cores; 2 only oversubscribe).
  [ "${W2V_THREADS:-0}" = 1 ] && step 300 $PY bench/word2vec_gpu_quality.py --round-size 0 \
    --threads 1,2,4,8,16 --seeds 1,2,3 --jobs 1
fi
if [ "${SKIP_BENCH:-0}" != 1 ] && [ "${W2V_ONLY:-0}" != 1 ]; then
  # Scaling over CPU workers: skip-gram, negative sampling, one epoch, one seed.
  for t in 1 2 4 8 16; do
    [ "$t" -le "$(nproc)" ] && step 20 $w2v --threads $t --models sg --epochs 1 --seeds 1
  done
  step 40 $PY bench/bench_sampler.py --device cuda --repeats 3 --budget 4
  # CCE's headline: exact full softmax at V = 256k, D = 2304, N = 8192, bf16, in ms and GB.
  step 60 $PY bench/bench_cce_headline.py --device cuda
  # One case a call, so that a slow case cannot take the rest. torch.compile's row is left to
  # the CCE headline above: with it, the lm case ran past 120 s on an H200 and printed nothing.
  step 60 $PY bench/bench_losses.py --device cuda --cases word2vec --repeat 5 --warmup 2
  step 120 $PY bench/bench_losses.py --device cuda --cases lm --repeat 3 --warmup 1 --no-compile
  # hs,eval printed no row within 90 s on an H200 (which provider is slow is not known yet).
  step 150 $PY bench/bench_losses.py --device cuda --cases hs,eval --repeat 3 --warmup 1 \
    --no-compile
  step 30 $PY bench/bench_lm.py speed --device cuda --datasets wikitext-2
  # PTB medium (2x650, 39 epochs, tied), full and sampled side by side: long, so opt-in.
  [ "${LM_MEDIUM:-0}" = 1 ] && step 3600 $PY bench/bench_lm.py quality --config medium \
    --heads full sampled --jobs 2 --device cuda
fi
mkdir -p "$ROOT/bench/results"
cp -a bench/results/. "$ROOT/bench/results/" 2>/dev/null || true
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/results.tgz" -C "$WORK/bench" results
fi
echo "gpu_run: status $status"
exit $status
