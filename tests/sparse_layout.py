"""The two layouts of a native op's row-sparse weight gradient (values [R, D], ids [R]).

The CPU's is coalesced: one row per touched class, ids ascending. A CUDA device's (and the
emulated build's) has one row per pair, R = the number of pairs, so that its size is known
without reading anything back: ids are the pairs' class ids sorted (duplicates kept), each
run of equal ids holds its sum in its first row and zeros in the others.
"""

import torch

from fastsoftmax.ops._checks import on_device


def coalesced_rows(rows: torch.Tensor, ids: torch.Tensor, num_classes: int, pairs: int):
    """(values, ids) of the coalesced gradient, after checking the layout of the backend in
    use: static on a device (`pairs` rows), coalesced on the CPU."""
    if not on_device(ids):
        assert bool((ids[1:] > ids[:-1]).all())
        return rows, ids
    assert rows.shape[0] == ids.numel() == pairs
    assert bool((ids[1:] >= ids[:-1]).all())
    starts = torch.ones_like(ids, dtype=torch.bool)
    starts[1:] = ids[1:] != ids[:-1]
    assert bool((rows[~starts] == 0).all())
    grad = torch.sparse_coo_tensor(ids.unsqueeze(0), rows, (num_classes, rows.shape[1]),
                                   check_invariants=True)  # ids in range
    grad = grad.coalesce()
    # Coalescing adds only zeros to each run's first row: the sums are kept bit for bit.
    assert torch.equal(grad.values(), rows[starts])
    return grad.values(), grad.indices()[0]


def check_gradient(grad: torch.Tensor, pairs: int, device_layout: bool) -> None:
    """A parameter's sparse gradient from autograd: a device's has the static nnz and says it
    is not coalesced (SGD and the clip take it as it is); the CPU's has the touched rows only
    (autograd's accumulation into .grad does not keep its coalesced flag)."""
    assert grad.is_sparse
    if device_layout:
        assert grad._nnz() == pairs
        assert pairs < 2 or not grad.is_coalesced()  # torch calls 0 or 1 rows coalesced
    else:
        assert grad._nnz() == grad.coalesce()._nnz() <= pairs
