"""The fused softmax's Triton kernels compiled ahead of time for sm_80 and sm_90, no GPU
needed: each launch the GPU dispatch would make (every dtype, TF32 and IEEE float32, every
flag on, real block sizes, warps and stages) must fit the part's shared memory and its 255
registers per thread, spilling at most triton_aot.LOCAL_LIMIT bytes a thread. Then the
interpreter runs the kernels once at those GPU block sizes against the float64 reference.
The machinery is in tests/triton_aot.py; AOT_FULL=1 compiles every flag combination.

Both run in child processes (see triton_aot.py), the compiles once per session in
AOT_JOBS processes (default: up to 4); Triton's on-disk cache makes a second run fast.
"""

import functools
import json
import os
import subprocess
import sys

import pytest

triton = pytest.importorskip("triton", reason="Triton is not installed")

import triton_aot as A  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _needs_the_compile_api():
    """The pieces of Triton this uses, or a skip that names the version lacking them."""
    try:
        from triton.backends.compiler import GPUTarget  # noqa: F401
        from triton.compiler import ASTSource  # noqa: F401
        from triton.backends import backends
    except ImportError as e:
        pytest.skip(f"triton {triton.__version__} lacks the ahead-of-time API: {e}")
    if "nvidia" not in backends:
        pytest.skip(f"triton {triton.__version__} has no NVIDIA backend")
    if A.cuobjdump() is None:
        pytest.skip(f"triton {triton.__version__} ships no cuobjdump and none is on PATH")


# The Triton this was written against; another version's compile API may differ.
TESTED = "3.9."


def _child(mode: str, timeout: int, **env_vars):
    """(the JSON the child printed, or None; its stderr's tail). Skips when the child's
    torch cannot record launches on fake CUDA tensors."""
    env = dict(os.environ, TRITON_DEFAULT_FP_FUSION=os.environ.get(
        "TRITON_DEFAULT_FP_FUSION", "1"), **env_vars)  # the launch default, and quiet
    env.pop("TRITON_INTERPRET", None)
    run = subprocess.run([sys.executable, os.path.join(HERE, "triton_aot.py"), mode],
                         capture_output=True, text=True, env=env, timeout=timeout)
    if run.returncode == A.UNSUPPORTED:
        pytest.skip(run.stderr.strip().splitlines()[-1])
    return (json.loads(run.stdout) if run.returncode == 0 else None), run.stderr[-6000:]


@functools.lru_cache(maxsize=None)
def _compile_pass():
    jobs = os.environ.get("AOT_JOBS", str(min(4, os.cpu_count() or 1)))
    return _child("compile", timeout=1800, AOT_JOBS=jobs)


def _compiled() -> list:
    """Every record of the session's one compile pass. A pass that crashes fails the test
    under the Triton it was written for and skips, naming the version, under another."""
    _needs_the_compile_api()
    records, err = _compile_pass()
    if records is None and not triton.__version__.startswith(TESTED):
        pytest.skip(f"triton {triton.__version__} (written for {TESTED}x): the ahead-of-time "
                    f"compile failed: {err.strip().splitlines()[-1]}")
    assert records is not None, f"triton_aot.py compile failed:\n{err}"
    return records


def _table(records) -> str:
    return "\n".join(
        f"sm_{r['arch']} {r['kernel']} {r['dtype']} {r['precision']} {r['shape']} "
        f"bias={r['bias']} sum={r['class_sum']} cap={r['softcap']} T={r['T']} "
        f"tiles={r['BN']}x{r['BV']}x{r['BD']} warps={r['num_warps']} "
        f"stages={r['num_stages']}: {r['registers']} regs, {r['local']} B local, "
        f"{r['shared']} B shared" for r in records)


@pytest.mark.parametrize("arch", sorted(A.SHARED_LIMIT))
def test_triton_compiles_for_real_gpus_within_budget(arch):
    records = [r for r in _compiled() if r["arch"] == arch]
    over = [(r, A.budget_breaches(r)) for r in records]
    over = [(r, b) for r, b in over if b]
    assert not over, "over budget:\n" + "\n".join(
        f"{_table([r])}: {'; '.join(b)}" for r, b in over)


def test_triton_compiles_for_every_dtype_kernel_and_precision():
    """The pass compiled what it should: both kernels for each arch, dtype, shape and flag
    case, and float32 under both TF32 and IEEE products."""
    records = _compiled()
    full = os.environ.get("AOT_FULL") == "1"
    cases = A.flag_cases() if full else A.worst_cases()
    have = {(r["arch"], r["kernel"], r["dtype"], r["shape"], r["bias"], r["class_sum"],
             r["softcap"], r["T"]) for r in records}
    for arch, kernel, dtype, shape in ((a, k, d, s) for a in A.SHARED_LIMIT
                                       for k in ("_forward_kernel", "_backward_kernel")
                                       for d in A.DTYPES for s in A.SHAPES):
        for case in cases:
            assert (arch, kernel, dtype, shape, *case.values()) in have, (
                f"sm_{arch} {kernel} {dtype} {shape} {case} was not compiled")
    precisions = {(r["dtype"], r["precision"]) for r in records}
    assert {("float32", "tf32"), ("float32", "ieee")} <= precisions


def test_triton_compiles_for_the_interpreter_at_gpu_block_sizes():
    """The same kernels at the GPU's tiles (not the interpreter's usual 16-wide ones) agree
    with tests/reference.py in float64: loss, lse and gradients, options on."""
    tiles, err = _child("interpret", timeout=900)
    assert tiles is not None, f"triton_aot.py interpret failed:\n{err}"
    assert tiles and all(min(t) >= 16 for t in tiles)
