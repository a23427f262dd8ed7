"""Random inputs of the loss ops (sampled softmax, NCE, negative sampling), the float64
reference of tests/reference.py on them, and error bounds derived from the dtype.

A case draws its structure with hypothesis (shapes, including empty ones and V = 1; num_true,
S, K; dtype; memory layouts; ignore_index patterns; duplicate and colliding ids; the logit
range up to the dtype's extreme) and its values from a seeded torch generator.
"""

import dataclasses
import math
from typing import Optional

import torch
from hypothesis import strategies as st

import reference as R
from fastsoftmax import SampledValues
from fuzz_support import EXTREME_LOGIT, dtypes, eps, layouts, with_layout

IGNORE_DEFAULT = -100


@dataclasses.dataclass
class LossCase:
    kind: str                    # "softmax", "nce" or "negsamp"
    dtype: torch.dtype
    lead: tuple                  # input is lead + (D,)
    input: torch.Tensor          # as passed (any layout), requires grad through its graph
    weight: torch.Tensor         # [V, D]
    bias: Optional[torch.Tensor]  # [V] or None
    target: torch.Tensor         # lead or lead + (T,)
    num_true: int
    sampled: Optional[SampledValues]   # softmax / NCE
    negatives: Optional[torch.Tensor]  # negsamp: lead + (K,) or (K,)
    log_z: object                # float or a 0-d tensor that requires grad (NCE)
    remove_hits: bool
    ignore_index: int
    reduction: str
    upstream: torch.Tensor       # gradient fed to the output

    @property
    def rows(self):
        """input [N, D], target [N, T] as the ops see them."""
        n = math.prod(self.input.shape[:-1])
        return (self.input.reshape(n, self.input.shape[-1]),
                self.target.reshape(n, self.num_true))

    def params(self):
        p = [self.input, self.weight]
        if self.bias is not None:
            p.append(self.bias)
        if isinstance(self.log_z, torch.Tensor):
            p.append(self.log_z)
        return p


def _rows_of_norm(g, rows, cols, norm):
    x = torch.randn(rows, cols, generator=g, dtype=torch.float64)
    return x / x.norm(dim=1, keepdim=True).clamp_min(1e-300) * norm


@st.composite
def loss_cases(draw, kind, max_rows=6):
    dtype = draw(dtypes)
    lead = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=2)))
    if len(lead) == 1:  # the usual [N, D]: longer, more often
        lead = (draw(st.integers(0, max_rows)),)
    N = math.prod(lead)
    D = draw(st.integers(0, 9))
    V = draw(st.integers(1, 10))
    T = draw(st.integers(1, 3))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    # Logit range: tiny, ordinary, or the dtype's extreme (exp overflows just past it).
    top = draw(st.sampled_from([1e-3, 3.0, EXTREME_LOGIT[dtype]]))
    split = draw(st.floats(0.05, 0.95))
    h = _rows_of_norm(g, N, D, (0.9 * top) ** split)
    w = _rows_of_norm(g, V, D, (0.9 * top) ** (1 - split))
    b = (torch.rand(V, generator=g, dtype=torch.float64) - 0.5) * 0.2 * top

    # Ids: small V makes duplicates and collisions with the targets common.
    ids = st.integers(0, V - 1)
    ignore_index = draw(st.sampled_from([IGNORE_DEFAULT, -1, V + 3] + ([0] if T == 1 else [])))
    ignored = draw(st.lists(st.booleans(), min_size=N, max_size=N))
    target = torch.tensor(draw(st.lists(ids, min_size=N * T, max_size=N * T)),
                          dtype=torch.int64).reshape(N, T)
    target[torch.tensor(ignored, dtype=torch.bool)] = ignore_index  # whole rows

    case = dict(kind=kind, dtype=dtype, lead=lead, num_true=T, ignore_index=ignore_index,
                reduction=draw(st.sampled_from(["none", "sum", "mean"])), sampled=None,
                negatives=None, bias=None, log_z=0.0, remove_hits=False)
    case["input"] = with_layout(h.to(dtype).requires_grad_(), draw(layouts)).reshape(lead + (D,))
    case["weight"] = with_layout(w.to(dtype).requires_grad_(), draw(layouts))
    target = with_layout(target, draw(layouts))
    squeeze = T == 1 and draw(st.booleans())
    case["target"] = target.reshape(lead if squeeze else lead + (T,))
    if kind == "negsamp":
        K = draw(st.integers(0, 4))
        shared = draw(st.booleans())
        rows = 1 if shared else N
        neg = torch.tensor(draw(st.lists(ids, min_size=rows * K, max_size=rows * K)),
                           dtype=torch.int64)
        neg = neg.reshape(K) if shared else with_layout(neg.reshape(N, K), draw(layouts))
        case["negatives"] = neg if shared else neg.reshape(lead + (K,))
    else:
        S = draw(st.integers(1, 6))
        cand = torch.tensor(draw(st.lists(ids, min_size=S, max_size=S)), dtype=torch.int64)
        counts = st.floats(1e-3, 10.0)
        true_count = torch.tensor(draw(st.lists(counts, min_size=N * T, max_size=N * T)),
                                  dtype=torch.float32).reshape(case["target"].shape)
        sampled_count = torch.tensor(draw(st.lists(counts, min_size=S, max_size=S)),
                                     dtype=torch.float32)
        case["sampled"] = SampledValues(with_layout(cand, draw(layouts)), true_count,
                                        with_layout(sampled_count, draw(layouts)))
        case["remove_hits"] = draw(st.booleans())
        if draw(st.booleans()):
            case["bias"] = with_layout(b.to(dtype).requires_grad_(), draw(layouts))
        if kind == "nce":
            z = draw(st.floats(-5.0, 5.0))
            as_tensor = draw(st.sampled_from([None, torch.float32, torch.float64]))
            case["log_z"] = z if as_tensor is None else torch.tensor(z, dtype=as_tensor,
                                                                       requires_grad=True)
    shape = () if case["reduction"] != "none" else lead
    case["upstream"] = (torch.rand(shape, generator=g, dtype=torch.float64) + 0.5).to(dtype)
    return LossCase(**case)


