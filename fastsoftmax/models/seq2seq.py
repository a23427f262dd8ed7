"""Attention encoder–decoder (Luong et al. 2015) with a full or sampled softmax output head.

Shape letters: B batch, S source length, T target length, E embedding size, H hidden size,
D output-feature size, V target vocabulary, K beam size.

Layout of one example: source ids x_1..x_S; decoder input <bos> y_1..y_T; decoder output
y_1..y_T <eos>. Padding id 0 everywhere. Padding never reaches an LSTM (packed sequences), never
receives attention (its score is -inf before the softmax, so its weight is exactly 0) and never
contributes to the loss, so a sequence's result does not depend on what it is batched with.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from ..nn import SampledSoftmaxLoss

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")
ATTENTIONS = ("dot", "general", "concat", None)
OUTPUTS = ("full", "sampled")
TASKS = ("pairs", "chars")


# -- data ------------------------------------------------------------------------------------
def read_pairs(path: str, task: str, max_words: int | None = None) -> list[tuple[str, str]]:
    """Reads (source, target) string pairs.

    task 'pairs': `source<TAB>target[<TAB>anything]` per line (the Tatoeba/manythings layout;
    newer files carry a third attribution column, which is ignored).
    task 'chars': `source_target`, split on the first '_' (the date and addition sets); the
    fixed-width space padding of those files is stripped.
    max_words drops pairs whose either side has more words than that ('pairs' only).
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {', '.join(TASKS)}")
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    return parse_pairs(lines, task, max_words=max_words, where=path)


def parse_pairs(
    lines: Iterable[str], task: str, max_words: int | None = None, where: str = "<input>"
) -> list[tuple[str, str]]:
    """As read_pairs, from lines already in memory; errors name `where` and the line number."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {', '.join(TASKS)}")
    sep = "\t" if task == "pairs" else "_"
    shown = "TAB" if task == "pairs" else "'_'"
    pairs = []
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\r")
        if not line.strip():
            raise ValueError(f"{where}:{n}: empty line; every line must be source{shown}target")
        if sep not in line:
            raise ValueError(f"{where}:{n}: no {shown} separating source from target: {line!r}")
        src, rest = line.split(sep, 1)
        tgt = rest.split("\t", 1)[0] if task == "pairs" else rest
        if task == "chars":
            src, tgt = src.strip(), tgt.strip()
        if not src.strip() or not tgt.strip():
            side = "source" if not src.strip() else "target"
            raise ValueError(f"{where}:{n}: empty {side}: {line!r}")
        if (
            max_words is not None
            and task == "pairs"
            and (len(tokenize(src, "pairs")) > max_words or len(tokenize(tgt, "pairs")) > max_words)
        ):
            continue
        pairs.append((src, tgt))
    if not pairs:
        raise ValueError(f"{where}: no usable pairs")
    return pairs


_WORD = re.compile(r"\w+(?:'\w+)?|[^\w\s]", re.UNICODE)


def tokenize(text: str, task: str) -> list[str]:
    """'chars': one token per character. 'pairs': lower-cased words and punctuation marks, with
    the French narrow/no-break spaces before punctuation treated as spaces."""
    if task == "chars":
        return list(text)
    text = text.replace("\u202f", " ").replace("\u00a0", " ").replace("\u2019", "'").lower()
    return _WORD.findall(text)


def detokenize(tokens: Sequence[str], task: str) -> str:
    return "".join(tokens) if task == "chars" else " ".join(tokens)


class Vocab:
    """Token ↔ id map; ids 0..3 are <pad>, <unk>, <bos>, <eos>; the rest by falling frequency
    (ties alphabetical, so a vocabulary is a function of the data alone)."""

    def __init__(self, tokens: Sequence[str]):
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary must start with {SPECIALS}")
        self.itos = list(tokens)
        self.stoi = {t: i for i, t in enumerate(self.itos)}

    @classmethod
    def build(cls, sequences: Iterable[Sequence[str]], max_size: int | None = None) -> Vocab:
        counts = Counter(t for seq in sequences for t in seq)
        ranked = sorted((t for t in counts if t not in SPECIALS), key=lambda t: (-counts[t], t))
        if max_size is not None:
            ranked = ranked[: max(0, max_size - len(SPECIALS))]
        return cls(list(SPECIALS) + ranked)

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, tokens: Sequence[str]) -> list[int]:
        return [self.stoi.get(t, UNK) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens up to (not including) the first <eos>; padding dropped."""
        out = []
        for i in ids:
            i = int(i)
            if i == EOS:
                break
            if i not in (PAD, BOS):
                out.append(self.itos[i])
        return out


