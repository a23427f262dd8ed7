"""The collectives of the vocabulary-parallel layers, each a small named autograd mapping
(Megatron-LM's tensor_parallel/mappings.py pattern): what a mapping does in forward and what
its gradient needs in backward sit side by side, so a layer reads as ordinary PyTorch.

Every rank of a vocabulary group holds the same input rows h [N, D] and a row shard of the
output embedding. The mappings:

- copy_to_vocab_group: forward identity; backward all-reduce (sum). h feeds every shard's
  logits, so dL/dh is the sum of the shards' partial gradients.
- reduce_from_vocab_group: forward all-reduce (sum); backward identity. Combines values each
  rank computed for its own classes (zeros elsewhere); x + 0 is exact, so a value owned by
  one rank arrives bit-for-bit on all of them.
- logsumexp_over_vocab_group: forward all-reduce max then sum of exp: the global log Z from
  each shard's log-sum-exp; backward needs no collective (dZ/dlse_r = exp(lse_r - Z)).

The checks (`agree`, `check_shards`) make a bad input a ValueError on every rank of the group
at the same point: a rank that raised alone would leave the others waiting in the next
collective until its timeout.
"""

from typing import List, Optional

import torch
import torch.distributed as dist
from torch import Tensor


def backend_for(device: torch.device) -> str:
    """The torch.distributed backend for tensors on `device`: nccl for CUDA, gloo otherwise."""
    return "nccl" if torch.device(device).type == "cuda" else "gloo"


def group_size(group) -> int:
    return dist.get_world_size(group)


def group_rank(group) -> int:
    return dist.get_rank(group)


class _CopyToVocabGroup(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM, group=ctx.group)
        return grad, None


class _ReduceFromVocabGroup(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        out = x.contiguous().clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _LogSumExpOverVocabGroup(torch.autograd.Function):
    @staticmethod
    def forward(ctx, lse, group):
        # Max first so that no exp overflows: each shard's lse is <= the global max.
        top = lse.detach().contiguous().clone()
        dist.all_reduce(top, op=dist.ReduceOp.MAX, group=group)
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
        total = (lse.detach() - top).exp()
        dist.all_reduce(total, op=dist.ReduceOp.SUM, group=group)
        out = top + total.log()
        ctx.save_for_backward(lse.detach(), out)
        return out

    @staticmethod
    def backward(ctx, grad):
        lse, out = ctx.saved_tensors
        return grad * (lse - out).exp(), None


def copy_to_vocab_group(x: Tensor, group=None) -> Tensor:
    """Identity forward; the gradient is summed over the group's ranks in backward."""
    return _CopyToVocabGroup.apply(x, group)


def reduce_from_vocab_group(x: Tensor, group=None) -> Tensor:
    """The sum over the group's ranks (every rank gets it); identity in backward."""
    return _ReduceFromVocabGroup.apply(x, group)


def logsumexp_over_vocab_group(lse: Tensor, group=None) -> Tensor:
    """log sum_r exp(lse_r) over the group's ranks, elementwise; differentiable without a
    collective in backward."""
    return _LogSumExpOverVocabGroup.apply(lse, group)


def agree(ok: bool, what: str, device, group=None) -> None:
    """Raise ValueError(`what`) on the ranks where `ok` is False and a ValueError naming those
    ranks on all others: one all-reduce of a [world] flag vector, so every rank of the group
    stops at the same point instead of hanging in the next collective."""
    world, me = group_size(group), group_rank(group)
    flags = torch.zeros(world, dtype=torch.int64, device=device)
    flags[me] = 0 if ok else 1
    dist.all_reduce(flags, op=dist.ReduceOp.SUM, group=group)
    bad: List[int] = [r for r in range(world) if int(flags[r])]
    if not bad:
        return
    if not ok:
        raise ValueError(f"vocabulary-parallel rank {me}: {what}")
    raise ValueError(f"vocabulary-parallel rank {me}: rank(s) {bad} of the vocabulary group "
                     f"found a bad input (see their error); every rank stops here")


def check_shards(num_classes: int, in_features: int, start: int, rows: int, device,
                 group=None, has_bias: Optional[bool] = None) -> None:
    """Every rank of the group must agree on V and D, and the shards must tile [0, V) in
    rank order. One all-gather of (V, D, start, rows, bias); the same ValueError on every
    rank when they do not."""
    world = group_size(group)
    mine = torch.tensor([num_classes, in_features, start, rows, -1 if has_bias is None
                         else int(has_bias)], dtype=torch.int64, device=device)
    parts = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(parts, mine, group=group)
    table = [[int(v) for v in p.tolist()] for p in parts]
    vs, ds = {t[0] for t in table}, {t[1] for t in table}
    problem = None
    if len(vs) > 1 or len(ds) > 1:
        problem = ("the ranks disagree on the layer's shape: (V, D) per rank = "
                   f"{[(t[0], t[1]) for t in table]}")
    elif len({t[4] for t in table}) > 1:
        problem = f"the ranks disagree on the bias (per rank: {[t[4] for t in table]})"
    else:
        edge = 0
        for r, t in enumerate(table):
            if t[2] != edge or t[3] < 1:
                problem = (f"the shards do not tile [0, {num_classes}) in rank order: rank {r} "
                           f"holds rows [{t[2]}, {t[2] + t[3]}), expected to start at {edge} "
                           f"with at least one row")
                break
            edge = t[2] + t[3]
        if problem is None and edge != table[0][0]:
            problem = f"the shards cover [0, {edge}) but V = {table[0][0]}"
    if problem is not None:
        raise ValueError(f"vocabulary-parallel layer on rank {group_rank(group)}: {problem}")
