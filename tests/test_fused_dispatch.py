"""How the exact losses choose between the fused Triton kernels and the streamed path
(fastsoftmax/losses/fused.py resolve(), unavailable()), and what a GPU launch of the kernels
would be given (ops/_triton_softmax.py), checked without a GPU.

CUDA inputs are torch's fake tensors (FakeTensorMode, device="cuda:N"): real CUDA tensors
to every check (is_cuda, device), with no memory and no driver. Where the kernels would
launch, they are swapped for recorders. `interpreted` is set to False where a test stands for
a GPU machine, whose kernels are compiled, not interpreted."""

import ast
import contextlib
import os
import pathlib
import types

import torch

if not torch.cuda.is_available():  # before anything imports the kernels (as
    os.environ.setdefault("TRITON_INTERPRET", "1")  # tests/test_fused_softmax.py)

import pytest  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from fastsoftmax import functional as FF  # noqa: E402
from fastsoftmax.losses import fused  # noqa: E402
from fastsoftmax.ops import fused_softmax as fused_op  # noqa: E402
from fastsoftmax.losses import full  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
# CUDA's grid limits, programs along x, y, z (CUDA C programming guide, "Thread hierarchy"),
# written out here so that a wrong constant in the module cannot pass its own test.
CUDA_GRID = (2**31 - 1, 65535, 65535)
NATIVE = (torch.float16, torch.bfloat16, torch.float32)


def _cuda(*shape, dtype=torch.bfloat16, device="cuda:0"):
    return torch.empty(*shape, dtype=dtype, device=device)


@pytest.fixture
def on_a_gpu_machine(monkeypatch):
    """The kernels as a GPU machine has them: compiled (not interpreted), Triton present."""
    monkeypatch.setattr(fused, "interpreted", lambda: False)
    monkeypatch.setattr(fused, "HAS_TRITON", True)


@pytest.mark.parametrize("dtype", NATIVE)
def test_on_cuda_the_default_takes_the_streamed_path(on_a_gpu_machine, dtype):
    with FakeTensorMode():
        h, w, b = _cuda(32, 16, dtype=dtype), _cuda(100, 16, dtype=dtype), _cuda(100, dtype=dtype)
        assert fused.resolve(None, h, w, b) is False
        assert fused.resolve(True, h, w, b) is True
        assert fused.resolve(False, h, w, b) is False


class _Reached(Exception):
    """Raised where full_softmax_loss hands its rows to a path."""


def test_the_loss_on_cuda_takes_the_kernels_only_with_fused_true(on_a_gpu_machine,
                                                                  monkeypatch):
    """Through full_softmax_loss on CUDA input: the path it hands _full_rows. The call stops
    there, since fake CUDA tensors cannot be sliced without CUDA. z_loss keeps the call off
    the one-block F.cross_entropy shortcut. The target-id check reads the ids back, which
    fake tensors cannot; the ids here are in range anyway."""
    def reached(*args, use_fused, **kwargs):
        raise _Reached(use_fused)

    monkeypatch.setattr(full, "check_target_range", lambda safe, num_classes: safe)
    monkeypatch.setattr(full, "_full_rows", reached)
    with FakeTensorMode():
        h, w = _cuda(32, 16), _cuda(100, 16)
        target = torch.zeros(32, dtype=torch.int64, device="cuda:0")
        for fused_arg in (None, False, True):
            with pytest.raises(_Reached) as path:
                FF.full_softmax_loss(h, w, target, z_loss=1e-4, fused=fused_arg)
            assert path.value.args[0] is (fused_arg is True), f"fused={fused_arg}"


@pytest.fixture
def autocast_on_cuda():
    """torch's CUDA autocast flag on (torch.autocast('cuda') turns itself off without CUDA)."""
    before = torch.is_autocast_enabled("cuda")
    torch.set_autocast_enabled("cuda", True)
    try:
        yield
    finally:
        torch.set_autocast_enabled("cuda", before)


