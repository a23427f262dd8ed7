"""The Word2Vec model's files: its vectors, syn1neg and/or syn1 with its Huffman tree,
vocabulary, keep probabilities and settings, in fastsoftmax's own .npz of plain arrays and
JSON, with .npy files beside it for arrays saved separately (written atomically, read without
unpickling, mapped with mmap='r': persistence.py). word2vec.c's vector files are formats.py."""

from __future__ import annotations

import numpy as np
import torch

from ...tree import ClassTree
from .data import keep_probabilities
from . import settings
from .persistence import (checked_mmap, choose_separate, file_contents, keyed_vectors_arrays,
                          keyed_vectors_from_arrays, load_npz, read_only, save_npz)
from .training import checked_round_size


class class_only(classmethod):
    """A classmethod that refuses to be called on an instance (AttributeError, as gensim's
    load): `model.load(path)` would suggest it loads into `model`, and it does not."""

    def __get__(self, instance, owner=None):
        if instance is not None:
            raise AttributeError(f"{self.__func__.__name__} is a class method: call it on the "
                                 "class, e.g. Word2Vec.load(path); it returns a new model")
        return super().__get__(instance, owner)


def save_model(model, path: str, separately=None, sep_limit=None) -> None:
    if model._syn0 is None:
        raise RuntimeError("nothing to save: the model has no vocabulary yet")
    arrays = keyed_vectors_arrays(model.wv, "wv_")
    # The training table, which load restores (wv.vectors may be a copy of it on CUDA, or a
    # read-only map): taken as it is, leaving wv as the caller had it.
    arrays["wv_vectors"] = model._syn0.cpu().numpy()
    if model.negative:
        arrays["syn1neg"] = model._syn1neg.cpu().numpy()
    if model.hs:
        arrays["syn1"] = model._syn1.cpu().numpy()  # the V - 1 rows of the inner nodes
        arrays["hs_links"] = model.hs_tree.links.cpu().numpy()
    arrays["keep"] = model._keep_np
    config = {k: getattr(model, k) for k in model._CONFIG}
    save_npz(path, arrays, {"class": "Word2Vec", "config": config},
             choose_separate(arrays, separately, sep_limit))


# With mmap='r' the training tables are copy-on-write maps of their .npy files: training
# writes private copies of the pages it changes, in this process's memory, so it neither
# crashes on a read-only page nor writes the file (which other processes may be mapping), and
# save() writes what it learned to new files. Pages never written stay shared with the file.
# Refusing train() would only make users reload to go on, for no safety gained.
MAPPED_TABLES = {"wv_vectors": "c", "syn1neg": "c", "syn1": "c"}


def load_model(cls, path: str, device=None, mmap=None):
    checked_mmap(mmap)
    arrays, meta = load_npz(path, ("Word2Vec",), mmap, MAPPED_TABLES)
    with file_contents(path, "Word2Vec model"):
        return _model(cls, path, arrays, meta, device)


def _model(cls, path: str, arrays: dict, meta: dict, device):
    """A `cls` (Word2Vec) from a model file's arrays and meta, every table checked."""
    cfg = meta["config"]
    model = cls(vector_size=cfg["vector_size"], hs=cfg.get("hs", 0),
                negative=cfg.get("negative", 5), device=device or "cpu")
    for k in cls._CONFIG:
        if k in cfg:
            setattr(model, k, cfg[k])
    checked_round_size(model.round_size)
    settings.choice("update", model.update, settings.UPDATES)
    model.wv = keyed_vectors_from_arrays(type(model.wv), arrays, "wv_")
    mapped = model.wv.vectors if isinstance(model.wv.vectors, np.memmap) else None
    model._syn0 = _tensor(model.wv.vectors, model.device)
    tree = _output_tables(model, path, arrays)
    counts = model.wv.counts
    model._keep_np = (arrays["keep"].astype(np.float32) if "keep" in arrays else
                      keep_probabilities(counts, int(counts.sum()), model.sample))
    _check_shapes(model)
    model._sync_vectors()
    if mapped is not None:  # queries read the map, read-only as gensim's (training syncs)
        model.wv.vectors = read_only(mapped)
    model._tables(tree)
    return model


def _output_tables(model, path: str, arrays: dict):
    """Sets the model's syn1neg and syn1 from the arrays its settings need; returns the
    Huffman tree (None without hs)."""
    model._syn1neg = model._syn1 = tree = None
    needed = (("syn1neg",) if model.negative else ()) + (("syn1", "hs_links") if model.hs else ())
    for name in needed:
        if name not in arrays:
            raise ValueError(f"{path}: the model file lacks {name!r} (hs={model.hs}, "
                             f"negative={model.negative})")
    if model.negative:
        model._syn1neg = _tensor(arrays["syn1neg"], model.device)
    if model.hs:
        model._syn1 = _tensor(arrays["syn1"], model.device)
        tree = ClassTree(torch.from_numpy(arrays["hs_links"]))  # checks it is one tree
        if tree.num_classes != len(model.wv) or model._syn1.shape[0] != len(model.wv) - 1:
            raise ValueError(f"{path}: the Huffman tree or syn1 does not match the "
                             f"vocabulary of {len(model.wv)} words")
    return tree


def _check_shapes(model) -> None:
    """Every table has a row per word (syn1 one per inner node): otherwise the model would
    load and fail only when trained (word2vec_train checks the shapes), far from the file."""
    V, D = len(model.wv), model.vector_size
    _check_shape("the vectors", model.wv.vectors, (V, D))
    _check_shape("the counts", model.wv.counts, (V,))
    _check_shape("the keep probabilities", model._keep_np, (V,))
    if model.negative:
        _check_shape("syn1neg", model._syn1neg, (V, D))
    if model.hs:
        _check_shape("syn1", model._syn1, (V - 1, D))


def _check_shape(name: str, array, shape: tuple) -> None:
    if tuple(array.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(array.shape)}, expected {shape}")


def _tensor(array, device) -> torch.Tensor:
    """A float32 table on `device`: a copy-on-write map is used in place on the CPU (copied
    to a GPU); an array read into memory is copied, as the model owns its tables."""
    if isinstance(array, np.memmap) and array.dtype == np.float32 and array.flags.writeable:
        return torch.from_numpy(array).to(device)
    return torch.from_numpy(np.array(array, dtype=np.float32)).to(device)
