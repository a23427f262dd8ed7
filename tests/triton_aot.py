"""Ahead-of-time checks of the fused softmax's Triton kernels for real GPUs, on a machine
without one (tests/test_triton_compiles.py runs them; `python tests/triton_aot.py table`
prints the resource table of docs/ci.md).

The launches are not written out by hand: forward() and backward() of
fastsoftmax/ops/_triton_softmax.py run on fake CUDA tensors (torch's FakeTensorMode, no
memory, no device) with their kernels swapped for recorders, so every argument, constexpr,
block size, num_warps and num_stages is the one the GPU dispatch would choose for that
dtype, flag combination and precision setting. Each recorded launch is compiled with
triton.compile for sm_80 and sm_90 and its cubin's registers, local memory and shared
memory are read back with the cuobjdump that Triton's NVIDIA backend ships.

Both modes run in a child process (`python tests/triton_aot.py compile|interpret`): Triton
fixes a kernel's mode, compiled or interpreted, when its module is imported.
"""

import contextlib
import itertools
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import types
from typing import Optional
from unittest import mock

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Shared memory one block may use after opting in (cudaFuncAttributeMaxDynamicSharedMemorySize):
# A100's 163 KiB, H100's 227 KiB (CUDA C programming guide, compute capabilities table).
SHARED_LIMIT = {80: 163 * 1024, 90: 227 * 1024}
REGISTERS_PER_THREAD = 255
# Bytes of local memory (spills, stack) a thread may use. ptxas trades a few spilled
# registers for its schedule on its own (the same kernel spills 0 or 80 B as D's alignment
# or one flag changes); 128 B, 32 values, is such a trade and L1 absorbs it. The gross
# spills a tile too large for the register file causes measured 480 to 8,456 B.
LOCAL_LIMIT = 128
# Stand-ins for the devices: only `programs` (the forward's split count) reads them.
SMS = {80: 108, 90: 132}

DTYPES = ("float16", "bfloat16", "float32", "float64")
# A language model's shape, every extent a multiple of 16 as Triton specializes on, and an
# odd one (word2vec's D = 300) that takes the unaligned, masked loads.
SHAPES = {"aligned": (8192, 4096, 128256), "odd": (1000, 300, 10001)}
_TYPES = dict(float16="fp16", bfloat16="bf16", float32="fp32", float64="fp64", int64="i64")


def flag_cases():
    """(bias, class_sum, softcap, T) for every flag combination with one target per row, and
    all flags with four targets (T unrolls a loop of the kernels)."""
    cases = [dict(bias=b, class_sum=s, softcap=c, T=1)
             for b, s, c in itertools.product((False, True), repeat=3)]
    return cases + [dict(bias=True, class_sum=True, softcap=True, T=4)]


def worst_cases():
    """Every flag with four targets: the most live values, so the most registers. The
    default pass compiles these; AOT_FULL=1 compiles every case of flag_cases()."""
    return [dict(bias=True, class_sum=True, softcap=True, T=4)]


# --- Recording the launches the GPU dispatch would make ----------------------------------


class _Recorder:
    """Stands in for a @triton.jit kernel: `kernel[grid](*args, **kwargs)` is remembered."""

    def __init__(self, fn, sink):
        self.fn, self.sink = fn, sink

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.sink.append((self.fn, args, kwargs))


@contextlib.contextmanager
def _pretend_gpu(arch: int):
    """torch.cuda's device queries answered for an sm_`arch` part with no driver present."""
    props = types.SimpleNamespace(
        major=arch // 10, minor=arch % 10, multi_processor_count=SMS[arch], name=f"sm_{arch}",
        shared_memory_per_block_optin=SHARED_LIMIT[arch], total_memory=80 << 30)
    with mock.patch("torch.cuda.get_device_properties", lambda *a, **k: props), \
            mock.patch("torch.cuda.get_device_capability", lambda *a, **k: (arch // 10,
                                                                               arch % 10)), \
            mock.patch("torch.cuda.current_device", lambda: 0), \
            mock.patch("torch.cuda.device", lambda *a, **k: contextlib.nullcontext()):
        yield


@contextlib.contextmanager
def _integer_index_as_select():
    """`t[i]` as t.select(0, i). Python's indexing enters a CUDA device guard before any
    dispatch, which a CPU build of torch refuses even for a fake tensor; select does not."""
    import torch
    plain = torch.Tensor.__getitem__

    def getitem(self, index):
        return self.select(0, index) if isinstance(index, int) else plain(self, index)

    with mock.patch.object(torch.Tensor, "__getitem__", getitem):
        yield


