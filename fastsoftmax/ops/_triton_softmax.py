"""Triton kernels of the fused exact softmax (the ops of fastsoftmax/ops/fused_softmax.py):
the per-row figures lse, true and total of losses/_softmax_stats.py, and their gradients,
with every logit computed in a tile of registers and never written to memory.

Imported only when a fused call runs: Triton is optional. Under TRITON_INTERPRET=1 (set
before this module is first imported) the same kernels run on CPU tensors through Triton's
interpreter, which is how CI executes them.

Forward: a program owns BN rows and a contiguous range of class tiles (a "split"); for each
tile it accumulates the [BN, BV] logits over D in blocks of BD (tl.dot, float32 accumulation,
float64 for float64 input), caps them, and folds them into a running max and sum of
exponentials (the online log-sum-exp), the true logits and sum_c a_c x_c. The splits'
partial figures [S, N] are combined on the host: S ≥ 1 splits let few rows still fill the
GPU, as flash-decoding splits its keys.

Backward: a program owns one [BN, BV] tile. It recomputes the tile's logits, forms the
logit gradient G (losses/_softmax_stats.py's formula) in registers, rounds G to the input's dtype
as autograd's F.linear backward would see it, and adds G W_tile to grad_h and Gᵀ h_rows to
grad_w, block by block of D, with float32 (float64) atomics. No [N, V] block ever reaches
memory; the cost is one extra matrix product (the recomputed logits) and atomic traffic of
(BN + BV)·D per tile. Float atomics make the order of the sums, and so the last bits of the
gradients, vary from run to run on a GPU.

Launches: Triton launches on the current CUDA device and its current stream, so each launch
runs under torch.cuda.device(h.device) (_on_device). CUDA caps a grid at 2^31 - 1 programs
in x and 65,535 in y and z: the backward's class tiles, along y, would pass y's limit once
V > 65,535·BV (8,388,480 with BV = 128), so those past it fold into z (_backward_grid).
"""

import contextlib
import os

import torch
import triton
import triton.language as tl

# Triton decorates each kernel below for the interpreter or for the GPU as this reads now.
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def _capped(x, softcap, HAS_CAP: tl.constexpr):
    """softcap * tanh(x / softcap), tanh written with one exp of a non-positive argument."""
    if HAS_CAP:
        y = x / softcap
        e = tl.exp(-2.0 * tl.abs(y))
        t = (1.0 - e) / (1.0 + e)
        x = softcap * tl.where(y < 0, -t, t)
    return x


@triton.jit
def _dot(a, b, acc, ACC: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    """acc + a @ b with ACC accumulation. UPCAST (the interpreter with bfloat16 inputs, whose
    tl.dot returns garbage for bfloat16 in Triton 3.9) multiplies in ACC instead: the product
    of two bfloat16 values is exact in float32, so only the order of the sums can differ."""
    if UPCAST:
        a, b = a.to(ACC), b.to(ACC)
    return tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=ACC)


@triton.jit
def _logit_tile(h, w, b, softcap, rows, cols, row_ok, col_ok, D,
                BN: tl.constexpr, BV: tl.constexpr, BD: tl.constexpr, ACC: tl.constexpr,
                PRECISION: tl.constexpr, UPCAST: tl.constexpr, HAS_BIAS: tl.constexpr,
                HAS_CAP: tl.constexpr):
    """The capped logits h[rows] · w[cols]ᵀ + b[cols] of one tile, [BN, BV] in ACC."""
    acc = tl.zeros((BN, BV), dtype=ACC)
    for d0 in range(0, D, BD):
        ds = d0 + tl.arange(0, BD)
        d_ok = ds < D
        a = tl.load(h + rows[:, None] * D + ds[None, :],
                    mask=row_ok[:, None] & d_ok[None, :], other=0.0)
        bt = tl.load(w + cols[None, :] * D + ds[:, None],
                     mask=col_ok[None, :] & d_ok[:, None], other=0.0)
        acc = _dot(a, bt, acc, ACC, PRECISION, UPCAST)
    if HAS_BIAS:
        acc += tl.load(b + cols, mask=col_ok, other=0.0).to(ACC)[None, :]
    return _capped(acc, softcap, HAS_CAP)


