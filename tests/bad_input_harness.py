"""The machinery of the bad-input matrix (tests/test_bad_input.py for the Python API,
tests/test_bad_input_cli.py for the command lines): the Row table entries, the input files the
rows read, and the check every row goes through.

Every row asserts all the guarantees of docs/guarantees.md:
  * a clear error: the exception type and a phrase of its message; for a command line a
    nonzero exit status, the phrase on stderr and no traceback (main() is run in this process:
    an exception escaping it is what would print a traceback, and fails the row);
  * no partial output left: no file appears anywhere in the row's folders (outputs, inputs,
    the working directory), hidden temporaries included;
  * nothing the user had is overwritten: the folders hold sentinel files where the row would
    write (existing.pt, existing.png, existing.txt, existing.json, existing.npz) and every
    file is byte-identical afterwards, the inputs (checkpoints being resumed) included.

Adding a row: append `api(what, entry, call, ErrorType, phrase)` to the table of
test_bad_input.py (call receives the Files object: f["name"] is an input file, f.out /
f.unwritable / f.a_file are paths to write to) or `command(what, prog, argv, phrase,
stdin=None)` to the table of test_bad_input_cli.py (argv strings may name {in}, {out},
{unwritable} and {a_file}; prog is a key of COMMANDS, where a new command line's main goes;
stdin is the text the command reads there). The input files come from the session fixture
`bad_input_files` of conftest.py, built by make_inputs.
"""

import hashlib
import io
import os
import pickle
import sys
import tempfile
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import pytest
import torch

from fastsoftmax.cli import dmn as dmn_cli
from fastsoftmax.cli import lm as lm_cli
from fastsoftmax.cli import memn2n as mn_cli
from fastsoftmax.cli import memnn as memnn_cli
from fastsoftmax.cli import seq2seq as s2s_cli
from fastsoftmax.cli import treernn as tree_cli
from fastsoftmax.cli import word2vec as w2v_cli
from fastsoftmax.models import KeyedVectors, Word2Vec

COMMANDS = {"fastsoftmax-lm": lm_cli.main, "fastsoftmax-seq2seq": s2s_cli.main,
            "fastsoftmax-word2vec": w2v_cli.main, "fastsoftmax-memn2n": mn_cli.main,
            "fastsoftmax-memnn": memnn_cli.main, "fastsoftmax-dmn": dmn_cli.main,
            "fastsoftmax-treernn": tree_cli.main}
SENTINELS = ("existing.pt", "existing.png", "existing.txt", "existing.json", "existing.npz")


@dataclass
class Row:
    what: str                      # the bad input, in words
    entry: str                     # the API or command it goes to
    error: type                    # exception type (SystemExit for a command line)
    phrase: str                    # a phrase the message must hold
    call: Optional[Callable] = None          # api rows: call(files)
    argv: Optional[Sequence[str]] = None     # command rows
    stdin: Optional[str] = None              # command rows: what they read on stdin

    @property
    def id(self) -> str:
        return f"{self.entry}: {self.what}"


def api(what, entry, call, error, phrase) -> Row:
    return Row(what, entry, error, phrase, call=call)


def command(what, prog, argv, phrase, stdin=None) -> Row:
    return Row(what, prog, SystemExit, phrase, argv=(prog, *argv), stdin=stdin)




# Train options small enough to run in a fraction of a second.
LM = ("--embed-dim", "8", "--hidden-size", "8", "--batch-size", "4", "--bptt", "8",
      "--epochs", "1", "--no-progress")
S2S = ("--epochs", "1", "--hidden-size", "8", "--embed-dim", "8", "--no-progress")
W2V = ("-size", "8", "-iter", "1", "-min-count", "1", "-threads", "1", "-quiet")
MN = ("--train-size", "40", "--test-size", "10", "--epochs", "1", "--embed-dim", "8",
      "--no-progress")



def vectors_of(keys):
    kv = KeyedVectors(2, len(keys))
    kv.index_to_key = list(keys)
    kv.key_to_index = {k: i for i, k in enumerate(keys)}
    kv.vectors[:] = np.arange(2 * len(keys), dtype=np.float32).reshape(-1, 2)
    return kv


