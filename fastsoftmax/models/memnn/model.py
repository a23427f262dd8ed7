"""The strongly supervised memory network (Weston, Chopra and Bordes 2015, "Memory Networks",
§3) with the write-time comparisons of its §3.4, for bAbI.

    I(x)   the bag of words of a sentence (a question or a statement)
    G      appends each statement to the memory, in story order (its index is its write time)
    O      picks κ supporting memories (κ = `hops`, the paper's 2):
               o_1 = argmax_i s_O(x, m_i),  o_2 = argmax_i s_O([x, m_o1], m_i), ...
    R      ranks the vocabulary's words: r = argmax_w s_R([x, m_o1, ..., m_oκ], w)

Both scores are s(x, y) = Φx(x)ᵀ UᵀU Φy(y). Φx has one |W| block per argument (the question,
m_o1, m_o2, ...: a word reads differently as the question's and as a supporting fact's) and
Φy one block of its own, so U is [D, (args + 1)|W|]; U_O and U_R are separate. U's block for
an argument is an embedding table, and U Φ of a sentence is the sum of its words' vectors.
R's Φy block, U_R Φy(w) for every word w, is the answer layer's [V, D] weight.

Write time (§3.4). "Which fact is the latest?" is not a function of a sentence's words, so
O compares two memories: with features Φt(x, y, y') ∈ {0, 1}³ (x older than y, x older than
y', y older than y'),

    s_Ot(x, y, y') = Φx(x)ᵀ U_Oᵀ U_O (Φy(y) − Φy(y') + Φt(x, y, y')),

> 0 when y is preferred. The argmax becomes a loop over the memories that keeps the winner of
each comparison with the next memory; without the time features that loop is the argmax.
x's write time is its latest supporting memory's (the question itself is newer than all).
"""

import math
from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn

from ... import functional as F
from ...nn import check_size

NOT_OLDER = 1 << 40  # the question's write time: after every memory


