"""Fuzz target: Word2Vec.load on model files (model_files.load_model, persistence.load_npz), in
both layouts (one .npz; an .npz with .npy files beside it) and both ways of loading (into
memory; mmap='r'). A file either loads into a model whose tables agree (V words: vectors and
syn1neg V x D, syn1 (V - 1) x D, keep probabilities and counts V) or raises a ValueError
naming the file. A load never reads a file outside the model's folder (a decoy .npy in a
subfolder, which fits the model, must never show up in it), and with mmap='r' writing the
loaded tables neither crashes (a read-only map would) nor changes a file on disk.

Input: one control byte, then
  - bit 0 clear: a file's bytes, bits 1-2 picking which: 0 the .npz (seeds: models written
    by Word2Vec.save, among them one saved with sep_limit=0 whose .npy files lie beside
    it), 1-3 one of that split model's .npy files (FILES), written over it, its .npz intact;
    this mostly exercises the zip layer and the .npy header and length checks;
  - bit 0 set: the model's `meta` JSON; the harness writes a well-formed .npz of a saved
    model's arrays with that meta (less those the meta lists as separate), bits 1-5 leaving
    out one array each and bit 6 cutting a row off the vectors, which exercises the checks
    of the settings, of the shapes and of the separate-array entries;
  - bit 7: load with mmap='r' (Word2Vec, and KeyedVectors, which must agree when both load).

    python tools/fuzz_files/target_model.py -runs=100000 CORPUS_DIR
"""

import io
import json
import os
import sys

import harness

DROPPABLE = ["syn1neg", "syn1", "hs_links", "keep", "wv_attr_count"]
FILES = ["wv_vectors", "syn1neg", "hs_links"]  # the .npy files bits 1-2 pick (1, 2, 3)
TOKEN = "5eed5eed"  # the split model's files keep their names from run to run


def instrument():
    global np, KeyedVectors, Word2Vec, persistence
    import numpy as np

    from fastsoftmax.models.word2vec import KeyedVectors, Word2Vec, persistence


PATH = harness.scratch_file("model.npz")
FOLDER = os.path.dirname(PATH)
SPLIT = os.path.join(FOLDER, "split.npz")
DECOY = os.path.join("outside", "decoy.npy")  # relative to FOLDER: not a plain name
_MODELS: dict = {}  # seed models' file bytes, arrays and meta, made once
_NPY: dict = {}     # the split model's .npy files: name -> original bytes


def _read(path: str):
    with open(path, "rb") as f:
        buf = f.read()
    with np.load(path) as z:
        arrays = {k: np.array(z[k]) for k in z.files}
    return buf, arrays, persistence.decode_json(arrays.pop("meta"))


def saved_models():
    if not _MODELS:
        sentences = [["a", "b", "c", "a"], ["b", "c", "d", "e", "a"], ["e", "d"]] * 3
        for name, kw in [("ns", dict(hs=0, negative=2)), ("hs", dict(hs=1, negative=0)),
                         ("both", dict(hs=1, negative=1))]:
            model = Word2Vec(sentences, vector_size=3, min_count=1, workers=1, epochs=1,
                             seed=1, **kw)
            model.save(PATH)
            _MODELS[name] = _read(PATH)
        token, persistence._token = persistence._token, lambda: TOKEN
        try:
            model.save(SPLIT, sep_limit=0)
        finally:
            persistence._token = token
        _MODELS["split"] = _read(SPLIT)
        for entry in _MODELS["split"][2]["separate"]:
            with open(os.path.join(FOLDER, entry["file"]), "rb") as f:
                _NPY[entry["file"]] = f.read()
        os.makedirs(os.path.join(FOLDER, "outside"), exist_ok=True)
        np.save(os.path.join(FOLDER, DECOY), np.full_like(model.wv.vectors, 0.5))
    return _MODELS


def _put(path: str, data: bytes) -> None:
    """A new file at `path` (a rename: a map of the old one, if any, keeps its pages)."""
    with open(path + ".new", "wb") as f:
        f.write(data)
    os.replace(path + ".new", path)


