"""Recurrent word-level language models whose output layer is any fastsoftmax loss.

Shapes: B batch streams, T time steps (BPTT length), N = B*T rows, D features fed to the
output layer, V vocabulary size.

The pieces are kept as plain functions and small classes (corpus, batching, model, one
training epoch, evaluation, learning-rate rule, checkpoints, generation) so the command line
in `fastsoftmax.lm`, the benchmark and the tests drive the same code.
"""

import math
import os
import random
import sys
import time
from collections import Counter
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..nn import NCELoss, NegativeSamplingLoss, SampledSoftmaxLoss
from ..samplers import LogUniformSampler, Sampler, UnigramSampler

EOS = "<eos>"
UNK = "<unk>"
OUTPUTS = ("full", "sampled", "nce", "neg")
CHECKPOINT_FORMAT = "fastsoftmax.lm/1"

Hidden = Union[Tensor, Tuple[Tensor, Tensor]]


# ---------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------
class Vocabulary:
    """Words of the training split, ids sorted by decreasing frequency (ties by first
    appearance) so that id order is Zipf order, which the log-uniform sampler assumes.
    `<unk>` and `<eos>` always exist; `counts` are the training counts (float64 [V])."""

    def __init__(self, itos: Sequence[str], counts: Optional[Tensor] = None):
        self.itos = list(itos)
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("vocabulary has duplicate words")
        for special in (UNK, EOS):
            if special not in self.stoi:
                raise ValueError(f"vocabulary lacks {special}")
        self.counts = (
            counts.double()
            if counts is not None
            else torch.ones(len(self.itos), dtype=torch.float64)
        )

    @classmethod
    def from_tokens(cls, tokens: Sequence[str]) -> "Vocabulary":
        counter = Counter(tokens)
        for special in (UNK, EOS):
            counter.setdefault(special, 0)
        # Counter keeps insertion order, and sorted() is stable: ties stay in first-seen order.
        words = sorted(counter, key=lambda w: -counter[w])
        counts = torch.tensor([counter[w] for w in words], dtype=torch.float64)
        return cls(words, counts)

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, tokens: Sequence[str]) -> Tensor:
        unk = self.stoi[UNK]
        return torch.tensor([self.stoi.get(t, unk) for t in tokens], dtype=torch.int64)

    def decode(self, ids) -> List[str]:
        return [self.itos[int(i)] for i in ids]


