"""A cheap check that training targets fit the log-uniform sampler's assumption.

LogUniformSampler draws class c with P(c) = log((c + 2) / (c + 1)) / log(V + 1): it assumes
ids sorted by falling frequency (id 0 the most frequent). Tokenizer vocabularies are rarely
sorted, and with randomly numbered classes the sampled losses train much worse without any
error (a 300-step PTB run: validation perplexity 718 instead of 426).

The statistic: the mean negative log-likelihood of the targets under the log-uniform
distribution, H = -mean log P(target), against log V, that of the uniform distribution. For
ids sorted by a Zipfian frequency, H is well below log V (log-uniform is a good fit); for
randomly numbered ids, P(target) is P at a random id and H is about log V - 1 + log log V,
above log V for every V > 15. H > log V means the log-uniform guess fits the targets worse
than not guessing at all: the ids contradict the assumption. The check costs one log and one
sum over the targets of the first batches, on their device, and one host synchronisation when
it decides (after `min_targets` rows); then it stops.
"""

import math
import warnings

import torch
from torch import Tensor

from . import LogUniformSampler

MIN_TARGETS = 4096


class LogUniformFitCheck:
    """Accumulates H over the first training targets and warns once if H > log V."""

    def __init__(self, num_classes: int, min_targets: int = MIN_TARGETS):
        self.num_classes, self.min_targets = num_classes, min_targets
        self.rows, self.total, self.count, self.done = 0, None, None, False

    def observe(self, target: Tensor, ignore_index: int, stacklevel: int = 2) -> None:
        if self.done or torch.compiler.is_compiling():
            return
        t = target.reshape(-1)
        valid = (t != ignore_index) & (t >= 0) & (t < self.num_classes)
        c = torch.where(valid, t, torch.zeros_like(t)).double()
        nll = math.log(math.log1p(self.num_classes)) - torch.log(torch.log1p(1.0 / (c + 1.0)))
        total, count = torch.where(valid, nll, 0.0).sum(), valid.sum()
        self.total = total if self.total is None else self.total + total
        self.count = count if self.count is None else self.count + count
        self.rows += t.numel()
        if self.rows < self.min_targets:
            return
        count = int(self.count)
        if count < self.min_targets // 2:
            return  # mostly ignored rows so far: wait for more
        self.done = True
        h, log_v = float(self.total) / count, math.log(self.num_classes)
        if h > log_v:
            warnings.warn(
                f"the log-uniform sampler assumes class ids sorted by falling frequency (id 0 "
                f"the most frequent), but the first {count} training targets contradict it: "
                f"they fit log-uniform worse than a uniform distribution ({h:.2f} against "
                f"{log_v:.2f} nats per target), so the sampled loss will train a poor model. "
                "Renumber the classes by falling frequency, or give the layer counts= (a "
                "unigram sampler) or sampler='uniform'.",
                UserWarning, stacklevel=stacklevel)


def check_log_uniform_fit(layer, target: Tensor) -> None:
    """Called by the sampled output layers in training: checks their targets once when their
    sampler is log-uniform (the state lives on the layer)."""
    if not isinstance(getattr(layer, "sampler", None), LogUniformSampler) \
            or not isinstance(target, Tensor) or target.dtype != torch.int64:
        return  # bad targets are reported by the loss itself
    check = layer.__dict__.get("_log_uniform_fit")
    if check is None:
        check = layer.__dict__["_log_uniform_fit"] = LogUniformFitCheck(layer.num_classes)
    check.observe(target, layer.ignore_index, stacklevel=4)  # points at the layer's forward


__all__ = ["LogUniformFitCheck", "check_log_uniform_fit"]