def test_a_dtype_on_the_default_list_takes_the_kernels_where_they_can_run(on_a_gpu_machine,
                                                                          monkeypatch):
    """Once a GPU run puts a dtype on DEFAULT_ON_CUDA, the default takes the kernels for it,
    and still not for other dtypes, for mixed devices (the streamed path then says what is
    wrong) or under deterministic algorithms."""
    monkeypatch.setattr(fused, "DEFAULT_ON_CUDA", frozenset({torch.bfloat16}))
    with FakeTensorMode():
        h, w = _cuda(32, 16), _cuda(100, 16)
        assert fused.resolve(None, h, w, None) is True
        assert fused.resolve(None, h.float(), w.float(), None) is False
        assert fused.resolve(None, h, _cuda(100, 16, device="cuda:1"), None) is False
        previous = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)
        try:
            assert fused.resolve(None, h, w, None) is False
        finally:
            torch.use_deterministic_algorithms(previous)


def test_under_autocast_the_default_keeps_the_streamed_path(on_a_gpu_machine, monkeypatch,
                                                            autocast_on_cuda):
    """The fused op is opaque to autocast: float32 input would reach the kernels as float32.
    So the default never takes them under autocast; fused=True still does."""
    monkeypatch.setattr(fused, "DEFAULT_ON_CUDA", frozenset(NATIVE))
    with FakeTensorMode():
        for dtype in NATIVE:
            h, w = _cuda(32, 16, dtype=dtype), _cuda(100, 16, dtype=dtype)
            assert fused.resolve(None, h, w, None) is False
            assert fused.resolve(True, h, w, None) is True


# ---------------------------------------------------------------------------------------
# Devices
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["linear_weight", "linear_bias", "targets", "weight"])
def test_unavailable_names_a_tensor_on_another_device(on_a_gpu_machine, where):
    with FakeTensorMode():
        args = dict(h=_cuda(8, 16), linear_weight=_cuda(40, 16), linear_bias=_cuda(40),
                    weight=_cuda(40, dtype=torch.float32),
                    targets=torch.zeros(8, 1, dtype=torch.int64, device="cuda:0"))
        args[where] = args[where].to("cuda:1")
        reason = fused.unavailable(**args)
        assert reason is not None and f"{where} on cuda:1" in reason, reason
        assert "input is on cuda:0" in reason
        with pytest.raises(ValueError, match=f"fused=True.*one device.*{where} on cuda:1"):
            fused.resolve(True, **args)
        assert fused.resolve(None, **args) is False


def test_the_fused_op_refuses_tensors_of_two_devices():
    """Called directly, the op checks too: a kernel handed pointers of two devices would read
    the wrong memory. FakeTensorMode would answer with the op's fake kernel, so the real
    implementation (custom_op keeps it as _init_fn) is called; it stops at the check."""
    with FakeTensorMode():
        h, w = _cuda(8, 16), _cuda(40, 16)
        targets = torch.zeros(8, 1, dtype=torch.int64, device="cuda:1")
        with pytest.raises(ValueError, match="one device.*targets on cuda:1"):
            fused_op.fused_softmax_stats._init_fn(h, w, None, targets, None, None)
        lse = _cuda(8, dtype=torch.float32)
        with pytest.raises(ValueError, match="one device.*g_true on cuda:1"):
            fused_op.fused_softmax_stats_backward._init_fn(
                h, w, None, targets.to("cuda:0"), None, None, lse, lse, lse.to("cuda:1"), lse)


# ---------------------------------------------------------------------------------------
# What a launch is given: precision, device, grid
# ---------------------------------------------------------------------------------------


@pytest.fixture
def kernels(monkeypatch):
    """ops/_triton_softmax.py, with torch.cuda's device query answered for an H100-sized
    part (132 SMs), as the GPU plan reads it."""
    pytest.importorskip("triton")
    from fastsoftmax.ops import _triton_softmax
    props = types.SimpleNamespace(multi_processor_count=132)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a, **k: props)
    return _triton_softmax


@pytest.fixture
def fp32_precision():
    """Sets torch's fp32_precision (global, then CUDA matmul) with the API torch 2.9 added,
    and restores both afterwards."""
    def set_both(generic, matmul):
        torch.backends.fp32_precision = generic
        torch.backends.cuda.matmul.fp32_precision = matmul

    before = (torch.backends.fp32_precision, torch.backends.cuda.matmul.fp32_precision)
    try:
        yield set_both
    finally:
        set_both(*before)


