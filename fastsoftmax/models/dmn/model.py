"""Dynamic memory network (Kumar et al. 2016, "Ask Me Anything", arXiv:1506.07285) whose
answer layer is any head of fastsoftmax.nn, taken from the registry by name.

Shapes: B stories, L story words, M facts, H hidden size, A answers.

    input      c_t = the input GRU's state at the end of sentence t, the GRU reading all the
               story's words in order, plus T(age of fact t) when `temporal`  [B, M, H]
    question   q = the question GRU's last state (same word embeddings)     [B, H]
    episodic   m^0 = q; for pass i = 1..P:
                 g_t = G(c_t, m^{i-1}, q) = σ(W2 tanh(W1 z(c_t, m^{i-1}, q) + b1) + b2)
                 (gate='sigmoid', the paper's) or the softmax of those scores over the
                 story's facts (gate='softmax', the default, see below)
                 z(c, m, q) = [c, m, q, c∘q, c∘m, |c − q|, |c − m|, cᵀW_b q, cᵀW_b m]
                 h_t = g_t GRU(c_t, h_{t−1}) + (1 − g_t) h_{t−1},  h_0 = 0,  e^i = h_M
                 m^i = GRU(e^i, m^{i−1})
    answer     a = GRU(q, m^P); the head's softmax over W a (one answer word)

Why softmax by default: in bAbI the gate must pick the *latest* fact about the question's
subject, and a forward GRU's c_t knows nothing of the facts after t. Scores compared across
facts (a softmax) can prefer the latest matching fact; independent sigmoid gates trained
toward 1 on it and 0 on the earlier ones cannot single it out, and the gated GRU has to
overwrite the earlier ones instead. On task 1 (1k, 15 epochs, no temporal encoding) both
answer 100% of the test questions, but the sigmoid's highest gate is on the supporting fact
in 85% of the passes against 100% (bench/results/dmn-babi-cpu.csv). Tasks 2 and 3 were run
with softmax gates only. The DMN+ of Xiong et al. 2016 also normalises the gates.

Why `temporal` (on by default, not in the paper): with a softmax gate, picking the latest
fact about someone needs the facts to say how old they are; a GRU's state says it only
vaguely. MemN2N's temporal encoding, a learned vector per fact age added to c_t, says it
exactly. The README's DMN section has the measured effect.

A padding fact has g_t = 0, so it leaves h unchanged and e^i is h at the story's last real
fact. The semantic memory is the word embedding, which `load_embeddings` can start from
word2vec vectors. The only Python loops are over facts and passes, never over stories.
"""

import math
from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn

from ...nn import check_size
from ..babi import check_answer_layer
from ..heads import model_head

GATES = ("softmax", "sigmoid")


def gate_values(logits: Tensor, kind: str) -> Tensor:
    """Gates [B, M] of the scores [B, M] (-inf on padding, whose gate is then 0): their
    sigmoid, or their softmax over the story's facts."""
    return torch.sigmoid(logits) if kind == "sigmoid" else torch.softmax(logits, dim=-1)


def gate_features(c: Tensor, m: Tensor, q: Tensor, bilinear: Tensor) -> Tensor:
    """z(c, m, q) [B, M, 7H + 2] for facts c [B, M, H], memory m [B, H], question q [B, H]
    and the bilinear weight W_b [H, H]."""
    m_, q_ = m.unsqueeze(1).expand_as(c), q.unsqueeze(1).expand_as(c)
    cw = c @ bilinear  # [B, M, H]
    return torch.cat([c, m_, q_, c * q_, c * m_, (c - q_).abs(), (c - m_).abs(),
                      (cw * q_).sum(-1, keepdim=True), (cw * m_).sum(-1, keepdim=True)], -1)