def _listed(meta: bytes) -> set:
    """The array names a (fuzzed) meta lists as separate, as far as it parses."""
    try:
        entries = json.loads(meta).get("separate", [])
        return {e["name"] for e in entries
                if isinstance(e, dict) and isinstance(e.get("name"), str)}
    except (ValueError, AttributeError, TypeError, KeyError):
        return set()


def structured(ctrl: int, meta: bytes) -> bytes:
    _, arrays, _ = saved_models()["both"]
    skip = _listed(meta)
    arrays = {k: v for k, v in arrays.items() if k not in skip and
              not any(ctrl & (2 << i) and k == d for i, d in enumerate(DROPPABLE))}
    if ctrl & 64 and "wv_vectors" in arrays:
        arrays["wv_vectors"] = arrays["wv_vectors"][:-1]
    arrays["meta"] = np.frombuffer(meta, dtype=np.uint8)
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def write_files(ctrl: int, data: bytes) -> dict:
    """Writes this input's files; returns {path: bytes} of the .npy files beside the model."""
    files = {os.path.join(FOLDER, f): raw for f, raw in _NPY.items()}
    which = (ctrl >> 1) & 3
    if ctrl & 1:
        _put(PATH, structured(ctrl, data))
    elif which == 0:
        _put(PATH, data)
    else:
        _put(PATH, saved_models()["split"][0])
        target = next(p for p in files if p.endswith(f".{FILES[which - 1]}.npy"))
        files[target] = data
    for path, raw in files.items():
        _put(path, raw)
    return files


def one_input(buf: bytes) -> None:
    saved_models()
    ctrl = buf[0] if buf else 0
    files = write_files(ctrl, buf[1:])
    mmap = "r" if ctrl & 128 else None
    kv = None
    if mmap:  # the wv alone, mapped 'r' (Word2Vec maps its tables copy-on-write)
        try:
            kv = KeyedVectors.load(PATH, mmap=mmap)
        except Exception as exc:
            harness.check_loader_error(exc, PATH)
    try:
        model = Word2Vec.load(PATH, mmap=mmap)
    except Exception as exc:  # checked: only a ValueError naming the file may escape
        harness.check_loader_error(exc, PATH)
        return
    assert kv is None or np.array_equal(kv.vectors, model.wv.vectors)
    V, D = len(model.wv), model.vector_size
    assert model.wv.vectors.shape == (V, D) and tuple(model._syn0.shape) == (V, D)
    assert len(model._keep_np) == V and len(model.wv.counts) == V
    tables = [model._syn0, model._syn1neg, model._syn1]
    if model.negative:
        assert tuple(model._syn1neg.shape) == (V, D), model._syn1neg.shape
    if model.hs:
        assert tuple(model._syn1.shape) == (V - 1, D), model._syn1.shape
    decoy = np.load(os.path.join(FOLDER, DECOY))
    for t in tables:
        assert t is None or t.shape != decoy.shape or not np.array_equal(t.numpy(), decoy), \
            "a table holds the decoy, a file outside the model's folder"
    if mmap:
        assert not (isinstance(model.wv.vectors, np.memmap) and model.wv.vectors.flags.writeable)
        for t in tables:
            if t is not None and t.numel():
                t.view(-1)[:1].add_(0.0)  # a write: on a read-only map this would crash
        for path, raw in files.items():
            with open(path, "rb") as f:
                assert f.read() == raw, f"{path} changed on disk"


def seeds():
    models = saved_models()
    out = [b"\x00" + raw for raw, _, _ in models.values()]
    out += [b"\x80" + models["split"][0]]
    for i, name in enumerate(FILES, 1):
        raw = next(r for f, r in _NPY.items() if f.endswith(f".{name}.npy"))
        out += [bytes([i << 1]) + raw, bytes([128 | i << 1]) + raw]
    text = json.dumps(models["both"][2]).encode()
    out += [b"\x01" + text, b"\x03" + text, b"\x41" + text, b"\x11" + text]
    split = models["split"][2]
    out += [b"\x01" + json.dumps(split).encode(), b"\x81" + json.dumps(split).encode()]
    entries = [dict(e, file=DECOY) if e["name"] == "wv_vectors" else e
               for e in split["separate"]]
    out += [b"\x81" + json.dumps(dict(split, separate=entries)).encode()]
    return out


if __name__ == "__main__":
    harness.main(one_input, seeds, instrument)
    sys.exit(0)
