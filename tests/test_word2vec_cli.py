"""The word2vec command line: a run end to end, and every input error named in one line on
stderr (exit status 2), before any training, never a traceback."""

import os
import subprocess
import sys

import pytest
import torch

from fastsoftmax.cli import word2vec as cli
from fastsoftmax.models import KeyedVectors

from w2v_helpers import planted_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = ["-size", "8", "-window", "2", "-iter", "1", "-min-count", "1", "-threads", "1"]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(" ".join(s) for s in planted_corpus(sentences=200)) + "\n")
    return path


def test_cli_end_to_end_as_a_module(tmp_path, corpus):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("m0_0\tm0_1\t9\nm0_0\tm1_1\t1\nm2_0\tm2_3\t8\nm3_1\tc4_2\t2\n")
    out = tmp_path / "vec.bin"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run(
        [sys.executable, "-m", "fastsoftmax.cli.word2vec", "-train", str(corpus), "-output",
         str(out), "-size", "16", "-window", "3", "-cbow", "0", "-iter", "2", "-min-count",
         "1", "-threads", "2", "-binary", "1", "-eval-pairs", str(pairs), "-verbose"],
        capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "words/s" in res.stderr and "100%" in res.stderr  # the tqdm bar
    assert "EPOCH 1: training on" in res.stderr  # gensim-style logs with -verbose
    assert "vocabulary" in res.stdout and "spearman" in res.stdout
    kv = KeyedVectors.load_word2vec_format(str(out), binary=True)
    assert kv.vectors.shape == (len(kv), 16) and "m0_0" in kv


def _fails(capsys, argv, *expected):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    for text in expected:
        assert text in err, err
    return err


def test_cli_errors_are_one_line_and_come_before_training(tmp_path, corpus, capsys,
                                                           monkeypatch):
    trained = []
    monkeypatch.setattr(cli.Word2Vec, "train", lambda *a, **k: trained.append(1))
    out = str(tmp_path / "v.txt")
    base = ["-train", str(corpus), "-output", out] + SMALL
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    if not os.access(str(locked), os.W_OK):  # root can write anywhere: nothing to test then
        _fails(capsys, base[:3] + [str(locked / "v.txt")] + SMALL, "cannot be written")
    _fails(capsys, base[:3] + [str(tmp_path / "no" / "v.txt")] + SMALL, "does not exist")
    _fails(capsys, base + ["-eval-pairs", str(tmp_path / "ws.tsv")], "-eval-pairs", "ws.tsv")
    _fails(capsys, base + ["-eval-analogies", str(tmp_path)], "is a directory")
    _fails(capsys, base + ["-negative", "0"], "-negative must be > 0 when -hs is 0")
    _fails(capsys, base + ["-hs", "1", "-negative", "-1"], "-negative must be >= 0")
    _fails(capsys, ["-train", str(tmp_path), "-output", out] + SMALL, "is a directory")
    _fails(capsys, ["-train", str(tmp_path / "x.txt"), "-output", out], "does not exist")
    _fails(capsys, base + ["-encoding", "klingon"], "klingon")
    _fails(capsys, base + ["-round-size", "-3"], "-round-size must be auto or an integer")
    if not torch.cuda.is_available():
        _fails(capsys, base + ["-device", "cuda"], "CUDA is not available")
    existing = tmp_path / "keep.txt"
    existing.write_text("precious")
    _fails(capsys, base[:3] + [str(existing)] + SMALL, "already exists", "-force")
    assert existing.read_text() == "precious" and not trained


def test_cli_round_size_trains_the_gpu_order(tmp_path, corpus, capsys):
    """-round-size on the CPU replays CUDA's lockstep rounds: another model than the
    sequential order's, the same for the same flags."""
    runs = {}
    for name, extra in (("seq", []), ("rounds", ["-round-size", "64"]),
                        ("again", ["-round-size", "64"])):
        out = tmp_path / f"{name}.txt"
        assert cli.main(["-train", str(corpus), "-output", str(out), "-quiet"] + SMALL
                        + extra) == 0
        runs[name] = KeyedVectors.load_word2vec_format(str(out))
    assert (runs["rounds"].vectors == runs["again"].vectors).all()
    assert not (runs["rounds"].vectors == runs["seq"].vectors).all()


def test_cli_non_utf8_corpus(tmp_path, capsys):
    path = tmp_path / "latin1.txt"
    lines = [" ".join(s) for s in planted_corpus(sentences=60)]
    lines[41] += " caf\xe9"
    path.write_bytes("\n".join(lines).encode("latin-1"))
    out = tmp_path / "v.txt"
    _fails(capsys, ["-train", str(path), "-output", str(out)] + SMALL,
           "latin1.txt:42: not utf8 text", "-encoding")
    assert not out.exists()
    assert cli.main(["-train", str(path), "-output", str(out), "-quiet", "-encoding",
                     "latin-1"] + SMALL) == 0
    assert "caf\xe9" in KeyedVectors.load_word2vec_format(str(out))
    assert cli.main(["-train", str(path), "-output", str(out), "-quiet", "-force",
                     "-decode-errors", "replace"] + SMALL) == 0
    assert "caf\ufffd" in KeyedVectors.load_word2vec_format(str(out))
