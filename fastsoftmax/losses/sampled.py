"""Sampled softmax and NCE: the functionals and their modules SampledSoftmaxLoss and NCELoss.

Shapes: input [*, D], linear_weight [V, D], linear_bias [V], target int64 [*] or
[*, num_true]. Any leading dims. The names follow torch.nn.functional.linear_cross_entropy:
`linear_weight`/`linear_bias` are the output embedding, `weight` [V] is a per-class rescaling
as in F.cross_entropy (renamed in 0.1: `weight`/`bias` used to be the output embedding).
Losses are computed per row in float32 (float64 for float64 input) and returned in the
input's dtype; `reduction='mean'` averages over rows not ignored (NaN when every row is
ignored or the batch is empty, as F.cross_entropy); 'sum' of an empty batch is 0 and 'none'
returns shape [*].

Both follow TensorFlow's `_compute_sampled_logits`: the logit of class c is
input.linear_weight[c] + linear_bias[c] - log(expected_count(c)), for the row's true classes
and for one candidate set shared by the batch; with `remove_accidental_hits` a sampled class
equal to one of the row's true classes is left out of that row, at every position it holds.
That is TensorFlow's result whenever the candidates are distinct (every draw of the layers,
and `candidates(unique=True)`); with a class repeated among given candidates, TensorFlow's
compute_accidental_hits masks only one of its positions (the last) and keeps the other copies
as negatives of the row's own true class, which fastsoftmax does not.
"""

import math
from typing import Optional, Union

import torch
from torch import Tensor, nn

from .. import ops
from ._layer_parts import COMMON_ARGS, SAMPLER_ARGS, refuse_label_smoothing
from ._reduction import finish, loss_rows, refuse_full_softmax_extras
from ._shapes import check_generator, check_label_smoothing
from ._smoothing import weighted_smoothed_loss
from ..samplers import LogUniformSampler, SampledValues, Sampler
from ._sampling import SampledLayer, draw_candidates, sampler_for
from .full import with_layer_keywords


def _candidates(sampled, num_sampled, sampler, safe: Tensor, num_classes: int, device,
                generator) -> SampledValues:
    """`sampled` as given (a SampledValues triple), or num_sampled distinct candidates drawn
    from `sampler` (default log-uniform)."""
    if sampled is None:
        sampler, num_sampled = sampler_for(sampler, num_sampled, "num_sampled", "sampled",
                                           num_classes, device, LogUniformSampler)
        if num_sampled > num_classes:
            raise ValueError(f"cannot draw {num_sampled} distinct candidates from "
                             f"{num_classes} classes")
        return draw_candidates(sampler, safe, num_sampled, generator)
    if not (isinstance(sampled, tuple) and len(sampled) == 3):
        raise TypeError("sampled must be a SampledValues triple (sampler.candidates(...))")
    if num_sampled is not None and num_sampled != sampled[0].shape[0]:
        raise ValueError(
            f"num_sampled={num_sampled} but sampled holds {sampled[0].shape[0]} candidates"
        )
    return sampled


def _sampled_logits_loss(input, linear_weight, target, linear_bias, *, mode, num_sampled,
                         sampler, sampled, num_true, remove_accidental_hits, log_z, reduction,
                         ignore_index, generator, sparse, weight=None, label_smoothing=0.0,
                         normalizer=None):
    """Sampled softmax (mode MODE_SOFTMAX) or NCE (MODE_NCE): the body both public
    functionals share."""
    lead, t2, h, weight = loss_rows(input, linear_weight, target, reduction, num_true, weight,
                                    normalizer)
    check_generator(generator)
    label_smoothing = check_label_smoothing(label_smoothing)
    safe = torch.where(t2 == ignore_index, torch.zeros_like(t2), t2)
    safe = safe.clamp(0, linear_weight.shape[0] - 1)  # bad ids are refused by the loss op
    candidates, true_count, sampled_count = _candidates(
        sampled, num_sampled, sampler, safe, linear_weight.shape[0], input.device, generator)
    if not isinstance(log_z, Tensor):
        # float64, so that float64 input keeps every bit of log_z (the op casts it to the
        # accumulation dtype; a float32 tensor here lost 1e-9 relative, fuzzing found).
        log_z = torch.tensor(float(log_z), dtype=torch.float64, device=input.device)
    true_count = true_count.reshape(t2.shape)
    loss, _, _ = ops.sampled_logits_forward(
        h, linear_weight, linear_bias, t2, candidates, true_count, sampled_count,
        log_z.reshape(()), mode, bool(remove_accidental_hits), int(ignore_index), bool(sparse),
    )
    row_weight = None
    if weight is not None or label_smoothing:
        loss, row_weight = weighted_smoothed_loss(
            loss, h, linear_weight, linear_bias, safe, (candidates, true_count, sampled_count),
            bool(remove_accidental_hits), weight, label_smoothing)
        keep = t2[:, 0] != ignore_index
        loss = torch.where(keep, loss, torch.zeros_like(loss))
    return finish(loss, t2, lead, reduction, ignore_index, input.dtype, row_weight, normalizer)


