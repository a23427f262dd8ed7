"""In-batch and mixed negatives with logQ correction: the two-tower retrieval loss, its
functional and its module InBatchSoftmaxLoss.

A batch holds N (query, item) pairs; every query is scored against the batch's N items plus M
shared extra items (mixed negative sampling), and row i's positive is item i:

    logits[i, j] = query_i . item_j / temperature - log_q[j]        [N, N + M]
    loss_i       = logsumexp_j logits[i, j] - logits[i, i]

log_q[j] is the log of how often item j is drawn as a candidate (Yi et al., RecSys 2019:
s^c(x, y_j) = s(x, y_j) - log p_j). The correction comes *after* the temperature, as in the
paper, whose s(x, y) already includes the 1 / temperature of its normalised embeddings, and as
in TensorFlow Recommenders' Retrieval task today (its first releases subtracted log p before
dividing by the temperature, which shrinks the correction by that factor).

Composed from torch ops: one matmul gives the [N, N + M] logits, and nothing [N, N, D] exists.
"""

import math
import numbers
from typing import Optional

import torch
import torch.nn.functional as TF
from torch import Tensor, nn

from ._layer_parts import SamplerTables
from ._shapes import check_generator, check_reduction
from ._streaming import acc_dtype
from ..samplers.frequency import FrequencyEstimator
from ..samplers import Sampler


def _vector(t, name: str, n: int, device, integer: bool) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if integer and (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool):
        raise TypeError(f"{name} must be an integer tensor of item ids, got {t.dtype}")
    if not integer and not t.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {t.dtype}")
    if tuple(t.shape) != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"{name} is on {t.device} but query is on {device}")
    return t


def _embeddings(t, name: str, like: Optional[Tensor]) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if t.dim() != 2:
        raise ValueError(f"{name} must be 2-D [rows, D], got shape {tuple(t.shape)}")
    if not t.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {t.dtype}")
    if like is not None:
        if t.shape[1] != like.shape[1]:
            raise ValueError(f"{name} has {t.shape[1]} features but query has {like.shape[1]}")
        if t.device != like.device:
            raise ValueError(f"{name} is on {t.device} but query is on {like.device}")
        if t.dtype != like.dtype:
            raise TypeError(f"{name} is {t.dtype} but query is {like.dtype}")
    return t


