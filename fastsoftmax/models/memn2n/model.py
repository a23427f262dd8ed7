"""End-to-end memory network (Sukhbaatar et al., 2015) whose answer layer is any head of
fastsoftmax.nn, taken from the registry by name.

Shapes: B stories, M memories (sentences), J words per sentence, D embedding size,
A answers (the small answer set, or the whole vocabulary).

    m_i = sum_j l_j * A x_ij + T_A(i)        memory i, read with input embedding A
    c_i = sum_j l_j * C x_ij + T_C(i)        and with output embedding C
    p   = softmax(u . m)                     attention over the memories ([B, M])
    o   = sum_i p_i c_i
    u'  = u + o    (adjacent tying)   or   H u + o   (layer-wise tying)

K such hops; the answer is the head's softmax over W u_{K+1}. l_j is the position encoding
(bag of words if off), T(i) the temporal encoding of the i-th most recent sentence.
"""

import math
from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn

from ...nn import check_size
from ..babi import check_answer_layer
from ..heads import model_head

TYINGS = ("adjacent", "layerwise")
# "sentence": the paper's l_kj with each sentence's own length; "longest": with the longest
# sentence of the data; "authors": the authors' code's weights (authors_weights)
POSITION_WEIGHTS = ("sentence", "longest", "authors")


def position_encoding(words: Tensor, dim: int, dtype=torch.float32,
                      length: Optional[int] = None) -> Tensor:
    """l [*, J, D] for word ids [*, J] (0 = padding): with j = 1..J and k = 1..D,
    l_kj = (1 - j/L) - (k/D)(1 - 2j/L), L the sentence's own length (`length` None) or the
    fixed `length` (the longest sentence of the data). Padding positions get 0."""
    if length is None:
        L = (words != 0).sum(-1, keepdim=True).clamp(min=1).to(dtype)  # [*, 1]
    else:
        L = torch.full((1,), float(length), device=words.device, dtype=dtype)
    j = torch.arange(1, words.shape[-1] + 1, device=words.device, dtype=dtype)  # [J]
    k = torch.arange(1, dim + 1, device=words.device, dtype=dtype)  # [D]
    ratio = (j / L).unsqueeze(-1)  # [*, J, 1]
    enc = (1 - ratio) - (k / dim) * (1 - 2 * ratio)
    return enc * (words != 0).unsqueeze(-1).to(dtype)


def authors_weights(positions: int, length: int, dim: int, dtype=torch.float32) -> Tensor:
    """The position weights of the authors' Matlab code (MemN2N-babi-matlab, build_model.m),
    [positions, D]: w_kj = 1 + 4 (k - (D+1)/2)(j - (J+1)/2) / (D J) for j = 1..`positions`,
    J = `length` (theirs counts one slot more than the longest sentence: the time word's)."""
    j = torch.arange(1, positions + 1, dtype=dtype).unsqueeze(-1)  # [positions, 1]
    k = torch.arange(1, dim + 1, dtype=dtype)  # [D]
    return 1 + 4 * (k - (dim + 1) / 2) * (j - (length + 1) / 2) / (dim * length)


def attend(u: Tensor, memory_in: Tensor, memory_out: Tensor, mask: Tensor,
           linear: bool = False, empty: Optional[Tensor] = None
           ) -> Tuple[Tensor, Tensor, Tensor]:
    """One hop: u [B, D], memories [B, M, D], mask [B, M] → (o [B, D], p [B, M], scores).
    p = softmax of u . m_i over the real memories; `linear` (linear start) uses the scores
    themselves, zero on padding. `empty` [B] (the authors' code): so many more empty memory
    slots, of score 0 and output 0, share the softmax's mass."""
    scores = torch.einsum("bd,bmd->bm", u, memory_in)
    if linear:
        p = scores * mask.to(scores.dtype)
    elif empty is None:
        p = torch.softmax(scores.masked_fill(~mask, -math.inf), dim=-1)
    else:
        s = scores.masked_fill(~mask, -math.inf)
        # log(#empty) stands for the empty slots' exp(0) each; -inf when there are none
        log_z = torch.logsumexp(torch.cat([s, empty.to(s.dtype).log().unsqueeze(-1)], -1),
                                dim=-1, keepdim=True)
        p = (s - log_z).exp()
    return torch.einsum("bm,bmd->bd", p, memory_out), p, scores


