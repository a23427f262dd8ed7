"""Run by tests/test_trainer.py under torchrun (2 gloo ranks): each rank trains a sampled-head
language model for 2 steps and saves the candidates every step drew in OUT/rank<r>.pt:

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/ddp_draws.py DATA OUT
"""

import os
import sys

import torch

torch.set_num_threads(1)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The sampled losses draw their candidates through the name draw_candidates of their family's
# module (fastsoftmax.functional only re-exports it): that is the one to wrap.
import fastsoftmax.losses.sampled as sampled  # noqa: E402
from fastsoftmax.models import lm  # noqa: E402


def main(data: str, out: str) -> None:
    drawn, original = [], sampled.draw_candidates

    def recording(*args, **kwargs):
        values = original(*args, **kwargs)
        drawn.append(values[0].clone())
        return values

    sampled.draw_candidates = recording
    config = lm.TrainConfig(data=data, output="sampled", num_sampled=8, embed_dim=8,
                            hidden_size=8, layers=1, dropout=0.5, batch_size=4, bptt=5,
                            epochs=1, max_steps=2, device="cpu", progress=False,
                            checkpoint=os.path.join(out, "run.pt"), force=True)
    lm.fit(config, log=lambda *a: None)
    torch.save(torch.stack(drawn), os.path.join(out, f"rank{os.environ['RANK']}.pt"))


if __name__ == "__main__":
    main(*sys.argv[1:3])
