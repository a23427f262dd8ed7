"""A language-model run's processes under torchrun: this process's place, its device, the
process group, and the hidden states of the BPTT streams each data rank carries."""

import datetime
import os
from typing import Optional

import torch
from torch import Tensor


def dist_env() -> tuple:
    """(world size, rank, local rank) as torchrun sets them; (1, 0, 0) outside it."""
    return (int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0")),
            int(os.environ.get("LOCAL_RANK", "0")))


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
