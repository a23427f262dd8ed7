"""Vocabulary-parallel output layers on torch.distributed: the output embedding [V, D] split
by rows over the ranks of a process group, the exact full softmax and the sampled losses
computed from every rank's shard with a few all-reduces (see docs/scaling.md).

    import torch.distributed as dist
    from fastsoftmax import SampledSoftmaxLoss
    from fastsoftmax.vocab_parallel import shard_layer

    dist.init_process_group("gloo")            # nccl for CUDA tensors (backend_for)
    head = shard_layer(SampledSoftmaxLoss(D, V, 1024), process_group=None)
    loss = head(features, target)              # the same features and target on every rank
"""

from .functional import (owned_logits, vocab_parallel_full_softmax_loss,
                         vocab_parallel_negative_sampling_loss, vocab_parallel_nce_loss,
                         vocab_parallel_sampled_softmax_loss)
from .layers import (VocabParallelLayer, VocabParallelNCELoss,
                     VocabParallelNegativeSamplingLoss, VocabParallelSampledLayer,
                     VocabParallelSampledSoftmaxLoss, shard_layer, shard_range)
from .mappings import (agree, backend_for, check_shards, copy_to_vocab_group,
                       logsumexp_over_vocab_group, reduce_from_vocab_group)

VocabParallelFullSoftmaxLoss = VocabParallelLayer

__all__ = [
    "VocabParallelFullSoftmaxLoss", "VocabParallelLayer", "VocabParallelNCELoss",
    "VocabParallelNegativeSamplingLoss", "VocabParallelSampledLayer",
    "VocabParallelSampledSoftmaxLoss", "agree", "backend_for", "check_shards",
    "copy_to_vocab_group", "logsumexp_over_vocab_group", "owned_logits", "reduce_from_vocab_group",
    "shard_layer", "shard_range", "vocab_parallel_full_softmax_loss",
    "vocab_parallel_nce_loss", "vocab_parallel_negative_sampling_loss",
    "vocab_parallel_sampled_softmax_loss",
]
