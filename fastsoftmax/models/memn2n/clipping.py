"""Gradient clipping per weight matrix, as the paper's authors clip (MemN2N-babi-matlab,
nn/Weight.m): each weight's gradient is rescaled on its own to norm `max_norm` when its norm
exceeds it, instead of one rescaling of all gradients together (fastsoftmax.optim's).

Their word embeddings and time vectors are one lookup table (the time words are words), so a
group here is an embedding's weight with its temporal vectors, stacked; every other
parameter (the separate answer layer, H) is a group of its own, a tied one counted once.
Their norm is Matlab's norm() of the matrix, the largest singular value ('spectral'); the
paper's text says an L2 norm, read here as the Frobenius norm of the group ('tensor').
"""

from typing import List

import torch

CLIP_STYLES = ("global", "tensor", "spectral")


def clip_groups(model) -> List[List[torch.nn.Parameter]]:
    """The parameters of a MemN2N in the groups the authors' code clips one by one."""
    groups, seen = [], set()
    for embedding, temporal in zip(model.embeddings, model.temporal):
        groups.append([embedding.weight, temporal])
        seen |= {id(embedding.weight), id(temporal)}
    for p in model.parameters():
        if id(p) not in seen:
            groups.append([p])
            seen.add(id(p))
    return groups


def group_norm(grads: List[torch.Tensor], style: str) -> torch.Tensor:
    """The norm of gradients stacked as rows of one matrix: 'tensor' Frobenius, 'spectral'
    the largest singular value (the L2 norm of a vector)."""
    if style == "tensor":
        return torch.stack([g.detach().float().norm() for g in grads]).norm()
    if style != "spectral":
        raise ValueError(f"style must be 'tensor' or 'spectral', got {style!r}")
    rows = torch.cat([g.detach().float().reshape(-1, g.shape[-1]) for g in grads])
    return torch.linalg.matrix_norm(rows, ord=2)


def clip_per_group(groups: List[List[torch.nn.Parameter]], max_norm: float,
                   style: str) -> torch.Tensor:
    """Rescale each group's gradients to norm `max_norm` where their norm exceeds it; returns
    how many groups were rescaled, as a tensor. The scale stays on the device (min(1,
    max_norm / norm), no branch on the norm), so a training step reads nothing back."""
    clipped = torch.zeros((), dtype=torch.int64, device=groups[0][0].device if groups else None)
    for group in groups:
        grads = [p.grad for p in group if p.grad is not None]
        if not grads:
            continue
        norm = group_norm(grads, style)
        scale = (max_norm / norm.clamp(min=torch.finfo(norm.dtype).tiny)).clamp(max=1.0)
        for g in grads:
            g.mul_(scale.to(g.dtype))
        clipped = clipped + (norm > max_norm)
    return clipped