@contextlib.contextmanager
def _fp32_matmul(tf32: bool):
    """torch's float32 matmul setting, TF32 or IEEE, restored afterwards: through the
    fp32_precision API where torch has it (>= 2.9; mixing it with allow_tf32 raises)."""
    import torch
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        name, value = "fp32_precision", "tf32" if tf32 else "ieee"
    else:
        name, value = "allow_tf32", tf32
    before = getattr(matmul, name)
    setattr(matmul, name, value)
    try:
        yield
    finally:
        setattr(matmul, name, before)


def record_launches(kernels, dtype: str, arch: int, case: dict, shape: str, tf32: bool):
    """[(kernel, args, kwargs)] of one forward and one backward call on fake CUDA tensors."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    N, D, V = SHAPES[shape]
    sink = []
    patches = [mock.patch.object(kernels, name, _Recorder(getattr(kernels, name), sink))
               for name in ("_forward_kernel", "_backward_kernel")]
    with contextlib.ExitStack() as stack:
        for p in patches + [_pretend_gpu(arch), _fp32_matmul(tf32), _integer_index_as_select()]:
            stack.enter_context(p)
        stack.enter_context(FakeTensorMode())
        dt = getattr(torch, dtype)
        acc = torch.float64 if dt == torch.float64 else torch.float32
        h, w = (torch.empty(n, D, dtype=dt, device="cuda") for n in (N, V))
        b = torch.empty(V, dtype=dt, device="cuda") if case["bias"] else None
        a = torch.empty(V, dtype=dt, device="cuda") if case["class_sum"] else None
        targets = torch.empty(N, case["T"], dtype=torch.int64, device="cuda")
        cap = 30.0 if case["softcap"] else None
        lse = kernels.forward(h, w, b, targets, a, cap)[0]
        g = [torch.empty(N, dtype=acc, device="cuda") for _ in range(3)]
        kernels.backward(h, w, b, targets, a, cap, lse, *g)
    return sink


def _arg_spec(value):
    """(signature type, constexpr value or None, divisible by 16) of a launch argument, as
    Triton's JIT specializes it: None and the integer 1 become constants; tensors and other
    integers note whether they are 16-aligned (the CUDA allocator aligns to 512 bytes, so a
    tensor is 16-aligned when its offset into the storage is)."""
    import torch
    if value is None or (isinstance(value, int) and value == 1):
        return "constexpr", value, False
    if isinstance(value, torch.Tensor):
        offset = value.storage_offset() * value.element_size()
        return "*" + _TYPES[str(value.dtype).removeprefix("torch.")], None, offset % 16 == 0
    if isinstance(value, int):  # the kernels take no bool argument that is not a constexpr
        return ("i32" if -2**31 <= value < 2**31 else "i64"), None, value % 16 == 0
    if isinstance(value, float):
        return "fp32", None, False
    raise TypeError(f"no Triton type for a launch argument {value!r}")


_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def ast_source(fn, args, kwargs):
    """(triton.compiler.ASTSource, compile options) of one recorded launch."""
    from triton.compiler import ASTSource
    names = list(fn.arg_names)
    values = dict(zip(names, args))
    values.update({k: v for k, v in kwargs.items() if k not in _OPTIONS})
    signature, constexprs, attrs = {}, {}, {}
    for i, name in enumerate(names):
        param = fn.params[i]
        if param.is_constexpr:
            signature[name], constexprs[name] = "constexpr", values[name]
            continue
        ty, const, aligned = _arg_spec(values[name])
        signature[name] = ty
        if ty == "constexpr":
            constexprs[name] = const
        elif aligned and not param.do_not_specialize:
            attrs[(i,)] = [["tt.divisibility", 16]]
    options = {k: kwargs[k] for k in _OPTIONS if k in kwargs}
    return ASTSource(fn, signature, constexprs, attrs), options


# --- Compiling and reading the cubins ----------------------------------------------------


def cuobjdump() -> Optional[pathlib.Path]:
    """The cuobjdump Triton's NVIDIA backend ships (or one on PATH), if any."""
    import shutil
    import triton
    shipped = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    found = str(shipped) if shipped.exists() else shutil.which("cuobjdump")
    return pathlib.Path(found) if found else None


def cubin_resources(cubin: bytes, tool: pathlib.Path) -> dict:
    """REG, STACK, SHARED (static), LOCAL of the one function in a cubin."""
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        out = subprocess.run([str(tool), "--dump-resource-usage", str(path)],
                             capture_output=True, text=True, check=True).stdout
    lines = [line for line in out.splitlines() if "REG:" in line]
    if len(lines) != 1:
        raise RuntimeError(f"expected one function in cuobjdump's output:\n{out}")
    fields = dict(item.split(":", 1) for item in lines[0].split())
    return {k: int(fields[k]) for k in ("REG", "STACK", "SHARED", "LOCAL")}


