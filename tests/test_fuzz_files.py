"""The file fuzz targets of make fuzz-files (tools/fuzz_files/), quickly: each target's check
over 2,000 inputs (its seeds, then seeded random mutations; in process, without atheris or
ASan), a planted wrong result or exception caught, and the driver's count and exit status
when atheris is installed (build/fuzz-deps, which make fuzz-files fills)."""

import csv
import importlib
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUZZ = os.path.join(ROOT, "tools", "fuzz_files")
sys.path.insert(0, FUZZ)
harness = importlib.import_module("harness")

RUNS = 2000


@pytest.fixture(autouse=True)
def sentence_cut():
    """The corpus_file target sets the readers' sentence cut (MAX_SENTENCE_WORDS, module
    constants) per input; put it back, so that the tests run after these in the same process
    (another module's, under pytest-xdist) cut at 10,000 words."""
    from fastsoftmax.models import textfiles
    from fastsoftmax.models.word2vec import corpus_file
    saved = textfiles.MAX_SENTENCE_WORDS, corpus_file.MAX_SENTENCE_WORDS
    yield
    textfiles.MAX_SENTENCE_WORDS, corpus_file.MAX_SENTENCE_WORDS = saved


def target(name: str):
    module = importlib.import_module(f"target_{name}")
    module.instrument()  # under atheris this runs inside its import hook
    return module


@pytest.mark.parametrize("name", ["corpus_encode", "corpus_file", "vectors", "model"])
def test_target_passes_its_seeds_and_mutations(name):
    t = target(name)
    seeds = t.seeds()
    assert seeds
    done, failure = harness.plain_fuzz(t.one_input, seeds, RUNS, seed=1)
    assert failure is None, failure
    assert done == RUNS


def test_a_wrong_op_result_is_a_finding(monkeypatch):
    t = target("corpus_encode")
    reference = t.corpus_encode_reference

    def off_by_one(text, words, max_words):
        tokens, ends, raw, bad = reference(text, words, max_words)
        return tokens, ends, [r + 1 for r in raw], bad

    monkeypatch.setattr(t, "corpus_encode_reference", off_by_one)
    done, failure = harness.plain_fuzz(t.one_input, t.seeds(), RUNS)
    assert done == 1 and isinstance(failure[1], AssertionError)


def test_a_reader_that_differs_on_bad_bytes_is_a_finding(monkeypatch):
    t = target("corpus_file")
    monkeypatch.setattr(t.corpus_file, "_raise_bad_byte",
                        lambda corpus, offset, chunk, bad: (_ for _ in ()).throw(
                            t.CorpusDecodeError(f"{corpus.path}: bad byte")))
    done, failure = harness.plain_fuzz(t.one_input, t.seeds(), RUNS)
    assert failure is not None and "bad byte" in str(failure[1])


@pytest.mark.parametrize("exc", [IndexError("list index out of range"),
                                 MemoryError(), ValueError("no file named")])
def test_a_loader_error_that_names_no_file_or_is_not_a_value_error_is_a_finding(
        monkeypatch, exc):
    t = target("vectors")

    def load(*args, **kw):
        raise exc

    monkeypatch.setattr(t.KeyedVectors, "load_word2vec_format", load)
    done, failure = harness.plain_fuzz(t.one_input, t.seeds(), RUNS)
    assert done == 1 and isinstance(failure[1], AssertionError)
    assert type(exc).__name__ in str(failure[1])


def test_the_model_target_reads_separate_files_in_memory_and_mapped(monkeypatch):
    t = target("model")
    modes = []
    read = t.persistence._read_npy

    def counted(path, entry, mode):
        modes.append(mode)
        return read(path, entry, mode)

    monkeypatch.setattr(t.persistence, "_read_npy", counted)
    done, failure = harness.plain_fuzz(t.one_input, t.seeds(), 300, seed=1)
    assert failure is None, failure
    assert {None, "r", "c"} <= set(modes)  # read, mapped read-only, mapped copy-on-write


def test_a_loader_that_reads_outside_the_models_folder_is_a_finding(monkeypatch):
    t = target("model")
    monkeypatch.setattr(t.persistence, "_plain_npy_name", lambda file: file.endswith(".npy"))
    done, failure = harness.plain_fuzz(t.one_input, t.seeds(), RUNS)
    assert failure is not None and "outside the model's folder" in str(failure[1])


def test_mutations_are_seeded():
    t = target("vectors")
    seeds = t.seeds()
    seen = []
    for _ in range(2):
        inputs = []
        harness.plain_fuzz(inputs.append, seeds, 200, seed=5)
        seen.append(inputs)
    assert seen[0] == seen[1] and len(set(seen[0])) > 150


def atheris_installed() -> bool:
    return os.path.isdir(os.path.join(ROOT, "build", "fuzz-deps", "atheris"))


@pytest.mark.skipif(not atheris_installed(), reason="atheris not installed (make fuzz-files)")
def test_driver_counts_executions_and_passes(tmp_path):
    rows = tmp_path / "rows.csv"
    out = subprocess.run([sys.executable, os.path.join(FUZZ, "run.py"), "--runs", "300",
                          "--out", str(tmp_path), "--rows", str(rows), "corpus_encode"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("corpus_encode "))
    assert row.split()[1] == "300" and row.split()[4] == "0" and row.endswith("ok"), row
    # The same figures as rows in the benchmarks' schema, for docs/reliability.md's table.
    with open(rows, newline="") as f:
        written = {r["metric"]: r["value"] for r in csv.DictReader(f)
                   if r["case"] == "corpus_encode" and r["provider"] == "plain"}
    assert written["executions"] == "300" and written["crashes"] == "0", written


@pytest.mark.skipif(not atheris_installed(), reason="atheris not installed (make fuzz-files)")
def test_driver_fails_and_keeps_the_input_when_a_target_finds_a_wrong_result(tmp_path):
    # A reference that disagrees with the op, found before tests/ on the path.
    fake = tmp_path / "fake"
    fake.mkdir()
    # Only the encoder is wrong: the count reference is the real one, loaded by its path.
    real = os.path.join(ROOT, "tests", "reference_word2vec.py")
    (fake / "reference_word2vec.py").write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('real_reference', {real!r})\n"
        "real = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(real)\n"
        "corpus_count_reference = real.corpus_count_reference\n"
        "def corpus_encode_reference(text, words, max_words):\n    return [], [], [], -2\n")
    out = subprocess.run([sys.executable, os.path.join(FUZZ, "run.py"), "--runs", "300",
                          "--out", str(tmp_path / "out"), "corpus_encode"], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(fake)))
    assert out.returncode == 1, out.stdout + out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("corpus_encode "))
    assert row.split()[4] == "1" and "FAILED" in row, row
    crashes = list((tmp_path / "out" / "corpus_encode").glob("crash-*"))
    assert len(crashes) == 1  # libFuzzer tries the empty input first: it fails here
