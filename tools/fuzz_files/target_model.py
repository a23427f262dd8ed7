"""Fuzz target: Word2Vec.load on .npz model files (formats.load_model / load_npz). A file
either loads into a model whose tables agree (V words: vectors and syn1neg V x D, syn1
(V - 1) x D, keep probabilities and counts V) or raises a ValueError naming the file.

Input: one control byte, then
  - bit 0 clear: the file's bytes (seeds: models written by Word2Vec.save), which mostly
    exercises the zip and .npy layers (a changed byte in a stored array fails its CRC);
  - bit 0 set: the model's `meta` JSON; the harness writes a well-formed .npz of a saved
    model's arrays with that meta, bits 1-5 leaving out one array each and bit 6 cutting a
    row off the vectors, which exercises the checks of the settings and of the shapes.

    python tools/fuzz_files/target_model.py -runs=100000 CORPUS_DIR
"""

import io
import json
import sys

import harness

DROPPABLE = ["syn1neg", "syn1", "hs_links", "keep", "wv_attr_count"]


def instrument():
    global np, Word2Vec, formats
    import numpy as np

    from fastsoftmax.models.word2vec import Word2Vec, formats


PATH = harness.scratch_file("model.npz")
_MODELS: dict = {}  # seed models' arrays and meta, made once


def saved_models():
    if not _MODELS:
        sentences = [["a", "b", "c", "a"], ["b", "c", "d", "e", "a"], ["e", "d"]] * 3
        for name, kw in [("ns", dict(hs=0, negative=2)), ("hs", dict(hs=1, negative=0)),
                         ("both", dict(hs=1, negative=1))]:
            model = Word2Vec(sentences, vector_size=3, min_count=1, workers=1, epochs=1,
                             seed=1, **kw)
            model.save(PATH)
            with open(PATH, "rb") as f:
                buf = f.read()
            with np.load(PATH) as z:
                arrays = {k: np.array(z[k]) for k in z.files}
            meta = formats.decode_json(arrays.pop("meta"))
            _MODELS[name] = (buf, arrays, meta)
    return _MODELS


def structured(ctrl: int, meta: bytes) -> bytes:
    _, arrays, _ = saved_models()["both"]
    arrays = {k: v for k, v in arrays.items()
              if not any(ctrl & (2 << i) and k == d for i, d in enumerate(DROPPABLE))}
    if ctrl & 64:
        arrays["wv_vectors"] = arrays["wv_vectors"][:-1]
    arrays["meta"] = np.frombuffer(meta, dtype=np.uint8)
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def one_input(buf: bytes) -> None:
    ctrl = buf[0] if buf else 0
    with open(PATH, "wb") as f:
        f.write(structured(ctrl, buf[1:]) if ctrl & 1 else buf[1:])
    try:
        model = Word2Vec.load(PATH)
    except Exception as exc:  # checked: only a ValueError naming the file may escape
        harness.check_loader_error(exc, PATH)
        return
    V, D = len(model.wv), model.vector_size
    assert model.wv.vectors.shape == (V, D) and tuple(model._syn0.shape) == (V, D)
    assert len(model._keep_np) == V and len(model.wv.counts) == V
    if model.negative:
        assert tuple(model._syn1neg.shape) == (V, D), model._syn1neg.shape
    if model.hs:
        assert tuple(model._syn1.shape) == (V - 1, D), model._syn1.shape


def seeds():
    out = []
    for raw, _, _ in saved_models().values():
        out.append(b"\x00" + raw)
    text = json.dumps(saved_models()["both"][2]).encode()
    out += [b"\x01" + text, b"\x03" + text, b"\x41" + text, b"\x11" + text]
    return out


if __name__ == "__main__":
    harness.main(one_input, seeds, instrument)
    sys.exit(0)
