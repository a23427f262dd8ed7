"""Reading a corpus for word2vec: a text file streamed line by line, and sentences cut into
pieces of at most MAX_SENTENCE_WORDS words."""

from __future__ import annotations

import os

MAX_SENTENCE_WORDS = 10000


class CorpusDecodeError(ValueError):
    """A corpus line that is not valid in the encoding asked for (names file and line)."""


class LineSentence:
    """Streams a whitespace-tokenised text file, one sentence per line, re-readable. Lines
    longer than MAX_SENTENCE_WORDS words are split into pieces of that length.

    Bytes are decoded with `encoding`; with errors="strict" (the default) a line that is not
    valid in it raises ValueError naming the file and the line. errors="replace" (or
    "ignore", ...) reads any bytes, as word2vec.c does (it is byte-oriented)."""

    def __init__(self, path: str, encoding: str = "utf8", errors: str = "strict"):
        if os.path.isdir(path):
            raise IsADirectoryError(f"corpus file {path!r} is a directory, not a text file")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"corpus file {path!r} does not exist")
        "".encode(encoding)  # an unknown encoding fails here (LookupError), not mid-training
        self.path, self.encoding, self.errors = path, encoding, errors

    def __iter__(self):
        with open(self.path, "rb") as f:
            for line_no, raw in enumerate(f, 1):
                try:
                    words = raw.decode(self.encoding, self.errors).split()
                except UnicodeDecodeError as e:
                    raise CorpusDecodeError(
                        f"{self.path}, line {line_no}: bytes {raw[e.start:e.end]!r} at column "
                        f"{e.start + 1} are not valid {self.encoding}; give the file's encoding "
                        "(e.g. latin-1) or read it byte-wise with errors='replace'"
                    ) from None
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