def _unwritable_folder(base: str) -> Optional[str]:
    """A folder this process cannot create files in: a read-only one, or, for root (who may
    write anywhere), /sys, whose file system takes no new files."""
    folder = os.path.join(base, "read-only")
    os.makedirs(folder, exist_ok=True)
    os.chmod(folder, 0o555)
    for candidate in (folder, "/sys"):
        try:
            tempfile.NamedTemporaryFile(dir=candidate).close()
        except OSError:
            return candidate
    return None


class Files:
    def __init__(self, inputs: str, out: str, unwritable: Optional[str]):
        self.inputs, self.out_dir, self.unwritable_dir = inputs, out, unwritable

    def __getitem__(self, name: str) -> str:
        return os.path.join(self.inputs, name)

    def out(self, name: str = "") -> str:
        return os.path.join(self.out_dir, name) if name else self.out_dir

    def a_file(self, name: str) -> str:
        return os.path.join(self.inputs, "corpus.txt", name)

    def format(self, arg: str) -> str:
        if "{unwritable}" in arg and self.unwritable_dir is None:
            pytest.skip("no folder this process cannot write to")
        return arg.format(**{"in": self.inputs, "out": self.out_dir,
                             "unwritable": self.unwritable_dir,
                             "a_file": os.path.join(self.inputs, "corpus.txt")})


