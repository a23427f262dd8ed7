"""Word2Vec and KeyedVectors .npz files that the file fuzzer (tools/fuzz_files/
target_model.py) found mishandled: a damaged archive or arrays and settings that do not make
a model must raise a ValueError naming the file, never KeyError, AttributeError, RuntimeError
or zlib.error, and never load a model whose tables disagree with its vocabulary (it would
fail only when trained). The same for the .npy files of arrays saved separately, loaded into
memory or with mmap='r': a damaged one, or a meta naming a file outside the model's folder,
is a ValueError naming the files."""

import io
import json
import os
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


# ---------------------------------------------------------------------------------------
# arrays saved separately (.npy files beside the .npz), loaded into memory or mapped
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    """{file name: bytes} of a model saved with sep_limit=0, and its meta."""
    folder = tmp_path_factory.mktemp("split")
    Word2Vec(SENTENCES, vector_size=3, min_count=1, workers=1, epochs=1, seed=1, hs=1,
             negative=1).save(str(folder / "m.npz"), sep_limit=0)
    files = {f: (folder / f).read_bytes() for f in os.listdir(folder)}
    with np.load(folder / "m.npz") as z:
        meta = json.loads(bytes(z["meta"]).decode())
    return files, meta


def write_split(folder, split, meta=None, **replace) -> str:
    """The split model in `folder`, its meta replaced by `meta`, and the .npy file of each
    array named in `replace` by those bytes (None: left out)."""
    files, saved = split
    by_name = {e["name"]: e["file"] for e in saved["separate"]}
    for f, raw in files.items():
        name = next((n for n, file in by_name.items() if file == f), None)
        data = replace.get(name, raw)
        if data is not None:
            (folder / f).write_bytes(data)
    path = folder / "m.npz"
    if meta is not None:
        np.savez(str(path), meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
    return str(path)


def npy(array) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def entry(meta, name):
    return next(e for e in meta["separate"] if e["name"] == name)


def with_entry(meta, array, **changes):
    return dict(meta, separate=[dict(e, **changes) if e["name"] == array else e
                                for e in meta["separate"]])


@pytest.mark.parametrize("mmap", [None, "r"])
def test_the_unchanged_split_model_loads(tmp_path, split, mmap):
    model = Word2Vec.load(write_split(tmp_path, split), mmap=mmap)
    assert model.wv.vectors.shape == (5, 3)


@pytest.mark.parametrize("mmap", [None, "r"])
@pytest.mark.parametrize("case,want", [
    ("missing", "cannot be opened"), ("truncated", "truncated: 4 bytes"),
    ("extra bytes", "bytes after its data"), ("float64", "holds <f8 \\[5, 3\\]"),
    ("a row short", "holds <f4 \\[4, 3\\]"), ("fortran order", "Fortran order"),
    ("not an .npy file", "valid .npy header"), ("a broken header", "valid .npy header")])
def test_a_damaged_npy_file_is_an_error_naming_both_files(tmp_path, split, mmap, case, want):
    vectors = np.load(io.BytesIO(split[0][entry(split[1], "wv_vectors")["file"]]))
    raw = npy(vectors)
    data = {"missing": None, "truncated": raw[:-4], "extra bytes": raw + b"\0" * 8,
            "float64": npy(vectors.astype(np.float64)), "a row short": npy(vectors[:-1]),
            "fortran order": npy(np.asfortranarray(vectors)), "not an .npy file": b"hello",
            "a broken header": raw[:10] + b"{'descr': (" + raw[21:]}[case]
    path = write_split(tmp_path, split, wv_vectors=data)
    npy_path = str(tmp_path / entry(split[1], "wv_vectors")["file"])
    with pytest.raises(ValueError, match=f"{path}: its array 'wv_vectors' is stored in "
                                         f"{npy_path}, which .*{want}"):
        Word2Vec.load(path, mmap=mmap)
    with pytest.raises(ValueError, match=path):
        KeyedVectors.load(path, mmap=mmap)


@pytest.mark.parametrize("mmap", [None, "r"])
@pytest.mark.parametrize("where", ["../up.npy", "ABSOLUTE", "sub/down.npy", "m.npz"])
def test_a_file_outside_the_models_folder_is_never_read(tmp_path, split, mmap, where):
    # Each target is a valid .npy file that fits the meta: only the name check stops it.
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    vectors = npy(np.full((5, 3), 0.5, dtype=np.float32))
    for target in (tmp_path / "up.npy", folder / "sub" / "down.npy", tmp_path / "abs.npy"):
        target.write_bytes(vectors)
    name = str(tmp_path / "abs.npy") if where == "ABSOLUTE" else where
    path = write_split(folder, split, with_entry(split[1], "wv_vectors", file=name))
    with pytest.raises(ValueError, match=f"{path}: separate array 'wv_vectors' names the "
                                         "file .*not a plain .npy file name beside the model"):
        Word2Vec.load(path, mmap=mmap)


@pytest.mark.parametrize("case", ["not a list", "not an object", "no bytes", "bytes wrong",
                                  "negative shape", "object dtype", "unknown dtype",
                                  "twice", "also inline"])
def test_a_malformed_separate_entry_names_the_file(tmp_path, split, case):
    meta = split[1]
    if case == "not a list":
        meta = dict(meta, separate={"wv_vectors": "x.npy"})
    elif case == "not an object":
        meta = dict(meta, separate=meta["separate"] + ["x.npy"])
    elif case == "no bytes":
        meta = dict(meta, separate=[{k: v for k, v in e.items() if k != "bytes"}
                                    for e in meta["separate"]])
    elif case == "twice":
        meta = dict(meta, separate=meta["separate"] + [entry(meta, "syn1neg")])
    else:
        changes = {"bytes wrong": dict(bytes=7), "negative shape": dict(shape=[-5, -3]),
                   "object dtype": dict(dtype="|O"), "unknown dtype": dict(dtype="zz9"),
                   "also inline": dict(name="meta")}[case]
        meta = with_entry(meta, "wv_vectors", **changes)
    path = write_split(tmp_path, split, meta)
    for mmap in (None, "r"):
        with pytest.raises(ValueError, match=path):
            Word2Vec.load(path, mmap=mmap)