class MemN2N(nn.Module):
    """End-to-end memory network with `hops` hops (default 3), `tying` 'adjacent'
    (A_{k+1} = C_k, question embedding B = A_1) or 'layerwise' (one A and one C for all hops,
    u_{k+1} = H u_k + o_k), position and temporal encoding, and the answer predicted by the
    head `output` ('full', 'sampled', 'nce', 'hs', ...) over `num_answers` classes (the small
    answer set, or the whole vocabulary). `counts` (answer frequencies) feed the unigram
    sampler and the 'hs' tree.

    `vocab_size` words embedded in `embed_dim`, the story's last `memory_size` sentences,
    `position_encoding` (the paper's PE) and `temporal_encoding` (a learned vector per
    sentence age), `num_sampled` candidates for the sampled heads, weights drawn from
    a normal distribution of standard deviation `init_std`, and `tie_answers` (the answer layer W tied to the last hop's C, as the
    authors' code does).

    Departures toward the authors' Matlab code (MemN2N-babi-matlab), all off by default:
    `position_weights` 'longest' (the paper's l_kj with L = `sentence_length`, the longest
    sentence of the data) or 'authors' (their build_model.m weights, authors_weights, the
    time vector read through the last slot's), and `empty_slots` S > 0 (their memory of S
    slots: a story of n sentences also has S - n empty ones, of score 0, in the softmax).

    `features(story, mask, query, linear)` → (u_{K+1} [B, D], [p_1 .. p_K] each [B, M]);
    `forward(story, mask, query, answer)` → (head loss, attentions): the head's training
    objective in training mode, the exact cross entropy in eval mode.
    """

    def __init__(self, vocab_size: int, num_answers: int, *, embed_dim: int = 20, hops: int = 3,
                 memory_size: int = 50, tying: str = "adjacent", position_encoding: bool = True,
                 temporal_encoding: bool = True, output: str = "full", num_sampled: int = 16,
                 counts: Optional[Tensor] = None, init_std: float = 0.1,
                 tie_answers: bool = False, position_weights: str = "sentence",
                 sentence_length: int = 0, empty_slots: int = 0):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("num_answers", num_answers),
                            ("embed_dim", embed_dim), ("hops", hops),
                            ("memory_size", memory_size)):
            check_size(name, value)
        if tying not in TYINGS:
            raise ValueError(f"tying must be one of {TYINGS}, got {tying!r}")
        check_answer_layer(output, counts)
        if tie_answers and (tying != "adjacent" or num_answers != vocab_size):
            raise ValueError("tie_answers needs tying 'adjacent' and one answer per word "
                             f"(num_answers {num_answers} == vocab_size {vocab_size})")
        self.config = dict(vocab_size=vocab_size, num_answers=num_answers, embed_dim=embed_dim,
                           hops=hops, memory_size=memory_size, tying=tying,
                           position_encoding=position_encoding,
                           temporal_encoding=temporal_encoding, output=output,
                           num_sampled=num_sampled, init_std=init_std)
        _check_departures(position_weights, sentence_length, empty_slots)
        # only recorded when set: older checkpoints' configs stay loadable
        for key, value, default in (("tie_answers", tie_answers, False),
                                    ("position_weights", position_weights, "sentence"),
                                    ("sentence_length", sentence_length, 0),
                                    ("empty_slots", empty_slots, 0)):
            if value != default:
                self.config[key] = value
        # adjacent: K + 1 embeddings E_0..E_K (A_k = E_{k-1}, C_k = E_k, B = E_0);
        # layer-wise: B, A, C.
        n = hops + 1 if tying == "adjacent" else 3
        self.embeddings = nn.ModuleList(nn.Embedding(vocab_size, embed_dim, padding_idx=0)
                                        for _ in range(n))
        self.temporal = nn.ParameterList(nn.Parameter(torch.zeros(memory_size, embed_dim))
                                         for _ in range(n))
        self.H = nn.Linear(embed_dim, embed_dim, bias=False) if tying == "layerwise" else None
        # tie_answers: the paper's adjacent tying also sets the answer layer W^T = C^K, so the
        # answer is scored by the very embedding the last hop read the facts with.
        tied = dict(linear_weight=self.embeddings[-1].weight) if tie_answers else {}
        self.head = model_head(output, embed_dim, num_answers, num_sampled=num_sampled,
                               counts=counts, sampler="unigram" if counts is not None else None,
                               **tied)
        if tie_answers and self.head.linear_weight is not self.embeddings[-1].weight:
            raise ValueError(f"output {output!r} cannot share its weight (tie_answers)")
        self.reset_parameters(init_std)

    def reset_parameters(self, std: float = 0.1) -> None:
        """N(0, std) for every weight (the paper's 0.1), padding rows at 0."""
        for p in self.parameters():
            # The 'hs' head keeps its zero start (every answer at its tree prior).
            if not (self.output == "hs" and p is self.head.linear_weight):
                nn.init.normal_(p, std=std)
        for e in self.embeddings:
            with torch.no_grad():
                e.weight[0].zero_()

    @property
    def output(self) -> str:
        return self.config["output"]

    @property
    def hops(self) -> int:
        return self.config["hops"]

    def _pair(self, hop: int) -> Tuple[int, int]:
        """Indices of A_k and C_k (k = hop, 0-based) in self.embeddings."""
        return (hop, hop + 1) if self.config["tying"] == "adjacent" else (1, 2)

    def _embed(self, which: int, words: Tensor, weights: Optional[Tensor]) -> Tensor:
        """Sentence vectors [*, D] of word ids [*, J]: the bag of words, weighted by the
        position encoding `weights` [*, J, D] when given."""
        e = self.embeddings[which](words)  # [*, J, D]
        return (e if weights is None else e * weights).sum(-2)

    def _weights(self, words: Tensor) -> Optional[Tensor]:
        if not self.config["position_encoding"]:
            return None
        style, dim = self.config.get("position_weights", "sentence"), self.config["embed_dim"]
        dtype = self.embeddings[0].weight.dtype
        if style == "authors":
            w = authors_weights(words.shape[-1], self._authors_length(), dim, dtype)
            return w.to(words.device) * (words != 0).unsqueeze(-1).to(dtype)
        return position_encoding(words, dim, dtype, length=self.config.get("sentence_length")
                                 if style == "longest" else None)

    def _authors_length(self) -> int:
        """The authors' J: the longest sentence, plus the time word's slot when there is one
        (config_babi.m)."""
        return self.config["sentence_length"] + int(self.config["temporal_encoding"])

    def _time_weight(self) -> Optional[Tensor]:
        """[D]: the authors' code reads the time word through the last position's weights."""
        if (self.config.get("position_weights") != "authors"
                or not self.config["position_encoding"]):
            return None
        J = self._authors_length()
        return authors_weights(J, J, self.config["embed_dim"],
                               self.embeddings[0].weight.dtype)[-1]

    def hops_of(self, story: Tensor, mask: Tensor, query: Tensor, linear: bool = False,
                age: Optional[Tensor] = None) -> Tuple[Tensor, List[Tensor], List[Tensor]]:
        """story [B, M, J], mask [B, M], query [B, J'] → (u_{K+1} [B, D], attention weights
        per hop, and the scores u_k . m_i they come from, -inf on padding: K tensors [B, M]
        each). `linear`: linear start (the weights are the raw scores, no softmax). `age`
        [B, M]: each memory's temporal index (default: n - 1 - i, i.e. the most recent 0)."""
        limit = self.config["memory_size"]
        if story.shape[1] > limit:
            raise ValueError(f"a story has {story.shape[1]} memories; this model holds {limit} "
                             f"(memory_size)")
        weights, time_weight = self._weights(story), self._time_weight()
        if age is None:  # memory i of a story with n sentences is the (n - 1 - i)-th latest
            age = (mask.sum(-1, keepdim=True) - 1
                   - torch.arange(story.shape[1], device=story.device)).clamp(min=0)
        slots = self.config.get("empty_slots", 0)
        empty = (slots - mask.sum(-1)).clamp(min=0) if slots and not linear else None
        memories = {}  # adjacent tying reads C_k and A_{k+1} from one embedding: once

        def memory(which: int) -> Tensor:
            if which not in memories:
                m = self._embed(which, story, weights)  # [B, M, D]
                if self.config["temporal_encoding"]:
                    t = self.temporal[which][age]
                    m = m + (t if time_weight is None else t * time_weight)
                memories[which] = m
            return memories[which]

        u = self._embed(0, query, self._weights(query))
        attention, scores = [], []
        for hop in range(self.hops):
            a, c = self._pair(hop)
            o, p, s = attend(u, memory(a), memory(c), mask, linear, empty)
            u = (self.H(u) if self.H is not None else u) + o
            attention.append(p)
            scores.append(s.masked_fill(~mask, -math.inf))
        return u, attention, scores

    def features(self, story: Tensor, mask: Tensor, query: Tensor, linear: bool = False,
                 age: Optional[Tensor] = None) -> Tuple[Tensor, List[Tensor]]:
        """(u_{K+1} [B, D], attention weights per hop, K tensors [B, M])."""
        u, attention, _ = self.hops_of(story, mask, query, linear, age)
        return u, attention

    def forward(self, story: Tensor, mask: Tensor, query: Tensor, answer: Tensor,
                linear: bool = False) -> Tuple[Tensor, List[Tensor]]:
        u, attention = self.features(story, mask, query, linear)
        return self.head(u, answer), attention

    def log_prob(self, story: Tensor, mask: Tensor, query: Tensor) -> Tensor:
        """Exact log-probabilities [B, A] of every answer."""
        return self.head.log_prob(self.features(story, mask, query)[0])

    def predict(self, story: Tensor, mask: Tensor, query: Tensor
                ) -> Tuple[Tensor, List[Tensor]]:
        """(answer ids [B] of the exact softmax, attention per hop)."""
        u, attention = self.features(story, mask, query)
        return self.head.predict(u), attention


def _check_departures(position_weights: str, sentence_length: int, empty_slots: int) -> None:
    if position_weights not in POSITION_WEIGHTS:
        raise ValueError(f"position_weights must be one of {POSITION_WEIGHTS}, "
                         f"got {position_weights!r}")
    if position_weights != "sentence":
        check_size("sentence_length", sentence_length)
    if isinstance(empty_slots, bool) or not isinstance(empty_slots, int) or empty_slots < 0:
        raise ValueError(f"empty_slots must be an integer ≥ 0, got {empty_slots!r}")
