"""Sampled output-layer losses: sampled softmax, NCE and negative sampling.

Shapes: input [*, D], linear_weight [V, D], linear_bias [V], target int64 [*] or
[*, num_true]. Any leading dims. The names follow torch.nn.functional.linear_cross_entropy:
`linear_weight`/`linear_bias` are the output embedding, `weight` [V] is a per-class rescaling
as in F.cross_entropy (renamed in 0.1: `weight`/`bias` used to be the output embedding). Losses are computed per row in float32 (float64 for float64 input) and
returned in the input's dtype; `reduction='mean'` averages over rows not ignored (NaN when
every row is ignored or the batch is empty, as F.cross_entropy); 'sum' of an empty batch is 0
and 'none' returns shape [*].

Sampled softmax and NCE follow TensorFlow's `_compute_sampled_logits`: the logit of class c
is input.weight[c] + bias[c] - log(expected_count(c)), for the row's true classes and for one
candidate set shared by the batch; with `remove_accidental_hits` a sampled class equal to
one of the row's true classes is left out of that row, at every position it holds. That is
TensorFlow's result whenever the candidates are distinct (every draw of the layers, and
`candidates(unique=True)`); with a class repeated among given candidates, TensorFlow's
compute_accidental_hits masks only one of its positions (the last) and keeps the other copies
as negatives of the row's own true class, which fastsoftmax does not. Negative sampling (word2vec) draws K
negatives per row (or K shared) and needs neither bias nor log-Q.
"""

from typing import Optional

import torch
from torch import Tensor

from . import ops
from ._reduction import finish, loss_rows, mean_normalizer, refuse_full_softmax_extras
from ._shapes import check_count, check_generator, check_label_smoothing
from ._smoothing import weighted_smoothed_loss
from .samplers import LogUniformSampler, SampledValues, Sampler, UniformSampler


def _check_sampler(sampler, num_classes: int, device: torch.device) -> Sampler:
    if not isinstance(sampler, Sampler):
        raise TypeError(f"sampler must be a fastsoftmax Sampler, got {type(sampler).__name__}")
    if sampler.num_classes != num_classes:
        raise ValueError(
            f"sampler draws from {sampler.num_classes} classes but linear_weight has "
            f"{num_classes}"
        )
    if sampler.device != device:
        raise ValueError(
            f"sampler is on {sampler.device} but input is on {device} (use sampler.to(device))"
        )
    return sampler


def draw_candidates(
    sampler: Sampler, true_classes: Tensor, num_sampled: int,
    generator: Optional[torch.Generator] = None,
) -> SampledValues:
    """`sampler.candidates(true_classes, num_sampled, unique=True)` without its host-side id
    check, so that it traces under torch.compile; the loss ops check every id natively.
    `true_classes` must hold valid ids (ignored rows replaced by any valid id)."""
    return sampler._draw_candidates(true_classes, num_sampled, True, generator)


def _sampled_logits_loss(input, weight, target, bias, *, mode, num_sampled, sampler, sampled,
                         num_true, remove_accidental_hits, log_z, reduction, ignore_index,
                         generator, sparse, class_weight=None, label_smoothing=0.0,
                         normalizer=None):
    """Sampled softmax (mode MODE_SOFTMAX) or NCE (MODE_NCE): the body both public
    functionals share. `weight`/`bias` here are the output embedding."""
    lead, t2, h, class_weight = loss_rows(input, weight, target, reduction, num_true,
                                          class_weight, normalizer)
    check_generator(generator)
    V = weight.shape[0]
    label_smoothing = check_label_smoothing(label_smoothing)
    safe = torch.where(t2 == ignore_index, torch.zeros_like(t2), t2)
    if sampled is None:
        if num_sampled is None:
            raise ValueError("give either num_sampled (and optionally sampler) or sampled")
        num_sampled = check_count(num_sampled, "num_sampled")
        if num_sampled > V:
            raise ValueError(f"cannot draw {num_sampled} distinct candidates from {V} classes")
        if sampler is None:
            sampler = LogUniformSampler(V, device=input.device)
        sampler = _check_sampler(sampler, V, input.device)
        sampled = draw_candidates(sampler, safe, num_sampled, generator)
    else:
        if not (isinstance(sampled, tuple) and len(sampled) == 3):
            raise TypeError("sampled must be a SampledValues triple (sampler.candidates(...))")
        if num_sampled is not None and num_sampled != sampled[0].shape[0]:
            raise ValueError(
                f"num_sampled={num_sampled} but sampled holds {sampled[0].shape[0]} candidates"
            )
    candidates, true_count, sampled_count = sampled
    if not isinstance(log_z, Tensor):
        # float64, so that float64 input keeps every bit of log_z (the op casts it to the
        # accumulation dtype; a float32 tensor here lost 1e-9 relative, fuzzing found).
        log_z = torch.tensor(float(log_z), dtype=torch.float64, device=input.device)
    true_count = true_count.reshape(t2.shape)
    loss, _, _ = ops.sampled_logits_forward(
        h, weight, bias, t2, candidates, true_count, sampled_count, log_z.reshape(()),
        mode, bool(remove_accidental_hits), int(ignore_index), bool(sparse),
    )
    row_weight = None
    if class_weight is not None or label_smoothing:
        loss, row_weight = weighted_smoothed_loss(
            loss, h, weight, bias, safe, (candidates, true_count, sampled_count),
            bool(remove_accidental_hits), class_weight, label_smoothing)
        keep = t2[:, 0] != ignore_index
        loss = torch.where(keep, loss, torch.zeros_like(loss))
    return finish(loss, t2, lead, reduction, ignore_index, input.dtype, row_weight, normalizer)


