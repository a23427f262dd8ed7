#!/usr/bin/env bash
# GPU runs in parts that each fit 4 minutes of device time (a 15-minute loan holds three),
# ordered by what they settle. Each call installs the CUDA wheel that CI built (make
# cuda-wheel: dist-cuda/, cp310-abi3, against torch 2.14.1+cu130 for sm_80 and sm_90),
# unchanged, under whatever torch the machine has (>= 2.11), then runs the parts it is given.
# Every step runs under its own time limit, so a slow one costs its limit and no more, and the
# log says which.
#   bash bench/gpu_run.sh --list           # the parts and their expected seconds; needs no GPU
#   bash bench/gpu_run.sh                  # parts 1-3, what settles most
#   bash bench/gpu_run.sh --part 4         # one part; --part 4,5 or --part all (1-8)
#   FASTSOFTMAX_COMMIT=abc1234 bash ...    # the commit every row carries (default: the
#                                          # checkout's, where it has .git)
#   WHEEL=path.whl, LIMIT_SCALE=2 (every limit doubled), PYTHON=python3.12
# The old modes still work and say which parts they mean: SKIP_BENCH=1 (part 1), W2V_ONLY=1
# (1,3), OWED=1 (1,2,4,6,7), ALL_TESTS=1 (11), W2V_THREADS=1 (adds 9), LM_MEDIUM=1 (adds 10).
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
SETUP_S=30      # install, copy and import checks before the first step: a guess, not timed
BUDGET_S=240    # what a part may take, setup included, with every step at its limit
LONG_PARTS="9 10 11"
ALL_PARTS="1 2 3 4 5 6 7 8"
scale=${LIMIT_SCALE:-1}

title() {
  case $1 in
    1) echo "the CUDA tests, and the fused, sync-free (set_sync_debug_mode) and unique-sampler tests natively" ;;
    2) echo "the fused exact softmax against Cut Cross-Entropy and Liger-Kernel at the headline shapes" ;;
    3) echo "word2vec in lockstep rounds: speed and WS-353 on the GPU, beside 16 CPU threads and gensim" ;;
    4) echo "the LM step: sampled against full softmax, the breakdown, and fastsoftmax-lm train --compile" ;;
    5) echo "the loss kernels: copy bandwidth and bounds, negative sampling, sampled softmax and NCE" ;;
    6) echo "hierarchical softmax, the exact softmax without grad (eval), alias draws" ;;
    7) echo "unique sampling (one block and multi-block rounds), word2vec hs=1 on 16 CPU threads" ;;
    8) echo "word2vec scaling over 1-16 CPU threads (the GPU machine's CPU)" ;;
    9) echo "word2vec quality in CUDA's order on 1-16 CPU threads (long: only when named)" ;;
    10) echo "PTB medium config, full and sampled side by side (long: only when named)" ;;
    11) echo "the whole test suite against the wheel (long: only when named)" ;;
    *) return 1 ;;
  esac
}

# step LIMIT SEEN CMD...: run CMD for at most LIMIT seconds (times LIMIT_SCALE), log its time and
# status. SEEN is what the step took in the last GPU log (bench/results/gpu-run-cuda.log,
# 2026-11-26), or - where no log timed it; --list sums these instead of running anything.
step() {
  local limit=$(( $1 * scale )) seen=$2 start=$SECONDS rc; shift 2
  if [ "$LISTING" = 1 ]; then
    list_limit=$(( list_limit + limit )) list_steps=$(( list_steps + 1 ))
    if [ "$seen" = - ]; then
      list_guess=$(( list_guess + limit / 2 )); list_unseen=$(( list_unseen + 1 ))
    else
      list_seen=$(( list_seen + seen ))
    fi
    return 0
  fi
  echo "== [$limit s] $*"
  timeout -k 5 "$limit" "$@"; rc=$?
  echo "== rc $rc after $(( SECONDS - start )) s$([ $rc = 124 ] && echo ', stopped at its time limit')"
  [ $rc = 0 ] || status=1
}

