"""A Word2Vec's settings: the checks of the constructor's keywords, each returning the value
to keep or raising with a sentence for the bad one (kept out of model.py, which holds the
model's behaviour). The constructor calls them in gensim's order of its keywords."""

import os

import numpy as np
import torch

# The update orders of negative sampling (Word2Vec's `update`): word2vec.c's, one prediction
# after another ("pairs"), or minibatches of shared negatives ("batched",
# csrc/cpu/word2vec_batched.cpp). "auto" takes, per setting, the faster order that held
# gensim's quality over 8 seeds (docs/word2vec-quality.md): shared negatives for skip-gram,
# word2vec.c's pairs for CBOW, whose groups of centres fell below gensim on SimLex-999.
UPDATES = ("auto", "pairs", "batched")


def refuse(name: str, why: str):
    raise TypeError(f"Word2Vec: {name} {why}")


def refuse_removed(hashfxn, gpu_warps) -> None:
    """hashfxn (only Python's hash) and gpu_warps (removed) are refused with the reason."""
    if hashfxn is not hash:
        refuse("hashfxn", "is not used: initial vectors come from seed (as in gensim 4, "
               "which ignores it too); leave it at the default")
    if gpu_warps is not None:
        refuse("gpu_warps", "was removed: CUDA now trains in lockstep rounds, whose result "
               "does not depend on the number of warps (see round_size)")


def positive_int(name: str, value) -> int:
    if not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def flag(name: str, value) -> int:
    """0 or 1 (hs, which gensim also takes as a bool)."""
    if value not in (0, 1, False, True):
        raise ValueError(f"{name} must be 0 or 1, got {value!r}")
    return int(bool(value))


def choice(name: str, value, allowed: tuple, got: str = "got"):
    if value not in allowed:
        names = [repr(a) for a in allowed]
        listed = ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
        raise ValueError(f"{name} must be {listed}, {got} {value!r}")
    return value


def negatives(negative, hs: int) -> int:
    """The number of negatives, which with hs=0 must leave an output layer."""
    if not isinstance(negative, (int, np.integer)) or negative < 0:
        raise ValueError(f"negative must be an int >= 0, got {negative!r}")
    if negative == 0 and not hs:
        raise ValueError("negative=0 with hs=0 leaves no output layer: use negative > 0 "
                         "(negative sampling), hs=1 (hierarchical softmax) or both")
    return int(negative)


def counts(epochs, min_count) -> tuple:
    if epochs < 0 or min_count < 0:
        raise ValueError("epochs and min_count must be non-negative")
    return int(epochs), int(min_count)


def rates(alpha, min_alpha) -> tuple:
    if not 0 <= min_alpha <= alpha:
        raise ValueError(f"need 0 <= min_alpha <= alpha, got {min_alpha} and {alpha}")
    return float(alpha), float(min_alpha)


def worker_count(workers) -> int:
    """workers, or every core for 0 or None."""
    return int(workers) if workers else (os.cpu_count() or 1)


def device_of(device) -> torch.device:
    out = torch.device(device)
    if out.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked for but CUDA is not available here")
    return out
