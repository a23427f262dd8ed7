"""The language model trained vocabulary-parallel under torchrun (`fastsoftmax-lm train
--vocab-parallel N`): a 2-D layout of W = data x N processes. Rank k is vocabulary rank
k % N of data rank k // N. The N ranks of one data rank (a vocabulary group) read the same
streams, run the same replicated body (embedding and RNN) and hold one row shard each of the
output layer (fastsoftmax.vocab_parallel); the data ranks of one vocabulary rank (a data
group) hold the same shard and read different streams.

One optimiser step: the head's collectives run inside forward and backward (vocabulary
group); then every gradient is averaged over the data group, and clipping takes the norm of
the whole model (the shards' squares summed over the vocabulary group, the replicated
parameters counted once), so every rank scales by the same factor as one process would.

Random streams: the ranks of a vocabulary group must draw the same dropout masks and the same
candidates, so they share one stream (the run's seed, or rank 0's saved state on resume); data
rank d > 0 derives its own from (seed, d, steps), as the data-parallel run does per rank.

Checkpoints: one file per vocabulary rank, written by data rank 0's group. Vocabulary rank
r > 0 writes `<checkpoint>.vocab<r>of<N>.<stamp>` (its shard, its optimiser state); then rank
0 writes the main file, whose `vocab_parallel` entry names the stamp; then the older shard
files go. Each write is atomic and the main file is the last word, so a run killed anywhere
resumes from one consistent set. A checkpoint of another layout (N or W) is refused.
"""

import os
from typing import NamedTuple, Optional

import torch
import torch.distributed as dist

from ...vocab_parallel import shard_layer
from .. import checkpoints
from ..trainer import Trainer
from ..vocabulary import Vocabulary
from .model import RNNLanguageModel

SHARD_KIND = "lm-vocab-shard"


class Layout(NamedTuple):
    world: int
    vocab: int  # N, ranks per vocabulary group
    data: int  # W / N
    vocab_rank: int
    data_rank: int
    vocab_group: object
    data_group: object


