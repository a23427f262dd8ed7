"""Reading text corpora, for every model: each line decoded on its own, so that bytes the
encoding cannot read are reported with the file and the line (and how to name the right
encoding); `read_lines` gives the lines, `LineSentence` the whitespace-split sentences that
word2vec and PPMI stream, cut by `pieces` into at most MAX_SENTENCE_WORDS words."""

from __future__ import annotations

import codecs
import os
from typing import Iterator

MAX_SENTENCE_WORDS = 10000


class CorpusDecodeError(ValueError):
    """A line that is not valid text in the encoding asked for (names the file and line)."""


def _checked(path: str, encoding: str) -> None:
    """Fails before the first line, not mid-training, on a bad encoding name or path."""
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise ValueError(f"unknown text encoding {encoding!r}") from None
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path!r} is a directory, not a text file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path!r} does not exist (a corpus is a text file, one "
                                f"sentence per line)")


def decode_error(path: str, number: int, encoding: str, line: bytes, start: int,
                 hint: str) -> CorpusDecodeError:
    """The error for line `number` of `path` (its bytes `line`), undecodable at `start`."""
    return CorpusDecodeError(f"{path}:{number}: not {encoding} text (byte {start + 1} of the "
                             f"line is {line[start:start + 1]!r}); {hint}")


def _decoded(path: str, encoding: str, errors: str, hint: str) -> Iterator[str]:
    """The lines of `path` decoded one by one (line ends kept); `hint` ends the error."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                yield raw.decode(encoding, errors)
            except UnicodeDecodeError as exc:
                raise decode_error(path, number, encoding, raw, exc.start, hint) from None


def read_lines(path: str, encoding: str = "utf-8") -> Iterator[str]:
    """The lines of `path` without their line ends. Raises FileNotFoundError for a missing
    file and ValueError naming the file and line of text `encoding` cannot decode."""
    _checked(path, encoding)
    hint = ("if the file uses another encoding, name it with --encoding (for example "
            "--encoding latin-1)")
    for line in _decoded(path, encoding, "strict", hint):
        yield line.rstrip("\r\n")


class LineSentence:
    """Streams a whitespace-tokenised text file, one sentence per line, re-readable. Lines
    longer than MAX_SENTENCE_WORDS words are split into pieces of that length.

    Bytes are decoded with `encoding`; with errors="strict" (the default) a line that is not
    valid in it raises CorpusDecodeError (a ValueError) naming the file and the line.
    errors="replace" (or "ignore", ...) reads any bytes, as word2vec.c does (it is
    byte-oriented)."""

    def __init__(self, path: str, encoding: str = "utf8", errors: str = "strict"):
        _checked(path, encoding)
        self.path, self.encoding, self.errors = path, encoding, errors

    HINT = "give the file's encoding (e.g. latin-1) or read it byte-wise with errors='replace'"

    def __iter__(self):
        for line in _decoded(self.path, self.encoding, self.errors, self.HINT):
            words = line.split()
            for start in range(0, max(len(words), 1), MAX_SENTENCE_WORDS):
                yield words[start:start + MAX_SENTENCE_WORDS]


def pieces(sentence):
    """A sentence as lists of at most MAX_SENTENCE_WORDS words."""
    if isinstance(sentence, str):
        raise TypeError(
            "sentences must be an iterable of token lists, got a str; split it into words first"
        )
    words = sentence if isinstance(sentence, list) else list(sentence)
    if len(words) <= MAX_SENTENCE_WORDS:
        yield words
    else:
        for start in range(0, len(words), MAX_SENTENCE_WORDS):
            yield words[start:start + MAX_SENTENCE_WORDS]
