"""The progress reporter of every model's training: a tqdm bar on stderr, drawn by default
only when stderr is a terminal (a log file gets the per-epoch lines alone)."""

import sys
from typing import Optional

from tqdm import tqdm


def progress_bar(total: int, desc: str, enabled: Optional[bool] = None, file=None) -> tqdm:
    """A bar of `total` steps: `bar.update(1)`; `bar.set_postfix_str("loss 3.2")` for the
    running figures; `bar.close()` ends the line. enabled=None: only on a terminal."""
    file = file if file is not None else sys.stderr
    if enabled is None:
        enabled = file.isatty()
    return tqdm(total=total, desc=desc, file=file, disable=not enabled, ascii=".#",
                bar_format="{desc} [{bar:24}] {n_fmt}/{total_fmt} {elapsed}<{remaining} "
                           "{postfix}", mininterval=0.2, leave=True)
