"""Candidate samplers: alias tables (any weights, unigram^power), log-uniform and uniform.

All draws come from one Philox stream keyed by a seed taken from a CPU torch.Generator, so
results repeat under torch.manual_seed and agree between CPU and CUDA. `candidates` follows
TensorFlow's candidate samplers (tf.random.*_candidate_sampler).
"""

import copy
import math
from typing import Dict, NamedTuple, Optional, Tuple, Union

import torch
from torch import Tensor

from .. import ops
from ..ops import _checks
from ._inputs import _as_int, _shape, _weights_tensor

DeviceLike = Union[str, torch.device, None]


class SampledValues(NamedTuple):
    """What a candidate sampler returns, as TensorFlow's candidate samplers do.

    sampled_candidates: int64 [S]; true_expected_count: float32, shaped like true_classes;
    sampled_expected_count: float32 [S].
    """

    sampled_candidates: Tensor
    true_expected_count: Tensor
    sampled_expected_count: Tensor


def _unique_expected_count(p: Tensor, tries: Tensor, num_sampled: int) -> Tensor:
    """TensorFlow's ExpectedCountHelper: the chance that a class shows up in num_tries draws,
    -expm1(num_tries * log1p(-p)), except p * num_sampled when nothing was rejected."""
    tries = tries.double()
    return torch.where(
        tries == num_sampled, num_sampled * p, -torch.expm1(tries * torch.log1p(-p))
    )