class RunsCode:
    """Unpickled, it calls open(path, "w"): a file appears where none should."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def write_file(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf8"))



def make_inputs(tmp_path_factory):
    """The files the rows read, in a new folder; yields (that folder, a folder this process
    cannot write to, or None)."""
    torch.set_num_threads(1)
    root = str(tmp_path_factory.mktemp("inputs"))
    words = [f"w{i}" for i in range(12)]
    sentences = [" ".join(words[(i + j) % 12] for j in range(6)) for i in range(60)]
    for split in ("train", "valid", "test"):
        write_file(f"{root}/corpus/{split}.txt", "\n".join(sentences) + "\n")
        write_file(f"{root}/empty_corpus/{split}.txt", "")
        write_file(f"{root}/latin1_corpus/{split}.txt", "w1 w2\nw3 caf\xe9 w4\n".encode("latin-1"))
    write_file(f"{root}/corpus.txt", "\n".join(sentences) + "\n")
    write_file(f"{root}/empty.txt", "")
    pairs = [f"{a} {b}\t{b} {a}" for a in words[:4] for b in words[:4]] * 3
    write_file(f"{root}/pairs.tsv", "\n".join(pairs) + "\n")
    write_file(f"{root}/latin1_pairs.tsv", "caf\xe9\tw1\n".encode("latin-1"))
    # vector files: a good one and one damaged in each way a loader must name
    write_file(f"{root}/vectors.txt", "3 2\na 1 2\nb 3 4\nc 5 6\n")
    write_file(f"{root}/truncated.txt", "3 2\na 1 2\nb 3 4\n")
    write_file(f"{root}/no_header.txt", "vectors of my model\na 1 2\n")
    write_file(f"{root}/wrong_dim.txt", "3 2\na 1 2\nb 3\nc 5 6\n")
    write_file(f"{root}/latin1.txt", "2 2\na 1 2\n".encode() + "caf\xe9 3 4\n".encode("latin-1"))
    write_file(f"{root}/nan_text.txt", "2 2\na 1 2\nb x 4\n")
    binary = io.BytesIO()
    binary.write(b"2 2\n")
    for word, row in ((b"a", [1.0, 2.0]), ("caf\xe9".encode("latin-1"), [3.0, 4.0])):
        binary.write(word + b" " + np.array(row, dtype="<f4").tobytes() + b"\n")
    write_file(f"{root}/latin1.bin", binary.getvalue())
    vectors_of(["a", "b", "c"]).save_word2vec_format(f"{root}/good.bin", binary=True)
    with open(f"{root}/good.bin", "rb") as f:
        write_file(f"{root}/truncated.bin", f.read()[:-7])
    vectors_of(["a", "b"]).save(f"{root}/kv.npz")
    model = Word2Vec([s.split() for s in sentences], vector_size=4, min_count=1, epochs=1,
                     workers=1)
    model.save(f"{root}/w2v.npz")
    with open(f"{root}/w2v.npz", "rb") as f:
        write_file(f"{root}/truncated.npz", f.read()[:300])
    with open(f"{root}/pickle.npz", "wb") as f:
        pickle.dump({"vectors": np.zeros((2, 2))}, f)
    with open(f"{root}/foreign.npz", "wb") as f:
        np.savez(f, weights=np.zeros((2, 2)))
    with open(f"{root}/object_array.npz", "wb") as f:
        np.savez(f, meta=np.array([{"class": "KeyedVectors"}], dtype=object))
    # checkpoints: one of each kind, a truncated one, another program's torch file
    assert lm_cli.main(["train", "--data", f"{root}/corpus", "--checkpoint", f"{root}/lm.pt",
                        *LM]) == 0
    assert s2s_cli.main(["train", "--data", f"{root}/pairs.tsv", "--checkpoint",
                         f"{root}/s2s.pt", *S2S]) == 0
    assert mn_cli.main(["train", "--checkpoint", f"{root}/memn2n.pt", *MN]) == 0
    with open(f"{root}/lm.pt", "rb") as f:
        write_file(f"{root}/truncated.pt", f.read()[:2000])
    torch.save({"state_dict": {"w": torch.zeros(2)}}, f"{root}/foreign.pt")
    with open(f"{root}/lm.pt", "rb") as f:  # a real checkpoint, plus an object that runs code
        state = torch.load(f, weights_only=True)
    torch.save(dict(state, extra=RunsCode(f"{root}/marker")), f"{root}/runs_code.pt")
    unwritable = _unwritable_folder(str(tmp_path_factory.mktemp("locked")))
    yield root, unwritable
    if unwritable and unwritable != "/sys":
        os.chmod(unwritable, 0o755)


def snapshot(*folders) -> dict:
    """Every file under the folders (hidden ones included): path -> digest of its bytes."""
    out = {}
    for folder in folders:
        for base, _, names in os.walk(folder):
            for name in names:
                path = os.path.join(base, name)
                with open(path, "rb") as f:
                    out[path] = hashlib.sha256(f.read()).hexdigest()
    return out


def run_command(argv, capsys) -> str:
    """stderr of the command line `argv`, which must fail with a nonzero status."""
    prog, *args = argv
    capsys.readouterr()
    try:
        code = COMMANDS[prog](list(args))
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    except BaseException as exc:  # what a console script would print as a traceback
        pytest.fail(f"{prog} {' '.join(args)} raised {type(exc).__name__}: {exc} (a traceback "
                    f"for the user)")
    err = capsys.readouterr().err
    assert code not in (0, None), f"{prog} {' '.join(args)} exited with status {code}"
    assert "Traceback" not in err
    return err



def check_row(row, inputs, tmp_path, monkeypatch, capsys):
    """Run one row in fresh folders and assert every guarantee (the module's docstring)."""
    root, unwritable = inputs
    out = str(tmp_path / "out")
    os.makedirs(out)
    for name in SENTINELS:
        write_file(os.path.join(out, name), f"the user's own {name}: must survive\n")
    files = Files(root, out, unwritable)
    monkeypatch.chdir(out)  # where a default checkpoint name would land
    before = snapshot(root, out)
    if row.stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(row.stdin))
    if row.argv is not None:
        argv = [files.format(a) for a in row.argv]
        message = run_command(argv, capsys)
    else:
        with pytest.raises(row.error) as info:
            row.call(files)
        message = str(info.value)
    assert row.phrase in message, f"{row.phrase!r} not in the message: {message!r}"
    assert snapshot(root, out) == before, "a file was written, changed or left behind"
    if unwritable == "/sys":
        assert not any(n.endswith((".pt", ".png", ".json", ".txt", ".tmp"))
                       for n in os.listdir("/sys"))