@pytest.mark.parametrize("generic,matmul,want", [
    ("none", "none", "ieee"),  # torch's default: no TF32 in float32 matmuls
    ("none", "tf32", "tf32"), ("none", "ieee", "ieee"),
    ("tf32", "none", "tf32"),  # the matmul setting inherits the global one
    ("tf32", "ieee", "ieee"), ("ieee", "none", "ieee"), ("ieee", "tf32", "tf32")])
def test_the_plan_reads_tf32_with_the_new_api(kernels, fp32_precision, generic, matmul, want):
    """Once the new API is set, torch raises on a read of the legacy allow_tf32 ("mix of the
    legacy and new APIs"); the plan must neither raise nor ignore the setting."""
    fp32_precision(generic, matmul)
    with FakeTensorMode():
        h = _cuda(8, 16, dtype=torch.float32)
        assert kernels._plan(h, 100)["PRECISION"] == want
        assert kernels._plan(h.bfloat16(), 100)["PRECISION"] == "ieee"  # 16-bit: no TF32


def _reads_of_legacy_precision(path: pathlib.Path) -> list:
    """The lines of `path` that read allow_tf32 or get_float32_matmul_precision(), both of
    which raise once the new API is set."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        if name in ("allow_tf32", "get_float32_matmul_precision"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_module_reads_the_legacy_tf32_flags():
    found = [hit for path in sorted((ROOT / "fastsoftmax").rglob("*.py"))
             for hit in _reads_of_legacy_precision(path)]
    assert not found, "legacy TF32 reads: " + ", ".join(found)


def test_a_cuda_input_launches_under_its_device(kernels):
    """Triton launches on the current device; the guard makes that the input's."""
    with FakeTensorMode():
        guard = kernels._on_device(_cuda(8, 16, device="cuda:1"))
    assert isinstance(guard, torch.cuda.device) and guard.idx == 1
    assert not isinstance(kernels._on_device(torch.empty(8, 16)), torch.cuda.device)


class _Recorder:
    """Stands in for a @triton.jit kernel: `kernel[grid](...)` notes the grid and whether the
    device guard was entered, then launches the real kernel unless `launch` is False."""

    def __init__(self, name, kernel, log, guard, launch=True):
        self.name, self.kernel, self.log, self.guard, self.launch = (name, kernel, log, guard,
                                                                     launch)

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.log.append((self.name, grid, self.guard["inside"]))
            if self.launch:
                self.kernel[grid](*args, **kwargs)
        return run


def _record_launches(monkeypatch, kernels, launch=True) -> list:
    log, guard = [], {"inside": None}

    @contextlib.contextmanager
    def on_device(h):
        guard["inside"] = h.device
        try:
            yield
        finally:
            guard["inside"] = None

    # raising=False: a module without the guard still gets its launches (and grids) recorded
    monkeypatch.setattr(kernels, "_on_device", on_device, raising=False)
    for name in ("_forward_kernel", "_backward_kernel"):
        monkeypatch.setattr(kernels, name, _Recorder(name, getattr(kernels, name), log, guard,
                                                     launch))
    return log


def test_both_launches_run_inside_the_device_guard(kernels, monkeypatch):
    """forward() and backward() launch their kernels only inside _on_device(h), on CPU
    tensors under the interpreter (the guard is then a no-op, but the structure is the
    one a CUDA input takes)."""
    if not kernels.INTERPRETED:
        pytest.skip("the kernels were imported for a GPU; CPU tensors need the interpreter")
    log = _record_launches(monkeypatch, kernels)
    h, w = torch.randn(8, 16, dtype=torch.float64), torch.randn(40, 16, dtype=torch.float64)
    targets = torch.zeros(8, 1, dtype=torch.int64)
    lse = kernels.forward(h, w, None, targets, None, None)[0]
    torch.testing.assert_close(lse, torch.logsumexp(h @ w.T, 1))
    kernels.backward(h, w, None, targets, None, None, lse, lse, lse, lse)
    assert [(name, inside) for name, _, inside in log] == [
        ("_forward_kernel", h.device), ("_backward_kernel", h.device)]


