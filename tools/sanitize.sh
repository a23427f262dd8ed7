#!/usr/bin/env bash
# Builds the extension and the emulated CUDA build (tools/build_cuda_emu.py) with
# AddressSanitizer and UndefinedBehaviorSanitizer into a copy of the sources under
# build/sanitize (the in-place build and build/cuda_emu are left alone) and runs the op-level
# tests, the emulator's own tests and the fixed-seed fuzz profile against that copy, on the
# CPU and on the emulated CUDA kernels, with the sanitizer runtimes preloaded into Python
# (Python itself is not instrumented, so the runtime has to be loaded before anything else).
#
#   tools/sanitize.sh            build, then run the op-level tests and the fuzz profile
#   tools/sanitize.sh --subset   build, then run the subset CI runs (.ci/run): the loss and
#                                corpus-reader
#                                tests, the emulator's tests and 50 fuzz examples per
#                                property (10 per emulated one) instead of 220 (22)
#   tools/sanitize.sh --build    build only
#   tools/sanitize.sh --build-ext    build only the extension (make fuzz-files)
#   SANITIZE_TESTS="tests/x.py" tools/sanitize.sh    build, then run those tests
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PY:-$ROOT/.venv/bin/python}
OUT=$ROOT/build/sanitize
SAN="-fsanitize=address,undefined -fno-omit-frame-pointer"

mkdir -p "$OUT"
# A copy of what the tests need (cp -a keeps the times, so the objects of an earlier
# sanitized build under build/sanitize/build are reused when a source did not change).
rm -rf "$OUT/fastsoftmax" "$OUT/csrc" "$OUT/tests" "$OUT/tools"
mkdir "$OUT/tools"
cp -a fastsoftmax csrc tests "$OUT/"
cp -a tools/build_cuda_emu.py tools/find_cuda.py "$OUT/tools/"  # setup.py imports find_cuda
rm -f "$OUT"/fastsoftmax/_C*.so
find "$OUT" -name __pycache__ -prune -exec rm -rf {} +
cp setup.py pyproject.toml "$OUT/"

cd "$OUT"
# The venv's ninja (as the Makefile's builds): another ninja version rebuilds everything.
export PATH="$(dirname "$PY"):$PATH"
# -g for file:line in reports. setup.py's own -O3 comes later on the command line and wins:
# the code checked is the optimised code that ships. FORCE_ONLY_CPU: the CUDA sources are
# not host code (nvcc has no ASan).
start=$(date +%s)
CFLAGS="$SAN -g" LDFLAGS="$SAN" FORCE_ONLY_CPU=1 MAX_JOBS=${MAX_JOBS:-2} \
  "$PY" setup.py -q build_ext --inplace >build.log 2>&1 \
  || { tail -50 build.log; echo "sanitize: build failed (log: $OUT/build.log)" >&2; exit 1; }
so=$(ls fastsoftmax/_C*.so)
# A library that is not linked against the ASan runtime was built without the flags.
require_asan() {
  ldd "$1" | grep libasan >/dev/null || { echo "sanitize: $1 is not linked against libasan" >&2; exit 1; }
}
require_asan "$so"
echo "sanitize: built $OUT/$so in $(( $(date +%s) - start )) s"
[ "${1:-}" = "--build-ext" ] && exit 0

ASAN_LIB=$(gcc -print-file-name=libasan.so)
UBSAN_LIB=$(gcc -print-file-name=libubsan.so)
# The emulated CUDA build, run from the copy: it lands in build/sanitize/build/cuda_emu,
# where the copy's tests/cuda_emulator.py looks. The builder loads the library it built, so
# it runs with the runtimes preloaded (as do the compilers it starts: harmless, leak checks
# off). csrc/emu/fiber.cpp switches fibers with swapcontext under ASan and announces each
# switch to it.
start=$(date +%s)
LD_PRELOAD="$ASAN_LIB $UBSAN_LIB" ASAN_OPTIONS=detect_leaks=0 EMU_CFLAGS="$SAN -g" \
  EMU_LDFLAGS="$SAN" MAX_JOBS=${MAX_JOBS:-2} "$PY" tools/build_cuda_emu.py >build_emu.log 2>&1 \
  || { tail -50 build_emu.log; echo "sanitize: emulator build failed (log: $OUT/build_emu.log)" >&2; exit 1; }
