"""Attention encoder–decoder (Luong et al. 2015) whose output layer is any head of the
fastsoftmax family (fastsoftmax.nn.make_head).

Shape letters: B batch, S source length, T target length, E embedding size, H hidden size,
D output-feature size, V target vocabulary, K beam size.

Padding id 0 never reaches an LSTM (packed sequences), never receives attention (its score is
-inf before the softmax, so its weight is exactly 0) and never contributes to the loss (the
head's ignore_index), so a sequence's result does not depend on what it is batched with.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ...nn import HEADS
from ..heads import model_head
from . import hard_attention as hard
from . import local_attention as local
from .data import BOS, EOS, PAD

ATTENTIONS = ("dot", "general", "concat", None)


class Seq2Seq(nn.Module):
    """LSTM encoder–decoder with optional Luong attention and a full or sampled output layer,
    from `src_vocab_size` to `tgt_vocab_size` words: embeddings of `embed_dim`, `num_layers`
    LSTM layers of `hidden_size`, `dropout` on the embeddings, between layers and on the
    output features, and `num_sampled` candidates for the sampled heads.

    Args:
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
        output: any head of fastsoftmax.nn.HEADS ('full', 'sampled', ...); a sampled head changes
            the training loss only: eval-mode loss and decoding use the exact softmax.
        counts: target-token frequencies [V] for the sampled heads' unigram sampler.
        attention_mode: 'soft' (c_t = Σ_s α_ts h_s) or 'hard' (c_t = h_{z_t}: z_t drawn from α_t
            in training, argmax_s α_ts in eval mode and in greedy and beam search), with the score
            network learnt by REINFORCE (see hard_attention.py for the surrogate loss). In hard
            mode the training loss's value is still the mean cross entropy of the target tokens
            (under the drawn positions); the REINFORCE terms only add their gradient. The reward
            of step t is the head's per-token log-likelihood (for a sampled head: minus its
            per-token training loss).
        baseline: hard mode only, 'none', 'mean' (moving average of the reward) or 'value' (the
            default: that average plus a linear value head on the decoder state); see
            hard_attention.RewardBaseline.
        entropy_bonus: hard mode only, λ ≥ 0 of the -λ·H(α_t) term (default 0.01).
        alignment: 'global' (every source position), 'local-m' or 'local-p' (Luong's local
            attention: a window of 2·window + 1 positions around p_t, soft attention only; see
            local_attention.py). window: D, for local alignment only (default 10).
    """

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, embed_dim: int = 64,
                 hidden_size: int = 128, num_layers: int = 1, *, bidirectional: bool = False,
                 reverse_source: bool = False, attention: str | None = "general",
                 peeky: bool = False, output: str = "full", num_sampled: int = 64,
                 counts: Tensor | None = None, dropout: float = 0.0,
                 attention_mode: str = "soft", baseline: str | None = None,
                 entropy_bonus: float | None = None, alignment: str = "global",
                 window: int | None = None):
        super().__init__()
        self.config = _checked_config(
            src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, embed_dim=embed_dim,
            hidden_size=hidden_size, num_layers=num_layers, bidirectional=bidirectional,
            reverse_source=reverse_source, attention=attention, peeky=peeky, output=output,
            num_sampled=num_sampled, dropout=dropout, attention_mode=attention_mode,
            baseline=baseline, entropy_bonus=entropy_bonus, alignment=alignment, window=window)
        self._counts = counts
        self.attention = self.config["attention"]
        self.attention_mode = attention_mode
        self.entropy_bonus = self.config["entropy_bonus"]
        self.alignment, self.window = alignment, self.config["window"]
        self.baseline_kind: str | None = None  # overrides the baseline's kind when set
        self.peeky = peeky
        self.reverse_source = reverse_source
        self.bidirectional = bidirectional
        self.num_layers = num_layers
        self._build_layers(**self.config, counts=counts)

    def _build_layers(self, *, src_vocab_size: int, tgt_vocab_size: int, embed_dim: int,
                      hidden_size: int, num_layers: int, bidirectional: bool, attention,
                      peeky: bool, output: str, num_sampled: int, dropout: float,
                      attention_mode: str, baseline, alignment: str, counts, **_) -> None:
        H = hidden_size
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
        if alignment == "local-p":
            self.local_p = local.PredictiveCenter(H)
        D = H + (H if peeky else 0)
        # Hard attention needs each token's loss (its reward), so its head does not reduce.
        self.head = model_head(output, D, tgt_vocab_size, num_sampled=num_sampled, counts=counts,
                               bias=True, ignore_index=PAD,
                               reduction="none" if attention_mode == "hard" else "mean")
        if attention_mode == "hard":
            self.reward_baseline = hard.RewardBaseline(baseline, H)

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

    def _decode_steps(self, tgt_in: Tensor, state, memory: Tensor, mask: Tensor, summary: Tensor,
                      offset: int = 0):
        """Runs the decoder over tgt_in [B, T] (target steps offset, offset + 1, …; local-m
        attends around them) from `state`; returns output features [B, T, D], the new state,
        attention weights [B, T, S] (None without attention; one-hot rows of the chosen
        positions with hard attention) and, with hard attention, what REINFORCE needs:
        (log α [B, T, S], chosen positions [B, T], decoder states [B, T, H]), else None."""
        emb = self.dropout(self.tgt_embed(tgt_in))
        T = tgt_in.shape[1]
        if self.peeky:
            emb = torch.cat([emb, summary[:, None, :].expand(-1, T, -1)], dim=-1)
        dec, state = self.decoder(emb, state)
        weights = reinforce = None
        if self.attention is not None and self.attention_mode == "hard":
            log_alpha = hard.masked_log_softmax(self._scores(memory, dec), mask)
            positions = hard.choose_positions(log_alpha, sample=self.training)
            # One-hot rows times memory: exactly h_{z_t}, with the gradient of h_{z_t} only.
            weights = nn.functional.one_hot(positions, memory.shape[1]).to(dec.dtype)
            reinforce = (log_alpha, positions, dec)
        elif self.attention is not None and self.alignment != "global":
            lengths = mask.sum(dim=1)
            centers = (self.local_p(dec, lengths) if self.alignment == "local-p"
                       else local.monotonic_centers(lengths, dec.shape[1], offset))
            weights = local.local_weights(self._scores(memory, dec), lengths, centers,
                                          self.window, gaussian=self.alignment == "local-p")
        elif self.attention is not None:
            scores = self._scores(memory, dec).masked_fill(~mask[:, None, :], float("-inf"))
            weights = torch.softmax(scores.float(), dim=-1).to(dec.dtype)
        if self.attention is not None:
            context = weights @ memory  # [B, T, H]
            feats = torch.tanh(self.combine(torch.cat([context, dec], dim=-1)))
        else:
            feats = dec
        if self.peeky:
            feats = torch.cat([feats, summary[:, None, :].expand(-1, T, -1)], dim=-1)
        return self.dropout(feats), state, weights, reinforce

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
        """Teacher-forced loss, averaged over the non-padding target tokens: the head's sampled
        loss in training mode (output='sampled'), the exact cross entropy otherwise. With hard
        attention in training mode its gradient also holds the REINFORCE terms."""
        memory, mask, state, summary = self.encode(src, src_len)
        feats, _, _, reinforce = self._decode_steps(tgt_in, state, memory, mask, summary)
        loss = self.head(feats.reshape(-1, feats.shape[-1]), tgt_out.reshape(-1))
        if self.attention_mode == "hard":
            return self._hard_loss(loss.view(tgt_out.shape), tgt_out, reinforce)
        return loss

    def _hard_loss(self, token_loss: Tensor, tgt_out: Tensor, reinforce) -> Tensor:
        """token_loss [B, T] (0 on padding) → mean cross entropy + (s - s.detach()), where s is
        the REINFORCE surrogate (hard_attention.py) plus the value head's regression loss:
        zero in value, so the loss reads as a cross entropy, but its gradient in backward.
        Training mode also folds the batch's reward into the baseline's moving average."""
        valid = (tgt_out != PAD).to(token_loss.dtype)
        count = valid.sum().clamp(min=1)
        loss = (token_loss * valid).sum() / count
        if not self.training:
            return loss
        log_alpha, positions, dec = reinforce
        reward = -token_loss.detach()
        log_chosen = log_alpha.gather(-1, positions[..., None]).squeeze(-1)
        b = self.reward_baseline(dec, self.baseline_kind)
        per_step = (hard.reinforce_term(log_chosen, reward, b)
                    - self.entropy_bonus * hard.entropy(log_alpha))
        surrogate = ((per_step * valid).sum() / count
                     + self.reward_baseline.value_loss(dec, reward, valid)).to(loss.dtype)
        self.reward_baseline.update(reward, valid)
        return loss + (surrogate - surrogate.detach())

    def log_prob(self, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> Tensor:
        """Exact teacher-forced log-probabilities [B, T, V]."""
        memory, mask, state, summary = self.encode(src, src_len)
        feats = self._decode_steps(tgt_in, state, memory, mask, summary)[0]
        return self.head.log_prob(feats)

    def attention_weights(self, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced attention weights [B, T, S] (hard attention: one-hot rows of the
        chosen positions, drawn in training mode, argmax in eval mode)."""
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
        for step in range(max_len):
            feats, state, w, _ = self._decode_steps(y, state, memory, mask, summary, step)
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
    def beam_search(self, src: Tensor, src_len: Tensor, beam_size: int = 5, max_len: int = 50,
                    alpha: float = 1.0):
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
        for step in range(max_len):
            feats, state, _, _ = self._decode_steps(y, state, memory, mask, summary, step)
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
    def decode(self, src: Tensor, src_len: Tensor, beam_size: int = 1, max_len: int = 50,
               alpha: float = 1.0) -> Tensor:
        """Greedy for beam_size 1, beam search otherwise; tokens [B, T']."""
        if beam_size == 1:
            return self.greedy(src, src_len, max_len)[0]
        return self.beam_search(src, src_len, beam_size, max_len, alpha)[0]

    # -- saving ---------------------------------------------------------------------------------
    def state(self) -> dict:
        """What `from_state` needs to rebuild this model exactly (the sampler's counts too)."""
        return dict(config=dict(self.config), counts=self._counts, state_dict=self.state_dict())

    @classmethod
    def from_state(cls, state: dict) -> Seq2Seq:
        model = cls(**state["config"], counts=state.get("counts"))
        model.load_state_dict(state["state_dict"])
        return model


def _checked_config(**config) -> dict:
    """A Seq2Seq's options, checked, with the attention 'none' as None and the hard and local
    attention's defaults filled in."""
    if config["attention"] == "none":
        config["attention"] = None
    attention, output = config["attention"], config["output"]
    if attention not in ATTENTIONS:
        raise ValueError(
            f"unknown attention {attention!r}; expected dot, general, concat or None"
        )
    if output not in HEADS:
        raise ValueError(f"unknown output {output!r}; expected one of {', '.join(HEADS)}")
    if config["bidirectional"] and config["hidden_size"] % 2:
        raise ValueError(
            f"a bidirectional encoder needs an even hidden_size, got {config['hidden_size']}"
        )
    config["baseline"], config["entropy_bonus"] = hard.resolve_options(
        attention, config["attention_mode"], config["baseline"], config["entropy_bonus"])
    config["window"] = local.resolve_options(config["alignment"], config["window"], attention,
                                             config["attention_mode"])
    for name in ("src_vocab_size", "tgt_vocab_size", "embed_dim", "hidden_size", "num_layers"):
        v = config[name]
        if not isinstance(v, int) or v <= 0:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    return config