def split_indices(n: int, valid_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """A seeded shuffle, the first valid_fraction held out."""
    if not 0.0 <= valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be in [0, 1), got {valid_fraction}")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    k = round(n * valid_fraction)
    return order[k:], order[:k]


class Batch:
    """Padded tensors for a list of (source ids, target ids) examples.

    src [B, S], src_len [B]; tgt_in [B, T+1] = <bos> y; tgt_out [B, T+1] = y <eos>."""

    def __init__(self, examples: Sequence[tuple[Sequence[int], Sequence[int]]]):
        if not examples:
            raise ValueError("an empty batch")
        B = len(examples)
        S = max(len(s) for s, _ in examples)
        T = max(len(t) for _, t in examples) + 1
        self.src = torch.full((B, S), PAD, dtype=torch.long)
        self.src_len = torch.tensor([len(s) for s, _ in examples], dtype=torch.long)
        self.tgt_in = torch.full((B, T), PAD, dtype=torch.long)
        self.tgt_out = torch.full((B, T), PAD, dtype=torch.long)
        for b, (s, t) in enumerate(examples):
            if len(s) == 0:
                raise ValueError(f"example {b} has an empty source")
            self.src[b, : len(s)] = torch.tensor(s, dtype=torch.long)
            self.tgt_in[b, 0] = BOS
            self.tgt_in[b, 1 : len(t) + 1] = torch.tensor(t, dtype=torch.long)
            self.tgt_out[b, : len(t)] = torch.tensor(t, dtype=torch.long)
            self.tgt_out[b, len(t)] = EOS

    def to(self, device) -> Batch:
        for k in ("src", "src_len", "tgt_in", "tgt_out"):
            setattr(self, k, getattr(self, k).to(device))
        return self


def batches(
    examples: Sequence[tuple[Sequence[int], Sequence[int]]],
    batch_size: int,
    shuffle: bool = False,
    seed: int = 0,
) -> Iterator[Batch]:
    """Batches of examples of similar source length (less padding, so less wasted work); with
    shuffle the batches come in a seeded random order and their membership varies by epoch."""
    order = list(range(len(examples)))
    rng = random.Random(seed)
    if shuffle:
        rng.shuffle(order)
    # Sort within windows of 50 batches only, so shuffled epochs still mix lengths across batches.
    window = batch_size * 50
    chunks = []
    for w in range(0, len(order), window):
        part = sorted(order[w : w + window], key=lambda i: len(examples[i][0]))
        chunks += [part[i : i + batch_size] for i in range(0, len(part), batch_size)]
    if shuffle:
        rng.shuffle(chunks)
    for c in chunks:
        yield Batch([examples[i] for i in c])


# -- evaluation ------------------------------------------------------------------------------
def corpus_bleu(
    hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]], max_n: int = 4
) -> float:
    """Corpus BLEU (Papineni et al. 2002) in percent, one reference per sentence: geometric mean
    of clipped n-gram precisions for n = 1..max_n, counts summed over the corpus before dividing,
    times the brevity penalty exp(1 - r/c) when the hypotheses are shorter than the references.
    No smoothing: a corpus with no matching max_n-gram scores 0."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    match = [0] * max_n
    total = [0] * max_n
    hyp_len = ref_len = 0
    for hyp, ref in zip(hypotheses, references):
        hyp_len += len(hyp)
        ref_len += len(ref)
        for n in range(1, max_n + 1):
            h = Counter(tuple(hyp[i : i + n]) for i in range(len(hyp) - n + 1))
            r = Counter(tuple(ref[i : i + n]) for i in range(len(ref) - n + 1))
            match[n - 1] += sum(min(c, r[g]) for g, c in h.items())
            total[n - 1] += max(len(hyp) - n + 1, 0)
    if hyp_len == 0 or min(match) == 0:
        return 0.0
    log_p = sum(math.log(m / t) for m, t in zip(match, total)) / max_n
    bp = 1.0 if hyp_len > ref_len else math.exp(1.0 - ref_len / hyp_len)
    return 100.0 * bp * math.exp(log_p)


# -- output heads ----------------------------------------------------------------------------
class FullHead(nn.Module):
    """Linear layer + exact softmax cross entropy, in plain PyTorch."""

    def __init__(self, in_features: int, num_classes: int):
        super().__init__()
        self.proj = nn.Linear(in_features, num_classes)

    def loss(self, features: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(self.proj(features), target, ignore_index=PAD)

    def log_prob(self, features: Tensor) -> Tensor:
        return F.log_softmax(self.proj(features).float(), dim=-1)


class SampledHead(nn.Module):
    """Adapter over fastsoftmax.SampledSoftmaxLoss (Jean et al. 2015): the sampled loss while
    training; the exact softmax in eval mode and for log_prob, so decoding is never approximate."""

    def __init__(
        self, in_features: int, num_classes: int, num_sampled: int, counts: Tensor | None = None
    ):
        super().__init__()
        if num_sampled >= num_classes:
            raise ValueError(
                f"num_sampled ({num_sampled}) must be smaller than the target vocabulary "
                f"({num_classes}); use output='full' for a vocabulary this small"
            )
        self.loss_fn = SampledSoftmaxLoss(
            in_features, num_classes, num_sampled, counts=counts, ignore_index=PAD
        )

    def loss(self, features: Tensor, target: Tensor) -> Tensor:
        return self.loss_fn(features, target)

    def log_prob(self, features: Tensor) -> Tensor:
        return self.loss_fn.log_prob(features)


# -- model -----------------------------------------------------------------------------------
class Seq2Seq(nn.Module):
    """LSTM encoder–decoder with optional Luong attention and a full or sampled output layer.

    attention: 'dot' (h_s·h_t), 'general' (h_s·W h_t), 'concat' (vᵀ tanh(W [h_s; h_t])) or None
        for the plain encoder–decoder, whose decoder sees the source only through its initial
        state. With attention the output features are h̃_t = tanh(W_c [c_t; h_t]) (no input
        feeding, so all target steps run in one LSTM call while training).
    bidirectional: the encoder runs both ways with H/2 units each; forward and backward states
        are concatenated to H, so the decoder and the dot score need no bridge.
    reverse_source: the encoder reads each source back to front (Sutskever et al. 2014); its
        outputs are put back in source order, so attention maps align with the source text.
    peeky: the encoder summary (top-layer final state) is concatenated to every decoder input
        and to the output features.
    output: 'full' or 'sampled' (fastsoftmax.SampledSoftmaxLoss); 'sampled' changes the
        training loss only: eval-mode loss and decoding use the exact softmax.
    counts: target-token frequencies [V] for the sampled head's unigram sampler.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        embed_dim: int = 64,
        hidden_size: int = 128,
        num_layers: int = 1,
        *,
        bidirectional: bool = False,
        reverse_source: bool = False,
        attention: str | None = "general",
        peeky: bool = False,
        output: str = "full",
        num_sampled: int = 64,
        counts: Tensor | None = None,
        dropout: float = 0.0,
    ):
        super().__init__()
        if attention == "none":
            attention = None
        if attention not in ATTENTIONS:
            raise ValueError(
                f"unknown attention {attention!r}; expected dot, general, concat or None"
            )
        if output not in OUTPUTS:
            raise ValueError(f"unknown output {output!r}; expected 'full' or 'sampled'")
        if bidirectional and hidden_size % 2:
            raise ValueError(
                f"a bidirectional encoder needs an even hidden_size, got {hidden_size}"
            )
        for name, v in (
            ("src_vocab_size", src_vocab_size),
            ("tgt_vocab_size", tgt_vocab_size),
            ("embed_dim", embed_dim),
            ("hidden_size", hidden_size),
            ("num_layers", num_layers),
        ):
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        self.config = {
            "src_vocab_size": src_vocab_size,
            "tgt_vocab_size": tgt_vocab_size,
            "embed_dim": embed_dim,
            "hidden_size": hidden_size,
            "num_layers": num_layers,
            "bidirectional": bidirectional,
            "reverse_source": reverse_source,
            "attention": attention,
            "peeky": peeky,
            "output": output,
            "num_sampled": num_sampled,
            "dropout": dropout,
        }
        self._counts = counts
        H = hidden_size
        self.attention = attention
        self.peeky = peeky
        self.reverse_source = reverse_source
        self.bidirectional = bidirectional
        self.num_layers = num_layers
        self.src_embed = nn.Embedding(src_vocab_size, embed_dim, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, embed_dim, padding_idx=PAD)
        inner_dropout = dropout if num_layers > 1 else 0.0
        self.encoder = nn.LSTM(
            embed_dim,
            H // 2 if bidirectional else H,
            num_layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=inner_dropout,
        )
        self.decoder = nn.LSTM(
            embed_dim + (H if peeky else 0), H, num_layers, batch_first=True, dropout=inner_dropout
        )
        self.dropout = nn.Dropout(dropout)
        if attention == "general":
            self.attn_W = nn.Linear(H, H, bias=False)
        elif attention == "concat":
            self.attn_W = nn.Linear(2 * H, H, bias=False)
            self.attn_v = nn.Linear(H, 1, bias=False)
        if attention is not None:
            self.combine = nn.Linear(2 * H, H, bias=False)  # W_c
        D = H + (H if peeky else 0)
        if output == "full":
            self.head = FullHead(D, tgt_vocab_size)
        else:
            self.head = SampledHead(D, tgt_vocab_size, num_sampled, counts)

    # -- encoder ------------------------------------------------------------------------------
    @staticmethod
    def _reverse_within_length(x: Tensor, lengths: Tensor) -> Tensor:
        """x [B, S, ...] with each row's first lengths[b] entries reversed, padding left alone."""
        B, S = x.shape[:2]
        pos = torch.arange(S, device=x.device).expand(B, S)
        idx = torch.where(pos < lengths[:, None], lengths[:, None] - 1 - pos, pos)
        idx = idx.view(B, S, *([1] * (x.dim() - 2))).expand_as(x)
        return x.gather(1, idx)

    def encode(self, src: Tensor, src_len: Tensor):
        """src [B, S] → (memory [B, S, H] in source order, mask [B, S] true on real tokens,
        decoder initial state (h, c) each [L, B, H], summary [B, H])."""
        if src_len.min() <= 0:
            raise ValueError("every source needs at least one token")
        S = src.shape[1]
        if self.reverse_source:
            src = self._reverse_within_length(src, src_len)
        emb = self.dropout(self.src_embed(src))
        packed = pack_padded_sequence(emb, src_len.cpu(), batch_first=True, enforce_sorted=False)
        out, (h, c) = self.encoder(packed)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=S)
        if self.reverse_source:
            memory = self._reverse_within_length(memory, src_len)
        if self.bidirectional:
            # [2L, B, H/2] (layer-major, forward then backward) → [L, B, H]
            L, B = self.num_layers, src.shape[0]
            h = h.view(L, 2, B, -1).permute(0, 2, 1, 3).reshape(L, B, -1)
            c = c.view(L, 2, B, -1).permute(0, 2, 1, 3).reshape(L, B, -1)
        mask = torch.arange(S, device=src.device)[None, :] < src_len[:, None].to(src.device)
        return memory, mask, (h.contiguous(), c.contiguous()), h[-1]

    # -- decoder ------------------------------------------------------------------------------
    def _scores(self, memory: Tensor, dec: Tensor) -> Tensor:
        """memory [B, S, H], dec [B, T, H] → scores [B, T, S]."""
        if self.attention == "dot":
            return dec @ memory.transpose(1, 2)
        if self.attention == "general":
            return self.attn_W(dec) @ memory.transpose(1, 2)
        # concat: W [h_s; h_t] = W_s h_s + W_t h_t, evaluated per pair via broadcasting.
        H = memory.shape[-1]
        W_s, W_t = self.attn_W.weight[:, H:], self.attn_W.weight[:, :H]
        e = torch.tanh((dec @ W_t.t())[:, :, None, :] + (memory @ W_s.t())[:, None, :, :])
        return self.attn_v(e).squeeze(-1)

    def _decode_steps(self, tgt_in: Tensor, state, memory: Tensor, mask: Tensor, summary: Tensor):
        """Runs the decoder over tgt_in [B, T] from `state`; returns output features [B, T, D],
        the new state and attention weights [B, T, S] (None without attention)."""
        emb = self.dropout(self.tgt_embed(tgt_in))
        T = tgt_in.shape[1]
        if self.peeky:
            emb = torch.cat([emb, summary[:, None, :].expand(-1, T, -1)], dim=-1)
        dec, state = self.decoder(emb, state)
        weights = None
        if self.attention is not None:
            scores = self._scores(memory, dec).masked_fill(~mask[:, None, :], float("-inf"))
            weights = torch.softmax(scores.float(), dim=-1).to(dec.dtype)
            context = weights @ memory  # [B, T, H]
            feats = torch.tanh(self.combine(torch.cat([context, dec], dim=-1)))
        else:
            feats = dec
        if self.peeky:
            feats = torch.cat([feats, summary[:, None, :].expand(-1, T, -1)], dim=-1)
        return self.dropout(feats), state, weights

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
        """Teacher-forced loss, averaged over the non-padding target tokens: the head's sampled
        loss in training mode (output='sampled'), the exact cross entropy otherwise."""
        memory, mask, state, summary = self.encode(src, src_len)
        feats, _, _ = self._decode_steps(tgt_in, state, memory, mask, summary)
        return self.head.loss(feats.reshape(-1, feats.shape[-1]), tgt_out.reshape(-1))

    def log_prob(self, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> Tensor:
        """Exact teacher-forced log-probabilities [B, T, V]."""
        memory, mask, state, summary = self.encode(src, src_len)
        feats, _, _ = self._decode_steps(tgt_in, state, memory, mask, summary)
        return self.head.log_prob(feats)

    def attention_weights(self, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced attention weights [B, T, S]."""
        if self.attention is None:
            raise ValueError("this model has no attention")
        memory, mask, state, summary = self.encode(src, src_len)
        return self._decode_steps(tgt_in, state, memory, mask, summary)[2]

    # -- search -------------------------------------------------------------------------------
    @torch.no_grad()
    def greedy(self, src: Tensor, src_len: Tensor, max_len: int = 50):
        """Greedy decoding. Returns (tokens [B, T'] ending in <eos> then padding, scores [B]
        = summed log-probabilities up to and including <eos>, attention [B, T', S] or None)."""
        memory, mask, state, summary = self.encode(src, src_len)
        B = src.shape[0]
        y = torch.full((B, 1), BOS, dtype=torch.long, device=src.device)
        done = torch.zeros(B, dtype=torch.bool, device=src.device)
        score = torch.zeros(B, device=src.device)
        out, attn = [], []
        for _ in range(max_len):
            feats, state, w = self._decode_steps(y, state, memory, mask, summary)
            logp = self.head.log_prob(feats[:, 0])
            best, tok = logp.max(dim=-1)
            score = score + torch.where(done, torch.zeros_like(best), best)
            tok = tok.masked_fill(done, PAD)
            out.append(tok)
            if w is not None:
                attn.append(w[:, 0].masked_fill(done[:, None], 0.0))
            done = done | (tok == EOS)
            y = tok[:, None]
            if bool(done.all()):
                break
        tokens = torch.stack(out, dim=1)
        return tokens, score, (torch.stack(attn, dim=1) if attn else None)

    @torch.no_grad()
    def beam_search(
        self,
        src: Tensor,
        src_len: Tensor,
        beam_size: int = 5,
        max_len: int = 50,
        alpha: float = 1.0,
    ):
        """Batched beam search. Each source keeps beam_size hypotheses; a hypothesis that has
        emitted <eos> stays in its beam with a frozen score (it can only extend with padding).
        The winner maximises score / length**alpha (length counts <eos>; alpha 0 ranks by raw
        log-probability, which favours short outputs). Returns (tokens [B, T'], normalised
        score [B])."""
        if beam_size < 1:
            raise ValueError(f"beam_size must be >= 1, got {beam_size}")
        memory, mask, (h, c), summary = self.encode(src, src_len)
        B, K = src.shape[0], beam_size
        dev = src.device
        # Beams live flattened as B*K rows, row b*K + k.
        memory = memory.repeat_interleave(K, 0)
        mask = mask.repeat_interleave(K, 0)
        summary = summary.repeat_interleave(K, 0)
        state = (h.repeat_interleave(K, 1), c.repeat_interleave(K, 1))
        score = torch.full((B, K), float("-inf"), device=dev)
        score[:, 0] = (
            0.0  # all beams start identical: keep one so the first step does not tie K ways
        )
        length = torch.zeros(B, K, device=dev)
        done = torch.zeros(B, K, dtype=torch.bool, device=dev)
        seqs = torch.zeros(B, K, 0, dtype=torch.long, device=dev)
        y = torch.full((B * K, 1), BOS, dtype=torch.long, device=dev)
        for _ in range(max_len):
            feats, state, _ = self._decode_steps(y, state, memory, mask, summary)
            logp = self.head.log_prob(feats[:, 0]).view(B, K, -1)
            V = logp.shape[-1]
            # A finished hypothesis has one continuation, padding, at no cost.
            frozen = torch.full_like(logp, float("-inf"))
            frozen[..., PAD] = 0.0
            logp = torch.where(done[..., None], frozen, logp)
            cand = (score[..., None] + logp).view(B, K * V)
            score, flat = cand.topk(K, dim=-1)
            src_beam, tok = flat // V, flat % V
            rows = (src_beam + torch.arange(B, device=dev)[:, None] * K).view(-1)
            state = (state[0][:, rows], state[1][:, rows])
            prev_done = done.gather(1, src_beam)
            length = length.gather(1, src_beam) + (~prev_done).float()
            done = prev_done | (tok == EOS)
            seqs = torch.cat(
                [seqs.gather(1, src_beam[..., None].expand_as(seqs)), tok[..., None]], 2
            )
            y = tok.view(-1, 1)
            if bool(done.all()):
                break
        norm = score / length.clamp(min=1).pow(alpha)
        # Unfinished hypotheses only win when no hypothesis of that source finished.
        norm = torch.where(
            done | ~done.any(1, keepdim=True), norm, torch.full_like(norm, float("-inf"))
        )
        best = norm.argmax(dim=1)
        tokens = seqs[torch.arange(B, device=dev), best]
        return tokens, norm[torch.arange(B, device=dev), best]

    @torch.no_grad()
    def decode(
        self,
        src: Tensor,
        src_len: Tensor,
        beam_size: int = 1,
        max_len: int = 50,
        alpha: float = 1.0,
    ) -> Tensor:
        """Greedy for beam_size 1, beam search otherwise; tokens [B, T']."""
        if beam_size == 1:
            return self.greedy(src, src_len, max_len)[0]
        return self.beam_search(src, src_len, beam_size, max_len, alpha)[0]

    # -- checkpoints --------------------------------------------------------------------------
    def checkpoint(self, **extra) -> dict:
        """What `from_checkpoint` needs, plus anything the caller adds (vocabularies, optimizer
        state, epoch)."""
        counts = getattr(self, "_counts", None)
        return dict(config=dict(self.config), counts=counts, state_dict=self.state_dict(), **extra)

    @classmethod
    def from_checkpoint(cls, ckpt: dict, map_location=None) -> Seq2Seq:
        if isinstance(ckpt, str):
            ckpt = torch.load(ckpt, map_location=map_location, weights_only=False)
        model = cls(**ckpt["config"], counts=ckpt.get("counts"))
        model.load_state_dict(ckpt["state_dict"])
        return model


def encode_pairs(
    pairs: Sequence[tuple[str, str]], task: str, src_vocab: Vocab, tgt_vocab: Vocab
) -> list[tuple[list[int], list[int]]]:
    return [
        (src_vocab.encode(tokenize(s, task)), tgt_vocab.encode(tokenize(t, task))) for s, t in pairs
    ]
