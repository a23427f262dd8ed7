"""Hard (stochastic) attention trained by REINFORCE (Williams 1992; Xu et al. 2015, §4.1).

Shape letters: B batch, T target length, S source length, H hidden size.

Soft attention feeds the decoder the expectation c_t = Σ_s α_ts h_s. Hard attention feeds it
one source state, c_t = h_{z_t}, with the position z_t drawn from α_t = softmax(scores_t) in
training and taken as argmax_s α_ts at inference. The loss ℓ_t(z_t) = -log p(y_t | z_t, ...)
then depends on the draw, and we minimise its expectation L = E_{z~α}[ℓ(z)]. Its gradient

    ∇L = E_z[∇ℓ(z)] + E_z[ℓ(z) ∇log α_z]

has a path part (every parameter ℓ touches directly: decoder, encoder through h_{z_t}, head)
and a score-function part (every parameter α depends on, the score network above all). One draw
gives an unbiased estimate of both. We get it from autograd with a surrogate loss whose
gradient is that estimate:

    surrogate = ℓ(z) - (R - b).detach() · log α_z - λ · H(α)          with reward R = -ℓ(z).

The baseline b may be anything that does not depend on the draw z: since
Σ_z α_z ∇log α_z = ∇Σ_z α_z = 0, E_z[b ∇log α_z] = 0, so b changes the variance and not the
expectation. λ·H(α) is the entropy bonus: it keeps α from collapsing onto one position before
the reward has told the positions apart (it biases the gradient on purpose, by -λ∇H).

Why a per-step reward: the decoder is teacher-forced without input feeding, so z_t changes
only the prediction of y_t. The terms ℓ_u, u ≠ t, of a whole-sequence reward have zero mean
against ∇log α_{z_t} and would add only variance.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

ATTENTION_MODES = ("soft", "hard")
BASELINES = ("none", "mean", "value")


def resolve_options(attention, attention_mode, baseline, entropy_bonus):
    """(baseline, entropy_bonus) a Seq2Seq runs with: the defaults ('value', 0.01) filled in
    for hard attention, (None, None) for soft; a ValueError for an unknown mode or baseline,
    hard mode without a score (attention None), a negative bonus, or a hard-only option given
    with soft attention (it would be silently ignored)."""
    if attention_mode not in ATTENTION_MODES:
        raise ValueError(f"unknown attention_mode {attention_mode!r}; expected 'soft' or 'hard'")
    if attention_mode == "soft":
        for name, value in (("baseline", baseline), ("entropy_bonus", entropy_bonus)):
            if value is not None:
                raise ValueError(f"{name} applies to hard attention only "
                                 f"(attention_mode='hard'), got {name}={value!r} with soft")
        return None, None
    if attention is None:
        raise ValueError("hard attention needs a score: attention 'dot', 'general' or 'concat'")
    # 'value' by default: in bench/bench_hard_attention.py it cut the score gradient's variance
    # most after the first epoch and gave the best exact match of the three on both tasks.
    baseline = "value" if baseline is None else baseline
    if baseline not in BASELINES:
        raise ValueError(f"unknown baseline {baseline!r}; expected one of "
                         f"{', '.join(BASELINES)}")
    entropy_bonus = 0.01 if entropy_bonus is None else entropy_bonus
    if (isinstance(entropy_bonus, bool) or not isinstance(entropy_bonus, (int, float))
            or not math.isfinite(entropy_bonus) or entropy_bonus < 0):
        raise ValueError(f"entropy_bonus must be a finite number >= 0, got {entropy_bonus!r}")
    return baseline, float(entropy_bonus)


def masked_log_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """log α [B, T, S] over the real source positions (mask [B, S] true there); padding gets
    -inf, so α is exactly 0 there and a draw can never land on it. Computed in at least
    float32 (float64 stays float64)."""
    work = torch.promote_types(scores.dtype, torch.float32)
    return torch.log_softmax(scores.to(work).masked_fill(~mask[:, None, :], float("-inf")), -1)


def choose_positions(log_alpha: Tensor, sample: bool) -> Tensor:
    """Positions [B, T]: drawn from α (training) or its argmax (inference). torch.multinomial
    never draws a category of probability 0, so padded positions are never chosen."""
    if not sample:
        return log_alpha.argmax(-1)
    B, T, S = log_alpha.shape
    return torch.multinomial(log_alpha.exp().reshape(B * T, S), 1).view(B, T)


def entropy(log_alpha: Tensor) -> Tensor:
    """H(α_t) = -Σ_s α_ts log α_ts, [B, T]; padded positions (α = 0, log α = -inf) add 0 and
    no NaN to the gradient (log α is zeroed there before the product)."""
    finite = torch.isfinite(log_alpha)
    return -(log_alpha.exp() * log_alpha.masked_fill(~finite, 0.0)).sum(-1)


def reinforce_term(log_prob_chosen: Tensor, reward: Tensor, baseline: Tensor | float) -> Tensor:
    """The score-function surrogate -(R - b)·log α_z per step ([B, T]); its gradient is the
    REINFORCE estimate of ∇E[R] with the sign of a loss. reward and baseline carry no gradient
    here (they are detached), so only log α_z is differentiated."""
    if isinstance(baseline, Tensor):
        baseline = baseline.detach()
    return -(reward.detach() - baseline) * log_prob_chosen


class RewardBaseline(nn.Module):
    """What the reward is compared against.

    - kind 'none': b = 0.
    - kind 'mean': b = an exponential moving average (decay `decay`) of the mean reward per
      target token over past training batches, bias-corrected like Adam's moments so the
      first batches are not pulled towards 0. Cheap and target-independent.
    - kind 'value': b_t = the running mean + a linear value head on the decoder state h_t
      (detached, so fitting the value does not reshape the decoder), trained to predict R_t
      by squared error. It can tell easy steps (a separator) from hard ones (a digit), which
      a single mean cannot; starting at zero, the head begins as the 'mean' baseline
      instead of as a random guess that would raise the variance until it is fitted.

    Every kind keeps the running mean (also a readable training signal); only 'value' owns
    parameters. Neither depends on the draw z_t, which keeps the estimate unbiased.
    """

    def __init__(self, kind: str, hidden_size: int, decay: float = 0.9):
        super().__init__()
        if kind not in BASELINES:
            raise ValueError(f"unknown baseline {kind!r}; expected one of {', '.join(BASELINES)}")
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"baseline decay must lie in [0, 1), got {decay!r}")
        self.kind, self.decay = kind, decay
        self.register_buffer("running_sum", torch.zeros((), dtype=torch.float64))
        self.register_buffer("running_weight", torch.zeros((), dtype=torch.float64))
        self.value = None
        if kind == "value":
            self.value = nn.Linear(hidden_size, 1)
            nn.init.zeros_(self.value.weight)
            nn.init.zeros_(self.value.bias)

    @property
    def mean(self) -> float:
        """The running mean reward (0 before the first batch)."""
        return float(self._mean())

    def _mean(self) -> Tensor:
        # A tensor, so a training step on a GPU never waits to read it.
        return self.running_sum / self.running_weight.clamp(min=1e-300)

    def forward(self, dec: Tensor, kind: str | None = None) -> Tensor | float:
        """The baseline for every step: [B, T] for 'value', a scalar otherwise, in dec's dtype.
        `kind` overrides self.kind ('none' or 'mean' on any model; used to measure variance)."""
        kind = self.kind if kind is None else kind
        if kind == "none":
            return 0.0
        mean = self._mean().to(dec.dtype)
        if kind == "mean":
            return mean
        if self.value is None:
            raise ValueError("this model has no value head (it was built with another baseline)")
        return mean + self.value(dec.detach()).squeeze(-1)

    def value_loss(self, dec: Tensor, reward: Tensor, valid: Tensor) -> Tensor:
        """Mean squared error of the value head on the real target steps (0 without one)."""
        if self.value is None:
            return reward.new_zeros(())
        err = (self.forward(dec, "value") - reward.detach()) ** 2
        return (err * valid).sum() / valid.sum().clamp(min=1)

    @torch.no_grad()
    def update(self, reward: Tensor, valid: Tensor) -> None:
        """Folds one batch's mean reward into the moving average (a batch without a real
        target step leaves it as it was)."""
        n = valid.sum().double()
        batch_mean = (reward * valid).sum().double() / n.clamp(min=1)
        decay = torch.where(n > 0, self.decay, 1.0).to(self.running_sum.dtype)
        self.running_sum.mul_(decay).add_((1 - decay) * batch_mean)
        self.running_weight.mul_(decay).add_(1 - decay)
