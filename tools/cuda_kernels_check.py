"""Asserts that the installed fastsoftmax is a CUDA build and that every fastsoftmax:: op with
a CPU kernel also has a CUDA kernel in the dispatcher (no GPU needed: registration happens
when the library loads). Run from outside the source tree, in the venv the CUDA wheel is
installed in.
"""

import sys

import torch

import fastsoftmax

# Ops that work on host memory whatever the training device: their results feed kernels on
# any device, so they have no CUDA kernel. corpus_encode and corpus_count read a file's bytes;
# device_reads sets and reads the library's host-side check switch and read counter (its
# tensor argument is any CPU tensor, there only for dispatch).
HOST_ONLY = {"fastsoftmax::corpus_count", "fastsoftmax::corpus_encode",
             "fastsoftmax::device_reads"}
# Ops that are a CPU algorithm by design: word2vec's minibatches of shared negatives
# (Word2Vec(update="batched"|"auto") on the CPU); on CUDA, Word2Vec trains in lockstep rounds
# through word2vec_train and never sends its tables to this op. A CUDA tensor given to it
# directly gets torch's error naming the CUDA backend.
CPU_ONLY = {"fastsoftmax::word2vec_train_batched"}


def main() -> int:
    info = fastsoftmax.build_info()
    print(f"cuda_kernels_check: fastsoftmax at {fastsoftmax.__file__}, torch {torch.__version__}, "
          f"build {info}")
    if not info["cuda"]:
        print("cuda_kernels_check: FAIL the installed fastsoftmax was built without CUDA")
        return 1
    names = sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("fastsoftmax::"))
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    cpu = [n for n in names if has(n, "CPU") and n not in HOST_ONLY | CPU_ONLY]
    missing = [n for n in cpu if not has(n, "CUDA")]
    if not cpu:
        print("cuda_kernels_check: FAIL no fastsoftmax:: op has a CPU kernel")
        return 1
    if missing:
        print(f"cuda_kernels_check: FAIL {len(missing)} of {len(cpu)} ops with a CPU kernel have no "
              "CUDA kernel: " + ", ".join(missing))
        return 1
    print(f"cuda_kernels_check: ok all {len(cpu)} ops with a CPU kernel have a CUDA kernel "
          f"(host-only: {', '.join(sorted(HOST_ONLY))}; CPU-only: {', '.join(sorted(CPU_ONLY))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
