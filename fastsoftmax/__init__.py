"""fastsoftmax: cheap large-vocabulary output layers for PyTorch.

Samplers (alias tables, log-uniform, uniform) and output layers (full softmax, sampled
softmax, NCE, negative sampling; functional and nn.Module forms) with native CPU and CUDA
kernels, registered as torch ops.
"""

# ops is imported for its registrations; fastsoftmax.ops is public.
from . import _loader, _version, functional, ops  # noqa: F401
from .samplers.frequency import FrequencyEstimator
from .functional import (
    full_margin_ranking_loss,
    full_softmax_loss,
    hierarchical_softmax_loss,
    in_batch_softmax_loss,
    multi_margin_loss,
    nce_loss,
    negative_sampling_loss,
    sampled_margin_ranking_loss,
    sampled_softmax_loss,
    streaming_logsumexp,
    warp_loss,
)
from .nn import (
    FullSoftmaxLoss,
    HierarchicalSoftmaxLoss,
    InBatchSoftmaxLoss,
    MultiMarginLoss,
    NCELoss,
    NegativeSamplingLoss,
    OutputLayer,
    SampledMarginRankingLoss,
    SampledSoftmaxLoss,
    WARPLoss,
    make_head,
    register_head,
)
from .ops import deferred_checks
from .optim import clip_grad_norm
from .samplers import (
    AliasSampler,
    LogUniformSampler,
    SampledValues,
    Sampler,
    UniformSampler,
    UnigramSampler,
)
from .tree import ClassTree

__version__ = _version.version()  # pyproject.toml's: the checkout's, or the installed metadata's


def build_info() -> dict:
    """How the compiled extension was built: CUDA compiled in or not (cuda), its CUDA version
    and arch list (cuda_version, cuda_arch_list), the torch it was built against
    (torch_version), and the oldest torch whose stable ABI it targets (torch_target_version):
    it loads under every torch from that one on."""
    return _loader.build_info()


__all__ = [
    # the output layers (fastsoftmax.nn) and their registry
    "FullSoftmaxLoss", "HierarchicalSoftmaxLoss", "InBatchSoftmaxLoss", "MultiMarginLoss",
    "NCELoss", "NegativeSamplingLoss", "OutputLayer", "SampledMarginRankingLoss",
    "SampledSoftmaxLoss", "WARPLoss", "make_head", "register_head",
    # their functional forms (fastsoftmax.functional)
    "functional", "full_margin_ranking_loss", "full_softmax_loss", "hierarchical_softmax_loss",
    "in_batch_softmax_loss", "multi_margin_loss", "nce_loss", "negative_sampling_loss",
    "sampled_margin_ranking_loss", "sampled_softmax_loss", "streaming_logsumexp", "warp_loss",
    # samplers, the class tree, the frequency estimator
    "AliasSampler", "LogUniformSampler", "SampledValues", "Sampler", "UniformSampler",
    "UnigramSampler", "ClassTree", "FrequencyEstimator",
    "build_info", "clip_grad_norm", "deferred_checks",
]
