"""Reading text corpora: every line decoded on its own, so that a byte the encoding cannot
read is reported with the file and line (and how to pass the right encoding)."""

import codecs
import os
from typing import Iterator


def read_lines(path: str, encoding: str = "utf-8") -> Iterator[str]:
    """The lines of `path` without their line ends. Raises FileNotFoundError for a missing
    file and ValueError naming the file and line of text `encoding` cannot decode."""
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise ValueError(f"unknown text encoding {encoding!r}") from None
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode(encoding)
            except UnicodeDecodeError as exc:
                raise ValueError(
                    f"{path}:{number}: not {encoding} text (byte {exc.start + 1} of the line "
                    f"is {raw[exc.start:exc.start + 1]!r}); if the file uses another encoding, "
                    f"name it with --encoding (for example --encoding latin-1)"
                ) from None
            yield line.rstrip("\r\n")
