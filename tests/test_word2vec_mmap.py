"""Word2Vec and KeyedVectors saved with arrays in separate .npy files (gensim's separately and
sep_limit) and loaded with mmap='r': the layout, round trips, what a mapped model shares with
its files, training a mapped model (copy on first write: the files never change) and
crash-safe writes. Damaged and hostile files: tests/test_hostile_model_files.py."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from fastsoftmax import atomic
from fastsoftmax.models.word2vec import KeyedVectors, Word2Vec, persistence

from w2v_helpers import planted_corpus

SENTENCES = planted_corpus(sentences=200)
KINDS = {"ns": dict(hs=0, negative=3), "hs": dict(hs=1, negative=0),
         "both": dict(hs=1, negative=2)}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def model(kind="ns"):
    return Word2Vec(SENTENCES, vector_size=8, min_count=1, workers=1, epochs=1, seed=3,
                    **KINDS[kind])


def meta_of(path) -> dict:
    with np.load(path) as z:
        return json.loads(bytes(z["meta"]).decode())


def contents(folder) -> dict:
    return {f: (folder / f).read_bytes() for f in sorted(os.listdir(folder))}


def mapped_file(address: int):
    """The file /proc/self/maps shows mapped at `address`, or None."""
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= address < hi:
                return fields[5].strip() if len(fields) == 6 else None
    return None


def tables(m) -> dict:
    out = {"vectors": m.wv.vectors, "counts": m.wv.counts, "keep": m.keep_probabilities()}
    if m.negative:
        out["syn1neg"] = m.syn1neg
    if m.hs:
        out["syn1"], out["links"] = m.syn1, m.hs_tree.links.numpy()
    return out


def assert_same_model(a, b):
    assert a.wv.index_to_key == b.wv.index_to_key
    ta, tb = tables(a), tables(b)
    assert ta.keys() == tb.keys()
    for name in ta:
        assert np.array_equal(ta[name], tb[name]), name
    assert all(getattr(a, k) == getattr(b, k) for k in Word2Vec._CONFIG)


@pytest.mark.parametrize("kind", list(KINDS))
def test_sep_limit_zero_and_mmap_round_trip_equal_the_in_memory_load(tmp_path, kind):
    m = model(kind)
    path = tmp_path / "m.npz"
    m.save(str(path), sep_limit=0)
    meta = meta_of(path)
    with np.load(path) as z:
        assert z.files == ["meta"]  # every array went to its own file
    assert meta["format"] == 2
    for e in meta["separate"]:
        assert e["file"].startswith("m.npz.") and (tmp_path / e["file"]).is_file()
        header = np.load(tmp_path / e["file"], mmap_mode="r")
        assert (header.dtype.str, list(header.shape), header.nbytes) == (
            e["dtype"], e["shape"], e["bytes"])
    assert len(os.listdir(tmp_path)) == 1 + len(meta["separate"])
    mapped = Word2Vec.load(str(path), mmap="r")
    assert_same_model(mapped, m)
    assert_same_model(Word2Vec.load(str(path)), m)
    m.save(str(tmp_path / "one.npz"))  # the single-file layout loads the same
    assert_same_model(Word2Vec.load(str(tmp_path / "one.npz"), mmap="r"), mapped)
    kv = KeyedVectors.load(str(path), mmap="r")
    assert kv.index_to_key == m.wv.index_to_key
    assert np.array_equal(kv.vectors, m.wv.vectors)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux's /proc")
def test_mapped_arrays_are_read_only_maps_of_the_files(tmp_path):
    m = model("both")
    path = tmp_path / "m.npz"
    m.save(str(path), sep_limit=0)
    files = {e["name"]: str(tmp_path / e["file"]) for e in meta_of(path)["separate"]}
    b = Word2Vec.load(str(path), mmap="r")
    v = b.wv.vectors
    assert isinstance(v, np.memmap) and not v.flags.writeable
    assert v.filename == files["wv_vectors"]
    assert mapped_file(v.ctypes.data) == files["wv_vectors"]
    # the training tables use the same pages, until training writes them
    assert mapped_file(b._syn0.data_ptr()) == files["wv_vectors"]
    assert mapped_file(b._syn1neg.data_ptr()) == files["syn1neg"]
    assert mapped_file(b._syn1.data_ptr()) == files["syn1"]
    with pytest.raises(ValueError, match="read-only"):
        v[0, 0] = 1.0
    kv = KeyedVectors.load(str(path), mmap="r")
    assert isinstance(kv.vectors, np.memmap) and not kv.vectors.flags.writeable
    assert mapped_file(kv.vectors.ctypes.data) == files["wv_vectors"]
    # mmap=None reads every array into memory, the separate ones too
    a = Word2Vec.load(str(path))
    assert not isinstance(a.wv.vectors, np.memmap) and a.wv.vectors.flags.writeable
    assert mapped_file(a._syn0.data_ptr()) not in files.values()
    assert not isinstance(KeyedVectors.load(str(path)).vectors, np.memmap)


def test_queries_on_a_mapped_model_equal_those_in_memory(tmp_path):
    m = model("ns")
    path = str(tmp_path / "m.npz")
    m.save(path, sep_limit=0)
    a, b = Word2Vec.load(path), Word2Vec.load(path, mmap="r")
    pairs = tmp_path / "pairs.tsv"
    words = m.wv.index_to_key
    pairs.write_text("".join(f"{words[i]}\t{words[i + 1]}\t{i % 7}\n" for i in range(0, 40, 2)))
    for wv in (b.wv, KeyedVectors.load(path, mmap="r")):
        assert wv.most_similar("m0_0", topn=5) == a.wv.most_similar("m0_0", topn=5)
        assert wv.similarity("m0_0", "c1_2") == a.wv.similarity("m0_0", "c1_2")
        assert np.array_equal(wv[["m0_0", "c2_1"]], a.wv[["m0_0", "c2_1"]])
        assert wv.evaluate_word_pairs(str(pairs)) == a.wv.evaluate_word_pairs(str(pairs))
        assert wv.doesnt_match(["m0_0", "m0_1", "c3_3"]) == a.wv.doesnt_match(
            ["m0_0", "m0_1", "c3_3"])


@pytest.mark.parametrize("kind", list(KINDS))
def test_training_a_mapped_model_copies_on_first_write(tmp_path, kind):
    m = model(kind)
    path = str(tmp_path / "m.npz")
    m.save(path, sep_limit=0)
    before = contents(tmp_path)
    a, b = Word2Vec.load(path), Word2Vec.load(path, mmap="r")
    for x in (a, b):
        x.train(SENTENCES[:100], total_examples=100, epochs=1)
    assert contents(tmp_path) == before  # the files never change
    assert not np.array_equal(b.wv.vectors, m.wv.vectors)  # training took effect
    assert_same_model(b, a)  # exactly as on the model read into memory
    # the work is kept: saved over the model's own path (its files still mapped), it loads
    b.save(path, sep_limit=0)
    assert not (set(before) - {"m.npz"}) & set(os.listdir(tmp_path))  # old files removed
    assert_same_model(Word2Vec.load(path, mmap="r"), a)
    assert b.wv.most_similar("m0_0", topn=3) == a.wv.most_similar("m0_0", topn=3)


@pytest.mark.parametrize("mmap", ["r+", "c", "w+", "R", True, 1])
def test_other_mmap_values_are_refused(tmp_path, mmap):
    path = str(tmp_path / "m.npz")
    model().save(path, sep_limit=0)
    for load in (Word2Vec.load, KeyedVectors.load):
        with pytest.raises(ValueError, match="mmap must be None .* or 'r'"):
            load(path, mmap=mmap)


def test_separately_and_sep_limit_choose_the_separate_arrays(tmp_path):
    m = model("ns")
    path = str(tmp_path / "m.npz")

    def separate(**kw):
        m.save(path, **kw)
        return sorted(e["name"] for e in meta_of(path).get("separate", []))

    assert separate() == [] and meta_of(path)["format"] == 1  # small: one file, as before
    assert os.listdir(tmp_path) == ["m.npz"]
    assert separate(separately=["syn1neg"], sep_limit=0) == ["syn1neg"]  # no size rule then
    assert separate(separately=[], sep_limit=0) == []
    table = m.wv.vectors.nbytes
    assert separate(sep_limit=table) == ["syn1neg", "wv_vectors"]  # bytes >= sep_limit
    assert separate(sep_limit=table + 1) == []
    assert len(os.listdir(tmp_path)) == 1  # each save removed the files of the one before
    with pytest.raises(ValueError, match="'vectors'.*name no array.*wv_vectors"):
        m.save(path, separately=["vectors"])
    for bad in (-1, "10MB", True):
        with pytest.raises(ValueError, match="sep_limit"):
            m.save(path, sep_limit=bad)
    kv_path = str(tmp_path / "kv.npz")
    m.wv.save(kv_path, separately=["vectors"])
    assert [e["name"] for e in meta_of(kv_path)["separate"]] == ["vectors"]
    assert isinstance(KeyedVectors.load(kv_path, mmap="r").vectors, np.memmap)
    with pytest.raises(TypeError, match="ignore"):
        m.wv.save(kv_path, ignore=["vectors"])


def test_a_failed_save_leaves_the_old_files_and_no_new_ones(tmp_path, monkeypatch):
    m = model("ns")
    path = str(tmp_path / "m.npz")
    m.save(path, sep_limit=0)
    before = contents(tmp_path)
    m.train(SENTENCES[:50], total_examples=50, epochs=1)  # new tables of the same shapes

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(persistence.np, "savez", disk_full)  # after the .npy files
    with pytest.raises(OSError, match="No space"):
        m.save(path, sep_limit=0)
    monkeypatch.undo()
    assert contents(tmp_path) == before
    assert not np.array_equal(Word2Vec.load(path, mmap="r").wv.vectors, m.wv.vectors)


def test_an_error_once_the_new_npz_is_in_place_keeps_the_files_it_names(tmp_path,
                                                                          monkeypatch):
    m = model("ns")
    path = str(tmp_path / "m.npz")
    m.save(path, sep_limit=0)
    arrays = len(meta_of(path)["separate"])
    m.train(SENTENCES[:50], total_examples=50, epochs=1)
    synced = []

    def interrupted(folder):  # the folder's sync after the .npz's rename: an interrupt
        synced.append(folder)
        if len(synced) == arrays + 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(atomic, "_fsync_folder", interrupted)
    with pytest.raises(KeyboardInterrupt):
        m.save(path, sep_limit=0)
    monkeypatch.undo()
    assert_same_model(Word2Vec.load(path, mmap="r"), m)  # the new save, whole


KILLED_SAVE = """
import os, sys
import numpy as np
from fastsoftmax.models.word2vec import Word2Vec, persistence
m = Word2Vec.load(sys.argv[1])
m.wv.vectors[:] += 1.0  # a view of the training table on the CPU: what the next save writes
m._syn1neg += 1.0
persistence.np.savez = lambda *a, **k: os._exit(9)  # killed after the .npy files
m.save(sys.argv[1], sep_limit=0)
"""


def test_a_save_killed_before_the_npz_leaves_the_old_model_whole(tmp_path):
    m = model("ns")
    path = str(tmp_path / "m.npz")
    m.save(path, sep_limit=0)
    before = contents(tmp_path)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, "-c", KILLED_SAVE, path], env=env, timeout=300)
    assert run.returncode == 9
    after = contents(tmp_path)
    left = sorted(f for f in set(after) - set(before) if not f.startswith("."))  # not the
    # .npz's temporary file, which the next write of m.npz removes (fastsoftmax/atomic.py)
    assert len(left) == len(before) - 1 and all(f.startswith("m.npz.") for f in left)
    assert all(after[f] == before[f] for f in before)  # the old save, untouched
    for mmap in (None, "r"):
        assert_same_model(Word2Vec.load(path, mmap=mmap), m)
    # the files the killed save left are named by no .npz: the next save removes them
    m.save(path, sep_limit=0)
    assert len(os.listdir(tmp_path)) == len(before)
    assert_same_model(Word2Vec.load(path, mmap="r"), m)


def test_a_save_never_writes_over_or_removes_another_file(tmp_path, monkeypatch):
    m = model("ns")
    path = str(tmp_path / "m.npz")
    m.save(path)
    mine = tmp_path / "m.npz.0123abcd.wv_vectors.npy"  # a name this save would use
    mine.write_bytes(b"the user's own file")
    np.save(tmp_path / "other.npz.0123abcd.wv_vectors.npy", np.ones(3))  # another model's
    np.save(tmp_path / "m.npz.notes.npy", np.ones(3))  # not of the pattern
    others = contents(tmp_path)
    monkeypatch.setattr(persistence, "_token", lambda: "0123abcd")
    with pytest.raises(ValueError, match=f"{mine} already exists.*left as it is"):
        m.save(path, sep_limit=0)
    assert contents(tmp_path) == others
    monkeypatch.undo()  # a fresh token: the save goes through and leaves the others alone
    m.save(path, sep_limit=0)
    m.save(path, sep_limit=0)
    after = contents(tmp_path)
    assert all(after[f] == others[f] for f in others if f != "m.npz")
    assert_same_model(Word2Vec.load(path, mmap="r"), m)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_loading_a_mapped_model_on_cuda_copies_the_tables(tmp_path):
    m = model("ns")
    path = str(tmp_path / "m.npz")
    m.save(path, sep_limit=0)
    before = contents(tmp_path)
    g = Word2Vec.load(path, device="cuda", mmap="r")
    assert g._syn0.device.type == "cuda" and g._syn1neg.device.type == "cuda"
    assert np.array_equal(g._syn0.cpu().numpy(), m.wv.vectors)
    assert isinstance(g.wv.vectors, np.memmap) and not g.wv.vectors.flags.writeable
    g.train(SENTENCES[:100], total_examples=100, epochs=1)
    assert not np.array_equal(g.wv.vectors, m.wv.vectors)
    assert contents(tmp_path) == before
