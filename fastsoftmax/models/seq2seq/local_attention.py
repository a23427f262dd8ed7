"""Local attention (Luong, Pham & Manning 2015, §3.2): each target step attends to a window
of 2D + 1 source positions around an aligned position p_t instead of to the whole source.

Shape letters: B batch, T target length, S padded source length, H hidden size.

    local-m  p_t = t, the target step (0-based), assuming monotonic alignment; a step past
             the source's end is held at its last position, len − 1, so that every window
             holds a real source position.
    local-p  p_t = len · sigmoid(v_pᵀ tanh(W_p h_t)), a real number in [0, len], with len
             the example's own source length (never the padded S).

The window is the integer positions s with |s − p_t| ≤ D (for an integer p_t that is
[p_t − D, p_t + D]). The alignment is a softmax of the scores (dot, general or concat, as
for global attention) over the window's real positions only: positions before 0, at or past
len (padding) and outside the window get weight exactly 0. local-p then multiplies it by
the Gaussian exp(−(s − p_t)² / (2σ²)) with σ = D / 2, and does not renormalise (as in the
paper): the weights sum to at most 1, and the Gaussian is what carries the gradient to
W_p and v_p. The window's edges themselves are a step function of p_t and have no gradient.

Every window holds at least one real position: local-m clamps p_t to len − 1, and a local-p
p_t ∈ [0, len] is within 1 ≤ D of len − 1. The scores are computed for all S positions and
masked, which costs what global attention costs; it pays off only as a restriction (it
cannot attend far from p_t), not in speed, at these source lengths.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

ALIGNMENTS = ("global", "local-m", "local-p")
DEFAULT_WINDOW = 10  # Luong et al.'s D


def resolve_options(alignment: str, window, attention, attention_mode) -> int | None:
    """The window D a Seq2Seq runs with: DEFAULT_WINDOW filled in for local alignment, None
    for global; a ValueError for an unknown alignment, a window below 1, a window given with
    global alignment (it would be ignored), local alignment without a score function, or
    with hard attention (not implemented)."""
    if alignment not in ALIGNMENTS:
        raise ValueError(f"unknown alignment {alignment!r}; expected one of "
                         f"{', '.join(ALIGNMENTS)}")
    if alignment == "global":
        if window is not None:
            raise ValueError(f"window applies to local alignment only (local-m, local-p), got "
                             f"window={window!r} with global")
        return None
    if attention is None:
        raise ValueError(f"{alignment} alignment needs a score: attention 'dot', 'general' or "
                         f"'concat'")
    if attention_mode != "soft":
        raise ValueError(f"{alignment} alignment works with soft attention only, got "
                         f"attention_mode={attention_mode!r}")
    window = DEFAULT_WINDOW if window is None else window
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an integer ≥ 1, got {window!r}")
    return window


def monotonic_centers(lengths: Tensor, T: int, offset: int = 0) -> Tensor:
    """local-m's p_t [B, T] for target steps offset … offset + T − 1: the step, held at the
    source's last position len − 1 once past it."""
    t = torch.arange(offset, offset + T, device=lengths.device, dtype=torch.float64)
    return torch.minimum(t[None, :], (lengths[:, None] - 1).to(t.dtype))


class PredictiveCenter(nn.Module):
    """local-p's p_t = len · sigmoid(v_pᵀ tanh(W_p h_t)) [B, T] from decoder states [B, T, H]
    and source lengths [B]."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.W_p = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_p = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, dec: Tensor, lengths: Tensor) -> Tensor:
        gate = torch.sigmoid(self.v_p(torch.tanh(self.W_p(dec))).squeeze(-1))
        return lengths[:, None].to(gate.dtype) * gate


def local_weights(scores: Tensor, lengths: Tensor, centers: Tensor, window: int,
                  gaussian: bool) -> Tensor:
    """Local attention weights [B, T, S] from scores [B, T, S], source lengths [B] (positions
    at or past a row's length are padding) and window centers p_t [B, T] (see the module
    docstring). A row whose window held no real position would be all zero, never NaN."""
    S = scores.shape[-1]
    s = torch.arange(S, device=scores.device, dtype=centers.dtype)
    distance = s[None, None, :] - centers[..., None]  # [B, T, S]
    inside = (distance.abs() <= window) & (s[None, None, :] < lengths[:, None, None])
    masked = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    masked = masked.masked_fill(~inside, float("-inf"))
    # Softmax over the window; an empty window's row of -inf stays 0 instead of NaN.
    top = masked.amax(dim=-1, keepdim=True).clamp(min=torch.finfo(masked.dtype).min).detach()
    e = torch.exp(masked - top)
    weights = e / e.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(e.dtype).tiny)
    if gaussian:
        sigma = window / 2.0
        weights = weights * torch.exp(-distance.to(weights.dtype) ** 2 / (2 * sigma * sigma))
    return weights.to(scores.dtype)