@triton.jit
def _forward_kernel(h, w, b, targets, class_sum, out_max, out_sum, out_true, out_total,
                    N, V, D, softcap, tiles_per_split, num_tiles,
                    T: tl.constexpr, BN: tl.constexpr, BV: tl.constexpr, BD: tl.constexpr,
                    ACC: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
                    HAS_BIAS: tl.constexpr,
                    HAS_CAP: tl.constexpr, HAS_SUM: tl.constexpr):
    split = tl.program_id(1)
    rows = (tl.program_id(0) * BN + tl.arange(0, BN)).to(tl.int64)
    row_ok = rows < N
    run_max = tl.full((BN,), float("-inf"), ACC)
    run_sum = tl.zeros((BN,), ACC)
    true = tl.zeros((BN,), ACC)
    total = tl.zeros((BN,), ACC)
    first = split * tiles_per_split
    for tile in range(first, tl.minimum(first + tiles_per_split, num_tiles)):
        cols = (tile * BV + tl.arange(0, BV)).to(tl.int64)
        col_ok = cols < V
        x = _logit_tile(h, w, b, softcap, rows, cols, row_ok, col_ok, D, BN, BV, BD, ACC,
                        PRECISION, UPCAST, HAS_BIAS, HAS_CAP)
        # The first tile of a split always holds a class, so run_max is finite from then on.
        masked = tl.where(col_ok[None, :], x, float("-inf"))
        new_max = tl.maximum(run_max, tl.max(masked, 1))
        run_sum = run_sum * tl.exp(run_max - new_max) + tl.sum(
            tl.exp(masked - new_max[:, None]), 1)
        run_max = new_max
        inside = tl.where(col_ok[None, :], x, 0.0)
        for t in tl.static_range(T):
            target = tl.load(targets + rows * T + t, mask=row_ok, other=-1)
            true += tl.sum(tl.where(cols[None, :] == target[:, None], inside, 0.0), 1)
        if HAS_SUM:
            a = tl.load(class_sum + cols, mask=col_ok, other=0.0)
            total += tl.sum(inside * a[None, :], 1)
    out = split * N + rows
    tl.store(out_max + out, run_max, mask=row_ok)
    tl.store(out_sum + out, run_sum, mask=row_ok)
    tl.store(out_true + out, true, mask=row_ok)
    tl.store(out_total + out, total, mask=row_ok)


@triton.jit
def _backward_kernel(h, w, b, targets, class_sum, lse, g_lse, g_true, g_total,
                     grad_h, grad_w, grad_b, N, V, D, softcap,
                     T: tl.constexpr, BN: tl.constexpr, BV: tl.constexpr, BD: tl.constexpr,
                     ACC: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
                    HAS_BIAS: tl.constexpr,
                     HAS_CAP: tl.constexpr, HAS_SUM: tl.constexpr):
    # Row blocks along x, class tiles along y and then z (_backward_grid): a class tile of
    # the last z past the last one holds no class below V, so all its columns are masked.
    col_tile = tl.program_id(2) * tl.num_programs(1) + tl.program_id(1)
    rows = (tl.program_id(0) * BN + tl.arange(0, BN)).to(tl.int64)
    cols = (col_tile * BV + tl.arange(0, BV)).to(tl.int64)
    row_ok, col_ok = rows < N, cols < V
    x = _logit_tile(h, w, b, softcap, rows, cols, row_ok, col_ok, D, BN, BV, BD, ACC,
                    PRECISION, UPCAST, HAS_BIAS, HAS_CAP)
    row_lse = tl.load(lse + rows, mask=row_ok, other=0.0)
    grad = tl.load(g_lse + rows, mask=row_ok, other=0.0)[:, None] * tl.exp(x - row_lse[:, None])
    per_target = tl.load(g_true + rows, mask=row_ok, other=0.0)
    for t in tl.static_range(T):
        target = tl.load(targets + rows * T + t, mask=row_ok, other=-1)
        grad += tl.where(cols[None, :] == target[:, None], per_target[:, None], 0.0)
    if HAS_SUM:
        a = tl.load(class_sum + cols, mask=col_ok, other=0.0)
        grad += tl.load(g_total + rows, mask=row_ok, other=0.0)[:, None] * a[None, :]
    if HAS_CAP:  # d/draw of softcap * tanh(raw / softcap), in terms of the capped logit
        grad *= 1.0 - (x / softcap) * (x / softcap)
    grad = tl.where(row_ok[:, None] & col_ok[None, :], grad, 0.0)
    if HAS_BIAS:
        tl.atomic_add(grad_b + cols, tl.sum(grad, 0), mask=col_ok)
    grad = grad.to(h.dtype.element_ty)
    for d0 in range(0, D, BD):
        ds = d0 + tl.arange(0, BD)
        d_ok = ds < D
        w_tile = tl.load(w + cols[:, None] * D + ds[None, :],
                         mask=col_ok[:, None] & d_ok[None, :], other=0.0)
        tl.atomic_add(grad_h + rows[:, None] * D + ds[None, :],
                      _dot(grad, w_tile, None, ACC, PRECISION, UPCAST),
                      mask=row_ok[:, None] & d_ok[None, :])
        h_rows = tl.load(h + rows[:, None] * D + ds[None, :],
                         mask=row_ok[:, None] & d_ok[None, :], other=0.0)
        tl.atomic_add(grad_w + cols[:, None] * D + ds[None, :],
                      _dot(tl.trans(grad), h_rows, None, ACC, PRECISION, UPCAST),
                      mask=col_ok[:, None] & d_ok[None, :])