emu=build/cuda_emu/fastsoftmax_emu.so
require_asan "$emu"
echo "sanitize: built $OUT/$emu in $(( $(date +%s) - start )) s"

[ "${1:-}" = "--build" ] && exit 0

export LD_PRELOAD="$ASAN_LIB $UBSAN_LIB"
# halt_on_error: any ASan or UBSan report fails the run.
# detect_leaks=0: CPython and torch never free their process-lifetime heap at exit (about
# 45,000 allocations after `import torch`, mostly 2-5 frame stacks in the interpreter,
# pybind11 and torch's operator registry), and LeakSanitizer's exit scan of them had not
# finished after 30 minutes on this project's (shared) 2-core machine. A suppressions file cannot tell them apart from a leak of
# ours: the pattern that matches torch's frames (its library name) matches every call into
# our ops through the dispatcher. Our C++ allocates only through RAII owners (at::Tensor,
# std::vector; no new/malloc in csrc/cpu or csrc/common), and use-after-free, overflows and
# double frees stay checked.
# ASan warns once that it "doesn't fully support makecontext/swapcontext": the emulator's
# announcements (above) are what it asks for, and without them it also warned that it was
# "ignoring requested __asan_handle_no_return" when a kernel threw on a fiber's stack.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=0:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:report_error_type=1"
export OMP_NUM_THREADS=2

if [ -n "${SANITIZE_TESTS:-}" ]; then
  TESTS=$SANITIZE_TESTS
elif [ "${1:-}" = "--subset" ]; then
  TESTS="tests/test_losses.py tests/test_corpus_file.py tests/test_cuda_emulator.py tests/fuzz"
  export FASTSOFTMAX_FUZZ_EXAMPLES=${FASTSOFTMAX_FUZZ_EXAMPLES:-50}
else
  TESTS="tests/test_samplers.py tests/test_sampler_api.py tests/test_losses.py tests/test_margin_losses.py tests/test_word2vec.py tests/test_word2vec_model.py tests/test_corpus_file.py tests/test_cuda_emulator.py tests/fuzz"
fi
start=$(date +%s)
# Run from the copy: `python -m pytest` puts the working directory first on sys.path, so
# `import fastsoftmax` is the sanitized build.
"$PY" -c "import fastsoftmax._C as c, sys; f = c.__file__; print('sanitize: testing', f); \
  sys.exit(0 if f.startswith('$OUT/') else 'not the sanitized build: ' + f)"
"$PY" -c "import sys; sys.path.insert(0, 'tests'); import cuda_emulator as e; \
  print('sanitize: testing', e.LIBRARY); \
  sys.exit(0 if e.AVAILABLE and e.LIBRARY == '$OUT/$emu' else 'not the sanitized emulator')"
# Deselected: torch.compile (inductor compiles C++ in child processes that inherit the
# preloaded runtime: slow, a test of inductor rather than of our kernels, and with leak
# checking on it failed on g++'s exit code) and the command-line smoke tests (training runs
# that time out at ASan's speed; they call the ops the op-level tests check).
# --capture=sys: a sanitizer writes its report to file descriptor 2 and ends the process at
# once; pytest's default capture of that descriptor would swallow the report.
# PYTEST_WORKERS (default 2, the Makefile's) xdist workers, grouped as make test's; each worker
# inherits LD_PRELOAD and the options, runs from this folder (so imports the sanitized build),
# and a worker a sanitizer ends is reported as crashed, failing the run.
"$PY" -m pytest -q -x --capture=sys -p no:cacheprovider -p no:warnings \
  -n "${PYTEST_WORKERS:-2}" --dist loadgroup --no-loadscope-reorder \
  -k "not torch_compile and not cli" $TESTS
echo "sanitize: tests passed under ASan+UBSan in $(( $(date +%s) - start )) s"