def _check_temperature(temperature) -> None:
    if isinstance(temperature, Tensor):
        if temperature.numel() != 1:
            raise ValueError(f"temperature must be a number, got shape {tuple(temperature.shape)}")
    elif isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not (
            math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a positive finite number, got {temperature!r}")


def _check_extras(query, item_ids, remove_accidental_hits, extra_items, extra_ids, log_q,
                  extra_log_q):
    """(extra_items, extra_ids, extra_log_q) checked against the batch's query, item_ids and
    log_q (all None without extra items)."""
    if extra_items is None:
        for name, value in (("extra_ids", extra_ids), ("extra_log_q", extra_log_q)):
            if value is not None:
                raise ValueError(f"{name} is given without extra_items")
        return None, None, None
    extra_items = _embeddings(extra_items, "extra_items", query)
    m, device = extra_items.shape[0], query.device
    if extra_ids is not None:
        if item_ids is None:
            raise ValueError("extra_ids is given without item_ids: ids are only compared "
                             "with the row's positive item id")
        extra_ids = _vector(extra_ids, "extra_ids", m, device, True)
    elif item_ids is not None and remove_accidental_hits:
        raise ValueError("remove_accidental_hits needs extra_ids to compare the extra items "
                         "with each row's positive (give extra_ids, or "
                         "remove_accidental_hits=False)")
    if (log_q is None) != (extra_log_q is None):
        raise ValueError("give both log_q and extra_log_q (in the same unit), or neither: "
                         "correcting only some columns biases the softmax")
    if extra_log_q is not None:
        extra_log_q = _vector(extra_log_q, "extra_log_q", m, device, False)
    return extra_items, extra_ids, extra_log_q


def _column_bias(query, n, item_ids, log_q, extra_ids, extra_log_q, remove_accidental_hits):
    """One additive [N, N + M] bias (or [1, N + M], or None) carrying both -log_q and the
    -inf of accidental hits, in the accumulation dtype."""
    acc, shift = acc_dtype(query), None
    if log_q is not None:
        lq = log_q if extra_log_q is None else torch.cat([log_q, extra_log_q])
        shift = -lq.to(acc)[None, :]
    if remove_accidental_hits and item_ids is not None:
        ids = item_ids if extra_ids is None else torch.cat([item_ids, extra_ids.to(item_ids.dtype)])
        hits = item_ids[:, None] == ids[None, :]
        hits[:, :n].fill_diagonal_(False)  # the row's own positive stays
        fill = torch.tensor(-math.inf, dtype=acc, device=query.device)
        shift = torch.where(hits, fill, fill.new_zeros(()) if shift is None else shift)
    return shift


def _logits(query, candidates, column_bias, temperature):
    """query . candidates / temperature + bias, [N, N + M], in float32 (float64)."""
    scale = not (isinstance(temperature, (int, float)) and temperature == 1)
    if query.dtype in (torch.float32, torch.float64) and column_bias is not None and not \
            torch.is_autocast_enabled(query.device.type):
        # 1/temperature on the [N, D] queries and the bias added by the GEMM itself: 20-25%
        # less time than dividing and subtracting on [N, N + M] (measured on 2 loaded cores)
        q = query * (1.0 / temperature) if scale else query
        return torch.addmm(column_bias.expand(query.shape[0], candidates.shape[0]), q,
                           candidates.t())
    # float16/bfloat16: the matmul in the input's dtype, the bias in float32 after it
    logits = torch.matmul(query, candidates.t())
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    if scale:
        logits = logits / temperature
    return logits if column_bias is None else logits + column_bias


def in_batch_softmax_loss(
    query: Tensor,
    item: Tensor,
    *,
    item_ids: Optional[Tensor] = None,
    log_q: Optional[Tensor] = None,
    temperature: float = 1.0,
    extra_items: Optional[Tensor] = None,
    extra_ids: Optional[Tensor] = None,
    extra_log_q: Optional[Tensor] = None,
    remove_accidental_hits: bool = True,
    reduction: str = "mean",
) -> Tensor:
    """Softmax cross entropy of each query against the batch's items (in-batch negatives) and
    optional shared extra items (mixed negatives), with logQ correction.

    Args:
        query: [N, D] query-tower outputs. item: [N, D] item-tower outputs; row i's positive
            is item i.
        item_ids: int [N], the items' ids; needed to remove accidental hits.
        log_q: float [N], the log of each batch item's sampling frequency (log of a
            probability or of an expected count per batch: a constant offset cancels in the
            softmax). With extra items, give log_q and extra_log_q in the same unit: the log
            of the expected number of times the item is among the step's N + M candidates,
            log(batch count + M * q_extra), is the consistent choice (InBatchSoftmaxLoss
            does this).
        temperature: logits are query . item / temperature - log_q (correction after the
            temperature, as Yi et al.). A positive number, or a 0-d tensor to learn it.
        extra_items: [M, D] extra negatives shared by every row; extra_ids int [M] and
            extra_log_q float [M] as item_ids and log_q.
        remove_accidental_hits: a column holding the same id as the row's positive (another
            batch item or an extra) is left out of that row's softmax. Needs item_ids (with
            extra items, extra_ids too); without item_ids nothing is removed.
        reduction: 'mean' over rows (NaN for an empty batch, as F.cross_entropy), 'sum', or
            'none' for the [N] per-row losses.

    The loss is computed in float32 for float16/bfloat16 inputs (float64 for float64) and
    returned in query's dtype.
    """
    query = _embeddings(query, "query", None)
    item = _embeddings(item, "item", query)
    n, device = query.shape[0], query.device
    if item.shape[0] != n:
        raise ValueError(f"item has {item.shape[0]} rows but query has {n}: row i of item "
                         "is the positive of query row i")
    check_reduction(reduction)
    _check_temperature(temperature)
    if item_ids is not None:
        item_ids = _vector(item_ids, "item_ids", n, device, True)
    if log_q is not None:
        log_q = _vector(log_q, "log_q", n, device, False)
    extra_items, extra_ids, extra_log_q = _check_extras(
        query, item_ids, remove_accidental_hits, extra_items, extra_ids, log_q, extra_log_q)
    candidates = item if extra_items is None else torch.cat([item, extra_items])
    column_bias = _column_bias(query, n, item_ids, log_q, extra_ids, extra_log_q,
                               remove_accidental_hits)
    logits = _logits(query, candidates, column_bias, temperature)
    loss = TF.cross_entropy(logits, torch.arange(n, device=device), reduction=reduction)
    return loss if torch.is_autocast_enabled(device.type) else loss.to(query.dtype)


class InBatchSoftmaxLoss(nn.Module):
    """The in-batch softmax loss of two-tower retrieval, with logQ correction from a
    streaming frequency estimate and optional mixed negatives.

    Args:
        temperature: logits are query . item / temperature - log_q.
        estimator: a FrequencyEstimator (a submodule: saved with this module's state). In
            training mode every forward first updates it with the batch's item_ids, then
            subtracts its log frequency (expected hits per step) from each column. In eval
            mode it is read, not updated.
        num_extra: M extra negatives per step shared by every row, drawn (with replacement)
            from `sampler` and embedded by `item_encoder`.
        sampler: a fastsoftmax Sampler over the item ids (needed when num_extra > 0); its
            tables are buffers of `sampler_tables`, saved and moved with this module.
        item_encoder: callable ids int64 [M] -> [M, D], normally the item tower. It is not
            registered as a submodule: its parameters stay with your model.
        remove_accidental_hits, reduction: as in_batch_softmax_loss.

    With extra items and an estimator, every column c is corrected by the log of its expected
    number of appearances among the step's candidates, log(1/B[c] + M * q_sampler(c)), the
    mixture of the batch (estimated) and the sampler (exact); without an estimator no column
    is corrected unless `forward` gets log_q (allowed without extra items only).

    It is an nn.Module, not an OutputLayer: it owns no output embedding and no classes (both
    towers are the caller's), and its forward takes (query, item, item_ids), not
    (input, target), so none of OutputLayer's interface (full_loss, log_prob, predict, the
    heads' registry) applies to it.
    """

    def __init__(self, temperature: float = 1.0, *, estimator: Optional[FrequencyEstimator] = None,
                 num_extra: int = 0, sampler: Optional[Sampler] = None, item_encoder=None,
                 remove_accidental_hits: bool = True, reduction: str = "mean"):
        super().__init__()
        if estimator is not None and not isinstance(estimator, FrequencyEstimator):
            raise TypeError(f"estimator must be a FrequencyEstimator, got "
                            f"{type(estimator).__name__}")
        if isinstance(num_extra, bool) or not isinstance(num_extra, numbers.Integral) \
                or num_extra < 0:
            raise ValueError(f"num_extra must be a non-negative int, got {num_extra!r}")
        num_extra = int(num_extra)
        if num_extra:
            if not isinstance(sampler, Sampler):
                raise TypeError("num_extra > 0 needs sampler= (a fastsoftmax Sampler over the "
                                f"item ids), got {type(sampler).__name__}")
            if not callable(item_encoder):
                raise TypeError("num_extra > 0 needs item_encoder= (ids -> item embeddings)")
        elif sampler is not None or item_encoder is not None:
            raise ValueError("sampler and item_encoder are used only with num_extra > 0")
        check_reduction(reduction)
        _check_temperature(temperature)
        self.temperature, self.estimator, self.num_extra = temperature, estimator, num_extra
        # The sampler's tables are buffers, saved, loaded, copied and moved with the module.
        self.sampler_tables = None if sampler is None else SamplerTables(sampler)
        self._item_encoder = [item_encoder]
        self.remove_accidental_hits, self.reduction = bool(remove_accidental_hits), reduction

    @property
    def sampler(self) -> Optional[Sampler]:
        """The sampler of the extra negatives (its tables: the buffers of `sampler_tables`)."""
        return None if self.sampler_tables is None else self.sampler_tables.sampler

    def forward(self, query: Tensor, item: Tensor, item_ids: Optional[Tensor] = None, *,
                log_q: Optional[Tensor] = None,
                generator: Optional[torch.Generator] = None) -> Tensor:
        check_generator(generator)
        if self.estimator is not None:
            if item_ids is None:
                raise ValueError("an estimator needs item_ids to count the items")
            if log_q is not None:
                raise ValueError("log_q is given but the estimator supplies it: give one")
            if self.training:
                self.estimator.update(item_ids)
        extra = extra_ids = extra_log_q = None
        if self.num_extra:
            if log_q is not None:
                raise ValueError("with num_extra > 0 the correction must cover the extra items "
                                 "too: use an estimator, or call in_batch_softmax_loss")
            if self.sampler.device != query.device:
                raise ValueError(f"the sampler is on {self.sampler.device} but query is on "
                                 f"{query.device}: move the module with .to(device)")
            extra_ids = self.sampler.sample(self.num_extra, generator=generator)
            extra = self._item_encoder[0](extra_ids)
            if self.estimator is not None:
                log_q = self._mixture_log_count(item_ids, "item_ids")
                extra_log_q = self._mixture_log_count(extra_ids, "extra ids")
            if item_ids is None:
                extra_ids = None
        elif self.estimator is not None:
            log_q = self.estimator.log_q(item_ids)
        return in_batch_softmax_loss(
            query, item, item_ids=item_ids, log_q=log_q, temperature=self.temperature,
            extra_items=extra, extra_ids=extra_ids, extra_log_q=extra_log_q,
            remove_accidental_hits=self.remove_accidental_hits, reduction=self.reduction)

    def _mixture_log_count(self, ids: Tensor, name: str) -> Tensor:
        """log(expected hits per step in the batch + num_extra * sampler probability)."""
        q = self.sampler._prob_of(self.sampler._check_ids(ids, name))
        return (self.estimator.frequency(ids) + self.num_extra * q).log().float()

    def extra_repr(self) -> str:
        return (f"temperature={self.temperature}, num_extra={self.num_extra}, "
                f"sampler={self.sampler!r}, remove_accidental_hits="
                f"{self.remove_accidental_hits}, reduction={self.reduction!r}")


__all__ = ["InBatchSoftmaxLoss", "in_batch_softmax_loss"]