def make_layout(vocab: int) -> Layout:
    """The groups of a data x `vocab` layout over the initialised default group. Every rank
    creates every group, in one order (torch.distributed.new_group's rule)."""
    world, rank = dist.get_world_size(), dist.get_rank()
    if vocab < 1 or world % vocab:
        raise ValueError(f"--vocab-parallel {vocab} must divide the number of processes "
                         f"({world}): the layout is data x vocabulary")
    data = world // vocab
    vocab_groups = [dist.new_group([d * vocab + v for v in range(vocab)]) for d in range(data)]
    data_groups = [dist.new_group([d * vocab + v for d in range(data)]) for v in range(vocab)]
    return Layout(world, vocab, data, rank % vocab, rank // vocab,
                  vocab_groups[rank // vocab], data_groups[rank % vocab])


def start(config, world: int) -> Layout:
    """The layout of a run with --vocab-parallel N > 1 (after init_process_group), its
    options checked, and rank 0's checkpoint path on every rank (the default path holds the
    time, which the ranks need not read in the same second)."""
    check_model(config)
    if world == 1 or not dist.is_initialized():
        raise ValueError(f"--vocab-parallel {config.vocab_parallel} runs under torchrun with "
                         f"a multiple of {config.vocab_parallel} processes")
    layout = make_layout(config.vocab_parallel)
    path = [config.checkpoint]
    dist.broadcast_object_list(path, src=0)
    config.checkpoint = path[0]
    return layout


def unloaded_model(state: dict):
    """A model of the checkpoint's shape and its vocabulary, before any weight is loaded (the
    trainer loads this rank's own file once the head is sharded)."""
    vocab = Vocabulary.from_state_dict(state["vocab"])
    return RNNLanguageModel(counts=vocab.counts, **state["model_config"]), vocab


def check_model(config) -> None:
    """The options vocabulary-parallel training does not take, refused before any work."""
    if config.output not in ("full", "sampled", "nce", "neg"):
        raise ValueError(f"--vocab-parallel takes --output full, sampled, nce or neg, not "
                         f"{config.output!r}: the hierarchical softmax's tree does not split "
                         f"by vocabulary rows (docs/scaling.md)")
    if config.tie_weights:
        raise ValueError("--vocab-parallel cannot --tie-weights: the input embedding is whole "
                         "on every rank, the output embedding is split by rows")
    if config.sparse:
        raise ValueError("--vocab-parallel does not take --sparse")


def shard_model(model, layout: Layout):
    """Replace the model's head by its vocabulary-parallel twin (this rank's rows)."""
    model.head = shard_layer(model.head, layout.vocab_group)
    return model


def _sharded(model) -> list:
    head = model.head
    return [p for p in (head.linear_weight, head.linear_bias) if p is not None]


def sync_and_clip(model, layout: Layout, clip: float) -> None:
    """Average every gradient over the data group, then clip by the norm of the whole model."""
    params = [p for p in model.parameters() if p.grad is not None]
    if layout.data > 1:
        for p in params:
            dist.all_reduce(p.grad, group=layout.data_group)
            p.grad.div_(layout.data)
    if clip <= 0:
        return
    sharded = {id(p) for p in _sharded(model)}
    shard_sq = sum((p.grad.double().square().sum() for p in params if id(p) in sharded),
                   torch.zeros((), dtype=torch.float64))
    dist.all_reduce(shard_sq, group=layout.vocab_group)
    rest_sq = sum((p.grad.double().square().sum() for p in params if id(p) not in sharded),
                  torch.zeros((), dtype=torch.float64))
    total = float((shard_sq + rest_sq).sqrt())
    coef = min(1.0, clip / (total + 1e-6))  # clip_grad_norm's factor, of the global norm
    for p in params:
        p.grad.mul_(coef)


def describe(state: dict) -> str:
    vp = state.get("vocab_parallel")
    if not vp:
        return "a single-process (or data-parallel) run"
    return (f"a vocabulary-parallel run of {vp['world']} processes ({vp['data']} data x "
            f"{vp['vocab']} vocabulary)")


def check_resume(state: dict, path: str, layout: Optional[Layout], world: int) -> None:
    """Refuse, with one sentence, a checkpoint written by another layout than this run's."""
    vp = state.get("vocab_parallel")
    mine = (None if layout is None else (layout.world, layout.vocab))
    theirs = None if not vp else (vp["world"], vp["vocab"])
    if mine == theirs:
        return
    now = ("a single-process (or data-parallel) run" if layout is None else
           f"a vocabulary-parallel run of {world} processes ({layout.data} data x "
           f"{layout.vocab} vocabulary)")
    raise ValueError(f"cannot resume {path}: it was written by {describe(state)} and this is "
                     f"{now}; resharding a checkpoint to another layout is not supported, "
                     f"resume with the same torchrun --nproc_per_node and --vocab-parallel")


def shard_path(path: str, layout: Layout, stamp: int, vocab_rank: Optional[int] = None) -> str:
    r = layout.vocab_rank if vocab_rank is None else vocab_rank
    return f"{path}.vocab{r}of{layout.vocab}.{stamp}"


class VocabParallelTrainer(Trainer):
    """Trainer whose checkpoint is one file per vocabulary rank (see the module docstring):
    the lm's fit builds it with Recipe.trainer(..., cls=VocabParallelTrainer, layout=...),
    which resumes it from the checkpoint's main file (this rank's shard read here)."""

    def __init__(self, *args, layout: Layout, **kw):
        super().__init__(*args, saves=layout.data_rank == 0, **kw)
        self.layout, self.stamp, self.previous = layout, 0, None

    def resume(self, saved: dict) -> None:
        lay = self.layout
        self.stamp = saved["vocab_parallel"]["stamp"]
        own = saved
        if lay.vocab_rank > 0:
            path = shard_path(self.config.resume, lay, self.stamp)
            own = checkpoints.load_checkpoint(path, SHARD_KIND)
            if own.get("stamp") != self.stamp or own.get("vocab_rank") != lay.vocab_rank:
                raise ValueError(f"{path} does not belong to {self.config.resume}")
            self.previous = path
        self.model.load_state_dict(own["model"])
        super().resume(dict(saved, optimizer=own["optimizer"]))

    def save(self, **extra) -> Optional[str]:
        if not self.saves:
            return None
        lay, path = self.layout, self.config.checkpoint
        self.stamp += 1
        mine = None
        if lay.vocab_rank > 0:
            mine = checkpoints.save_checkpoint(
                shard_path(path, lay, self.stamp), SHARD_KIND,
                dict(model=self.model.state_dict(), optimizer=self.optimizer.state_dict(),
                     stamp=self.stamp, vocab_rank=lay.vocab_rank))
        dist.barrier(group=lay.vocab_group)  # every shard on disk before the main file names it
        if lay.vocab_rank == 0:
            super().save(vocab_parallel=dict(world=lay.world, vocab=lay.vocab, data=lay.data,
                                             stamp=self.stamp), **extra)
        dist.barrier(group=lay.vocab_group)  # the main file names the new stamp: drop the old
        if self.previous and self.previous != mine and os.path.exists(self.previous):
            os.remove(self.previous)
        self.previous = mine
        return path
