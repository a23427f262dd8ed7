#!/usr/bin/env bash
# Compiles every CUDA source with nvcc for sm_80 and sm_90, on a machine without a GPU and
# with a CPU-only torch, so CUDA code that does not compile cannot land. Objects are thrown
# away; linking needs a CUDA build of torch: make cuda-wheel (CI step (c)) does that.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "compile_cuda: nvcc not found (set NVCC=...)" >&2; exit 1; }
TORCH_INC=$("$PY" -c "import torch.utils.cpp_extension as c; print(' '.join('-I'+p for p in c.include_paths()))")
TORCH_VER=$("$PY" -c "import torch; print(torch.__version__)")
# CPU wheels of torch ship the c10/cuda headers but not this generated one.
SHIM=tools/cuda_shim
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
compile() {
  src=$1
  "$NVCC" -c "$src" -o "$out/$(basename "$src").o" -std=c++20 -O3 -Xcompiler -fPIC \
    --expt-relaxed-constexpr -DWITH_CUDA -DUSE_CUDA \
    -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
    -diag-suppress 3306 -Xcompiler -Wno-c++20-extensions \
    $TORCH_INC -I"$SHIM" 2>"$out/$(basename "$src").log" \
    && echo "compiled $src (sm_80, sm_90)" \
    || { cat "$out/$(basename "$src").log"; echo "FAILED $src"; return 1; }
}
export -f compile
export NVCC TORCH_INC TORCH_VER SHIM out
ls csrc/cuda/*.cu | xargs -P 2 -I{} bash -c 'compile {}' || status=1
exit $status