# part N: the steps of part N, in order. (timeout runs programs, not shell functions, so the
# commands shared by several steps are strings, split where they are used.)
part() {
  local w2v="$PY bench/bench_word2vec.py --no-gensim" t
  # A short fastsoftmax-lm run on WikiText-2: the log gives its tokens/s (compiling included)
  # and perplexity; it writes no rows.
  local lm="$PY -m fastsoftmax.cli.lm train --data $DATA/wikitext-2 --max-steps 500 --epochs 1 --force"
  case $1 in
    1)  # The tests parametrized over "cuda" (tests/conftest.py DEVICES) and the CUDA-only ones,
        # then three files whole: the fused kernels natively, the training steps under
        # torch.cuda.set_sync_debug_mode("error"), the unique sampler (a -k filter would
        # deselect most of them).
        step 90 23 $PY -m pytest -q -p no:cacheprovider -rfE -k "cuda or gpu" tests
        step 120 - $PY -m pytest -q -p no:cacheprovider -rfE tests/test_fused_softmax.py \
          tests/test_sync_free.py tests/test_unique_sampling.py ;;
    2)  # CCE's headline (V = 256k, D = 2304, N = 8192, bf16), then V = 10^5 and 8*10^5 at D = 1024.
        step 60 36 $PY bench/bench_cce_headline.py --device cuda
        step 45 - $PY bench/bench_cce_headline.py --device cuda --shape 8192,100000,1024
        step 60 - $PY bench/bench_cce_headline.py --device cuda --shape 8192,800000,1024 ;;
    3)  # Negative sampling and hs=1 on the GPU, 5 epochs, three seeds (one epoch of WikiText-2
        # is too little for negative sampling to score on WS-353); the CPU's 16 threads and
        # gensim with as many workers, the same seeds: the three columns of the word2vec table.
        step 60 - $w2v --device cuda --models sg,cbow --epochs 5 --seeds 1,2,3
        step 40 - $w2v --device cuda --models sg,cbow --epochs 5 --seeds 1,2,3 --hs 1 --negative 0
        step 40 18 $w2v --threads "$(nproc)" --models sg,cbow --epochs 5 --seeds 1,2,3
        step 60 - $PY bench/bench_word2vec.py --threads "$(nproc)" --models sg,cbow --epochs 5 \
          --seeds 1,2,3 --gensim-only ;;
    4)  # Tokens/s of every head eager, the step's breakdown at V = 8*10^5, then the compiled
        # step (torch.compile fullgraph, inductor) of the sampled and full heads.
        step 45 - $PY bench/bench_lm.py speed --device cuda --datasets wikitext-2 synthetic-800k
        step 45 - $PY bench/bench_lm.py breakdown --device cuda --datasets synthetic-800k \
          --heads full sampled neg --grads dense sparse --warmup 3 --steps 10
        step 60 - $lm --output sampled --compile --checkpoint /tmp/gpu-run-lm-sampled.pt
        step 60 - $lm --output full --compile --checkpoint /tmp/gpu-run-lm-full.pt ;;
    5)  # The device's copy bandwidth and every row's bound at it; then the loss cases, one a
        # call, so that a slow case cannot take the rest. torch.compile's row is left to the CCE
        # headline: with it, the lm case ran past 120 s on an H200 and printed nothing.
        step 25 4 $PY bench/bound_model.py --measure
        step 60 15 $PY bench/bench_losses.py --device cuda --cases word2vec --repeat 5 --warmup 2
        step 120 - $PY bench/bench_losses.py --device cuda --cases lm --repeat 3 --warmup 1 \
          --no-compile ;;
    6)  # hs and eval printed no row within 90 s on 2026-11-26: their weights were drawn on the
        # CPU then (now on the device).
        step 90 - $PY bench/bench_losses.py --device cuda --cases hs --repeat 3 --warmup 1 \
          --no-compile
        step 60 - $PY bench/bench_losses.py --device cuda --cases eval --repeat 3 --warmup 1 \
          --no-compile
        step 30 6 $PY bench/bench_sampler.py --device cuda --repeats 3 --budget 4 ;;
    7)  # S = 8192 takes the multi-block rounds, S = 1024 the single block.
        step 45 - $PY bench/bench_sampler.py --device cuda --unique 8192 --vocab 1000000 \
          --repeats 3 --budget 4
        step 45 - $PY bench/bench_sampler.py --device cuda --unique 1024 --vocab 100000,1000000 \
          --repeats 3 --budget 4
        step 60 - $w2v --threads "$(nproc)" --models sg,cbow --epochs 5 --seeds 1,2,3 --hs 1 \
          --negative 0 ;;
    8)  # Skip-gram, negative sampling, one epoch, one seed (16 real cores; 2 only oversubscribe).
        # (what each took in the log: 7, 6, 4, 4 and 4 s)
        for t in 1:7 2:6 4:4 8:4 16:4; do
          step 20 "${t#*:}" $w2v --threads "${t%:*}" --models sg --epochs 1 --seeds 1
        done ;;
    9)  step 300 - $PY bench/word2vec_gpu_quality.py --round-size 0 --threads 1,2,4,8,16 \
          --seeds 1,2,3 --jobs 1 ;;
    10) step 3600 - $PY bench/bench_lm.py quality --config medium --heads full sampled --jobs 2 \
          --device cuda ;;
    11) step 540 - $PY -m pytest -q -p no:cacheprovider -rfE tests ;;
  esac
}

