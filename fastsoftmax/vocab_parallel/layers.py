"""Vocabulary-parallel output layers: the single-process layers of fastsoftmax.nn with the
output embedding split by rows over the ranks of a process group. Rank r of a group of W
holds rows shard_range(V, W, r) of linear_weight [V, D] (and of linear_bias [V]); the
per-class `weight` [V] and a sampled layer's sampler tables are whole on every rank (one or
two numbers per class beside D).

Every rank of the group must call forward with the same input and target (the layers sum the
shards' contributions; they do not split the batch) and, for the sampled layers, with its
default generator (or the `generator` given) in the same state: each rank then draws the same
candidates itself, with no message at all, which is the cheapest exact way to share them. The
data-parallel dimension is a separate group (see fastsoftmax.models.lm.vocab_parallel).

Build one from a single-process layer with `shard_layer(layer, process_group)`: the same
options, this rank's rows of its weights, so the sharded layer computes what `layer` does.
"""

import hashlib
from typing import Optional, Tuple

import torch
import torch.distributed as dist
from torch import Tensor, nn

from .. import nn as fsnn
from ..losses._layer_parts import OutputLayer, SamplerTables
from ..losses._shapes import check_size, target_2d
from ..losses._streaming import CHUNK_BYTES
from ..losses.fused import check_fused
from ..losses._sampling import draw_candidates, draw_negatives
from . import functional as F
from .mappings import check_shards, group_rank, group_size


def shard_range(num_classes: int, world: int, rank: int) -> Tuple[int, int]:
    """(start, rows) of rank `rank`'s contiguous shard of `num_classes` rows over `world`
    ranks: the first V mod W ranks hold one row more, so sizes differ by at most one."""
    base, extra = divmod(num_classes, world)
    return rank * base + min(rank, extra), base + (1 if rank < extra else 0)


class VocabParallelLayer(OutputLayer):
    """The exact full softmax in training and eval over a row-sharded output embedding
    (subclasses change training). `process_group` None is the default (whole-world) group.
    An OutputLayer like the single-process layers: the same checks of the common arguments
    and the same forward (training loss in training mode, full_loss in eval)."""

    kind = "full"

    def __init__(self, in_features: int, num_classes: int, *, process_group=None,
                 bias: bool = False, device=None, dtype=None, reduction: str = "mean",
                 weight: Optional[Tensor] = None, ignore_index: Optional[int] = None,
                 label_smoothing: float = 0.0, z_loss: float = 0.0, softcap=None,
                 chunk_bytes: int = CHUNK_BYTES, check_targets: bool = True,
                 fused: Optional[bool] = None, _rows: Optional[Tensor] = None):
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("vocabulary-parallel layers need torch.distributed: call "
                               "torch.distributed.init_process_group first")
        super().__init__(in_features, num_classes, reduction=reduction,
                         ignore_index=ignore_index, label_smoothing=label_smoothing)
        self.group = process_group
        world, rank = group_size(process_group), group_rank(process_group)
        if num_classes < world:
            raise ValueError(f"cannot split {num_classes} classes over {world} ranks: every "
                             f"rank needs at least one")
        self.start, rows = shard_range(num_classes, world, rank)
        self.world, self.rank = world, rank
        self.z_loss, self.softcap, self.chunk_bytes = z_loss, softcap, chunk_bytes
        self.check_targets = bool(check_targets)
        self.fused = check_fused(fused)  # the exact loss's kernels per shard
        if _rows is not None:  # shard_layer's: this rank's rows of a given layer, no draw
            init = _rows.detach().clone()
        else:
            # Distinct rows per rank even when the ranks' generators agree (they must, for
            # the candidates): one draw from the shared stream keeps them in step, the rank
            # tells the shards apart.
            seed = int(torch.randint(2**62, (1,)))
            g = torch.Generator().manual_seed(int.from_bytes(hashlib.sha256(
                f"{seed}/{rank}".encode()).digest()[:7], "little"))
            init = torch.randn(rows, in_features, generator=g, dtype=dtype or torch.float32)
            init = init / in_features ** 0.5
        self.linear_weight = nn.Parameter(init.to(device))
        self.linear_bias = (nn.Parameter(torch.zeros(rows, device=device, dtype=init.dtype))
                            if bias else None)
        self.register_buffer("weight", None if weight is None else weight.to(device))
        check_shards(num_classes, in_features, self.start, rows, self.linear_weight.device,
                     process_group, has_bias=bias)

    @property
    def rows(self) -> int:
        return self.linear_weight.shape[0]

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, num_classes={self.num_classes}, rows "
                f"[{self.start}, {self.start + self.rows}) of rank {self.rank}/{self.world}")

    def training_loss(self, input, target, generator=None) -> Tensor:
        return self.full_loss(input, target)

    def full_loss(self, input: Tensor, target: Tensor, *, reduction: Optional[str] = None
                  ) -> Tensor:
        """The exact full-softmax cross entropy, identical on every rank of the group."""
        return F.vocab_parallel_full_softmax_loss(
            input, self.linear_weight, target, num_classes=self.num_classes, start=self.start,
            linear_bias=self.linear_bias, weight=self.weight,
            label_smoothing=self.label_smoothing, ignore_index=self.ignore_index,
            reduction=self.reduction if reduction is None else reduction,
            chunk_bytes=self.chunk_bytes, z_loss=self.z_loss, softcap=self.softcap,
            group=self.group, check_targets=self.check_targets, fused=self.fused)

    def log_prob(self, input: Tensor) -> Tensor:
        raise NotImplementedError(
            "a vocabulary-parallel layer does not build [*, V] log-probabilities on one rank; "
            "gather the weights with gather_weight() into a single-process layer for that")

    predict = log_prob

    def gather_weight(self) -> Tuple[Tensor, Optional[Tensor]]:
        """The whole linear_weight [V, D] (and linear_bias [V] or None) on every rank: an
        all-gather of the shards (padded to the largest, since they may differ by a row)."""
        most = shard_range(self.num_classes, self.world, 0)[1]
        out = []
        for t in (self.linear_weight, self.linear_bias):
            if t is None:
                out.append(None)
                continue
            pad = torch.zeros((most,) + tuple(t.shape[1:]), dtype=t.dtype, device=t.device)
            pad[:t.shape[0]] = t.detach()
            parts = [torch.empty_like(pad) for _ in range(self.world)]
            dist.all_gather(parts, pad, group=self.group)
            out.append(torch.cat([p[:shard_range(self.num_classes, self.world, r)[1]]
                                  for r, p in enumerate(parts)]))
        return out[0], out[1]