def sampled_softmax_loss(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    linear_bias: Optional[Tensor] = None,
    weight: Optional[Tensor] = None,
    label_smoothing: float = 0.0,
    num_sampled: Optional[int] = None,
    sampler: Optional[Sampler] = None,
    sampled: Optional[SampledValues] = None,
    num_true: int = 1,
    remove_accidental_hits: bool = True,
    reduction: str = "mean",
    ignore_index: int = -100,
    generator: Optional[torch.Generator] = None,
    sparse: bool = False,
    normalizer=None,
    z_loss: float = 0.0,
    softcap: Optional[float] = None,
) -> Tensor:
    """Softmax cross entropy over [true..., sampled...] logits with label mass 1/num_true on
    each true class (tf.nn.sampled_softmax_loss). One candidate set of `num_sampled` distinct
    classes is drawn from `sampler` (default LogUniformSampler) with `generator` per call,
    shared by the batch, unless `sampled` is given. `sparse` makes linear_weight's gradient a
    sparse tensor of the rows used (for SparseAdam or SGD on very large V).

    `remove_accidental_hits` masks every candidate position equal to one of the row's true
    classes. TensorFlow masks one position per (row, true class): the same with distinct
    candidates, different when `sampled` repeats a true class (TF keeps the other copies as
    negatives of the true class itself; masking them all is the sounder estimate).

    `weight` [V] rescales each row's loss by the weight of its true class and 'mean' then
    divides by the sum of those weights, as F.cross_entropy (one true class per row).
    `label_smoothing` spreads that mass uniformly over the row's candidates (its true
    classes and the sampled classes it keeps), with the logQ-corrected logits; see
    fastsoftmax._smoothing for the formula. Both are exact F.cross_entropy in eval, where
    the layers compute the full softmax.

    `normalizer` (with reduction='sum') divides the summed loss by it, as in
    full_softmax_loss (gradient accumulation). z_loss and softcap need the full softmax
    (full_softmax_loss): given here they are refused with a ValueError."""
    refuse_full_softmax_extras("sampled_softmax_loss", z_loss, softcap)
    return _sampled_logits_loss(
        input, linear_weight, target, linear_bias, mode=ops.MODE_SOFTMAX,
        num_sampled=num_sampled, sampler=sampler, sampled=sampled, num_true=num_true,
        remove_accidental_hits=remove_accidental_hits, log_z=0.0, reduction=reduction,
        ignore_index=ignore_index, generator=generator, sparse=sparse, class_weight=weight,
        label_smoothing=label_smoothing, normalizer=normalizer)


def nce_loss(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    linear_bias: Optional[Tensor] = None,
    weight: Optional[Tensor] = None,
    num_sampled: Optional[int] = None,
    sampler: Optional[Sampler] = None,
    sampled: Optional[SampledValues] = None,
    num_true: int = 1,
    remove_accidental_hits: bool = False,
    log_z=0.0,
    reduction: str = "mean",
    ignore_index: int = -100,
    generator: Optional[torch.Generator] = None,
    sparse: bool = False,
    normalizer=None,
) -> Tensor:
    """Noise-contrastive estimation (tf.nn.nce_loss): per row, the sum of sigmoid cross
    entropies of the true logits (label 1/num_true) and sampled logits (label 0), every logit
    shifted by -log_z (a float, or a tensor to learn it; 0 = self-normalised). `sparse` as in
    sampled_softmax_loss. `weight` [V] scales each row's whole loss (its true and noise
    terms: the row is one example of its class) by the weight of its true class; 'mean'
    divides by the sum of those weights. NCE is not a cross entropy, so it has no
    label_smoothing (nor z_loss or softcap). `remove_accidental_hits` masks every hit
    position, unlike TensorFlow when `sampled` repeats a true class (see
    sampled_softmax_loss). `normalizer` as in sampled_softmax_loss."""
    return _sampled_logits_loss(
        input, linear_weight, target, linear_bias, mode=ops.MODE_NCE,
        num_sampled=num_sampled, sampler=sampler, sampled=sampled, num_true=num_true,
        remove_accidental_hits=remove_accidental_hits, log_z=log_z, reduction=reduction,
        ignore_index=ignore_index, generator=generator, sparse=sparse, class_weight=weight,
        normalizer=normalizer)


