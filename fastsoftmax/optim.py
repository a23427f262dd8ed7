"""Optimisation helpers that understand sparse gradients (sparse=True embeddings and output
layers): a global-norm clip and an optimiser that gives sparse parameters SparseAdam."""

from typing import Iterable, List

import torch
from torch import nn


def clip_grad_norm(parameters: Iterable[torch.Tensor], max_norm: float) -> float:
    """Scale all gradients so that their global L2 norm is at most `max_norm`; returns the
    norm before clipping. Unlike `torch.nn.utils.clip_grad_norm_` it accepts sparse gradients
    (the norm of a sparse gradient is that of its coalesced values)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return 0.0
    norms = [(g.coalesce().values() if g.is_sparse else g).detach().float().norm() for g in grads]
    total = torch.stack([n.to(norms[0].device) for n in norms]).norm()
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.to(g.device, g.dtype))
    return float(total)


class CombinedOptimizer:
    """Several optimisers stepped as one (Adam for dense parameters, SparseAdam for sparse
    ones). `param_groups` lists every group, so a schedule that sets group["lr"] reaches all."""

    def __init__(self, optimizers: List[torch.optim.Optimizer]):
        self.optimizers = [o for o in optimizers if o is not None]

    @property
    def param_groups(self) -> list:
        return [g for o in self.optimizers for g in o.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for o in self.optimizers:
            o.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        for o in self.optimizers:
            o.step()

    def state_dict(self) -> dict:
        return dict(combined=[o.state_dict() for o in self.optimizers])

    def load_state_dict(self, state: dict) -> None:
        if "combined" not in state or len(state["combined"]) != len(self.optimizers):
            raise ValueError("the saved optimiser state does not match this optimiser")
        for o, s in zip(self.optimizers, state["combined"]):
            o.load_state_dict(s)


def make_optimizer(model: nn.Module, name: str, lr: float, sparse_parameters=()):
    """'sgd' (takes dense and sparse gradients alike) or 'adam': torch.optim.Adam for the
    dense parameters and torch.optim.SparseAdam for `sparse_parameters`, whose gradients are
    sparse (Adam refuses those)."""
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr)
    if name != "adam":
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {name!r}")
    sparse_ids = {id(p) for p in sparse_parameters}
    if not sparse_ids:
        return torch.optim.Adam(model.parameters(), lr=lr)
    dense = [p for p in model.parameters() if id(p) not in sparse_ids]
    sparse = [p for p in model.parameters() if id(p) in sparse_ids]
    return CombinedOptimizer([torch.optim.Adam(dense, lr=lr) if dense else None,
                              torch.optim.SparseAdam(sparse, lr=lr)])


__all__ = ["CombinedOptimizer", "clip_grad_norm", "make_optimizer"]
