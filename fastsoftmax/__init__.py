"""fastsoftmax: cheap large-vocabulary output layers for PyTorch.

Samplers (alias tables, log-uniform, uniform) and output layers (full softmax, sampled
softmax, NCE, negative sampling; functional and nn.Module forms) with native CPU and CUDA
kernels, registered as torch ops.
"""

# ops is imported for its registrations; fastsoftmax.ops is public.
from . import _loader, functional, ops  # noqa: F401
from .functional import (
    full_softmax_loss,
    nce_loss,
    negative_sampling_loss,
    sampled_softmax_loss,
    streaming_logsumexp,
)
from .nn import (
    FullSoftmaxLoss,
    NCELoss,
    NegativeSamplingLoss,
    OutputLayer,
    SampledSoftmaxLoss,
    make_head,
    register_head,
)
from .optim import clip_grad_norm
from .samplers import (
    AliasSampler,
    LogUniformSampler,
    SampledValues,
    Sampler,
    UniformSampler,
    UnigramSampler,
)

from .frequency import FrequencyEstimator
from .retrieval import InBatchSoftmaxLoss, in_batch_softmax_loss

__version__ = "0.1.0"


def build_info() -> dict:
    """How the compiled extension was built: CUDA compiled in or not (cuda), its CUDA version
    and arch list (cuda_version, cuda_arch_list), the torch it was built against
    (torch_version), and the oldest torch whose stable ABI it targets (torch_target_version):
    it loads under every torch from that one on."""
    return _loader.build_info()


__all__ = [
    "FullSoftmaxLoss",
    "OutputLayer",
    "make_head",
    "register_head",
    "full_softmax_loss",
    "streaming_logsumexp",
    "NCELoss",
    "NegativeSamplingLoss",
    "SampledSoftmaxLoss",
    "AliasSampler",
    "LogUniformSampler",
    "SampledValues",
    "Sampler",
    "UniformSampler",
    "UnigramSampler",
    "build_info",
    "clip_grad_norm",
    "functional",
    "nce_loss",
    "negative_sampling_loss",
    "sampled_softmax_loss",
    "FrequencyEstimator",
    "InBatchSoftmaxLoss",
    "in_batch_softmax_loss",
]

# Hierarchical softmax.
from .hierarchical import hierarchical_softmax_loss  # noqa: E402
from .nn import HierarchicalSoftmaxLoss  # noqa: E402
from .tree import ClassTree  # noqa: E402

__all__ += ["ClassTree", "HierarchicalSoftmaxLoss", "hierarchical_softmax_loss"]

# Margin (hinge) losses: the multiclass hinge, margin ranking (exact and sampled) and WARP;
# importing margin_layers registers the heads 'multi_margin', 'margin_ranking' and 'warp'.
from .margin import (  # noqa: E402
    full_margin_ranking_loss,
    multi_margin_loss,
    sampled_margin_ranking_loss,
    warp_loss,
)
from .margin_layers import MultiMarginLoss, SampledMarginRankingLoss, WARPLoss  # noqa: E402

__all__ += ["MultiMarginLoss", "SampledMarginRankingLoss", "WARPLoss",
            "full_margin_ranking_loss", "multi_margin_loss", "sampled_margin_ranking_loss",
            "warp_loss"]
