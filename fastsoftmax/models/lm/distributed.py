"""A language-model run's processes under torchrun: this process's place, its device, the
process group, the streams each data rank reads and the hidden states they carry."""

import datetime
import os
from typing import Callable, Optional

import torch
from torch import Tensor

from ..trainer import rank_seed
from . import vocab_parallel as vp
from .data import batchify, num_bptt_batches, shard_rows
from .epochs import steps_done


def dist_env() -> tuple:
    """(world size, rank, local rank) as torchrun sets them; (1, 0, 0) outside it."""
    return (int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0")),
            int(os.environ.get("LOCAL_RANK", "0")))


def check_processes(config) -> None:
    """--restarts N > 1 runs its N trainings one after another in one process, each moving
    or removing the others' files: under torchrun every process would, so it is refused."""
    if config.restarts != 1 and dist_env()[0] > 1:
        raise ValueError(f"--restarts {config.restarts} trains its runs one after another in "
                         f"one process, not under torchrun: start one torchrun per --seed "
                         f"instead")


def pick_device(name: Optional[str], local_rank: int) -> torch.device:
    """The device `name` (None: cuda when available); a GPU named without its index is this
    process's, the local rank's."""
    device = torch.device(name or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", local_rank)
    return device


def map_hidden(hidden, fn):
    """`fn` of each tensor of an RNN state (an LSTM's pair, a GRU's tensor; None stays None)."""
    if hidden is None:
        return None
    return tuple(fn(h) for h in hidden) if isinstance(hidden, (tuple, list)) else fn(hidden)


def gather_streams(h: Tensor, world: int, group=None) -> Tensor:
    """[layers, B/world, H] on each rank → [layers, B, H], the ranks' streams in order (a
    collective: every rank must call it)."""
    if world == 1:
        return h
    import torch.distributed as dist

    parts = [torch.empty_like(h) for _ in range(world)]
    dist.all_gather(parts, h.contiguous(), group=group)
    return torch.cat(parts, dim=1)


def init_process_group(device: torch.device) -> None:
    """Join the torchrun process group: nccl on GPUs, gloo on CPU."""
    import torch.distributed as dist

    if device.type == "cuda":
        torch.cuda.set_device(device)
    # FASTSOFTMAX_DIST_TIMEOUT (seconds) bounds every collective: the tests set it so a
    # broken run fails instead of waiting torch's default half hour.
    wait = os.environ.get("FASTSOFTMAX_DIST_TIMEOUT")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=None if
                            wait is None else datetime.timedelta(seconds=float(wait)))


def join_processes(config, state: Optional[dict], world: int, device: torch.device):
    """Under torchrun, join the process group; returns the layout of a vocabulary-parallel run
    (None otherwise). A checkpoint written by another layout is refused."""
    if world > 1:
        init_process_group(device)
    layout = vp.start(config, world) if config.vocab_parallel > 1 else None
    if state is not None:
        vp.check_resume(state, config.resume, layout, world)
    return layout


def data_parallel(model, device: torch.device):
    """`model` in DistributedDataParallel: its gradients averaged over the processes."""
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None)


class Streams:
    """One data rank's share of a corpus as BPTT streams: its rows of the global training
    batch (`train`), the whole validation and test splits, and the hidden state and totals of
    an epoch that a mid-epoch checkpoint (`position`) interrupted. Data rank `rank` of
    `world`; `group` is the data group of a vocabulary-parallel run (None: every process)."""

    def __init__(self, corpus, config, rank: int, world: int, device, group=None,
                 position: Optional[dict] = None):
        self.rank, self.world, self.device, self.group = rank, world, device, group
        self.train = shard_rows(batchify(corpus["train"], config.batch_size), rank,
                                world).to(device)
        self.valid = batchify(corpus["valid"], config.eval_batch_size).to(device)
        self.test = batchify(corpus["test"], config.eval_batch_size).to(device)
        self.steps_per_epoch = num_bptt_batches(self.train, config.bptt)
        self.position = position

    def resumed(self) -> dict:
        """train_epoch's `hidden` and `totals` that continue the interrupted epoch (this rank's
        rows of the global batch's hidden state, saved whole), once; {} afterwards."""
        if self.position is None:
            return {}
        position, self.position = self.position, None
        hidden = map_hidden(position["hidden"], lambda h: shard_rows(
            h, self.rank, self.world, dim=1).contiguous().to(self.device))
        return dict(hidden=hidden, totals=position["totals"])

    def saver(self, trainer, epoch: int, every: int) -> Callable:
        """train_epoch's `on_step`: a checkpoint every `every` steps within epoch `epoch` (0:
        none) holding the global batch's hidden state (a collective: every rank calls it)."""
        def save(step: int, hidden, totals: Callable) -> None:
            if not every or step % every or step >= self.steps_per_epoch:
                return
            whole = map_hidden(hidden, lambda h: gather_streams(
                h.detach(), self.world, self.group).cpu())
            trainer.save(position=dict(epoch=epoch, step=step, hidden=whole, totals=totals()))
        return save


def rank_streams(config, corpus, state: Optional[dict], trainer, layout, rank: int,
                 world: int, device) -> Streams:
    """This process's streams: those of its data rank (the ranks of one vocabulary group read
    the same ones), continuing a resumed mid-epoch checkpoint; a data rank > 0 seeds its own
    random stream."""
    drank, dworld, group = ((rank, world, None) if layout is None else
                            (layout.data_rank, layout.data, layout.data_group))
    position = None if state is None else state.get("position")
    if position:
        trainer.log(f"continuing epoch {position['epoch']} from step {position['step']}")
    if drank > 0:
        # Every rank built the same model from config.seed; from here on each draws its own
        # candidates and dropout masks. Rank 0 goes on with the seeded stream (the one
        # checkpoints keep); the others derive theirs from the seed, their rank and the steps
        # already taken, so a rerun or a resume draws them again.
        taken = steps_done(trainer.history) + (position["totals"]["steps"] if position else 0)
        torch.manual_seed(rank_seed(config.seed, drank, taken))
    return Streams(corpus, config, drank, dworld, device, group, position)