class VocabParallelSampledLayer(VocabParallelLayer):
    """Shared parts of the sampled layers: the sampler over the global V (whole on every rank),
    its sample count, and how the candidates are drawn (as the single-process layer draws).
    The count has its single-process twin's name (`num_samples_arg`): num_sampled, or
    num_negatives for negative sampling, whose negatives may repeat (so K may exceed V)."""

    num_samples_arg = "num_sampled"
    distinct_samples = True

    def __init__(self, in_features, num_classes, num_sampled, *, sampler, **layer):
        super().__init__(in_features, num_classes, **layer)
        name = self.num_samples_arg
        count = check_size(name, num_sampled)  # checked here, where it is owned
        if self.distinct_samples and count >= self.num_classes:
            raise ValueError(f"{name} ({count}) must be smaller than num_classes "
                             f"({self.num_classes}): the candidates are distinct classes; use "
                             f"VocabParallelFullSoftmaxLoss, the exact softmax, instead")
        setattr(self, name, count)
        if sampler.num_classes != num_classes:
            raise ValueError(f"the sampler draws from {sampler.num_classes} classes, the layer "
                             f"has {num_classes}: it must sample the global vocabulary")
        self.sampler_tables = SamplerTables(sampler.to(self.linear_weight.device))

    @property
    def sampler(self):
        return self.sampler_tables.sampler

    def _candidates(self, input, target, generator):
        lead = tuple(input.shape[:-1])
        t2 = target_2d(target, lead, None)
        safe = torch.where(t2 == self.ignore_index, torch.zeros_like(t2), t2)
        safe = safe.clamp(0, self.num_classes - 1)  # bad ids are refused by the loss
        return draw_candidates(self.sampler, safe, self.num_sampled, generator)


class VocabParallelSampledSoftmaxLoss(VocabParallelSampledLayer):
    """SampledSoftmaxLoss over a row-sharded output embedding: in training the sampled
    softmax over `num_sampled` distinct candidates drawn by `sampler` from the global V
    (each rank draws the same ones), with accidental hits removed; in eval the exact full
    softmax. The other keywords are VocabParallelLayer's."""

    kind = "sampled"
    remove_accidental_hits = True

    def training_loss(self, input, target, generator=None, sampled=None):
        if sampled is None:
            sampled = self._candidates(input, target, generator)
        return F.vocab_parallel_sampled_softmax_loss(
            input, self.linear_weight, target, num_classes=self.num_classes, start=self.start,
            sampled=sampled, linear_bias=self.linear_bias, num_true=None,
            remove_accidental_hits=self.remove_accidental_hits, reduction=self.reduction,
            ignore_index=self.ignore_index, group=self.group, check_targets=self.check_targets)


class VocabParallelNCELoss(VocabParallelSampledLayer):
    """NCELoss over a row-sharded output embedding: in training noise-contrastive estimation
    against `num_sampled` distinct candidates drawn by `sampler` from the global V (each rank
    draws the same ones), with the log normaliser `log_z` (a buffer); in eval the exact full
    softmax. The other keywords are VocabParallelLayer's."""

    kind = "nce"
    remove_accidental_hits = False

    def __init__(self, in_features, num_classes, num_sampled, *, log_z: float = 0.0, **layer):
        super().__init__(in_features, num_classes, num_sampled, **layer)
        like = self.linear_weight
        self.register_buffer("log_z", torch.tensor(float(log_z), device=like.device, dtype=(
            torch.float64 if like.dtype == torch.float64 else torch.float32)))

    def training_loss(self, input, target, generator=None, sampled=None):
        if sampled is None:
            sampled = self._candidates(input, target, generator)
        return F.vocab_parallel_nce_loss(
            input, self.linear_weight, target, num_classes=self.num_classes, start=self.start,
            sampled=sampled, linear_bias=self.linear_bias, num_true=None, log_z=self.log_z,
            remove_accidental_hits=self.remove_accidental_hits, reduction=self.reduction,
            ignore_index=self.ignore_index, group=self.group, check_targets=self.check_targets)


