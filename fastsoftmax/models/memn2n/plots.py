"""The attention over the memories of one story, per hop."""

import dataclasses
import os

from ...atomic import atomic_path
from ..vocabulary import Vocabulary
from .data import Story


def attention_figure(sentences, weights, title: str):
    """A matplotlib figure: rows the story's sentences (oldest on top), columns the hops,
    each cell the attention weight, printed in it; supporting facts marked with '*' by the
    caller in the sentence text."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    grid = np.array(weights).T  # [sentences, hops]
    fig, ax = plt.subplots(figsize=(3 + 1.1 * grid.shape[1] + 0.09 * max(map(len, sentences)),
                                    1.2 + 0.36 * grid.shape[0]))
    ax.imshow(grid, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
    for (r, c), v in np.ndenumerate(grid):
        ax.text(c, r, f"{v:.2f}", ha="center", va="center",
                color="white" if v > 0.6 else "black", fontsize=8)
    ax.set_xticks(range(grid.shape[1]))
    ax.set_xticklabels([f"hop {k + 1}" for k in range(grid.shape[1])])
    ax.set_yticks(range(grid.shape[0]))
    ax.set_yticklabels(sentences, fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_attention(model, vocab: Vocabulary, answers, story: Story, path: str,
                   overwrite: bool = False, device="cpu") -> dict:
    """Answer `story` and draw its attention per hop to the PNG `path` (refused if the file
    exists, unless `overwrite`). Supporting facts known to the generator are marked '*'.
    Returns answer_stories' result for the story."""
    from .answering import answer_stories

    if os.path.exists(path) and not overwrite:
        raise ValueError(f"plot {path} already exists; choose another path or pass --force")
    story = dataclasses.replace(story, lines=list(range(1, len(story.sentences) + 2)))
    res = answer_stories(model, vocab, answers, [story], device=device)[0]
    shown = story.sentences[res["first"]:]
    support = {i - res["first"] for i in story.support}
    labels = [("* " if i in support else "") + " ".join(w) for i, w in enumerate(shown)]
    truth = f" (true: {story.answer})" if story.answer else ""
    title = (f"{' '.join(story.question)} → {res['answer']}{truth}\n"
             f"attention over memories per hop (* supporting fact)")
    import matplotlib.pyplot as plt

    fig = attention_figure(labels, res["attention"], title)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_path(path) as tmp:  # the format from path's extension, not the temporary's
        fig.savefig(tmp, dpi=120, format=os.path.splitext(path)[1][1:] or None)
    plt.close(fig)
    return res