# ---- which parts ------------------------------------------------------------------------------
LISTING=0
parts=""
PY=${PYTHON:-python3}
DATA=${FASTSOFTMAX_DATA:-$ROOT/../shared/data}
refuse() { echo "gpu_run: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --list) LISTING=1 ;;
    --part) [ $# -ge 2 ] || refuse "--part needs a number, a comma list or all"
            parts="$parts ${2//,/ }"; shift ;;
    --part=*) parts="$parts ${1#--part=}"; parts=${parts//,/ } ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) refuse "unknown argument '$1' (--list, --part N[,M...] or --part all)" ;;
  esac
  shift
done
old_mode() { echo "gpu_run: $1=1 means --part $2"; parts="$parts ${2//,/ }"; }
[ "${OWED:-0}" = 1 ] && old_mode OWED 1,2,4,6,7
[ "${SKIP_BENCH:-0}" = 1 ] && old_mode SKIP_BENCH 1
[ "${ALL_TESTS:-0}" = 1 ] && old_mode ALL_TESTS 11
[ "${W2V_ONLY:-0}" = 1 ] && old_mode W2V_ONLY 1,3
[ "${W2V_THREADS:-0}" = 1 ] && old_mode W2V_THREADS 9
[ "${LM_MEDIUM:-0}" = 1 ] && old_mode LM_MEDIUM 10
parts=${parts//all/$ALL_PARTS}
if [ -z "${parts// /}" ]; then
  [ "$LISTING" = 1 ] && parts="$ALL_PARTS $LONG_PARTS" || parts="1 2 3"
fi
for p in $parts; do
  title "$p" >/dev/null || refuse "unknown part '$p': the parts are 1-11 and all (1-8); see --list"
done

if [ "$LISTING" = 1 ]; then
  echo "Expected seconds are estimates: steps timed in bench/results/gpu-run-cuda.log (H200,"
  echo "2026-11-26) count as timed, the others as half their limit; setup ($SETUP_S s) is a guess."
  for p in $parts; do
    list_limit=0 list_seen=0 list_guess=0 list_unseen=0 list_steps=0
    part "$p"
    fits=$([ $(( SETUP_S + list_limit )) -le $BUDGET_S ] && echo "fits 4 min" || echo "over 4 min")
    printf 'part %-2s ~%4s s expected, %4s s at every limit, %s (%s of %s steps untimed): %s\n' \
      "$p" $(( SETUP_S + list_seen + list_guess )) $(( SETUP_S + list_limit )) "$fits" \
      "$list_unseen" "$list_steps" "$(title "$p")"
  done
  exit 0
fi

# ---- install and run ----------------------------------------------------------------------------
export PYTHONUNBUFFERED=1
PYTHON=$PY
LOG=${OUT:+$OUT/gpu-run.log}
LOG=${LOG:-/tmp/gpu-run.log}
exec > >(tee "$LOG") 2>&1
status=0
echo "gpu_run: parts$parts"
# The commit every row carries (bench/common.py's commit column). The device's copy of the
# checkout may have no .git: then the caller passes it in FASTSOFTMAX_COMMIT.
if [ -z "${FASTSOFTMAX_COMMIT:-}" ]; then
  FASTSOFTMAX_COMMIT=$(git rev-parse --short HEAD 2>/dev/null) || FASTSOFTMAX_COMMIT=unknown
  [ "$FASTSOFTMAX_COMMIT" = unknown ] || git diff --quiet HEAD 2>/dev/null \
    || FASTSOFTMAX_COMMIT="$FASTSOFTMAX_COMMIT+dirty"
fi
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
# The rows name the checkout's commit, but the wheel's code is what runs: a wheel built from
# other Python sources is said so in the commit itself.
py_sum() {  # one checksum of a tree's fastsoftmax/*.py (the build's own _build_info.py aside)
  (cd "$1" && find fastsoftmax -name '*.py' ! -name _build_info.py ! -path '*/__pycache__/*' \
    | LC_ALL=C sort | xargs sha256sum | sha256sum)
}
if [ "$(py_sum "$SITE")" != "$(py_sum "$ROOT")" ]; then
  echo "gpu_run: the wheel's Python files differ from the checkout's (rebuild with make cuda-wheel)"
  FASTSOFTMAX_COMMIT="$FASTSOFTMAX_COMMIT+other-wheel"
fi
export FASTSOFTMAX_COMMIT
echo "gpu_run: rows carry commit $FASTSOFTMAX_COMMIT"
export PYTHONPATH=$SITE
# The tests and benchmarks run from a copy outside the checkout: they put their root on
# sys.path, and the checkout's fastsoftmax/ (no compiled extension) would shadow the wheel.
WORK=${GPU_WORK:-/tmp/fastsoftmax-gpu-run}
rm -rf "$WORK" && mkdir -p "$WORK" && cp -a tests bench tools docs README.md pyproject.toml "$WORK/"
cd "$WORK"
$PYTHON -c "import fastsoftmax, torch; print(fastsoftmax.__file__, fastsoftmax.build_info()); \
assert fastsoftmax.build_info()['cuda'] and torch.cuda.is_available()" || exit 1
[ -d "$ROOT/.device-data" ] && export FASTSOFTMAX_DATA=$ROOT/.device-data
DATA=${FASTSOFTMAX_DATA:-$DATA}
for p in $parts; do
  start=$SECONDS
  echo "==== part $p: $(title "$p")"
  part "$p"
  echo "==== part $p took $(( SECONDS - start )) s"
done
mkdir -p "$ROOT/bench/results"
cp -a bench/results/. "$ROOT/bench/results/" 2>/dev/null || true
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/results.tgz" -C "$WORK/bench" results
fi
echo "gpu_run: status $status"
exit $status