def tf32_allowed() -> bool:
    """Whether torch lets float32 matmuls on CUDA use TF32, read with the fp32_precision API
    (torch >= 2.9): once a user sets that API, reading the legacy allow_tf32 raises
    ("mix of the legacy and new APIs"), while the new getter also reflects the legacy
    setters. "none" inherits torch.backends.fp32_precision; "none" there too is torch's
    default, IEEE."""
    precision = torch.backends.cuda.matmul.fp32_precision
    if precision == "none":
        precision = torch.backends.fp32_precision
    return precision == "tf32"


def _plan(h: torch.Tensor, V: int) -> dict:
    """Block sizes and warps: 16-wide tiles under the interpreter (numpy does the work; tl.dot
    needs 16 at least), tensor-core tiles on a GPU, smaller for wider elements."""
    acc = tl.float64 if h.dtype == torch.float64 else tl.float32
    tf32 = h.dtype == torch.float32 and h.is_cuda and tf32_allowed()
    plan = dict(ACC=acc, PRECISION="tf32" if tf32 else "ieee",
                UPCAST=not h.is_cuda and h.dtype == torch.bfloat16)
    if not h.is_cuda:
        return dict(plan, BN=16, BV=16, BD=16, num_warps=1, programs=4)
    sms = torch.cuda.get_device_properties(h.device).multi_processor_count
    # [BN, BV] and BD by element size, 8 warps: compiled for sm_80 and sm_90 with every flag
    # on, these spill at most 112 B a thread and fit sm_80's 163 KiB of shared memory. The
    # 64 x 128 tiles before spilled up to 0.7 KB in float32 and 8.5 KB in float64, whose
    # backward needed 176 KiB, and BD = 64 spilled 1.6 KB in 16-bit backwards
    # (tests/test_triton_compiles.py, docs/ci.md).
    BN, BV, BD = {2: (64, 128, 32), 4: (32, 128, 32), 8: (32, 64, 32)}[h.element_size()]
    return dict(plan, BN=BN, BV=BV, BD=BD, num_warps=8, programs=4 * sms)


def _flags(linear_bias, class_sum, softcap) -> dict:
    return dict(HAS_BIAS=linear_bias is not None, HAS_CAP=softcap is not None,
                HAS_SUM=class_sum is not None)


# CUDA's limits on a launch grid, programs along x, y and z.
GRID_LIMITS = (2**31 - 1, 65535, 65535)


def _checked(grid: tuple, N: int, V: int) -> tuple:
    for axis, (size, limit) in enumerate(zip(grid, GRID_LIMITS)):
        if size > limit:
            raise ValueError(f"the fused softmax kernels cannot launch N = {N} rows by V = {V} "
                             f"classes: {size} programs along grid axis {'xyz'[axis]}, past "
                             f"CUDA's {limit}; use fused=False (the streamed path)")
    return grid


