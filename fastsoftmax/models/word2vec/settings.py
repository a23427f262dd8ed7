"""A Word2Vec's settings: the constructor's keywords checked, with a sentence for each bad
value, and set on the model (kept out of model.py, which holds the model's behaviour)."""

import os

import numpy as np
import torch

from .training import checked_round_size


def _refuse(name: str, why: str):
    raise TypeError(f"Word2Vec: {name} {why}")


def apply(model, *, vector_size, alpha, window, min_count, max_vocab_size, sample, seed,
          workers, min_alpha, sg, hs, negative, ns_exponent, cbow_mean, hashfxn, epochs,
          null_word, sorted_vocab, batch_words, compute_loss, comment, max_final_vocab,
          shrink_windows, device, huffman, alpha_schedule, round_size, gpu_warps) -> None:
    """Checks the keywords of Word2Vec(...) and sets them on `model`."""
    if hashfxn is not hash:
        _refuse("hashfxn", "is not used: initial vectors come from seed (as in gensim 4, "
                "which ignores it too); leave it at the default")
    for name, v in (("vector_size", vector_size), ("window", window),
                    ("batch_words", batch_words)):
        if not isinstance(v, (int, np.integer)) or v <= 0:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if hs not in (0, 1, False, True):
        raise ValueError(f"hs must be 0 or 1, got {hs!r}")
    if huffman not in ("gensim", "word2vec.c"):
        raise ValueError(f"huffman must be 'gensim' or 'word2vec.c', got {huffman!r}")
    model.huffman = huffman
    if alpha_schedule not in ("linear", "gensim-corpus_file"):
        raise ValueError(f"alpha_schedule must be 'linear' or 'gensim-corpus_file', not "
                         f"{alpha_schedule!r}")
    model.alpha_schedule = alpha_schedule
    if gpu_warps is not None:
        _refuse("gpu_warps", "was removed: CUDA now trains in lockstep rounds, whose "
                "result does not depend on the number of warps (see round_size)")
    model.round_size = checked_round_size(round_size)
    if not isinstance(negative, (int, np.integer)) or negative < 0:
        raise ValueError(f"negative must be an int >= 0, got {negative!r}")
    if negative == 0 and not hs:
        raise ValueError("negative=0 with hs=0 leaves no output layer: use negative > 0 "
                         "(negative sampling), hs=1 (hierarchical softmax) or both")
    if epochs < 0 or min_count < 0:
        raise ValueError("epochs and min_count must be non-negative")
    if not 0 <= min_alpha <= alpha:
        raise ValueError(f"need 0 <= min_alpha <= alpha, got {min_alpha} and {alpha}")
    model.vector_size, model.layer1_size = int(vector_size), int(vector_size)
    model.window, model.min_count = int(window), int(min_count)
    model.sg, model.hs, model.negative = int(bool(sg)), int(bool(hs)), int(negative)
    model.ns_exponent, model.cbow_mean = float(ns_exponent), int(bool(cbow_mean))
    model.sample, model.alpha, model.min_alpha = float(sample), float(alpha), float(min_alpha)
    model.epochs, model.seed = int(epochs), int(seed)
    model.workers = int(workers) if workers else (os.cpu_count() or 1)
    model.device = torch.device(device)
    if model.device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked for but CUDA is not available here")
    model.max_vocab_size, model.max_final_vocab = max_vocab_size, max_final_vocab
    model.null_word, model.sorted_vocab = int(bool(null_word)), int(bool(sorted_vocab))
    model.batch_words, model.compute_loss = int(batch_words), bool(compute_loss)
    model.shrink_windows, model.comment = bool(shrink_windows), comment
