"""A recursive network over binary trees (Socher et al. 2011's composition, with the node's
operator as an input) and the sequential LSTM baseline, both predicting a class per tree
through a head of the fastsoftmax family (fastsoftmax.models.heads.model_head).

Shape letters: B trees, N nodes of a level, H hidden size, E embedding size, L tokens.

TreeRNN: a leaf's vector is its digit's embedding; an operation's is

    layers 1:  h = tanh(W [h_l; h_r] + e_op + b)
    layers 2:  h = tanh(W_2 tanh(W_1 [h_l; h_r] + e_op + b_1) + b_2)

One layer cannot compute an arbitrary table of (left value, right value) → value (mod-10
addition is no linear function of [h_l; h_r]); two layers can, hence the default. The root's
vector goes to the head. `encode` evaluates a Batch level by level: one composition per
height over all nodes of that height in the batch, never a Python loop over nodes.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ...nn import HEADS
from ..heads import model_head
from .data import OPS, PAD, TOKENS, Batch, Tree

MODELS = ("tree", "lstm")
NUM_CLASSES = 10


class _Classifier(nn.Module):
    """What both models share: a head over `features(batch)` [B, H] with 10 classes."""

    def _init_head(self, config: dict, counts: Tensor | None) -> None:
        for name in ("hidden_size", "num_sampled"):
            v = config[name]
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if config["output"] not in HEADS:
            raise ValueError(f"unknown output {config['output']!r}; expected one of "
                             f"{', '.join(HEADS)}")
        self.config, self._counts = config, counts
        self.head = model_head(config["output"], config["hidden_size"], NUM_CLASSES,
                               num_sampled=config["num_sampled"], counts=counts, bias=True)

    def forward(self, batch: Batch) -> Tensor:
        """Mean loss over the batch: the head's training loss in training mode, the exact
        cross entropy in eval mode."""
        return self.head(self.features(batch), batch.values)

    def node_loss(self, batch: Batch) -> Tensor:
        """Mean loss over every subexpression's value (all nodes of the trees; for the LSTM,
        the state at each digit and each ')'), as Socher et al. train on the sentiment
        treebank's labelled phrases."""
        return self.head(*self.all_features(batch))

    def log_prob(self, batch: Batch) -> Tensor:
        """Exact log-probabilities [B, 10] of each tree's value."""
        return self.head.log_prob(self.features(batch))

    def state(self) -> dict:
        return dict(config=dict(self.config), counts=self._counts, state_dict=self.state_dict())


class TreeRNN(_Classifier):
    """Args: hidden_size H; layers 1 or 2 of the composition (see the module docstring);
    output any head name of fastsoftmax.nn.HEADS, num_sampled and counts [10] for the
    sampled heads."""

    def __init__(self, hidden_size: int = 64, *, layers: int = 2, output: str = "full",
                 num_sampled: int = 4, counts: Tensor | None = None):
        super().__init__()
        if layers not in (1, 2):
            raise ValueError(f"layers must be 1 or 2, got {layers!r}")
        self._init_head(dict(model="tree", hidden_size=hidden_size, layers=layers,
                             output=output, num_sampled=num_sampled), counts)
        H = hidden_size
        self.leaf = nn.Embedding(10, H)
        self.op = nn.Embedding(len(OPS), H)
        self.W = nn.Linear(2 * H, H)
        self.W2 = nn.Linear(H, H) if layers == 2 else None

    def compose(self, op: Tensor, left: Tensor, right: Tensor) -> Tensor:
        """Vectors [N, H] of N operations from their op ids [N] and children [N, H]."""
        h = torch.tanh(self.W(torch.cat([left, right], dim=-1)) + self.op(op))
        return torch.tanh(self.W2(h)) if self.W2 is not None else h

    def encode(self, batch: Batch) -> Tensor:
        """Every node's vector [nodes, H], numbered as in the Batch: one compose per level."""
        h = self.leaf(batch.leaves)
        for op, left, right in batch.levels:
            # Children are in levels already computed: rows < len(h).
            h = torch.cat([h, self.compose(op, h[left], h[right])])
        return h

    def features(self, batch: Batch) -> Tensor:
        return self.encode(batch)[batch.roots]

    def all_features(self, batch: Batch) -> tuple[Tensor, Tensor]:
        return self.encode(batch), batch.node_values

    def encode_tree(self, tree: Tree) -> Tensor:
        """One tree's root vector [H], node by node (recursion): the reference `encode` is
        tested against, and far slower."""
        if tree.op is None:
            return self.leaf.weight[tree.value]
        op = torch.tensor([OPS.index(tree.op)], device=self.leaf.weight.device)
        return self.compose(op, self.encode_tree(tree.left)[None],
                            self.encode_tree(tree.right)[None])[0]


class SequenceLSTM(_Classifier):
    """The baseline: an LSTM over the expression's in-order tokens (brackets included); its
    last state at each sequence's true end goes to the head. `layers` LSTM layers of
    `hidden_size` over token embeddings of `embed_dim`; the head `output` ('full' or any
    registered name) with `num_sampled` candidates from the unigram of `counts`."""

    def __init__(self, hidden_size: int = 64, *, embed_dim: int = 32, layers: int = 1,
                 output: str = "full", num_sampled: int = 4, counts: Tensor | None = None):
        super().__init__()
        for name, v in (("embed_dim", embed_dim), ("layers", layers)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        self._init_head(dict(model="lstm", hidden_size=hidden_size, embed_dim=embed_dim,
                             layers=layers, output=output, num_sampled=num_sampled), counts)
        self.embed = nn.Embedding(len(TOKENS), embed_dim, padding_idx=PAD)
        self.lstm = nn.LSTM(embed_dim, hidden_size, layers, batch_first=True)

    def features(self, batch: Batch) -> Tensor:
        packed = pack_padded_sequence(self.embed(batch.tokens), batch.lengths.cpu(),
                                      batch_first=True, enforce_sorted=False)
        _, (h, _) = self.lstm(packed)
        return h[-1]

    def all_features(self, batch: Batch) -> tuple[Tensor, Tensor]:
        packed = pack_padded_sequence(self.embed(batch.tokens), batch.lengths.cpu(),
                                      batch_first=True, enforce_sorted=False)
        out, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True,
                                     total_length=batch.tokens.shape[1])
        keep = batch.token_values >= 0
        return out[keep], batch.token_values[keep]


def build_model(model: str = "tree", **options) -> _Classifier:
    """TreeRNN (model 'tree') or SequenceLSTM ('lstm') with `options`."""
    if model == "tree":
        options.pop("embed_dim", None)  # the tree's embeddings have size H
        return TreeRNN(**options)
    if model == "lstm":
        return SequenceLSTM(**options)
    raise ValueError(f"unknown model {model!r}; expected one of {', '.join(MODELS)}")


def from_state(state: dict) -> _Classifier:
    """The model a checkpoint's state describes, its weights loaded."""
    config = dict(state["config"])
    model = build_model(config.pop("model"), **config, counts=state.get("counts"))
    model.load_state_dict(state["state_dict"])
    return model