def compile_launch(fn, args, kwargs, arch: int, tool: pathlib.Path) -> dict:
    """One launch compiled for sm_`arch`: its resource figures and what chose them."""
    import triton
    from triton.backends.compiler import GPUTarget
    src, options = ast_source(fn, args, kwargs)
    kernel = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=options)
    usage = cubin_resources(kernel.asm["cubin"], tool)
    meta = kernel.metadata
    return dict(
        kernel=fn.__name__, arch=arch, num_warps=meta.num_warps, num_stages=meta.num_stages,
        BN=kwargs.get("BN"), BV=kwargs.get("BV"), BD=kwargs.get("BD"),
        precision=kwargs.get("PRECISION"), registers=usage["REG"],
        local=usage["LOCAL"] + usage["STACK"], shared=meta.shared + usage["SHARED"])


def budget_breaches(record: dict) -> list:
    """What in one compiled kernel's figures exceeds the budgets above."""
    out = []
    if record["shared"] > SHARED_LIMIT[record["arch"]]:
        out.append(f"shared memory {record['shared']} B > {SHARED_LIMIT[record['arch']]} B")
    if record["registers"] > REGISTERS_PER_THREAD:
        out.append(f"{record['registers']} registers per thread > {REGISTERS_PER_THREAD}")
    if record["local"] > LOCAL_LIMIT:
        out.append(f"{record['local']} B of local memory (spills) > {LOCAL_LIMIT} B")
    return out


def _jobs(archs, dtypes, shapes, cases):
    """The distinct launches, as (arch, dtype, shape, case, tf32, index of the launch) a
    worker can record again: fake tensors do not cross processes."""
    from fastsoftmax.ops import _triton_softmax as kernels
    jobs, seen = [], set()
    for arch, dtype, shape, case, tf32 in itertools.product(archs, dtypes, shapes, cases,
                                                           (True, False)):
        for i, (fn, args, kwargs) in enumerate(
                record_launches(kernels, dtype, arch, case, shape, tf32)):
            src, options = ast_source(fn, args, kwargs)
            key = (arch, src.hash(), str(sorted(options.items())))
            if key not in seen:  # the TF32 setting changes nothing outside float32
                seen.add(key)
                jobs.append((arch, dtype, shape, case, tf32, i))
    return jobs


def _compile_job(job) -> dict:
    from fastsoftmax.ops import _triton_softmax as kernels
    arch, dtype, shape, case, tf32, i = job
    fn, args, kwargs = record_launches(kernels, dtype, arch, case, shape, tf32)[i]
    return dict(compile_launch(fn, args, kwargs, arch, cuobjdump()), dtype=dtype, shape=shape,
                **case)


def compile_all(archs, dtypes, shapes, cases, workers=1) -> list:
    """Every distinct launch of the dispatch compiled for each arch: [record]."""
    from concurrent.futures import ProcessPoolExecutor
    from fastsoftmax.ops import _triton_softmax as kernels
    if kernels.INTERPRETED:
        raise RuntimeError("the kernels were imported for the interpreter")
    if cuobjdump() is None:
        raise FileNotFoundError("no cuobjdump beside Triton's NVIDIA backend nor on PATH")
    jobs = _jobs(archs, dtypes, shapes, cases)
    if workers <= 1:
        return [_compile_job(job) for job in jobs]
    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(_compile_job, jobs))


# --- The interpreter at the GPU's block sizes --------------------------------------------


def gpu_tiles(kernels) -> list:
    """The distinct (BN, BV, BD) the GPU dispatch picks over dtypes and archs."""
    every = dict(bias=True, class_sum=True, softcap=True, T=1)
    tiles = {(kw["BN"], kw["BV"], kw["BD"])
             for arch, dtype in itertools.product(SHARED_LIMIT, DTYPES)
             for _, _, kw in record_launches(kernels, dtype, arch, every, "odd", False)}
    return sorted(tiles)