def _fits_cuda(grid) -> bool:
    return len(grid) <= 3 and all(1 <= n <= limit for n, limit in zip(grid, CUDA_GRID))


@pytest.mark.parametrize("dtype", NATIVE + (torch.float64,))
def test_the_gpu_grids_fit_cuda_at_ten_million_classes(kernels, dtype):
    """The grids the GPU plan gives (its tile sizes, 4 x 132 programs) for V = 10^7 classes:
    within CUDA's limits, a backward program for every [BN, BV] tile and no slab of z past
    the last class tile, and every forward split holding at least one class tile."""
    V = 10**7
    with FakeTensorMode():
        plan = kernels._plan(_cuda(8, 16, dtype=dtype), V)
    BN, BV = plan["BN"], plan["BV"]
    tiles = -(-V // BV)
    for N in (1, 8192, 10**6):
        grid = kernels._backward_grid(N, V, BN, BV)
        assert _fits_cuda(grid), (N, grid)
        assert grid[0] == -(-N // BN)
        assert grid[1] * (grid[2] - 1) < tiles <= grid[1] * grid[2], (N, grid)
        grid, per_split = kernels._forward_grid(N, V, BN, BV, plan["programs"])
        assert _fits_cuda(grid), (N, grid)
        assert grid[0] == -(-N // BN)
        assert (grid[1] - 1) * per_split < tiles <= grid[1] * per_split


def test_a_grid_past_cudas_limit_is_refused_with_the_way_out(kernels):
    with pytest.raises(ValueError, match="axis z, past CUDA's 65535; use fused=False"):
        kernels._backward_grid(1, 65535**2 + 1, 16, 1)
    with pytest.raises(ValueError, match="axis x, past CUDA's 2147483647; use fused=False"):
        kernels._backward_grid(2**31, 1, 1, 16)


def test_the_launched_grids_fit_cuda_at_ten_million_classes(kernels, monkeypatch):
    """forward() and backward() themselves, on fake CPU tensors (no memory) with the
    kernels recorded, not run: the grids they launch for V = 10^7 with the interpreter's
    16-wide tiles, 625,000 class tiles, fit CUDA's limits."""
    log = _record_launches(monkeypatch, kernels, launch=False)
    with FakeTensorMode():
        h, w = torch.empty(40, 16), torch.empty(10**7, 16)
        targets = torch.zeros(40, 1, dtype=torch.int64)
        lse = kernels.forward(h, w, None, targets, None, None)[0]
        kernels.backward(h, w, None, targets, None, None, lse, lse, lse, lse)
    assert [name for name, _, _ in log] == ["_forward_kernel", "_backward_kernel"]
    assert all(_fits_cuda(grid) for _, grid, _ in log), log


@pytest.mark.parametrize("y_limit", [None, 2, 3])
def test_the_backward_tiles_cover_every_row_block_and_class_tile(monkeypatch, y_limit):
    """The backward finds each tile's class tile from y and z: with 3 row blocks by 4
    class tiles (the interpreter's 16-wide tiles) the gradients equal the streamed path's,
    float64. A lowered limit on y stands in for CUDA's 65,535 (the forward's splits, 2 here,
    still fit): 2 gives 2 slabs of 2 along z; 3 gives 2 slabs of 3, whose last 2 class
    tiles lie past V and must add nothing."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not fused.interpreted():
        pytest.skip("the kernels were imported for a GPU; CPU tensors need the interpreter")
    pytest.importorskip("triton")
    from fastsoftmax.ops import _triton_softmax
    if y_limit is not None:
        monkeypatch.setattr(_triton_softmax, "GRID_LIMITS", (2**31 - 1, y_limit, 65535))
    g = torch.Generator().manual_seed(0)
    params = [torch.randn(*shape, generator=g, dtype=torch.float64).to(device).requires_grad_()
              for shape in ((40, 20), (50, 20), (50,))]
    target = torch.randint(0, 50, (40,), generator=g).to(device)
    out = {}
    for path in (True, False):
        loss = FF.full_softmax_loss(params[0], params[1], target, linear_bias=params[2],
                                    label_smoothing=0.1, fused=path)
        out[path] = (loss, *torch.autograd.grad(loss, params))
    torch.testing.assert_close(out[True], out[False])
