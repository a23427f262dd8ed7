"""Validation-perplexity curves of one or more runs, against epochs and against wall-clock
time (where the sampled heads' speed shows)."""

import os
from typing import List, Sequence, Tuple

from ...atomic import atomic_path


def runs_figure(runs: Sequence[Tuple[str, List[dict]]], title: str):
    """A matplotlib figure with one curve per (label, history) pair, history rows holding
    epoch, val_ppl and seconds (training time of that epoch). Left: per epoch (integer
    ticks); right: per cumulative training minute, where a faster head's curve ends sooner."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_epoch, by_time) = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for label, history in runs:
        ppl = [h["val_ppl"] for h in history]
        by_epoch.plot([h["epoch"] for h in history], ppl, marker="o", label=label)
        minutes, elapsed = [], 0.0
        for h in history:
            elapsed += h.get("seconds", 0.0)
            minutes.append(elapsed / 60)
        by_time.plot(minutes, ppl, marker="o", label=label)
    epochs = sorted({h["epoch"] for _, history in runs for h in history})
    if epochs:  # whole epochs only, at most about 15 labels
        step = -(-len(epochs) // 15)
        by_epoch.set_xticks(epochs[::step])
        by_epoch.set_xlim(epochs[0] - 0.5, epochs[-1] + 0.5)
    by_epoch.set_xlabel("epoch")
    by_time.set_xlabel("training time (minutes, wall clock)")
    by_epoch.set_ylabel("validation perplexity (exact softmax)")
    for ax in (by_epoch, by_time):
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_runs(runs: Sequence[Tuple[str, List[dict]]], path: str, title: str,
              overwrite: bool = False) -> str:
    """runs_figure written to the PNG `path`; refuses to replace an existing file unless
    `overwrite`."""
    if os.path.exists(path) and not overwrite:
        raise ValueError(f"plot {path} already exists; choose another path or pass --force")
    import matplotlib.pyplot as plt

    fig = runs_figure(runs, title)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with atomic_path(path) as tmp:  # the format from path's extension, not the temporary's
        fig.savefig(tmp, dpi=120, format=os.path.splitext(path)[1][1:] or None)
    plt.close(fig)
    return path
