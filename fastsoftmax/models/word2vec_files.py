"""Word2Vec's own file format: save and load of the whole model (vectors, syn1neg and/or syn1
with its Huffman tree, vocabulary, keep probabilities, settings) as a numpy .npz of plain
arrays and JSON, written atomically and read without unpickling (vectors_io.save_npz)."""

import numpy as np
import torch

from ..tree import ClassTree
from . import vectors_io, vocab
from .keyedvectors import KeyedVectors


def save_model(model, path: str) -> None:
    if model._syn0 is None:
        raise RuntimeError("nothing to save: the model has no vocabulary yet")
    model._sync_vectors()
    arrays = model.wv._arrays("wv_")
    if model.negative:
        arrays["syn1neg"] = model.syn1neg
    if model.hs:
        arrays["syn1"] = model.syn1
        arrays["hs_links"] = model.hs_tree.links.cpu().numpy()
    arrays["keep"] = model._keep_np
    config = {k: getattr(model, k) for k in model._CONFIG}
    vectors_io.save_npz(path, arrays, {"class": "Word2Vec", "config": config})


def load_model(cls, path: str, device=None):
    arrays, meta = vectors_io.load_npz(path, ("Word2Vec",))
    cfg = meta["config"]
    model = cls(vector_size=cfg["vector_size"], hs=cfg.get("hs", 0),
                negative=cfg.get("negative", 5), device=device or "cpu")
    for k in cls._CONFIG:
        if k in cfg:
            setattr(model, k, cfg[k])
    model.wv = KeyedVectors._from_arrays(arrays, "wv_")
    model._syn0 = torch.from_numpy(model.wv.vectors.copy()).to(model.device)
    model._syn1neg = model._syn1 = tree = None
    needed = (("syn1neg",) if model.negative else ()) + (("syn1", "hs_links") if model.hs else ())
    for name in needed:
        if name not in arrays:
            raise ValueError(f"{path}: the model file lacks {name!r} (hs={model.hs}, "
                             f"negative={model.negative})")
    if model.negative:
        model._syn1neg = torch.from_numpy(arrays["syn1neg"].astype(np.float32)).to(model.device)
    if model.hs:
        model._syn1 = torch.from_numpy(arrays["syn1"].astype(np.float32)).to(model.device)
        tree = ClassTree(torch.from_numpy(arrays["hs_links"]))  # checks it is one tree
        if tree.num_classes != len(model.wv) or model._syn1.shape[0] != len(model.wv) - 1:
            raise ValueError(f"{path}: the Huffman tree or syn1 does not match the "
                             f"vocabulary of {len(model.wv)} words")
    counts = model.wv.counts
    model._keep_np = (arrays["keep"].astype(np.float32) if "keep" in arrays else
                      vocab.keep_probabilities(counts, int(counts.sum()), model.sample))
    model._sync_vectors()
    model._tables(tree)
    return model
