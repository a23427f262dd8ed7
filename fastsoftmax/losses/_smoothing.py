"""Per-class weights and label smoothing of the sampled softmax, composed around the native
per-row loss (the kernels stay as they are).

Semantics in training (N rows, T true classes per row, S shared candidates; every logit is
logQ-corrected, z_j = h.w_j + b_j - log Q(j), and a candidate equal to one of the row's true
classes is left out of that row when remove_accidental_hits): the row's candidate set C_i is
its T true classes plus its S_i surviving sampled classes, n_i = T + S_i of them, and
log q_i(j) = z_j - logsumexp over C_i. Then

    loss_i = (1 - eps) * a(y_i) * (-1/T sum_t log q_i(y_it))
             + eps / n_i * sum_{j in C_i} a(j) * (-log q_i(j))

with a(c) = weight[c] (1 without weight). That is F.cross_entropy(weight=, label_smoothing=)
with the V classes replaced by the row's candidates: the smoothing mass eps is spread
uniformly over the candidates the row actually scores. 'mean' divides by sum_i a(y_i) over
the rows not ignored, as F.cross_entropy does. A per-class weight needs T = 1.

Cost: no [N, S] tensor beyond the kernel's own. The candidates' sum sum_j a(j) z_j is
h . (sum_s a(s) w_s) + const for the shared candidates, corrected row by row for the true
classes and the accidental hits (found by binary search); logsumexp over C_i is recovered
from the kernel's loss (loss = lse - mean_t z_true). Gathered rows get sparse gradients, which
autograd adds into the kernel's. A first version with dense gathers and [N, S, T] hit masks
took 3.7x the plain step (N = 2048, D = 256, V = 10^5, S = 1024, 2-core CPU); see
docs/api.md for this one's measured cost.
"""

from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor


def weighted_smoothed_loss(
    base: Tensor, h: Tensor, linear_weight: Tensor, linear_bias: Optional[Tensor],
    safe: Tensor, sampled, remove_accidental_hits: bool, weight: Optional[Tensor],
    label_smoothing: float,
) -> Tuple[Tensor, Optional[Tensor]]:
    """(per-row loss [N], per-row target weight [N] or None) from the kernel's per-row sampled
    softmax loss `base` [N]. `safe` [N, T]: the true classes, ignored rows replaced by a valid
    id (the caller zeroes those rows)."""
    acc = base.dtype
    row_w = None if weight is None else weight.to(acc)[safe[:, 0]]
    loss = base if row_w is None else base * row_w
    if label_smoothing == 0.0:
        return loss, row_w
    candidates, true_count, sampled_count = sampled
    N, T = safe.shape
    S = candidates.shape[0]
    hd = h.to(acc)
    # Rows are gathered with a sparse gradient whatever the layer's: autograd adds it into
    # the kernel's gradient (dense or sparse) instead of building more dense [V, D] tensors.
    true_rows = F.embedding(safe, linear_weight, sparse=True).to(acc)  # [N, T, D]
    raw_true = torch.einsum("nd,ntd->nt", hd, true_rows)  # h.w (+ b) of each true class
    if linear_bias is not None:
        raw_true = raw_true + linear_bias.to(acc)[safe]
    z_true = raw_true - true_count.reshape(N, T).to(acc).log()
    lse = base + z_true.mean(1)  # the kernel's loss is lse - mean_t z_true

    a_s = (torch.ones(S, dtype=acc, device=h.device) if weight is None
           else weight.to(acc)[candidates])
    a_t = (torch.ones(N, T, dtype=acc, device=h.device) if row_w is None else row_w[:, None])
    minus_log_q = -sampled_count.to(acc).log()  # [S]
    offset = minus_log_q
    if linear_bias is not None:
        offset = offset + linear_bias.to(acc)[candidates]
    sampled_rows = F.embedding(candidates, linear_weight, sparse=True).to(acc)  # [S, D]
    total = hd @ (a_s[:, None] * sampled_rows).sum(0) + (a_s * offset).sum()  # [N]
    total = total + (a_t * z_true).sum(1)
    mass = a_t.sum(1) + a_s.sum()
    count = torch.full((N,), float(T + S), dtype=acc, device=h.device)
    if remove_accidental_hits and S:
        # A sampled class equal to a true class y_it is not among the row's candidates: take
        # its term back out. It has y_it's weight and logit h.w + b (raw_true) with the
        # sampled log Q. Found by binary search over the sorted candidates, O(N T log S),
        # nothing [N, S]; a class listed twice among a row's true classes is removed once
        # (share = its copies among the candidates / its copies among the true classes).
        with torch.no_grad():
            order = torch.argsort(candidates)
            ordered = candidates[order].contiguous()
            lo = torch.searchsorted(ordered, safe.contiguous())
            in_candidates = torch.searchsorted(ordered, safe.contiguous(), right=True) - lo
            copies = (safe[:, :, None] == safe[:, None, :]).sum(-1)
            share = in_candidates.to(acc) / copies.to(acc)  # [N, T]
            hit_log_q = torch.where(in_candidates > 0, minus_log_q[order[lo.clamp(max=S - 1)]],
                                    torch.zeros_like(share))
            a_hit = share * a_t
        total = total - (a_hit * (raw_true + hit_log_q)).sum(1)
        mass = mass - a_hit.sum(1)
        count = count - share.sum(1)
    smooth = (mass * lse - total) / count
    return (1.0 - label_smoothing) * loss + label_smoothing * smooth, row_w


__all__ = ["weighted_smoothed_loss"]