# ---------------------------------------------------------------------------------------
# reference and error bounds
# ---------------------------------------------------------------------------------------


def reference_rows(case: LossCase) -> torch.Tensor:
    """Per-row float64 losses [N] of the case, differentiable w.r.t. case.params()."""
    h, t = case.rows
    if case.kind == "negsamp":
        neg = case.negatives
        neg = neg if neg.dim() == 1 else neg.reshape(h.shape[0], neg.shape[-1])
        return R.negative_sampling_reference(h, case.weight, t, neg, case.ignore_index)
    cand, tq, sq = case.sampled
    tq = tq.reshape(t.shape)
    if case.kind == "softmax":
        return R.sampled_softmax_reference(h, case.weight, case.bias, t, cand, tq, sq,
                                           case.remove_hits, case.ignore_index)
    log_z = case.log_z
    log_z = log_z.double() if isinstance(log_z, torch.Tensor) else log_z
    return R.nce_reference(h, case.weight, case.bias, t, cand, tq, sq, case.remove_hits,
                           log_z, case.ignore_index)


def row_classes(case: LossCase):
    """(classes [N, J], |logit offsets| [N, J]) of every logit a row computes."""
    h, t = case.rows
    N = h.shape[0]
    safe = torch.where(t == case.ignore_index, torch.zeros_like(t), t)
    if case.kind == "negsamp":
        neg = case.negatives
        neg = neg.expand(N, -1) if neg.dim() == 1 else neg.reshape(N, neg.shape[-1])
        classes = torch.cat([safe, neg], 1)
        return classes, torch.zeros(classes.shape, dtype=torch.float64)
    cand, tq, sq = case.sampled
    classes = torch.cat([safe, cand.expand(N, -1)], 1)
    off = torch.cat([tq.reshape(t.shape).double().log().abs(),
                     sq.double().log().abs().expand(N, -1)], 1)
    if case.bias is not None:
        off = off + case.bias.detach().double()[classes].abs()
    if isinstance(case.log_z, torch.Tensor):
        off = off + abs(float(case.log_z.detach()))
    else:
        off = off + abs(case.log_z)
    return classes, off


# Every bound below is a first-order rounding-error bound of the computation (dot products
# of D terms, sums over the J = T + S (or T + K) logits of a row and the N rows of a batch,
# one rounding to the dtype per stored value), in units of the dtype's epsilon, times SAFETY.
# A wrong index, a missed mask or a lost term is off by O(1) relative, far above them.
SAFETY = 4.0


