"""Word2Vec and KeyedVectors .npz files that the file fuzzer (tools/fuzz_files/
target_model.py) found mishandled: a damaged archive or arrays and settings that do not make
a model must raise a ValueError naming the file, never KeyError, AttributeError, RuntimeError
or zlib.error, and never load a model whose tables disagree with its vocabulary (it would
fail only when trained)."""

import io
import json
import zipfile

import numpy as np
import pytest

from fastsoftmax.models.word2vec import KeyedVectors, Word2Vec

SENTENCES = [["a", "b", "c", "a"], ["b", "c", "d", "e", "a"], ["e", "d"]] * 3


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(file bytes, arrays, meta) of a small model with both output layers."""
    path = tmp_path_factory.mktemp("model") / "m.npz"
    Word2Vec(SENTENCES, vector_size=3, min_count=1, workers=1, epochs=1, seed=1, hs=1,
             negative=1).save(str(path))
    with np.load(path) as z:
        arrays = {k: np.array(z[k]) for k in z.files}
    meta = json.loads(bytes(arrays.pop("meta")).decode())
    return path.read_bytes(), arrays, meta


def write(tmp_path, arrays, meta) -> str:
    arrays = dict(arrays, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
    path = tmp_path / "m.npz"
    np.savez(str(path), **arrays)
    return str(path)


def changed(arrays, **kw):
    out = dict(arrays)
    for k, v in kw.items():
        if v is None:
            del out[k]
        else:
            out[k] = v
    return out


def test_the_unchanged_file_loads(tmp_path, saved):
    _, arrays, meta = saved
    model = Word2Vec.load(write(tmp_path, arrays, meta))
    assert model.wv.index_to_key == Word2Vec.load(write(tmp_path, arrays, meta)).wv.index_to_key


@pytest.mark.parametrize("case", ["no config", "meta is a list", "vector_size a string",
                                  "keys a number", "one vector short", "round_size -3"])
def test_settings_and_arrays_that_make_no_model_name_the_file(tmp_path, saved, case):
    _, arrays, meta = saved
    if case == "no config":
        meta = {k: v for k, v in meta.items() if k != "config"}
    elif case == "meta is a list":
        meta = [meta]
    elif case == "vector_size a string":
        meta = dict(meta, config=dict(meta["config"], vector_size="3"))
    elif case == "round_size -3":
        meta = dict(meta, config=dict(meta["config"], round_size=-3))
    elif case == "keys a number":
        arrays = changed(arrays, wv_keys=np.frombuffer(b"7", dtype=np.uint8))
    else:
        arrays = changed(arrays, wv_vectors=arrays["wv_vectors"][:-1])
    path = write(tmp_path, arrays, meta)
    with pytest.raises(ValueError, match=path):
        Word2Vec.load(path)


@pytest.mark.parametrize("name,rows", [("syn1neg", -1), ("keep", -1),
                                       ("wv_attr_count", -2)])
def test_a_table_without_a_row_per_word_is_refused(tmp_path, saved, name, rows):
    # These loaded; training then failed on the shapes (word2vec_train checks them).
    _, arrays, meta = saved
    path = write(tmp_path, changed(arrays, **{name: arrays[name][:rows]}), meta)
    with pytest.raises(ValueError, match=f"{path}: .*shape"):
        Word2Vec.load(path)


def test_keyed_vectors_load_names_the_file(tmp_path, saved):
    _, arrays, meta = saved
    path = write(tmp_path, changed(arrays, wv_vectors=arrays["wv_vectors"][:-1]), meta)
    with pytest.raises(ValueError, match=path):
        KeyedVectors.load(path)


def damaged(raw: bytes, flag_bits: int = 0, method: int = None) -> bytes:
    """The archive with the flag bits or the compression method of every entry changed in
    both of the zip's headers (what a flipped byte does to one of them)."""
    out = bytearray(raw)
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = out.find(signature)
        while at >= 0:
            out[at + flags_at] |= flag_bits
            if method is not None:
                out[at + flags_at + 2] = method
            at = out.find(signature, at + 4)
    return bytes(out)


@pytest.mark.parametrize("how", ["encrypted", "bzip2", "unknown method"])
def test_a_damaged_archive_names_the_file(tmp_path, saved, how):
    raw = saved[0]
    data = {"encrypted": lambda: damaged(raw, flag_bits=1),
            "bzip2": lambda: damaged(raw, method=zipfile.ZIP_BZIP2),
            "unknown method": lambda: damaged(raw, method=99)}[how]()
    path = tmp_path / "damaged.npz"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=f"{path} cannot be read"):
        Word2Vec.load(str(path))


def test_damaged_helper_changes_the_archive(saved):
    with pytest.raises(RuntimeError, match="encrypted"):
        zipfile.ZipFile(io.BytesIO(damaged(saved[0], flag_bits=1))).read("syn1.npy")