class MemNN(nn.Module):
    """I, G, O and R over a vocabulary of `vocab_size` words (0 is padding), `embed_dim` the
    rows D of U_O and U_R, `hops` supporting memories (κ), `time_features` the write-time
    comparisons of §3.4 (False: plain argmax of s_O), the story's last `memory_size`
    sentences, weights drawn from a normal distribution of standard deviation `init_std`."""

    def __init__(self, vocab_size: int, *, embed_dim: int = 50, hops: int = 2,
                 memory_size: int = 50, time_features: bool = True, init_std: float = 0.1):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("embed_dim", embed_dim),
                            ("hops", hops), ("memory_size", memory_size)):
            check_size(name, value)
        self.config = dict(vocab_size=vocab_size, embed_dim=embed_dim, hops=hops,
                           memory_size=memory_size, time_features=time_features,
                           init_std=init_std)

        def blocks(n: int) -> nn.ModuleList:
            return nn.ModuleList(nn.Embedding(vocab_size, embed_dim, padding_idx=0)
                                 for _ in range(n))

        # U_O: Φx blocks for x, m_o1 .. m_o(κ-1); Φy's block; the three time features.
        self.o_in, self.o_out = blocks(hops), blocks(1)[0]
        self.o_time = nn.Parameter(torch.zeros(3, embed_dim)) if time_features else None
        # U_R: Φx blocks for x, m_o1 .. m_oκ; Φy's block is the answer layer's weight.
        self.r_in = blocks(hops + 1)
        self.answer_weight = nn.Parameter(torch.zeros(vocab_size, embed_dim))
        self.reset_parameters(init_std)

    def reset_parameters(self, std: float = 0.1) -> None:
        """N(0, std) for every weight, the padding word's rows at 0."""
        for p in self.parameters():
            nn.init.normal_(p, std=std)
        with torch.no_grad():
            for e in [*self.o_in, self.o_out, *self.r_in]:
                e.weight[0].zero_()

    @property
    def hops(self) -> int:
        return self.config["hops"]

    def U(self, which: str) -> Tensor:
        """U_O [D, (κ + 1)V + 3] or U_R [D, (κ + 2)V] as one matrix, the blocks in the order
        x, m_o1, ..., y (then U_O's three time features): s = Φxᵀ UᵀU Φy with Φ in that
        feature space (for tests and inspection; the model never builds it)."""
        if which == "O":
            cols = [e.weight for e in self.o_in] + [self.o_out.weight]
            if self.o_time is not None:
                cols.append(self.o_time)
        elif which == "R":
            cols = [e.weight for e in self.r_in] + [self.answer_weight]
        else:
            raise ValueError(f"which must be 'O' or 'R', got {which!r}")
        return torch.cat(cols, 0).T

    # ----- I: sentences as U Φ ------------------------------------------------------------
    @staticmethod
    def _bag(table: nn.Embedding, words: Tensor) -> Tensor:
        return table(words).sum(-2)

    def _input(self, tables, query: Tensor, facts: List[Tensor]) -> Tensor:
        """U Φx([x, f_1, ...]) [B, D]: the question's bag in block 0, fact k's in block k."""
        u = self._bag(tables[0], query)
        for table, words in zip(tables[1:], facts):
            u = u + self._bag(table, words)
        return u

    def memories(self, story: Tensor) -> Tensor:
        """U_O Φy(m_i) [B, M, D] of every memory."""
        limit = self.config["memory_size"]
        if story.shape[1] > limit:
            raise ValueError(f"a story has {story.shape[1]} memories; this model holds {limit} "
                             f"(memory_size)")
        return self._bag(self.o_out, story)

    @staticmethod
    def fact_words(story: Tensor, index: Tensor) -> Tensor:
        """The words [B, J] of memory index[b] of each story (index -1: padding)."""
        at = index.clamp(min=0)[:, None, None].expand(-1, 1, story.shape[-1])
        return story.gather(1, at)[:, 0] * (index >= 0)[:, None]

    # ----- O: the supporting memories -------------------------------------------------------
    def o_terms(self, query: Tensor, facts: List[Tensor], memories: Tensor
                ) -> Tuple[Tensor, Optional[Tensor]]:
        """(g [B, M], t [B, 3] or None): g_i = U_O Φx(x) · U_O Φy(m_i), and t the weights
        U_O Φx(x) · U_O Φt of the three time features, x = [query, facts...]."""
        u = self._input(self.o_in, query, facts)
        g = torch.einsum("bd,bmd->bm", u, memories)
        return g, (u @ self.o_time.T if self.o_time is not None else None)

    @staticmethod
    def compare(g: Tensor, t: Optional[Tensor], x_time: Tensor, first: Tensor, second: Tensor
                ) -> Tensor:
        """s_Ot(x, m_first, m_second) for index tensors first, second [B, ...] (> 0: first
        preferred); without time features g_first − g_second. x_time [B]: x's write time."""
        B = g.shape[0]
        s = g.gather(1, first.reshape(B, -1)).view_as(first) - \
            g.gather(1, second.reshape(B, -1)).view_as(second)
        if t is None:
            return s
        shape = (-1,) + (1,) * (first.dim() - 1)
        xt = x_time.view(shape)
        a, b, c = (t[:, k].view(shape) for k in range(3))
        return (s + a * (xt < first).to(s.dtype) + b * (xt < second).to(s.dtype)
                + c * (first < second).to(s.dtype))

    def choose(self, g: Tensor, t: Optional[Tensor], x_time: Tensor, mask: Tensor) -> Tensor:
        """The chosen memory [B]: the argmax of g over real memories, or with time features the
        paper's loop (the winner so far against each next memory, the challenger taking over
        when s_Ot < 0)."""
        if t is None:
            return g.masked_fill(~mask, -math.inf).argmax(1)
        winner = torch.zeros(g.shape[0], dtype=torch.int64, device=g.device)
        for i in range(1, g.shape[1]):
            challenger = torch.full_like(winner, i)
            s = self.compare(g, t, x_time, winner, challenger)
            winner = torch.where(mask[:, i] & (s < 0), challenger, winner)
        return winner

    def select(self, story: Tensor, mask: Tensor, query: Tensor) -> Tensor:
        """The supporting memories [B, κ] the network picks, hop after hop."""
        memories = self.memories(story)
        chosen, facts = [], []
        x_time = torch.full((story.shape[0],), NOT_OLDER, device=story.device)
        for _ in range(self.hops):
            g, t = self.o_terms(query, facts, memories)
            o = self.choose(g, t, x_time, mask)
            chosen.append(o)
            facts.append(self.fact_words(story, o))
            x_time = o
        return torch.stack(chosen, 1)

    def o_loss(self, story: Tensor, mask: Tensor, query: Tensor, targets: Tensor,
               margin: float) -> Tensor:
        """The supporting-fact ranking loss, summed over hops, each the mean over questions of
        Σ_{f̄ ≠ f} max(0, γ − s_O(x, f) + s_O(x, f̄)), x holding the true earlier facts (strong
        supervision). With time features the term of f̄ is max(0, γ − s_Ot(x, f, f̄)) when f is
        older, max(0, γ + s_Ot(x, f̄, f)) when f̄ is: f wins the comparison the loop makes, the
        older memory first. (The paper's appendix asks for both orders; for two memories of
        the same words only one order can be won, since "y older than y'" is off in the
        other, and that unreachable half of the loss would pull against the reachable one.)
        Hops whose target (or an earlier hop's) fell out of memory (-1) do not count."""
        memories = self.memories(story)
        B, M = mask.shape
        others = torch.arange(M, device=story.device).expand(B, M)
        x_time = torch.full((B,), NOT_OLDER, device=story.device)
        total, facts = story.new_zeros((), dtype=memories.dtype), []
        for k in range(self.hops):
            f = targets[:, k]
            g, t = self.o_terms(query, facts, memories)
            fk = f.clamp(min=0)[:, None].expand(B, M)
            # The loop compares the older memory with the newer: f must win that comparison.
            older, newer = torch.minimum(fk, others), torch.maximum(fk, others)
            sign = torch.where(fk == older, 1.0, -1.0).to(g.dtype)
            terms = torch.relu(margin - sign * self.compare(g, t, x_time, older, newer))
            terms = terms.masked_fill(~mask | (others == fk), 0.0).sum(1)
            known = (targets[:, :k + 1] >= 0).all(1)
            if known.any():
                total = total + terms[known].mean()
            facts.append(self.fact_words(story, f))
            x_time = f
        return total

    # ----- R: the answer ---------------------------------------------------------------------
    def r_input(self, story: Tensor, query: Tensor, chosen: Tensor) -> Tensor:
        """U_R Φx([x, m_o1, ..., m_oκ]) [B, D] for the chosen memories [B, κ]."""
        facts = [self.fact_words(story, chosen[:, k]) for k in range(self.hops)]
        return self._input(self.r_in, query, facts)

    def answer_scores(self, r: Tensor, specials: int = 2) -> Tensor:
        """s_R(x, w) [B, V] of every word; the first `specials` ids (<pad>, <unk>) are never
        an answer."""
        scores = r @ self.answer_weight.T
        scores[:, :specials] = -math.inf
        return scores

    def answer_loss(self, r: Tensor, answer: Tensor, *, num_sampled: int, sampler,
                    margin: float, generator=None, sampled: Optional[Tensor] = None) -> Tensor:
        """The answer's ranking loss, Σ_{r̄ ≠ r} max(0, γ − s_R(x, r) + s_R(x, r̄)) over
        `num_sampled` words drawn from `sampler` (or the words `sampled`, [B, K] or [K]), the
        answer itself left out, by fastsoftmax's sampled margin-ranking layer; the mean over
        questions."""
        return F.sampled_margin_ranking_loss(r, self.answer_weight, answer,
                                             num_sampled=num_sampled, sampler=sampler,
                                             margin=margin, generator=generator, sampled=sampled)

    def exact_answer_loss(self, r: Tensor, answer: Tensor, *, margin: float,
                          reduction: str = "mean") -> Tensor:
        """The answer's ranking loss over every word of the vocabulary (what the sampled term
        estimates: its expectation times V / num_sampled)."""
        return F.full_margin_ranking_loss(r, self.answer_weight, answer, margin=margin,
                                          reduction=reduction)

    def predict(self, story: Tensor, mask: Tensor, query: Tensor) -> Tuple[Tensor, Tensor]:
        """(answer word ids [B], chosen memories [B, κ])."""
        chosen = self.select(story, mask, query)
        r = self.r_input(story, query, chosen)
        return self.answer_scores(r).argmax(1), chosen