def sampled_softmax_loss(
    input: Tensor, linear_weight: Tensor, target: Tensor, *,
    linear_bias: Optional[Tensor] = None,
    weight: Optional[Tensor] = None,
    label_smoothing: float = 0.0,
    num_sampled: Optional[int] = None,
    sampler: Optional[Sampler] = None,
    sampled: Optional[SampledValues] = None,
    num_true: int = 1,
    remove_accidental_hits: bool = True,
    reduction: str = "mean", ignore_index: int = -100,
    generator: Optional[torch.Generator] = None, sparse: bool = False, normalizer=None,
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
    fastsoftmax.losses._smoothing for the formula. Both are exact F.cross_entropy in eval, where
    the layers compute the full softmax.

    `normalizer` (with reduction='sum') divides the summed loss by it, as in
    full_softmax_loss (gradient accumulation). z_loss and softcap need the full softmax
    (full_softmax_loss): given here they are refused with a ValueError."""
    refuse_full_softmax_extras("sampled_softmax_loss", z_loss, softcap)
    return _sampled_logits_loss(
        input, linear_weight, target, linear_bias, mode=ops.MODE_SOFTMAX,
        num_sampled=num_sampled, sampler=sampler, sampled=sampled, num_true=num_true,
        remove_accidental_hits=remove_accidental_hits, log_z=0.0, reduction=reduction,
        ignore_index=ignore_index, generator=generator, sparse=sparse, weight=weight,
        label_smoothing=label_smoothing, normalizer=normalizer)


def nce_loss(
    input: Tensor, linear_weight: Tensor, target: Tensor, *,
    linear_bias: Optional[Tensor] = None,
    weight: Optional[Tensor] = None,
    num_sampled: Optional[int] = None,
    sampler: Optional[Sampler] = None,
    sampled: Optional[SampledValues] = None,
    num_true: int = 1,
    remove_accidental_hits: bool = False,
    log_z=0.0,
    reduction: str = "mean", ignore_index: int = -100,
    generator: Optional[torch.Generator] = None, sparse: bool = False, normalizer=None,
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
        ignore_index=ignore_index, generator=generator, sparse=sparse, weight=weight,
        normalizer=normalizer)


@with_layer_keywords
class SampledSoftmaxLoss(SampledLayer):
    __doc__ = """Sampled softmax output layer (tf.nn.sampled_softmax_loss) over `num_classes`
    classes, `num_sampled` candidates per step shared by the batch (default sampler: log-uniform, or
    unigram^power when `counts` are given). In eval: the exact full softmax.

    Log-uniform assumes ids sorted by falling frequency; the layer warns once in training
    when its targets contradict that (see fastsoftmax.samplers.fit). Give `counts=` or
    sampler='uniform' for a vocabulary in any other order.

    Args:
        in_features: D, the size of each input row.
        num_classes: V, the number of classes.
        num_sampled: S, the candidates drawn per step (distinct, shared by the batch).
        remove_accidental_hits: leave a sampled class that equals a row's true class out of
            that row (default True; every such position, see sampled_softmax_loss).
        label_smoothing: eps (default 0.0). Eval: exactly F.cross_entropy's. Training: the
            row's target puts 1 - eps on its true class and spreads eps uniformly over its
            candidates (the true class and the sampled classes it keeps), with the
            logQ-corrected logits; `weight` weighs each candidate's term as F.cross_entropy
            weighs each class's. See fastsoftmax.losses._smoothing.""" + SAMPLER_ARGS.format(
        default="log-uniform") + COMMON_ARGS

    num_samples_arg = "num_sampled"

    def __init__(self, in_features: int, num_classes: int, num_sampled: int, *,
                 sampler: Union[Sampler, str, None] = None, counts=None, vocab=None,
                 power: float = 0.75, remove_accidental_hits: bool = True, sparse: bool = False,
                 **layer):
        super().__init__(in_features, num_classes, num_sampled, sampler=sampler, counts=counts,
                         vocab=vocab, power=power, sparse=sparse, default_sampler="log_uniform",
                         **layer)
        self.remove_accidental_hits = remove_accidental_hits

    def training_loss(self, input, target, generator=None):
        return sampled_softmax_loss(
            input, self.linear_weight, target, linear_bias=self.linear_bias,
            weight=self.weight, label_smoothing=self.label_smoothing,
            num_sampled=self.num_sampled, sampler=self.sampler, num_true=None,
            remove_accidental_hits=self.remove_accidental_hits, reduction=self.reduction,
            ignore_index=self.ignore_index, generator=generator, sparse=self.sparse)