def read_tokens(path: str) -> List[str]:
    """Whitespace tokens of a file, `<eos>` after every line (blank lines included, as the
    usual PTB / WikiText perplexities count them). A file with no words is an error."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    tokens: List[str] = []
    words = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            line_tokens = line.split()
            words += len(line_tokens)
            tokens.extend(line_tokens)
            tokens.append(EOS)
    if words == 0:
        raise ValueError(f"{path} is empty: it holds no words")
    return tokens


_SPLIT_NAMES = {
    "train": ("ptb.train.txt", "wiki.train.tokens", "train.txt", "train"),
    "valid": ("ptb.valid.txt", "wiki.valid.tokens", "valid.txt", "valid", "dev.txt"),
    "test": ("ptb.test.txt", "wiki.test.tokens", "test.txt", "test"),
}


def find_split(data_dir: str, split: str) -> str:
    """The file holding `split` in `data_dir` (PTB, WikiText or plain train/valid/test)."""
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(f"data directory not found: {data_dir}")
    for name in _SPLIT_NAMES[split]:
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(
        f"no {split} split in {data_dir}: expected one of {', '.join(_SPLIT_NAMES[split])}"
    )


class Corpus:
    """Train/valid/test id streams (int64 [L]) over a vocabulary built from train."""

    def __init__(
        self, data_dir: str, vocab: Optional[Vocabulary] = None, splits=("train", "valid", "test")
    ):
        paths = {s: find_split(data_dir, s) for s in splits}
        tokens = {s: read_tokens(p) for s, p in paths.items()}
        if vocab is None:
            if "train" not in tokens:
                raise ValueError("building a vocabulary needs the train split")
            vocab = Vocabulary.from_tokens(tokens["train"])
        self.vocab = vocab
        self.paths = paths
        self.splits: Dict[str, Tensor] = {s: vocab.encode(t) for s, t in tokens.items()}

    def __getitem__(self, split: str) -> Tensor:
        return self.splits[split]


def batchify(ids: Tensor, batch_size: int) -> Tensor:
    """[L] → [B, L // B]: B contiguous streams, the tail that does not fill a column dropped."""
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    length = ids.numel() // batch_size
    if length < 2:
        raise ValueError(
            f"{ids.numel()} tokens are too few for {batch_size} streams (need at least 2 each)"
        )
    return ids[: length * batch_size].view(batch_size, length)


def shard_rows(data: Tensor, rank: int, world_size: int, dim: int = 0) -> Tensor:
    """The rank's share of the streams of a [B, L] batch (or of a hidden state, streams on
    `dim` 1): each rank takes B / world_size consecutive streams, so the per-rank mean losses
    average to the global-batch mean."""
    if data.size(dim) % world_size:
        raise ValueError(
            f"batch size {data.size(dim)} is not divisible by the {world_size} processes"
        )
    per = data.size(dim) // world_size
    return data.narrow(dim, rank * per, per)


def bptt_batches(data: Tensor, bptt: int) -> Iterator[Tuple[Tensor, Tensor]]:
    """(input, target) pairs of [B, t ≤ bptt], target shifted one step ahead."""
    if bptt <= 0:
        raise ValueError(f"bptt must be positive, got {bptt}")
    for i in range(0, data.size(1) - 1, bptt):
        t = min(bptt, data.size(1) - 1 - i)
        yield data[:, i : i + t], data[:, i + 1 : i + 1 + t]


def num_bptt_batches(data: Tensor, bptt: int) -> int:
    return math.ceil((data.size(1) - 1) / bptt)


# ---------------------------------------------------------------------------------------
# Exact full-softmax negative log-likelihood, bounded memory
# ---------------------------------------------------------------------------------------
def full_softmax_nll(
    hidden: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    target: Tensor,
    chunk_elements: int = 1 << 22,
) -> Tensor:
    """Per-row −log softmax(hidden·weightᵀ + bias)[target], float32 [N].

    hidden [N, D], weight [V, D], target [N]. The logits are never held whole: rows are taken
    in blocks and the vocabulary in chunks of about `chunk_elements` logits, with a running
    (max, sum of exp) pair per row (the streaming log-sum-exp), so memory stays bounded for V
    in the millions while the value equals the one-shot computation to float rounding.
    """
    hidden = hidden.reshape(-1, hidden.size(-1))
    target = target.reshape(-1)
    n, v = hidden.size(0), weight.size(0)
    v_chunk = max(1, min(v, chunk_elements))
    n_chunk = max(1, chunk_elements // v_chunk)
    out = torch.empty(n, dtype=torch.float32, device=hidden.device)
    for r0 in range(0, n, n_chunk):
        h = hidden[r0 : r0 + n_chunk].float()
        tgt = target[r0 : r0 + n_chunk]
        run_max = torch.full((h.size(0),), -math.inf, device=h.device)
        run_sum = torch.zeros(h.size(0), device=h.device)
        tgt_logit = torch.zeros(h.size(0), device=h.device)
        for c0 in range(0, v, v_chunk):
            w = weight[c0 : c0 + v_chunk].float()
            logits = h @ w.t()
            if bias is not None:
                logits = logits + bias[c0 : c0 + v_chunk].float()
            new_max = torch.maximum(run_max, logits.max(dim=1).values)
            run_sum = run_sum * torch.exp(run_max - new_max) + torch.exp(
                logits - new_max[:, None]
            ).sum(dim=1)
            run_max = new_max
            inside = (tgt >= c0) & (tgt < c0 + w.size(0))
            local = (tgt - c0).clamp(0, w.size(0) - 1)
            tgt_logit = torch.where(inside, logits.gather(1, local[:, None])[:, 0], tgt_logit)
        out[r0 : r0 + h.size(0)] = run_max + torch.log(run_sum) - tgt_logit
    return out


# ---------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------
def make_sampler(kind: str, counts: Tensor, power: float = 0.75) -> Sampler:
    """The noise distribution: unigram^power of the training counts or log-uniform (Zipf
    over ids, which Vocabulary sorts by frequency). Every DDP rank builds it from the same
    full training counts, so all ranks draw from one distribution."""
    if kind == "unigram":
        return UnigramSampler(counts, power)
    if kind == "log_uniform":
        return LogUniformSampler(counts.numel())
    raise ValueError(f"sampler must be 'unigram' or 'log_uniform', got {kind!r}")


_SAMPLED_HEADS = {"sampled": SampledSoftmaxLoss, "nce": NCELoss, "neg": NegativeSamplingLoss}


class OutputHead(nn.Module):
    """Adapter giving every output layer one face: `.weight` [V, D], `.bias` [V] or None,
    `forward(h, target)` → the mean training loss, `nll(h, target)` → exact per-row NLL.

    'full' is written here in plain PyTorch; the sampled heads delegate their training loss
    to the fastsoftmax modules. Evaluation never uses the sampled objective: it is always
    the exact softmax over the head's own scores (for 'neg', which has no bias, h·Wᵀ).
    """

    def __init__(
        self,
        output: str,
        in_features: int,
        num_classes: int,
        *,
        weight: Optional[nn.Parameter] = None,
        num_sampled: int = 1024,
        sampler: Optional[Sampler] = None,
        eval_chunk: int = 1 << 22,
        sparse: bool = False,
    ):
        super().__init__()
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
        self.output = output
        self.eval_chunk = eval_chunk
        if output == "full":
            self.weight = (
                weight
                if weight is not None
                else nn.Parameter(torch.empty(num_classes, in_features))
            )
            self.bias = nn.Parameter(torch.zeros(num_classes))
            return
        cls = _SAMPLED_HEADS[output]
        if cls is None:
            raise RuntimeError(
                f"output {output!r} needs fastsoftmax's sampled losses, which this build lacks"
            )
        if num_sampled <= 0:
            raise ValueError(f"num_sampled must be positive, got {num_sampled}")
        if num_sampled >= num_classes:
            raise ValueError(
                f"num_sampled ({num_sampled}) must be smaller than the vocabulary ({num_classes})"
            )
        kwargs = dict(sampler=sampler, weight=weight)
        if sparse:
            kwargs["sparse"] = True
        if output != "neg":
            kwargs["bias"] = True
        self.loss = cls(in_features, num_classes, num_sampled, **kwargs)

    @property
    def weight_param(self) -> Tensor:
        return self.weight if self.output == "full" else self.loss.weight

    @property
    def bias_param(self) -> Optional[Tensor]:
        return self.bias if self.output == "full" else getattr(self.loss, "bias", None)

    @property
    def sampler(self) -> Optional[Sampler]:
        return None if self.output == "full" else getattr(self.loss, "sampler", None)

    @property
    def generator(self) -> Optional[torch.Generator]:
        """A generator the loss module keeps for its draws, if it keeps one (otherwise draws
        come from torch's default CPU generator, which checkpoints save anyway)."""
        g = None if self.output == "full" else getattr(self.loss, "generator", None)
        return g if isinstance(g, torch.Generator) else None

    def logits(self, h: Tensor) -> Tensor:
        return F.linear(h, self.weight_param, self.bias_param)

    def nll(self, h: Tensor, target: Tensor) -> Tensor:
        return full_softmax_nll(h, self.weight_param, self.bias_param, target, self.eval_chunk)

    def forward(self, h: Tensor, target: Tensor) -> Tensor:
        h = h.reshape(-1, h.size(-1))
        target = target.reshape(-1)
        if not self.training:
            return self.nll(h, target).mean()
        if self.output == "full":
            return F.cross_entropy(self.logits(h), target)
        return self.loss(h, target)

    def _apply(self, fn, *args, **kwargs):
        # Samplers hold tables outside the parameter tree; keep them beside the weight.
        super()._apply(fn, *args, **kwargs)
        s = self.sampler
        if isinstance(s, Sampler) and s.device != self.weight_param.device:
            self.loss.sampler = s.to(self.weight_param.device)
        return self


class RNNLanguageModel(nn.Module):
    """Embedding → multi-layer LSTM/GRU → output head chosen by name.

    Dropout (Zaremba et al. 2014) acts only on non-recurrent connections: on the embeddings,
    between layers (the RNN's own `dropout`) and on the top layer's output, never across time.
    `tie_weights` shares the embedding with the output layer; it needs emb_size ==
    hidden_size unless `projection` adds a hidden→embedding linear map before the output.

    `forward(input, target, hidden)` → (mean loss, new hidden): the sampled objective in
    training mode, the exact full-softmax cross entropy in eval mode.
    """

    def __init__(
        self,
        vocab_size: int,
        emb_size: int = 200,
        hidden_size: int = 200,
        num_layers: int = 2,
        *,
        rnn_type: str = "lstm",
        dropout: float = 0.0,
        tie_weights: bool = False,
        projection: bool = False,
        output: str = "full",
        num_sampled: int = 1024,
        sampler: Union[str, Sampler, None] = "unigram",
        counts: Optional[Tensor] = None,
        power: float = 0.75,
        init_range: float = 0.1,
        eval_chunk: int = 1 << 22,
        sparse: bool = False,
    ):
        super().__init__()
        for name, value in (
            ("vocab_size", vocab_size),
            ("emb_size", emb_size),
            ("hidden_size", hidden_size),
            ("num_layers", num_layers),
        ):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
        if rnn_type not in ("lstm", "gru"):
            raise ValueError(f"rnn_type must be 'lstm' or 'gru', got {rnn_type!r}")
        if tie_weights and emb_size != hidden_size and not projection:
            raise ValueError(
                f"tie_weights needs emb_size == hidden_size (got emb_size={emb_size}, "
                f"hidden_size={hidden_size}); make them equal or pass projection=True"
            )
        self.config = dict(
            vocab_size=vocab_size,
            emb_size=emb_size,
            hidden_size=hidden_size,
            num_layers=num_layers,
            rnn_type=rnn_type,
            dropout=dropout,
            tie_weights=tie_weights,
            projection=projection,
            output=output,
            num_sampled=num_sampled,
            sampler=sampler
            if isinstance(sampler, str) or sampler is None
            else type(sampler).__name__,
            power=power,
            init_range=init_range,
            sparse=sparse,
        )
        self.rnn_type = rnn_type
        # sparse: the embedding (and a sampled head) produce gradients touching only the rows
        # used, which for V in the hundreds of thousands is most of a CPU step otherwise.
        self.embedding = nn.Embedding(vocab_size, emb_size, sparse=sparse)
        rnn_cls = nn.LSTM if rnn_type == "lstm" else nn.GRU
        self.rnn = rnn_cls(
            emb_size,
            hidden_size,
            num_layers,
            batch_first=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.drop = nn.Dropout(dropout)
        self.proj = nn.Linear(hidden_size, emb_size, bias=False) if projection else None
        out_features = emb_size if projection else hidden_size

        if isinstance(sampler, str) and output != "full":
            if counts is None and sampler == "unigram":
                raise ValueError("the unigram sampler needs the training counts (counts=...)")
            sampler = make_sampler(
                sampler, counts if counts is not None else torch.ones(vocab_size), power
            )
        self.head = OutputHead(
            output,
            out_features,
            vocab_size,
            weight=self.embedding.weight if tie_weights else None,
            num_sampled=num_sampled,
            sampler=sampler if output != "full" else None,
            eval_chunk=eval_chunk,
            sparse=sparse,
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
        # Only the head's weight and bias: a sampled loss may own other parameters (NCE's
        # learned log Z) whose own initialisation must stand.
        nn.init.uniform_(self.head.weight_param, -init_range, init_range)
        bias = self.head.bias_param
        if bias is not None:
            nn.init.constant_(bias, -math.log(self.config["vocab_size"]))

    @property
    def output(self) -> str:
        return self.head.output

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
        """Full log-probabilities [B, T, V] of the next word (small V / short inputs only)."""
        y, hidden = self.features(input, hidden)
        return F.log_softmax(self.head.logits(y).float(), dim=-1), hidden


def detach_hidden(hidden: Optional[Hidden]) -> Optional[Hidden]:
    """Truncated BPTT: keep the state's value, cut the graph behind it."""
    if hidden is None:
        return None
    if isinstance(hidden, tuple):
        return tuple(h.detach() for h in hidden)
    return hidden.detach()


# ---------------------------------------------------------------------------------------
# Training and evaluation
# ---------------------------------------------------------------------------------------
class Progress:
    """One-line progress bar on stderr with tokens/s and the running loss."""

    def __init__(
        self, total: int, prefix: str = "", enabled: bool = True, stream=None, width: int = 24
    ):
        self.total, self.prefix, self.enabled, self.width = total, prefix, enabled, width
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.perf_counter()
        self.last_draw = 0.0

    def update(self, step: int, tokens: int, loss: float, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self.last_draw < 0.2:
            return
        self.last_draw = now
        frac = min(1.0, step / max(1, self.total))
        filled = round(frac * self.width)
        rate = tokens / max(now - self.start, 1e-9)
        self.stream.write(
            f"\r{self.prefix} [{'#' * filled}{'.' * (self.width - filled)}] {step}/{self.total} "
            f"{rate:,.0f} tok/s loss {loss:.3f}"
        )
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def clip_grad_norm(parameters, max_norm: float) -> float:
    """Scale all gradients so their global L2 norm is at most `max_norm`; returns the norm
    before clipping. Unlike torch's, accepts sparse gradients (sparse=True models)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return 0.0
    norms = [(g.coalesce().values() if g.is_sparse else g).detach().float().norm() for g in grads]
    total = torch.stack(norms).norm()
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.to(g.device, g.dtype))
    return float(total)


def train_epoch(
    model: nn.Module,
    data: Tensor,
    optimizer: torch.optim.Optimizer,
    *,
    bptt: int,
    clip: float = 0.0,
    max_steps: Optional[int] = None,
    world_size: int = 1,
    progress: Optional[Progress] = None,
    hidden: Optional[Hidden] = None,
    totals: Optional[Dict[str, float]] = None,
    on_step=None,
) -> Dict[str, float]:
    """One pass over `data` [B, L] with truncated BPTT; the hidden state is carried from batch
    to batch (detached) and starts at zero each epoch. `model` may be DDP-wrapped; `clip` > 0
    clips the global gradient norm. Returns mean training loss, tokens, seconds and steps.

    An epoch interrupted by a mid-epoch checkpoint continues from the `hidden` state and the
    running `totals` (loss_sum, steps, tokens, seconds) saved with it, after the
    totals["steps"] steps already taken. `on_step(step, hidden, totals)` runs after every step
    (checkpointing)."""
    core = model.module if hasattr(model, "module") else model
    core.train()
    totals = dict(totals or dict(loss_sum=0.0, steps=0, tokens=0, seconds=0.0))
    start = time.perf_counter() - totals["seconds"]
    for x, y in bptt_batches(data[:, totals["steps"] * bptt :], bptt):
        if max_steps is not None and totals["steps"] >= max_steps:
            break
        hidden = detach_hidden(hidden)
        optimizer.zero_grad(set_to_none=True)
        loss, hidden = model(x, y, hidden)
        loss.backward()
        if clip > 0:
            clip_grad_norm(core.parameters(), clip)
        optimizer.step()
        totals["loss_sum"] += loss.item()
        totals["steps"] += 1
        totals["tokens"] += y.numel() * world_size
        totals["seconds"] = time.perf_counter() - start
        if progress is not None:
            progress.update(totals["steps"], totals["tokens"], totals["loss_sum"] / totals["steps"])
        if on_step is not None:
            on_step(totals["steps"], hidden, totals)
    steps = max(totals["steps"], 1)
    if progress is not None:
        progress.update(totals["steps"], totals["tokens"], totals["loss_sum"] / steps, force=True)
        progress.close()
    return dict(
        loss=totals["loss_sum"] / steps,
        tokens=totals["tokens"],
        seconds=time.perf_counter() - start,
        steps=totals["steps"],
    )


@torch.no_grad()
def evaluate(model: RNNLanguageModel, data: Tensor, bptt: int = 35) -> float:
    """Exact full-softmax perplexity of `data` [B, L], hidden state carried over the stream;
    the mean is over every predicted token."""
    was_training = model.training
    model.eval()
    hidden = None
    total, count = 0.0, 0
    for x, y in bptt_batches(data, bptt):
        feats, hidden = model.features(x, hidden)
        total += model.head.nll(feats, y).double().sum().item()
        count += y.numel()
    model.train(was_training)
    return math.exp(total / count)


class LRSchedule:
    """Divide the learning rate by `factor` when validation perplexity stops improving, and,
    with `decay_after`, at the end of every epoch after that one (Zaremba et al.'s fixed
    schedule: 4 epochs at lr 1, then halved each epoch)."""

    def __init__(self, lr: float, factor: float = 2.0, decay_after: Optional[int] = None):
        if factor < 1.0:
            raise ValueError(f"the learning-rate divisor must be ≥ 1, got {factor}")
        self.lr, self.factor, self.decay_after = lr, factor, decay_after
        self.best = math.inf

    def step(self, epoch: int, val_ppl: float) -> float:
        """Called after `epoch` (1-based) with its validation perplexity; returns the new lr."""
        stalled = val_ppl >= self.best
        self.best = min(self.best, val_ppl)
        if stalled or (self.decay_after is not None and epoch >= self.decay_after):
            self.lr /= self.factor
        return self.lr

    def apply(self, optimizer: torch.optim.Optimizer) -> None:
        for group in optimizer.param_groups:
            group["lr"] = self.lr

    def state_dict(self) -> dict:
        return dict(lr=self.lr, factor=self.factor, decay_after=self.decay_after, best=self.best)

    def load_state_dict(self, state: dict) -> None:
        self.lr, self.factor = state["lr"], state["factor"]
        self.decay_after, self.best = state["decay_after"], state["best"]


def make_optimizer(model: nn.Module, name: str, lr: float) -> torch.optim.Optimizer:
    if name == "adam" and any(getattr(m, "sparse", False) for m in model.modules()):
        raise ValueError("sparse gradients need optimizer 'sgd' (Adam takes dense gradients)")
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr)
    if name == "adam":
        return torch.optim.Adam(model.parameters(), lr=lr)
    raise ValueError(f"optimizer must be 'sgd' or 'adam', got {name!r}")


# ---------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------
def rng_state() -> dict:
    """Every random stream training draws from: torch's CPU generator (dropout on CPU and the
    samplers' Philox seeds), CUDA's, Python's."""
    state = dict(torch=torch.get_rng_state(), python=random.getstate())
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    path: str,
    *,
    model: RNNLanguageModel,
    vocab: Vocabulary,
    optimizer: Optional[torch.optim.Optimizer] = None,
    schedule: Optional[LRSchedule] = None,
    epoch: int = 0,
    history: Optional[list] = None,
    train_config: Optional[dict] = None,
    position: Optional[dict] = None,
) -> None:
    """Model, vocabulary and counts (which rebuild the sampler exactly), optimiser, schedule,
    history and RNG state, written atomically (a crash never leaves half a checkpoint).
    `epoch` counts finished epochs; a mid-epoch checkpoint adds `position` (the epoch under
    way, steps taken, the carried hidden state and the running totals of `train_epoch`)."""
    sampler = model.head.sampler
    state = dict(
        format=CHECKPOINT_FORMAT,
        model_config=model.config,
        model=model.state_dict(),
        vocab=vocab.itos,
        counts=vocab.counts,
        sampler=None
        if sampler is None
        else dict(
            type=type(sampler).__name__,
            repr=repr(sampler),
            generator=None if model.head.generator is None else model.head.generator.get_state(),
        ),
        optimizer=None if optimizer is None else optimizer.state_dict(),
        schedule=None if schedule is None else schedule.state_dict(),
        epoch=epoch,
        history=list(history or []),
        train_config=dict(train_config or {}),
        position=position,
        rng=rng_state(),
    )
    tmp = f"{path}.tmp{os.getpid()}"
    torch.save(state, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: str, map_location="cpu") -> dict:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such checkpoint: {path}")
    state = torch.load(path, map_location=map_location, weights_only=False)
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a fastsoftmax language-model checkpoint")
    return state


def model_from_checkpoint(state: dict) -> Tuple[RNNLanguageModel, Vocabulary]:
    vocab = Vocabulary(state["vocab"], state["counts"])
    config = dict(state["model_config"])
    if config.get("sampler") not in ("unigram", "log_uniform", None):
        raise ValueError(f"cannot rebuild a model whose sampler was {config['sampler']!r}")
    model = RNNLanguageModel(counts=vocab.counts, **config)
    model.load_state_dict(state["model"])
    gen_state = (state.get("sampler") or {}).get("generator")
    if gen_state is not None and model.head.generator is not None:
        model.head.generator.set_state(gen_state)
    return model, vocab


# ---------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------
@torch.no_grad()
def generate(
    model: RNNLanguageModel,
    vocab: Vocabulary,
    prompt: str = "",
    *,
    max_tokens: int = 50,
    temperature: float = 1.0,
    top_k: Optional[int] = None,
    seed: Optional[int] = None,
) -> List[str]:
    """Words continuing `prompt` (which starts after an `<eos>`), drawn from the exact
    softmax at `temperature` (0: greedy), restricted to the `top_k` likeliest words when
    given. A `seed` makes the continuation reproducible and leaves global RNGs untouched."""
    if temperature < 0:
        raise ValueError(f"temperature must be ≥ 0, got {temperature}")
    if top_k is not None and top_k <= 0:
        raise ValueError(f"top_k must be positive, got {top_k}")
    was_training = model.training
    model.eval()
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    device = next(model.parameters()).device
    ids = torch.cat([vocab.encode([EOS]), vocab.encode(prompt.split())]).to(device)
    feats, hidden = model.features(ids[None], None)
    out: List[int] = []
    for _ in range(max_tokens):
        logits = model.head.logits(feats[0, -1]).float().cpu()
        if temperature == 0:
            choice = logits.argmax().item()
        else:
            logits = logits / temperature
            ids_k = None
            if top_k is not None and top_k < logits.numel():
                logits, ids_k = logits.topk(top_k)
            pick = int(torch.multinomial(torch.softmax(logits, 0), 1, generator=gen))
            choice = int(ids_k[pick]) if ids_k is not None else pick
        out.append(choice)
        feats, hidden = model.features(torch.tensor([[choice]], device=device), hidden)
    model.train(was_training)
    return vocab.decode(out)