def negative_sampling_loss(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    weight: Optional[Tensor] = None,
    num_negatives: Optional[int] = None,
    sampler: Optional[Sampler] = None,
    negatives: Optional[Tensor] = None,
    reduction: str = "mean",
    ignore_index: int = -100,
    generator: Optional[torch.Generator] = None,
    sparse: bool = False,
    normalizer=None,
) -> Tensor:
    """word2vec's loss: per row, -sum_true log s(w_t.h) - sum_k log s(-w_k.h). target [*] or
    [*, T]; negatives int64 [*, K] (per row) or [K] (shared). When not given, K =
    `num_negatives` per-row negatives are drawn from `sampler` (default uniform). Negatives
    equal to a true class are kept, as in the formula (word2vec.c skips them). `sparse` as in
    sampled_softmax_loss. `weight` [V] scales each row's whole loss by the weight of its
    true class, as for nce_loss. `normalizer` as in sampled_softmax_loss."""
    class_weight, weight = weight, linear_weight
    lead, t2, h, class_weight = loss_rows(input, weight, target, reduction, None,
                                          class_weight, normalizer)
    check_generator(generator)
    V = weight.shape[0]
    if negatives is None:
        if num_negatives is None:
            raise ValueError("give either num_negatives (and optionally sampler) or negatives")
        num_negatives = check_count(num_negatives, "num_negatives")
        if sampler is None:
            sampler = UniformSampler(V, device=input.device)
        sampler = _check_sampler(sampler, V, input.device)
        neg = sampler.sample(h.shape[0], num_negatives, generator=generator)
    else:
        if not isinstance(negatives, Tensor):
            raise TypeError(f"negatives must be a tensor, got {type(negatives).__name__}")
        if num_negatives is not None and num_negatives != negatives.shape[-1]:
            raise ValueError(
                f"num_negatives={num_negatives} but negatives has {negatives.shape[-1]} per row"
            )
        if negatives.dim() == 1:
            neg = negatives
        elif negatives.dim() == len(lead) + 1 and tuple(negatives.shape[:-1]) == lead:
            neg = negatives.reshape(h.shape[0], negatives.shape[-1])  # K may be 0
        else:
            raise ValueError(
                f"negatives must have shape {lead + ('K',)} (per row) or (K,) (shared), got "
                f"{tuple(negatives.shape)}"
            )
    loss, _ = ops.negative_sampling_forward(h, weight, t2, neg, int(ignore_index), bool(sparse))
    loss, row_weight = _rescale_rows(loss, t2, class_weight, ignore_index)
    return finish(loss, t2, lead, reduction, ignore_index, input.dtype, row_weight, normalizer)


def _rescale_rows(loss: Tensor, t2: Tensor, class_weight: Optional[Tensor], ignore_index: int):
    """(loss * weight[target], weight[target]) per row; ignored rows keep their zero loss."""
    if class_weight is None:
        return loss, None
    safe = torch.where(t2[:, 0] == ignore_index, torch.zeros_like(t2[:, 0]), t2[:, 0])
    row_weight = class_weight.to(loss.dtype)[safe]
    return loss * row_weight, row_weight


# The exact full softmax, streamed over the classes, lives in full_softmax.py.
from .full_softmax import (  # noqa: E402
    CHUNK_BYTES,
    full_argmax,
    full_log_softmax,
    full_softmax_loss,
    streaming_logsumexp,
)

__all__ = [
    "CHUNK_BYTES",
    "draw_candidates",
    "full_argmax",
    "full_log_softmax",
    "full_softmax_loss",
    "mean_normalizer",
    "nce_loss",
    "negative_sampling_loss",
    "sampled_softmax_loss",
    "streaming_logsumexp",
]

# The hierarchical softmax lives in its own module; exported from here as well.
from .hierarchical import hierarchical_softmax_loss  # noqa: E402

__all__ += ["hierarchical_softmax_loss"]

# In-batch / mixed negatives (two-tower retrieval) live in retrieval.py.
from .retrieval import in_batch_softmax_loss  # noqa: E402

__all__ += ["in_batch_softmax_loss"]

# The margin (hinge) losses live in margin.py.
from .margin import (  # noqa: E402
    full_margin_ranking_loss,
    full_warp_loss,
    multi_margin_loss,
    sampled_margin_ranking_loss,
    warp_loss,
)

__all__ += ["full_margin_ranking_loss", "full_warp_loss", "multi_margin_loss",
            "sampled_margin_ranking_loss", "warp_loss"]