class Sampler:
    """Base class: a distribution over classes 0..num_classes-1 that draws natively."""

    _kind: int

    def __init__(self, num_classes: int, device: DeviceLike):
        num_classes = _as_int(num_classes, "num_classes")
        if num_classes <= 0:
            raise ValueError(f"num_classes must be positive, got {num_classes}")
        self.num_classes = num_classes
        device = torch.device(device if device is not None else "cpu")
        self._table = (torch.empty(0, device=device), torch.empty(0, device=device))
        # As tensors report it ('cuda' is 'cuda:N'), so that device checks compare equal.
        self.device = self._table[0].device

    # -- distribution -------------------------------------------------------------------
    def _prob_of(self, ids: Tensor) -> Tensor:
        """float64 probability of each (already validated) id."""
        raise NotImplementedError

    @property
    def probs(self) -> Tensor:
        """float32 [V], sums to 1."""
        ids = torch.arange(self.num_classes, device=self.device)
        return self._prob_of(ids).float()

    def _check_ids(self, ids, name: str) -> Tensor:
        if not isinstance(ids, Tensor):
            try:  # a Python list, tuple, int or numpy array of ids
                ids = torch.as_tensor(ids, device=self.device)
            except (TypeError, ValueError, RuntimeError):
                raise TypeError(
                    f"{name} must be a tensor or a list of int ids, got {type(ids).__name__}"
                ) from None
            if ids.numel() == 0:
                ids = ids.long()
        if ids.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"{name} must be an int64 (or int32) tensor, got {ids.dtype}")
        if ids.device != self.device:
            raise ValueError(f"{name} is on {ids.device} but the sampler is on {self.device}")
        checks = _checks.pending()
        if checks is not None and _checks.on_device(ids):  # no host sync in a step
            return checks.ids(ids.long(), self.num_classes, name)
        if ids.numel() and bool(((ids < 0) | (ids >= self.num_classes)).any()):
            lo, hi = int(ids.min()), int(ids.max())
            raise ValueError(
                f"{name} must lie in [0, {self.num_classes}); found values in [{lo}, {hi}]"
            )
        return ids.long()

    def log_prob(self, ids: Tensor) -> Tensor:
        """float32 log-probability of each id (same shape)."""
        ids = self._check_ids(ids, "ids")
        return self._prob_of(ids).log().float()

    # -- drawing ------------------------------------------------------------------------
    def sample(self, *shape, generator: Optional[torch.Generator] = None) -> Tensor:
        """int64 ids of the given shape, drawn independently with replacement."""
        shape = _shape(shape)
        seed = ops.draw_seed(generator, self.device)
        prob, alias = self._table
        return ops.sample(prob, alias, seed, self.num_classes, self._kind, shape)

    def candidates(
        self,
        true_classes: Tensor,
        num_sampled: int,
        *,
        unique: bool = True,
        generator: Optional[torch.Generator] = None,
    ) -> SampledValues:
        """TensorFlow candidate-sampler semantics.

        One set of `num_sampled` candidates (distinct when `unique`, by rejection) and the
        expected number of times each true and sampled class appears in it: `num_sampled * p`
        without `unique`, `1 - (1 - p)^num_tries` with it, num_tries being every draw taken
        (like TensorFlow, `num_sampled * p` also when no draw was rejected).
        """
        true_classes = self._check_ids(true_classes, "true_classes")
        return self._draw_candidates(true_classes, num_sampled, unique, generator)

    def _draw_candidates(self, true_classes: Tensor, num_sampled: int, unique: bool,
                         generator: Optional[torch.Generator]) -> SampledValues:
        """`candidates` without the id check (a host sync), for callers whose ids are checked
        elsewhere (the loss ops) and for tracing under torch.compile."""
        num_sampled = _as_int(num_sampled, "num_sampled")
        if num_sampled <= 0:
            raise ValueError(f"num_sampled must be positive, got {num_sampled}")
        if unique and num_sampled > self._num_possible:
            raise ValueError(
                f"cannot draw {num_sampled} distinct candidates: only {self._num_possible} "
                "classes have non-zero probability (use unique=False or fewer samples)"
            )
        seed = ops.draw_seed(generator, self.device)
        prob, alias = self._table
        p_true = self._prob_of(true_classes)
        if unique:
            sampled, tries = ops.sample_unique(
                prob, alias, seed, self.num_classes, self._kind, num_sampled
            )
            true_count = _unique_expected_count(p_true, tries, num_sampled)
            sampled_count = _unique_expected_count(self._prob_of(sampled), tries, num_sampled)
        else:
            sampled = ops.sample(prob, alias, seed, self.num_classes, self._kind, (num_sampled,))
            true_count = num_sampled * p_true
            sampled_count = num_sampled * self._prob_of(sampled)
        return SampledValues(sampled, true_count.float(), sampled_count.float())

    @property
    def _num_possible(self) -> int:
        return self.num_classes

    # -- placement ----------------------------------------------------------------------
    def to(self, device: DeviceLike) -> "Sampler":
        """The same distribution on another device (tables copied, never rebuilt)."""
        if isinstance(device, torch.dtype):
            raise TypeError(
                f"a sampler moves between devices only, it has no dtype to change (got "
                f"{device}); its tables stay float32/int32 and ids int64 (use .to('cuda') "
                "or .to('cpu'))"
            )
        if not isinstance(device, (str, torch.device, int)) or isinstance(device, bool):
            raise TypeError(f"sampler.to takes a device, got {type(device).__name__}")
        device = torch.device(device)
        if device == self.device:
            return self
        return self._with_tensors({k: v.to(device) for k, v in self._tensors().items()})

    def _tensors(self) -> Dict[str, Tensor]:
        """Every tensor that defines the distribution, by name: the draw table and any tensor
        attribute of a subclass. An output layer keeps them as buffers (SamplerTables), so
        that its state_dict, .to(), copy.deepcopy and torch.save carry the sampler."""
        tensors = self._table_tensors()
        tensors.update((name.lstrip("_"), value) for name, value in vars(self).items()
                       if isinstance(value, Tensor))
        return tensors

    def _with_tensors(self, tensors: Dict[str, Tensor]) -> "Sampler":
        """The same kind of sampler drawing from `tensors` (named as by `_tensors`, all on one
        device); nothing is rebuilt."""
        other = copy.copy(self)
        for name, value in vars(self).items():
            if isinstance(value, Tensor):
                setattr(other, name, tensors[name.lstrip("_")])
        other._table = other._table_from(tensors)
        other.device = other._table[0].device
        return other

    def _table_tensors(self) -> Dict[str, Tensor]:
        return {"prob_table": self._table[0], "alias_table": self._table[1]}

    def _table_from(self, tensors: Dict[str, Tensor]) -> Tuple[Tensor, Tensor]:
        return tensors["prob_table"], tensors["alias_table"]

    def __getstate__(self):
        # The table may be views of another tensor (AliasSampler's entries), which pickle
        # (torch.save) refuses beside that tensor as another dtype: rebuilt on load.
        return dict(vars(self), _table=self._table_tensors() or None)

    def __setstate__(self, state):
        vars(self).update(state)
        self._table = self._table_from(dict(self._table or {}, **{
            name.lstrip("_"): value for name, value in state.items()
            if isinstance(value, Tensor)}))

    def _forget_derived(self) -> None:
        """Drops what a subclass derived from its tensors, after new values were copied into
        them (recomputed when next needed)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_classes={self.num_classes}, device={self.device})"


def interleaved_table(prob: Tensor, alias: Tensor) -> Tensor:
    """The alias table as AliasSampler keeps it: int32 [V, 2], one 8-byte entry (prob's bits,
    alias) a class, so that a draw reads one place instead of two."""
    return torch.stack((prob.view(torch.int32), alias), 1)


class AliasSampler(Sampler):
    """Any non-negative finite weights with a positive sum, drawn with a Walker/Vose alias
    table built natively on `device` in O(V) and sampled in O(1) per draw.

    The table reproduces `weights / weights.sum()` to float32 rounding, also for V in the tens
    of millions and for heavily skewed (Zipf) weights.
    """

    _kind = ops.KIND_ALIAS

    def __init__(self, weights, *, vocab=None, device: DeviceLike = None):
        weights = _weights_tensor(weights, "weights", vocab)
        if weights.dtype == torch.bool or weights.is_complex():
            raise TypeError(f"weights must be real numbers, got {weights.dtype}")
        if not weights.is_floating_point():
            weights = weights.double()  # integer counts are fine
        if device is None:
            device = weights.device
        weights = weights.to(device)
        if weights.dim() != 1:
            raise ValueError(f"weights must be 1-D, got shape {tuple(weights.shape)}")
        super().__init__(weights.numel() if weights.numel() else 1, device)
        # The native build validates (finite, non-negative, not all zero, non-empty).
        prob, alias = ops.alias_build(weights)
        # The draws are bound by their random reads of the table: one entry a class.
        self._entries = interleaved_table(prob, alias)
        self._table = self._table_from({"entries": self._entries})
        w = weights.double()
        self._probs = (w / w.sum()).float()
        self._possible: Optional[int] = self._count_possible()

    @property
    def probs(self) -> Tensor:
        return self._probs

    @property
    def alias_table(self) -> Tuple[Tensor, Tensor]:
        """The Walker/Vose table (prob float32 [V], alias int32 [V]) the draws read; class i
        keeps its bucket with probability prob[i] and passes it to alias[i] otherwise. As
        built, the two are the interleaved columns of one [V, 2] buffer (stride 2; after
        .to() of each half, two flat arrays); the native ops take either. Treat it as
        read-only."""
        return self._table

    def _prob_of(self, ids: Tensor) -> Tensor:
        return self._probs[ids].double()

    def _table_tensors(self) -> Dict[str, Tensor]:
        return {}  # the table is views of _entries, which _tensors names

    def _table_from(self, tensors: Dict[str, Tensor]) -> Tuple[Tensor, Tensor]:
        entries = tensors["entries"]
        return entries[:, 0].view(torch.float32), entries[:, 1]

    def _count_possible(self) -> int:
        """Classes the table can draw: a positive weight below float32 resolution of its
        bucket gets none of the mass, and counting it would let unique draws chase it for
        2^32 tries. c has mass when it keeps some of its own bucket or some bucket that does
        not keep all of its own passes to c (masks, not float64 masses: V can be 10^9). A host
        sync: done when the table is built, and again after new values are loaded."""
        prob, alias = self._table
        possible = prob > 0
        possible[alias[prob < 1].long()] = True
        return int(possible.sum())

    @property
    def _num_possible(self) -> int:
        if self._possible is None:
            self._possible = self._count_possible()
        return self._possible

    def _forget_derived(self) -> None:
        self._possible = None


class UnigramSampler(AliasSampler):
    """counts ** power, as word2vec's negative-sampling table and TensorFlow's
    fixed_unigram_candidate_sampler (distortion = power); ids below num_reserved_ids get
    probability 0."""

    def __init__(
        self,
        counts,
        power: float = 0.75,
        *,
        num_reserved_ids: int = 0,
        vocab=None,
        device: DeviceLike = None,
    ):
        counts = _weights_tensor(counts, "counts", vocab)
        if counts.dtype == torch.bool or counts.is_complex():
            raise TypeError(f"counts must be real numbers, got {counts.dtype}")
        if not counts.is_floating_point():
            counts = counts.double()
        if not math.isfinite(power) or power < 0:
            raise ValueError(f"power must be a finite non-negative number, got {power}")
        if not 0 <= num_reserved_ids <= counts.numel():
            raise ValueError(
                f"num_reserved_ids must be in [0, {counts.numel()}], got {num_reserved_ids}"
            )
        if counts.dim() == 1 and counts.numel() and bool((counts < 0).any()):
            raise ValueError("counts must be non-negative (found a negative count)")
        weights = counts.double() ** power
        if num_reserved_ids:
            weights[:num_reserved_ids] = 0.0
        super().__init__(weights, device=device)
        self.power = power
        self.num_reserved_ids = num_reserved_ids


class LogUniformSampler(Sampler):
    """P(c) = log((c + 2) / (c + 1)) / log(V + 1): the Zipfian sampler of TensorFlow's
    log_uniform_candidate_sampler, for class ids sorted by decreasing frequency.
    Drawn by inversion; no table."""

    _kind = ops.KIND_LOG_UNIFORM

    def __init__(self, num_classes: int, *, device: DeviceLike = None):
        super().__init__(num_classes, device)

    def _prob_of(self, ids: Tensor) -> Tensor:
        c = ids.double()
        return torch.log1p(1.0 / (c + 1.0)) / math.log1p(self.num_classes)


class UniformSampler(Sampler):
    """P(c) = 1 / V."""

    _kind = ops.KIND_UNIFORM

    def __init__(self, num_classes: int, *, device: DeviceLike = None):
        super().__init__(num_classes, device)

    def _prob_of(self, ids: Tensor) -> Tensor:
        return torch.full(ids.shape, 1.0 / self.num_classes, dtype=torch.float64, device=ids.device)