def _logit_scale(case: LossCase):
    """(classes [N, J], per-row largest |logit| scale m [N], logit error bound delta [N])."""
    h, _ = case.rows
    classes, off = row_classes(case)
    w_abs = case.weight.detach().double().abs()
    scale = (h.detach().double().abs()[:, None, :] * w_abs[classes]).sum(-1) + off  # [N, J]
    m = scale.amax(1) if classes.shape[1] else torch.zeros(h.shape[0], dtype=torch.float64)
    delta = (h.shape[1] + 4) * eps(case.dtype) * m
    return classes, m, delta


def _kept(case: LossCase) -> torch.Tensor:
    return case.rows[1][:, 0] != case.ignore_index


def forward_bound(case: LossCase, ref_rows: torch.Tensor, reduction: str) -> torch.Tensor:
    """Allowed |ours - reference| of the loss output for `reduction`."""
    classes, m, delta = _logit_scale(case)
    e, J, N = eps(case.dtype), classes.shape[1], classes.shape[0]
    kept = _kept(case)
    # A row's loss moves by at most (its logit count) x (logit error): log-sum-exp and the
    # softplus terms are 1-Lipschitz. Ignored rows must be exactly 0.
    rows = (SAFETY * (J + 2) * (delta + e * (1 + m)) + 4 * e * ref_rows.detach().abs()) * kept
    if reduction == "none":
        return rows
    total = rows.sum() + (N + 2) * e * ref_rows.detach().abs().sum()
    return total if reduction == "sum" else total / kept.sum()


def backward_bounds(case: LossCase, row_grad: torch.Tensor) -> list:
    """Allowed error of the gradient of each of case.params(), for per-row output gradients
    row_grad [N] (float64). A row's loss gradients (softmax probabilities, sigmoids) are off by
    at most 2 delta + (J + N + 4) eps; each weight gradient sums those times |h| or |w|."""
    h, _ = case.rows
    classes, _, delta = _logit_scale(case)
    e, (N, J) = eps(case.dtype), classes.shape
    a = row_grad.abs() * SAFETY * (2 * delta + (J + N + 4) * e)  # [N]
    w_abs = case.weight.detach().double().abs()
    flat = classes.reshape(-1)
    per_pair = a.repeat_interleave(J)
    bounds = [
        (a[:, None] * w_abs[classes].sum(1)).reshape(case.input.shape),
        torch.zeros_like(w_abs).index_add_(
            0, flat, per_pair[:, None] * h.detach().double().abs().repeat_interleave(J, 0)),
    ]
    if case.bias is not None:
        bounds.append(torch.zeros(w_abs.shape[0], dtype=torch.float64).index_add_(0, flat,
                                                                                   per_pair))
    if isinstance(case.log_z, torch.Tensor):
        bounds.append((a * J).sum())
    return bounds


def output_row_grads(case: LossCase) -> torch.Tensor:
    """The gradient each row's loss receives when case.upstream is fed to the output."""
    N = case.rows[0].shape[0]
    up = case.upstream.double()
    if case.reduction == "none":
        return up.reshape(N)
    if case.reduction == "sum":
        return up.expand(N)
    return up.expand(N) / _kept(case).sum()


def assert_within(name: str, ours, ref, bound, dtype) -> None:
    """|ours - ref| <= bound + 4 eps |ref| + a denormal floor, elementwise; NaN only where the
    reference is NaN; infinities equal."""
    ours = torch.zeros_like(bound) if ours is None else ours.detach().double()
    ref = torch.zeros_like(ours) if ref is None else ref.detach().double()
    assert ours.shape == ref.shape, (name, ours.shape, ref.shape)
    e = eps(dtype)
    allowed = bound + 4 * e * ref.abs() + 4 * torch.finfo(dtype).tiny * e
    new_nan = ours.isnan() & ~ref.isnan()
    assert not bool(new_nan.any()), f"{name}: NaN where the reference has none"
    ok = (ours.isnan() & ref.isnan()) | (ours == ref) | ((ours - ref).abs() <= allowed)
    if not bool(ok.all()):
        i = (~ok).nonzero()[0].tolist()
        raise AssertionError(
            f"{name}: at {i} ours {ours[tuple(i)].item()!r} reference {ref[tuple(i)].item()!r} "
            f"allowed error {allowed[tuple(i)].item():.3g} ({(~ok).sum().item()} of "
            f"{ok.numel()} outside)")
