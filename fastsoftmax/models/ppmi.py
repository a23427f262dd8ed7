"""PPMI and a truncated SVD of sparse co-occurrence counts, shared by word2vec's count-based
vectors (word2vec/ppmi_vectors.py) and the language model's context tree (lm/hs_tree.py)::

  PMI      log( #(w, c) D / (#(w) P_a(c) D) ), #(w) and D the row and grand sums, and
           P_a(c) = #(c)^a / sum_c' #(c')^a the context distribution raised to `cds_alpha`
           (0.75 smooths it, Levy et al.'s cds; 1 is plain PMI);
  PPMI     max(PMI - log(shift), 0), kept sparse (only positive entries stored);
  SVD      randomised (Halko et al. 2011, with power iterations) for large sparse matrices.
"""

import warnings

import numpy as np
import torch


def ppmi_matrix(cooc: torch.Tensor, cds_alpha: float = 0.75, shift: float = 1.0):
    """Sparse PPMI of a coalesced sparse co-occurrence matrix (see the module docstring)."""
    cooc = cooc.coalesce()
    (rows, cols), values = cooc.indices(), cooc.values().double()
    row_sums = torch.zeros(cooc.shape[0], dtype=torch.float64).index_add_(0, rows, values)
    col_sums = torch.zeros(cooc.shape[1], dtype=torch.float64).index_add_(0, cols, values)
    total = values.sum()
    context = col_sums.pow(cds_alpha)
    context = context / context.sum()
    pmi = (values.log() - (row_sums[rows] / total).log() - context[cols].log()
           - total.log() - np.log(shift))
    keep = pmi > 0
    return torch.sparse_coo_tensor(torch.stack((rows[keep], cols[keep])), pmi[keep],
                                   cooc.shape, is_coalesced=True, check_invariants=False)


def randomized_svd(m: torch.Tensor, q: int, power_iterations: int, seed: int):
    """(U [V, q], S [q]) of sparse m by Halko, Martinsson and Tropp (2011), algorithm 4.4:
    a Gaussian sketch m G, `power_iterations` rounds of m (m^T Q) re-orthonormalised each
    time (so small singular values do not drown), then the exact SVD of the small Q^T m.
    m and m^T are held as CSR, whose products with a dense [V, q] block run on all threads."""
    V = m.shape[1]
    q = min(q, min(m.shape))
    with warnings.catch_warnings():  # torch flags its CSR support as beta on every use
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        a_csr = m.float().coalesce().to_sparse_csr()
        at_csr = a_csr.to_sparse_csc().t()  # m^T as CSR (a CSC's transpose), no re-sort
    gen = torch.Generator().manual_seed(seed)
    basis = torch.linalg.qr(a_csr @ torch.randn(V, q, generator=gen)).Q
    for _ in range(power_iterations):
        basis = torch.linalg.qr(at_csr @ basis).Q
        basis = torch.linalg.qr(a_csr @ basis).Q
    small = (at_csr @ basis).t()  # Q^T m, [q, V]
    u_small, s, _ = torch.linalg.svd(small, full_matrices=False)
    return basis @ u_small, s
