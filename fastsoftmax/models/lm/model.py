"""The recurrent language model: embedding → multi-layer LSTM/GRU → an output layer of the
fastsoftmax family, taken from the registry by name (fastsoftmax.nn.make_head).

Shapes: B batch streams, T time steps (BPTT length), D features fed to the output layer,
V vocabulary size.
"""

import math
from typing import Optional, Tuple, Union

import torch
from torch import Tensor, nn

from ...nn import HEADS, check_size
from ..heads import model_head

Hidden = Union[Tensor, Tuple[Tensor, Tensor]]


class RNNLanguageModel(nn.Module):
    """Embedding → multi-layer LSTM/GRU → output head chosen by name ('full', 'sampled',
    'nce', 'neg' or any head registered with fastsoftmax.nn.register_head): `vocab_size`
    words, `embed_dim`, `num_layers` layers of `hidden_size` units of `rnn_type` ('lstm' or
    'gru'), every weight initialised uniformly in ±`init_range`.

    Dropout (Zaremba et al. 2014) acts only on non-recurrent connections: on the embeddings,
    between layers (the RNN's own `dropout`) and on the top layer's output, never across time.
    `tie_weights` shares the embedding with the output layer; it needs embed_dim ==
    hidden_size unless `projection` adds a hidden→embedding linear map before the output.
    `sampler` ('unigram' from `counts` to the `power`, or 'log_uniform'), `num_sampled` and
    `sparse` configure the heads that take them. `tree` (a ClassTree) replaces the Huffman
    tree of 'hs' built from `counts`; it is kept in the state dict, not in `config`.

    `forward(input, target, hidden)` → (mean loss, new hidden): the head's training objective
    in training mode, the exact full-softmax cross entropy in eval mode.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int = 200,
        hidden_size: int = 200,
        num_layers: int = 2,
        *,
        rnn_type: str = "lstm",
        dropout: float = 0.0,
        tie_weights: bool = False,
        projection: bool = False,
        output: str = "full",
        num_sampled: int = 1024,
        sampler: str = "unigram",
        counts: Optional[Tensor] = None,
        power: float = 0.75,
        init_range: float = 0.1,
        sparse: bool = False,
        tree=None,
    ):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("embed_dim", embed_dim),
                            ("hidden_size", hidden_size), ("num_layers", num_layers)):
            check_size(name, value)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if output not in HEADS:
            raise ValueError(f"output must be one of {tuple(HEADS)}, got {output!r}")
        if rnn_type not in ("lstm", "gru"):
            raise ValueError(f"rnn_type must be 'lstm' or 'gru', got {rnn_type!r}")
        if sampler not in ("unigram", "log_uniform"):
            raise ValueError(f"sampler must be 'unigram' or 'log_uniform', got {sampler!r}")
        if tie_weights and output == "hs":
            raise ValueError("tie_weights cannot be used with output 'hs': its weight holds the "
                             "tree's inner nodes, not one vector per word")
        if tree is not None and output != "hs":
            raise ValueError(f"tree is for output 'hs' only, got output {output!r}")
        if output == "hs" and counts is None:
            raise ValueError("output 'hs' needs the training counts (counts=...) for its tree")
        if tie_weights and embed_dim != hidden_size and not projection:
            raise ValueError(
                f"tie_weights needs embed_dim == hidden_size (got embed_dim={embed_dim}, "
                f"hidden_size={hidden_size}); make them equal or pass projection=True"
            )
        if sampler == "unigram" and counts is None and output != "full":
            raise ValueError("the unigram sampler needs the training counts (counts=...)")
        self.config = dict(
            vocab_size=vocab_size, embed_dim=embed_dim, hidden_size=hidden_size,
            num_layers=num_layers, rnn_type=rnn_type, dropout=dropout, tie_weights=tie_weights,
            projection=projection, output=output, num_sampled=num_sampled, sampler=sampler,
            power=power, init_range=init_range, sparse=sparse,
        )
        self.rnn_type = rnn_type
        # sparse: the embedding (and a sampled head) produce gradients touching only the rows
        # used, which for V in the hundreds of thousands is most of a CPU step otherwise.
        self.embedding = nn.Embedding(vocab_size, embed_dim, sparse=sparse)
        rnn_cls = nn.LSTM if rnn_type == "lstm" else nn.GRU
        self.rnn = rnn_cls(embed_dim, hidden_size, num_layers, batch_first=True,
                           dropout=dropout if num_layers > 1 else 0.0)
        self.drop = nn.Dropout(dropout)
        self.proj = nn.Linear(hidden_size, embed_dim, bias=False) if projection else None
        out_features = embed_dim if projection else hidden_size
        # Every DDP rank builds the sampler from the same full training counts, so all ranks
        # draw from one distribution. 'hs' takes its tree or the counts to build one from.
        uses_counts = (sampler == "unigram" or output == "hs") and tree is None
        self.head = model_head(
            output, out_features, vocab_size, num_sampled=num_sampled, sampler=sampler,
            counts=counts if uses_counts else None, tree=tree, power=power, bias=True,
            sparse=sparse, linear_weight=self.embedding.weight if tie_weights else None,
        )
        self.reset_parameters(init_range)

    def reset_parameters(self, init_range: float = 0.1) -> None:
        """Uniform(±init_range) for every weight (Zaremba et al.) and an output bias of
        −log V, the same for every head so runs with different heads start from the same
        model. A constant bias changes neither the softmax nor its gradient, so 'full' and
        'sampled' train exactly as with Zaremba's zero bias; NCE (self-normalised) needs it:
        with zero bias every noise word starts far too likely and the first thousands of
        steps go to pushing all scores down (PTB, 400 steps: valid ppl 132,836 vs 558)."""
        modules = [self.embedding, self.rnn] + ([self.proj] if self.proj is not None else [])
        for module in modules:
            for p in module.parameters():
                nn.init.uniform_(p, -init_range, init_range)
        # Only the head's weight and bias: a head may own other parameters (NCE's learned
        # log Z) whose own initialisation must stand.
        nn.init.uniform_(self.head.linear_weight, -init_range, init_range)
        if getattr(self.head, "linear_bias", None) is not None:
            nn.init.constant_(self.head.linear_bias, -math.log(self.config["vocab_size"]))

    @property
    def output(self) -> str:
        return self.config["output"]

    def sparse_parameters(self) -> list:
        """The parameters whose gradients are sparse (SparseAdam's share under 'adam'): the
        embedding and a sparse head's weight; a tied weight only when both sides are sparse."""
        if not self.config["sparse"]:
            return []
        head_sparse = getattr(self.head, "sparse", False)
        if self.config["tie_weights"]:
            return [self.embedding.weight] if head_sparse else []
        return [self.embedding.weight] + ([self.head.linear_weight] if head_sparse else [])

    def init_hidden(self, batch_size: int) -> Hidden:
        p = next(self.parameters())
        shape = (self.rnn.num_layers, batch_size, self.rnn.hidden_size)
        h = torch.zeros(shape, dtype=p.dtype, device=p.device)
        return (h, h.clone()) if self.rnn_type == "lstm" else h

    def features(self, input: Tensor, hidden: Optional[Hidden] = None) -> Tuple[Tensor, Hidden]:
        """input int64 [B, T] → features [B, T, D] fed to the output layer, new hidden."""
        x = self.drop(self.embedding(input))
        y, hidden = self.rnn(x, hidden)
        y = self.drop(y)
        if self.proj is not None:
            y = self.proj(y)
        return y, hidden

    def forward(self, input: Tensor, target: Tensor, hidden: Optional[Hidden] = None):
        y, hidden = self.features(input, hidden)
        return self.head(y, target), hidden

    def log_prob(self, input: Tensor, hidden: Optional[Hidden] = None) -> Tuple[Tensor, Hidden]:
        """Exact log-probabilities [B, T, V] of the next word."""
        y, hidden = self.features(input, hidden)
        return self.head.log_prob(y), hidden


def detach_hidden(hidden: Optional[Hidden]) -> Optional[Hidden]:
    """Truncated BPTT: keep the state's value, cut the graph behind it."""
    if hidden is None:
        return None
    if isinstance(hidden, tuple):
        return tuple(h.detach() for h in hidden)
    return hidden.detach()


class CompiledStep:
    """`model` (an RNNLanguageModel, or DDP around one) with its training forward under
    torch.compile(mode=mode, fullgraph=True): one graph per step shape, the backward compiled
    with it, the output layer's ops inside (every head traces without a graph break). The
    recurrent layer is traced too (dynamo's allow_rnn, set for these calls only). `.module`
    is the model, as DDP's, so the loop finds its parameters and train()/eval()."""

    def __init__(self, model: nn.Module, mode: str = "default"):
        self.module = model
        self.compiled = torch.compile(model, mode=mode, fullgraph=True)

    def __call__(self, *args):
        with torch._dynamo.config.patch(allow_rnn=True):
            return self.compiled(*args)