def interpret_at_gpu_tiles() -> list:
    """Loss, lse and gradients of float64 problems through the interpreter with the GPU's
    tiles (the CPU plan's 16-wide ones cover less of the masking: here rows, classes and D
    each end inside a partial block) against tests/reference.py. [(BN, BV, BD)] checked."""
    import torch
    import reference as R
    from fastsoftmax import functional as FF
    from fastsoftmax.ops import _triton_softmax as kernels
    if not kernels.INTERPRETED:
        raise RuntimeError("the kernels were imported for a GPU: set TRITON_INTERPRET=1 first")
    cpu_plan = kernels._plan
    N, D, V = 70, 80, 300
    g = torch.Generator().manual_seed(0)
    h = (2 * torch.randn(N, D, generator=g, dtype=torch.float64)).requires_grad_()
    w = torch.randn(V, D, generator=g, dtype=torch.float64).requires_grad_()
    b = torch.randn(V, generator=g, dtype=torch.float64).requires_grad_()
    cw = torch.rand(V, generator=g, dtype=torch.float64) + 0.5
    target = torch.randint(0, V, (N,), generator=g)
    target[[3, N - 1]] = -100
    several = torch.randint(0, V, (N, 3), generator=g)
    tiles = gpu_tiles(kernels)
    for BN, BV, BD in tiles:
        def plan(h, V, BN=BN, BV=BV, BD=BD):
            return dict(cpu_plan(h, V), BN=BN, BV=BV, BD=BD)

        with mock.patch.object(kernels, "_plan", plan):
            loss, lse = FF.full_softmax_loss(h, w, target, linear_bias=b, weight=cw,
                                             label_smoothing=0.1, z_loss=1e-3, softcap=20.0,
                                             reduction="sum", return_lse=True, fused=True)
            multi = FF.full_softmax_loss(h, w, several, reduction="sum", fused=True)
        want, want_lse = R.full_softmax_extras_reference(h, w, b, target, cw, 0.1, 1e-3, 20.0)
        want = want.sum()
        want_multi = R.reduce_reference(R.full_softmax_reference(h, w, None, several),
                                        several, "sum")
        torch.testing.assert_close(loss, want)
        torch.testing.assert_close(lse, want_lse)
        torch.testing.assert_close(multi, want_multi)
        got = torch.autograd.grad(loss + 0.3 * lse.sum() + multi, (h, w, b))
        ref = torch.autograd.grad(want + 0.3 * want_lse.sum() + want_multi, (h, w, b))
        for name, ours, theirs in zip(("h", "w", "b"), got, ref):
            torch.testing.assert_close(ours, theirs, msg=lambda m: f"grad {name} at tiles "
                                       f"{(BN, BV, BD)}: {m}")
    return tiles


def table(records) -> str:
    """Markdown: per arch, kernel, dtype and precision, the most registers, local memory
    and shared memory over the records' flag cases and shapes."""
    rows = {}
    for r in records:
        key = (r["arch"], r["kernel"].strip("_").removesuffix("_kernel"), r["dtype"],
               r["precision"], f"{r['BN']}x{r['BV']}x{r['BD']}", r["num_warps"],
               r["num_stages"])
        old = rows.get(key, (0, 0, 0))
        rows[key] = tuple(max(a, r[k]) for a, k in zip(old, ("registers", "local", "shared")))
    lines = ["| arch | kernel | dtype | product | BN x BV x BD | warps | stages | registers "
             "| local B | shared KiB |", "|" + " --- |" * 10]
    for key, (reg, local, shared) in sorted(rows.items()):
        arch, *rest = key
        cells = [f"sm_{arch}", *map(str, rest), str(reg), str(local), f"{shared / 1024:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# The exit status of a child whose torch cannot make the fake CUDA tensors it records with.
UNSUPPORTED = 77


def _fake_cuda_refused() -> Optional[str]:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    try:
        with _pretend_gpu(80), _integer_index_as_select(), FakeTensorMode():
            torch.empty(2, 2, device="cuda")[0].sum()
    except Exception as e:  # noqa: BLE001 - any refusal means the same: no recording here
        return f"torch {torch.__version__} makes no fake CUDA tensor here: {e}"
    return None


def _main(mode):
    if mode == "table":  # of a compile pass's output, read from stdin
        return print(table(json.load(sys.stdin)))
    refused = _fake_cuda_refused()
    if refused:
        print(refused, file=sys.stderr)
        raise SystemExit(UNSUPPORTED)
    if mode == "interpret":
        return json.dump(interpret_at_gpu_tiles(), sys.stdout)
    env = os.environ.get
    cases = flag_cases() if env("AOT_FULL") == "1" else worst_cases()
    json.dump(compile_all([int(a) for a in env("AOT_ARCHS", "80,90").split(",")],
                          env("AOT_DTYPES", ",".join(DTYPES)).split(","),
                          env("AOT_SHAPES", ",".join(SHAPES)).split(","), cases,
                          int(env("AOT_JOBS", "1"))), sys.stdout)


if __name__ == "__main__":  # python tests/triton_aot.py compile|interpret|table
    MODE = sys.argv[1] if len(sys.argv) > 1 else "compile"
    # Before anything imports Triton: its own @jit helpers (tl.cdiv) take the mode then.
    os.environ.pop("TRITON_INTERPRET", None)
    if MODE == "interpret":
        os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, str(ROOT))
    _main(MODE)
