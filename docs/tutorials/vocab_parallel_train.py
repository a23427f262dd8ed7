"""Vocabulary-parallel training of a sampled-softmax output layer, one process a rank:

    torchrun --standalone --nproc_per_node 2 docs/tutorials/vocab_parallel_train.py

Every rank holds its own rows of the output embedding [V, D] and its share of Adam's state;
all ranks see the same features and targets. The tutorial docs/tutorials/vocab-parallel.md
walks through it."""

import argparse
import os
import sys

import torch
import torch.distributed as dist

from fastsoftmax import SampledSoftmaxLoss, UnigramSampler
from fastsoftmax.vocab_parallel import backend_for, shard_layer


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classes", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    device = torch.device("cpu")
    dist.init_process_group(backend_for(device))  # torchrun gives the rank and the address
    rank, world = dist.get_rank(), dist.get_world_size()

    # The same seed on every rank: the same layer to shard, the same data, the same draws.
    torch.manual_seed(0)
    V, D = args.classes, args.dim
    counts = (1.0 / torch.arange(1, V + 1)) * 1e6            # Zipfian class counts
    classes = UnigramSampler(counts, power=1.0)              # where the targets come from
    centres = torch.randn(V, D)                              # each class's mean feature
    head = shard_layer(SampledSoftmaxLoss(D, V, 256, counts=counts))  # this rank's rows only
    optimiser = torch.optim.Adam(head.parameters(), lr=0.05)
    print(f"rank {rank} of {world}: {head.linear_weight.shape[0]:,} of {V:,} rows",
          flush=True)

    for _ in range(args.steps):
        target = classes.sample(512)
        features = centres[target] + 0.5 * torch.randn(512, D)
        loss = head(features, target)                        # sampled softmax, all ranks
        optimiser.zero_grad()
        loss.backward()                                      # each rank: its rows' gradient
        optimiser.step()

    head.eval()
    with torch.no_grad():
        target = classes.sample(2048)
        exact = head(centres[target] + 0.5 * torch.randn(2048, D), target)  # exact softmax
    if rank == 0:
        print(f"exact loss after {args.steps} steps: {exact.item():.3f} "
              f"(uniform: {torch.log(torch.tensor(float(V))).item():.3f})", flush=True)
    # Every rank past its last collective before any tears the group down: a rank that
    # destroyed gloo's group while its peer still talked to it aborted at exit (once in four
    # runs of the documentation tests).
    dist.barrier()
    dist.destroy_process_group()
    # With torch 2.13 on the CPU, about 1 run in 7 here then aborted in the interpreter's own
    # shutdown ("terminate called without an active exception"), after every rank had
    # destroyed the group: a thread the gloo backend leaves behind. Leaving with os._exit
    # skips that teardown; nothing of ours is left to flush but stdout.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