@with_layer_keywords
class NCELoss(SampledLayer):
    __doc__ = """Noise-contrastive estimation output layer (tf.nn.nce_loss). Logits are shifted by
    -log_z (self-normalised when 0); with `learn_log_z` it is a Parameter. In eval: the exact
    full softmax.

    With a bias, it starts at -log(num_classes), so that exp(logits) sums to about 1 from the
    first step. With a zero bias every class starts num_classes times too likely and NCE spends
    its first thousands of steps pushing all scores down (a 2x200 LSTM on PTB, 400 SGD steps:
    validation perplexity 132,836 from a zero bias, 558 from -log V).

    In training `weight` scales each row's whole NCE loss (true and noise terms: the row is
    one example of its class) by the weight of its true class.

    Args:
        in_features: D, the size of each input row.
        num_classes: V, the number of classes.
        num_sampled: S, the noise samples per step (distinct, shared by the batch).
        log_z: the log-normaliser subtracted from every logit (default 0.0).
        learn_log_z: make log_z a learned Parameter (default False: a buffer).
        label_smoothing: only 0.0; any other value is refused (NCE is no cross entropy).
        """ + SAMPLER_ARGS.format(default="log-uniform") + \
        COMMON_ARGS

    num_samples_arg = "num_sampled"

    def __init__(self, in_features: int, num_classes: int, num_sampled: int, *,
                 sampler: Union[Sampler, str, None] = None, counts=None, vocab=None,
                 power: float = 0.75, log_z: float = 0.0, learn_log_z: bool = False,
                 sparse: bool = False, **layer):
        refuse_label_smoothing("NCELoss", layer.get("label_smoothing", 0.0))
        super().__init__(in_features, num_classes, num_sampled, sampler=sampler, counts=counts,
                         vocab=vocab, power=power, sparse=sparse, default_sampler="log_uniform",
                         **layer)
        if self.linear_bias is not None:
            nn.init.constant_(self.linear_bias, -math.log(self.num_classes))
        like = self.linear_weight
        value = torch.tensor(float(log_z), device=like.device,
                             dtype=torch.float64 if like.dtype == torch.float64 else torch.float32)
        if learn_log_z:
            self.log_z = nn.Parameter(value)
        else:
            self.register_buffer("log_z", value)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # torch.nn.LinearCrossEntropyLoss has no log_z: its state dict keeps the layer's own.
        state_dict.setdefault(prefix + "log_z", self.log_z.detach())
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def training_loss(self, input, target, generator=None):
        # Eval needs no override: NCE's normalised model is the softmax of the unshifted
        # logits (log_z cancels), which is what full_loss computes.
        return nce_loss(
            input, self.linear_weight, target, linear_bias=self.linear_bias, weight=self.weight,
            num_sampled=self.num_sampled, sampler=self.sampler, num_true=None,
            log_z=self.log_z, reduction=self.reduction, ignore_index=self.ignore_index,
            generator=generator, sparse=self.sparse)


__all__ = ["NCELoss", "SampledSoftmaxLoss", "nce_loss", "sampled_softmax_loss"]
