"""Optimisation helpers that understand sparse gradients (sparse=True embeddings and output
layers): a global-norm clip and an optimiser that gives sparse parameters SparseAdam."""

from typing import Iterable, List

import torch
from torch import nn


def clip_grad_norm(parameters: Iterable[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale all gradients so that their global L2 norm is at most `max_norm`; returns the
    norm before clipping, a tensor on the gradients' device (as torch's does: reading it back
    is a host sync, left to the caller). Unlike `torch.nn.utils.clip_grad_norm_` it accepts
    sparse gradients: the norm of a sparse gradient is that of its coalesced values, computed
    without coalescing it (sparse_grad_norm), so that the clip reads nothing back either.
    Norms are taken in float32, or in float64 when a gradient is float64."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.zeros(())
    dtype = torch.float64 if any(g.dtype == torch.float64 for g in grads) else torch.float32
    norms = [(sparse_grad_norm(g, dtype) if g.is_sparse else g.detach().to(dtype).norm())
             for g in grads]
    total = torch.stack([n.to(norms[0].device) for n in norms]).norm()
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        # A sparse gradient scales through its values: its duplicates stay as they are.
        (g._values() if g.is_sparse else g).mul_(coef.to(g.device, g.dtype))
    return total


def sparse_grad_norm(grad: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The L2 norm of sparse COO `grad` as a dense tensor of the same values, in `dtype`,
    with no host read: coalescing an uncoalesced gradient (nn.Embedding's, or two sparse
    gradients summed into one parameter) reads the number of distinct rows back from a GPU.
    Its duplicates are summed instead into a buffer of its own static shape [nnz, ...]: rows
    sorted by index, a run of equal indices is one segment (cumsum of the index changes), each
    segment's values added into its slot, the unused slots left zero."""
    values = grad._values().detach().to(dtype)
    if grad.is_coalesced() or values.shape[0] < 2:
        return values.norm()
    key, order = _flat_indices(grad).sort(stable=True)
    starts = torch.ones_like(key, dtype=torch.bool)
    starts[1:] = key[1:] != key[:-1]
    segment = starts.cumsum(0) - 1
    sums = torch.zeros_like(values).index_add_(0, segment, values.index_select(0, order))
    return sums.norm()


def _flat_indices(grad: torch.Tensor) -> torch.Tensor:
    """One int64 key per stored element of sparse `grad`: its row-major position over the
    sparse dimensions (the row itself for an embedding's [V, D] gradient)."""
    indices = grad._indices()
    key = indices[0]
    for dim in range(1, grad.sparse_dim()):
        key = key * grad.shape[dim] + indices[dim]
    return key


class CombinedOptimizer(torch.optim.Optimizer):
    """Several optimisers stepped as one (Adam for dense parameters, SparseAdam for sparse
    ones), itself a torch.optim.Optimizer: LR schedulers and state-dict tools take it.

    Its `param_groups` are the inner optimisers' own group dicts (a schedule setting
    group["lr"] reaches them) and its `state` is one dict that the inner optimisers share (their
    parameters are disjoint), so Optimizer's own state_dict/load_state_dict cover them all."""

    def __init__(self, optimizers: List[torch.optim.Optimizer]):
        self.optimizers = [o for o in optimizers if o is not None]
        super().__init__([g for o in self.optimizers for g in o.param_groups], defaults={})
        self._share()

    def _share(self) -> None:
        """Point the inner optimisers at this one's groups and state (load_state_dict makes
        new ones)."""
        groups = iter(self.param_groups)
        for o in self.optimizers:
            o.param_groups = [next(groups) for _ in o.param_groups]
            o.state = self.state

    @torch.no_grad()
    def step(self, closure=None):
        loss = None if closure is None else torch.enable_grad()(closure)()
        for o in self.optimizers:
            o.step()
        return loss

    def load_state_dict(self, state_dict: dict) -> None:
        """A state of this optimiser, or of the older form {"combined": [one per optimiser]}."""
        if "combined" in state_dict:
            if len(state_dict["combined"]) != len(self.optimizers):
                raise ValueError("the saved optimiser state does not match this optimiser: "
                                 f"{len(state_dict['combined'])} optimisers saved, "
                                 f"{len(self.optimizers)} here")
            for o, s in zip(self.optimizers, state_dict["combined"]):
                o.load_state_dict(s)
            self.param_groups = [g for o in self.optimizers for g in o.param_groups]
            self.state.clear()
            for o in self.optimizers:
                self.state.update(o.state)
        else:
            super().load_state_dict(state_dict)
        self._share()


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


__all__ = ["CombinedOptimizer", "clip_grad_norm", "make_optimizer", "sparse_grad_norm"]