class AttentionGate(nn.Module):
    """G(c, m, q): the two-layer net on z(c, m, q); `forward` gives the logits [B, M] (the
    gate is their sigmoid), -inf on padding facts (`mask` False)."""

    def __init__(self, hidden: int, gate_hidden: int):
        super().__init__()
        self.bilinear = nn.Parameter(torch.empty(hidden, hidden))
        self.layer1 = nn.Linear(7 * hidden + 2, gate_hidden)
        self.layer2 = nn.Linear(gate_hidden, 1)
        nn.init.normal_(self.bilinear, std=1.0 / math.sqrt(hidden))

    def forward(self, c: Tensor, m: Tensor, q: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        z = gate_features(c, m, q, self.bilinear)
        logits = self.layer2(torch.tanh(self.layer1(z))).squeeze(-1)
        return logits if mask is None else logits.masked_fill(~mask, -math.inf)


def gated_episode(cell: nn.GRUCell, facts: Tensor, gates: Tensor,
                  h0: Optional[Tensor] = None, projected: Optional[Tensor] = None) -> Tensor:
    """The episode e = h_M of h_t = g_t GRU(c_t, h_{t−1}) + (1 − g_t) h_{t−1} over facts
    [B, M, H] with gates [B, M] (0 on padding), `cell`'s weights. `projected` is
    W_ih c_t + b_ih [B, M, 3H], which the passes share (the facts do not change), so it is
    computed once per batch (episode_inputs)."""
    B, M, H = facts.shape
    if projected is None:
        projected = episode_inputs(cell, facts)
    h = facts.new_zeros(B, H) if h0 is None else h0
    w_hh, b_hh = cell.weight_hh, cell.bias_hh
    for t in range(M):
        x_r, x_z, x_n = projected[:, t].chunk(3, -1)
        hh = h @ w_hh.t()
        if b_hh is not None:
            hh = hh + b_hh
        h_r, h_z, h_n = hh.chunk(3, -1)
        r = torch.sigmoid(x_r + h_r)
        z = torch.sigmoid(x_z + h_z)
        n = torch.tanh(x_n + r * h_n)
        new = (1 - z) * n + z * h  # torch.nn.GRUCell's update
        g = gates[:, t : t + 1]
        h = g * new + (1 - g) * h
    return h


def episode_inputs(cell: nn.GRUCell, facts: Tensor) -> Tensor:
    """The input half of `cell`'s gates for every fact at once, [B, M, 3H]: computed once
    and reused by every pass of the episodes."""
    out = facts @ cell.weight_ih.t()
    return out if cell.bias_ih is None else out + cell.bias_ih


class DMN(nn.Module):
    """Dynamic memory network with `passes` episodes (default 3), hidden size `hidden`
    (word embeddings of `embed_dim`, default `hidden`), a gate net of `gate_hidden` units,
    dropout on the word embeddings, and the answer predicted by the head `output` ('full',
    'sampled', ...) over `num_answers` classes; `counts` (the answers' training frequencies)
    feed the sampled heads' sampler. `vocab_size` words, the story's last `memory_size`
    facts, `temporal` a learned vector per fact age, `num_sampled` candidates for the sampled
    heads.

    `memories(batch)` → (answer features a [B, H], gate logits per pass, each [B, M]);
    `forward(batch)` → (head loss, gate logits per pass): the head's training objective in
    training mode, the exact cross entropy in eval mode.
    """

    def __init__(self, vocab_size: int, num_answers: int, *, hidden: int = 32,
                 embed_dim: Optional[int] = None, gate_hidden: Optional[int] = None,
                 passes: int = 3, memory_size: int = 50, dropout: float = 0.1,
                 gate: str = "softmax", temporal: bool = True, output: str = "full",
                 num_sampled: int = 16, counts: Optional[Tensor] = None):
        super().__init__()
        embed_dim = hidden if embed_dim is None else embed_dim
        gate_hidden = hidden if gate_hidden is None else gate_hidden
        for name, value in (("vocab_size", vocab_size), ("num_answers", num_answers),
                            ("hidden", hidden), ("embed_dim", embed_dim),
                            ("gate_hidden", gate_hidden), ("passes", passes),
                            ("memory_size", memory_size)):
            check_size(name, value)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if gate not in GATES:
            raise ValueError(f"gate must be one of {GATES}, got {gate!r}")
        check_answer_layer(output, counts)
        self.config = dict(vocab_size=vocab_size, num_answers=num_answers, hidden=hidden,
                           embed_dim=embed_dim, gate_hidden=gate_hidden, passes=passes,
                           memory_size=memory_size, dropout=dropout, gate=gate,
                           temporal=temporal, output=output,
                           num_sampled=num_sampled)
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.dropout = nn.Dropout(dropout)
        self.input_gru = nn.GRU(embed_dim, hidden, batch_first=True)
        # T(i): a learned vector per fact age (0 = the latest), MemN2N's temporal encoding.
        self.temporal = (nn.Parameter(0.1 * torch.randn(memory_size, hidden)) if temporal
                         else None)
        self.question_gru = nn.GRU(embed_dim, hidden, batch_first=True)
        self.gate = AttentionGate(hidden, gate_hidden)
        self.episode_cell = nn.GRUCell(hidden, hidden)
        self.memory_cell = nn.GRUCell(hidden, hidden)
        self.answer_cell = nn.GRUCell(hidden, hidden)
        self.head = model_head(output, hidden, num_answers, num_sampled=num_sampled,
                               counts=counts, sampler="unigram" if counts is not None else None)

    @property
    def passes(self) -> int:
        return self.config["passes"]

    def load_embeddings(self, vectors: Tensor, rows: Tensor) -> None:
        """Copy `vectors` [n, embed_dim] into the embedding rows `rows` [n] (word2vec
        initialisation of the semantic memory)."""
        if vectors.shape[-1] != self.config["embed_dim"]:
            raise ValueError(f"vectors of size {vectors.shape[-1]} cannot start embeddings of "
                             f"size {self.config['embed_dim']}")
        with torch.no_grad():
            self.embedding.weight[rows] = vectors.to(self.embedding.weight)

    def facts(self, words: Tensor, ends: Tensor, mask: Tensor) -> Tensor:
        """c [B, M, H]: the input GRU's states at the sentence ends, 0 on padding facts."""
        states, _ = self.input_gru(self.dropout(self.embedding(words)))  # [B, L, H]
        H = states.shape[-1]
        c = states.gather(1, ends.unsqueeze(-1).expand(-1, -1, H))
        if self.temporal is not None:
            age = (mask.sum(-1, keepdim=True) - 1
                   - torch.arange(mask.shape[1], device=mask.device)).clamp(min=0)
            c = c + self.temporal[age]
        return c * mask.unsqueeze(-1).to(c.dtype)

    def question(self, question: Tensor, qlen: Tensor) -> Tensor:
        """q [B, H]: the question GRU's state at the question's last word."""
        states, _ = self.question_gru(self.dropout(self.embedding(question)))
        return states[torch.arange(states.shape[0], device=states.device), qlen - 1]

    def episodes(self, c: Tensor, mask: Tensor, q: Tensor) -> Tuple[Tensor, List[Tensor]]:
        """(m^P [B, H], gate logits per pass [B, M] each, -inf on padding)."""
        projected = episode_inputs(self.episode_cell, c)
        m, logits = q, []
        for _ in range(self.passes):
            s = self.gate(c, m, q, mask)
            g = gate_values(s, self.config["gate"])
            e = gated_episode(self.episode_cell, c, g, projected=projected)
            m = self.memory_cell(e, m)
            logits.append(s)
        return m, logits

    def memories(self, batch) -> Tuple[Tensor, List[Tensor]]:
        """(answer features a [B, H], gate logits per pass)."""
        if batch.mask.shape[1] > self.config["memory_size"]:
            raise ValueError(f"a story has {batch.mask.shape[1]} facts; this model holds "
                             f"{self.config['memory_size']} (memory_size)")
        c = self.facts(batch.words, batch.ends, batch.mask)
        q = self.question(batch.question, batch.qlen)
        m, logits = self.episodes(c, batch.mask, q)
        return self.answer_cell(q, m), logits

    def forward(self, batch) -> Tuple[Tensor, List[Tensor]]:
        a, logits = self.memories(batch)
        return self.head(a, batch.answer), logits

    def log_prob(self, batch) -> Tensor:
        """Exact log-probabilities [B, A] of every answer."""
        return self.head.log_prob(self.memories(batch)[0])

    def predict(self, batch) -> Tuple[Tensor, List[Tensor]]:
        """(answer ids [B] of the exact softmax, gates per pass, each [B, M])."""
        a, logits = self.memories(batch)
        return self.head.predict(a), [gate_values(s, self.config["gate"]) for s in logits]