def _forward_grid(N: int, V: int, BN: int, BV: int, programs: int) -> tuple:
    """((row blocks, splits), tiles per split) of the forward. Row blocks go in x; with few
    of them the class tiles are split so that about `programs` programs run, and splits, at
    most `programs`, stay far below y's limit."""
    row_blocks, num_tiles = triton.cdiv(N, BN), triton.cdiv(V, BV)
    splits = max(1, min(num_tiles, triton.cdiv(programs, row_blocks)))
    tiles_per_split = triton.cdiv(num_tiles, splits)
    splits = triton.cdiv(num_tiles, tiles_per_split)  # every split holds at least one tile
    return _checked((row_blocks, splits), N, V), tiles_per_split


def _backward_grid(N: int, V: int, BN: int, BV: int) -> tuple:
    """(row blocks, class tiles, 1), one program per [BN, BV] tile, with the class tiles
    past y's limit folded into z: the kernel's class tile is z * (programs along y) + y."""
    col_tiles = triton.cdiv(V, BV)
    y = min(col_tiles, GRID_LIMITS[1])
    return _checked((triton.cdiv(N, BN), y, triton.cdiv(col_tiles, y)), N, V)


def _on_device(h: torch.Tensor):
    """torch.cuda.device(h.device) for CUDA tensors: Triton launches on the current device
    and its current stream, which need not be the input's (cuda:1 while cuda:0 is current)."""
    return torch.cuda.device(h.device) if h.is_cuda else contextlib.nullcontext()


def forward(h, linear_weight, linear_bias, targets, class_sum, softcap):
    """(lse, true, total), each [N] in the accumulation dtype (zeros for total without
    class_sum). h [N, D] and linear_weight [V, D] contiguous, of one dtype; targets [N, T]
    int64 contiguous (ids outside [0, V) count in no row's true)."""
    (N, D), V, T = h.shape, linear_weight.shape[0], targets.shape[1]
    plan = _plan(h, V)
    acc = torch.float64 if h.dtype == torch.float64 else torch.float32
    grid, tiles_per_split = _forward_grid(N, V, plan["BN"], plan["BV"], plan["programs"])
    parts = torch.empty(4, grid[1], N, dtype=acc, device=h.device)
    with _on_device(h):
        _forward_kernel[grid](
            h, linear_weight, linear_bias, targets, class_sum, parts[0], parts[1], parts[2],
            parts[3], N, V, D, 1.0 if softcap is None else float(softcap), tiles_per_split,
            triton.cdiv(V, plan["BV"]), T=T, BN=plan["BN"], BV=plan["BV"], BD=plan["BD"],
            ACC=plan["ACC"], PRECISION=plan["PRECISION"], UPCAST=plan["UPCAST"],
            num_warps=plan["num_warps"], **_flags(linear_bias, class_sum, softcap))
    lse = torch.logsumexp(parts[0] + parts[1].log(), 0)
    return lse, parts[2].sum(0), parts[3].sum(0)


def backward(h, linear_weight, linear_bias, targets, class_sum, softcap, lse, g_lse, g_true,
             g_total):
    """(grad_h, grad_w, grad_b or None) in the accumulation dtype, for the gradients g_lse,
    g_true, g_total [N] (accumulation dtype, contiguous) of forward's three outputs."""
    (N, D), V, T = h.shape, linear_weight.shape[0], targets.shape[1]
    plan = _plan(h, V)
    acc = torch.float64 if h.dtype == torch.float64 else torch.float32
    grid = _backward_grid(N, V, plan["BN"], plan["BV"])
    grad_h = torch.zeros(N, D, dtype=acc, device=h.device)
    grad_w = torch.zeros(V, D, dtype=acc, device=h.device)
    grad_b = None if linear_bias is None else torch.zeros(V, dtype=acc, device=h.device)
    with _on_device(h):
        _backward_kernel[grid](
            h, linear_weight, linear_bias, targets, class_sum, lse, g_lse, g_true, g_total,
            grad_h, grad_w, grad_b, N, V, D, 1.0 if softcap is None else float(softcap),
            T=T, BN=plan["BN"], BV=plan["BV"], BD=plan["BD"], ACC=plan["ACC"],
            PRECISION=plan["PRECISION"], UPCAST=plan["UPCAST"], num_warps=plan["num_warps"],
            **_flags(linear_bias, class_sum, softcap))
    return grad_h, grad_w, grad_b
