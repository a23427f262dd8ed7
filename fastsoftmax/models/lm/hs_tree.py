"""The tree of the 'hs' output layer of the language model.

'huffman' (word2vec.c's tree over the training counts) groups words by frequency alone, so an
inner node often has to separate words that follow the same histories. 'context' builds the
tree from what a next-word predictor can see: each word is described by the words that come
just before it in the training text (PPMI of (word, previous word at distance d) pairs, one
block of columns per distance, then a truncated SVD), and `ClassTree.from_vectors` splits
those vectors recursively, each split leaving 25% to 75% of the count mass on a side so
frequent words stay shallow. The tree is saved with the model (the head's `tree_links`
buffer), so a resumed or evaluated checkpoint uses the same tree.
"""

import torch
from torch import Tensor

from ...tree import ClassTree
from ..ppmi import ppmi_matrix, randomized_svd

TREES = ("huffman", "context", "features")


def left_context_vectors(ids: Tensor, vocab_size: int, *, dim: int = 64, window: int = 2,
                         seed: int = 0) -> Tensor:
    """float32 [V, dim]: U S^0.5 of the rank-`dim` SVD of the PPMI matrix [V, window * V]
    whose entry (w, (d - 1) V + u) counts word u at d words before w (d = 1..window) in the
    1-D id stream `ids`."""
    ids = torch.as_tensor(ids)
    if ids.dim() != 1 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError("ids must be a 1-D integer tensor (the training token stream)")
    if window < 1 or dim < 1:
        raise ValueError(f"window and dim must be >= 1, got {window} and {dim}")
    ids = ids.to("cpu", torch.int64)
    if ids.numel() <= window:
        raise ValueError(f"the token stream ({ids.numel()}) must be longer than window")
    if int(ids.min()) < 0 or int(ids.max()) >= vocab_size:
        raise ValueError(f"ids must lie in [0, {vocab_size})")
    rows = torch.cat([ids[d:] for d in range(1, window + 1)])
    cols = torch.cat([ids[:-d] + (d - 1) * vocab_size for d in range(1, window + 1)])
    cooc = torch.sparse_coo_tensor(torch.stack((rows, cols)),
                                   torch.ones(rows.numel(), dtype=torch.float64),
                                   (vocab_size, window * vocab_size),
                                   check_invariants=False).coalesce()
    m = ppmi_matrix(cooc)
    u, s = randomized_svd(m, min(dim + 10, vocab_size), 3, seed)
    return (u[:, :dim] * s[:dim].sqrt()).float()


@torch.no_grad()
def feature_vectors(model, ids: Tensor, *, batch_size: int = 20, bptt: int = 35) -> Tensor:
    """float32 [V, D]: for each word, the mean of the features (the output layer's input) that
    `model`, a trained RNNLanguageModel, computes just before that word in the id stream
    `ids` (zero for a word never seen). Words a trained model predicts from similar states
    get similar vectors (Mnih and Hinton 2009 built their trees from such averages)."""
    from .data import batchify, bptt_batches

    was_training = model.training
    model.eval()
    V = model.config["vocab_size"]
    p = next(model.parameters())
    sums, seen, hidden = None, torch.zeros(V, dtype=torch.float64), None
    for x, y in bptt_batches(batchify(torch.as_tensor(ids), batch_size).to(p.device), bptt):
        feats, hidden = model.features(x, hidden)
        feats = feats.reshape(-1, feats.shape[-1]).double().cpu()
        if sums is None:
            sums = torch.zeros(V, feats.shape[1], dtype=torch.float64)
        target = y.reshape(-1).cpu()
        sums.index_add_(0, target, feats)
        seen.index_add_(0, target, torch.ones_like(target, dtype=torch.float64))
    model.train(was_training)
    return (sums / seen.clamp(min=1)[:, None]).float()


def build_tree(kind: str, ids: Tensor, counts: Tensor, *, seed: int = 0, model=None
               ) -> ClassTree:
    """The 'hs' tree `kind` ('huffman', 'context', or 'features': the mean features of a
    trained language model `model` before each word) over the vocabulary of `counts` [V], from
    the training id stream `ids`."""
    if kind == "huffman":
        return ClassTree.huffman(counts)
    if kind == "features":
        if model is None:
            raise ValueError("hs_tree 'features' needs a trained language model "
                             "(--hs-tree-model CHECKPOINT)")
        if model.config["vocab_size"] != counts.numel():
            raise ValueError(f"the --hs-tree-model has {model.config['vocab_size']} words, the "
                             f"vocabulary {counts.numel()}")
        return ClassTree.from_vectors(feature_vectors(model, ids), counts, slack=0.25,
                                      seed=seed)
    if kind == "context":
        vectors = left_context_vectors(ids, counts.numel(), seed=seed)
        # slack 0.25: each split may leave 25% to 75% of the count mass on a side. On PTB
        # (2 epochs, small config) 0.25 beat 0.1 and 0.4 (valid ppl 155.8 vs 160.3, 156.9).
        return ClassTree.from_vectors(vectors, counts, slack=0.25, seed=seed)
    raise ValueError(f"hs_tree must be one of {TREES}, got {kind!r}")