class VocabParallelNegativeSamplingLoss(VocabParallelSampledLayer):
    """NegativeSamplingLoss over a row-sharded output embedding: in training word2vec's
    negative sampling with `num_negatives` negatives per row drawn by `sampler` from the
    global V (they may repeat, so K may exceed V; each rank draws the same ones); in eval the
    exact full softmax. The other keywords are VocabParallelLayer's."""

    kind = "neg"
    shared = False
    num_samples_arg, distinct_samples = "num_negatives", False  # as NegativeSamplingLoss

    def __init__(self, in_features, num_classes, num_negatives, **layer):
        super().__init__(in_features, num_classes, num_negatives, **layer)

    def training_loss(self, input, target, generator=None, negatives=None):
        if negatives is None:
            negatives = draw_negatives(self.sampler, input, self.num_negatives, self.shared,
                                       generator)
        return F.vocab_parallel_negative_sampling_loss(
            input, self.linear_weight, target, num_classes=self.num_classes, start=self.start,
            negatives=negatives, reduction=self.reduction, ignore_index=self.ignore_index,
            group=self.group, check_targets=self.check_targets)


_KINDS = {
    fsnn.FullSoftmaxLoss: VocabParallelLayer,
    fsnn.SampledSoftmaxLoss: VocabParallelSampledSoftmaxLoss,
    fsnn.NCELoss: VocabParallelNCELoss,
    fsnn.NegativeSamplingLoss: VocabParallelNegativeSamplingLoss,
}


def shard_layer(layer: nn.Module, process_group=None) -> VocabParallelLayer:
    """The vocabulary-parallel twin of the single-process `layer` (FullSoftmaxLoss,
    SampledSoftmaxLoss, NCELoss or NegativeSamplingLoss) over `process_group`: its options,
    and this rank's rows of its linear_weight and linear_bias (copied; `layer` may then be
    dropped). Every rank must pass an equal layer. The hierarchical softmax is refused (see
    docs/scaling.md for why it does not shard by rows)."""
    cls = _KINDS.get(type(layer))
    if cls is None:
        raise TypeError(f"shard_layer takes FullSoftmaxLoss, SampledSoftmaxLoss, NCELoss or "
                        f"NegativeSamplingLoss, got {type(layer).__name__} (the hierarchical "
                        f"softmax does not shard by vocabulary rows: see docs/scaling.md)")
    if getattr(layer, "sparse", False):
        raise ValueError("shard_layer: sparse gradients are not supported vocabulary-parallel "
                         "(each rank's shard is already the rows it owns); build with "
                         "sparse=False")
    w = layer.linear_weight
    start, rows = shard_range(layer.num_classes, group_size(process_group),
                              group_rank(process_group))
    options = dict(_rows=w[start:start + rows], process_group=process_group, bias=layer.linear_bias is not None,
                   device=w.device, dtype=w.dtype, reduction=layer.reduction,
                   weight=layer.weight, ignore_index=layer.ignore_index,
                   label_smoothing=layer.label_smoothing, chunk_bytes=layer.chunk_bytes,
                   fused=layer.fused)
    if cls is VocabParallelLayer:
        options.update(z_loss=layer.z_loss, softcap=layer.softcap)
        out = cls(layer.in_features, layer.num_classes, **options)
    else:
        if layer.label_smoothing or layer.weight is not None:
            raise ValueError(f"shard_layer: {type(layer).__name__} with a per-class weight or "
                             f"label smoothing is not supported vocabulary-parallel (only "
                             f"its eval path would honour them); FullSoftmaxLoss supports both")
        count = getattr(layer, layer.num_samples_arg)  # num_sampled or num_negatives
        out = cls(layer.in_features, layer.num_classes, count, sampler=layer.sampler, **options)
        if cls is VocabParallelSampledSoftmaxLoss:
            out.remove_accidental_hits = layer.remove_accidental_hits
        elif cls is VocabParallelNegativeSamplingLoss:
            out.shared = layer.shared
        else:
            out.remove_accidental_hits = False
            if isinstance(layer.log_z, nn.Parameter):
                del out.log_z  # the buffer gives way to a learned (replicated) Parameter
                out.log_z = nn.Parameter(layer.log_z.detach().clone())
            else:
                out.log_z.copy_(layer.log_z)
    with torch.no_grad():
        rows = slice(out.start, out.start + out.rows)
        out.linear_weight.copy_(w[rows])
        if out.linear_bias is not None:
            out.linear_bias.copy_(layer.linear_bias[rows])
    return out
