"""Small corpora and vectors shared by the word2vec, KeyedVectors, PPMI and CLI tests."""

import numpy as np
import torch

try:
    import gensim  # noqa: F401

    HAVE_GENSIM = True
except ImportError:
    HAVE_GENSIM = False
GENSIM_MISSING = "gensim is not installed (pip install gensim==4.4.0): no side-by-side check"


def planted_corpus(seed=0, groups=6, per_group=4, sentences=1500):
    """Each group has 'member' words that only ever occur among that group's 'context' words.
    Members of one group share contexts, so they must end up nearest neighbours."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(sentences):
        g = rng.integers(groups)
        words = []
        for _ in range(8):
            if rng.random() < 0.35:
                words.append(f"m{g}_{rng.integers(per_group)}")
            else:
                words.append(f"c{g}_{rng.integers(6)}")
        out.append(words)
    return out


def random_vectors(V=40, D=6, seed=0):
    """(keys, float32 [V, D]) with a few near-duplicates so that rankings are not all ties."""
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((V, D)).astype(np.float32)
    vectors[1] = vectors[0] + 0.1 * vectors[1]
    return [f"w{i}" for i in range(V)], vectors


def token_batch(sentences):
    """(tokens int32, sentence ends int64) of a list of id sequences: the trainer's batch."""
    tokens = torch.tensor(np.concatenate(sentences) if sentences else [], dtype=torch.int32)
    ends = torch.tensor(np.cumsum([len(s) for s in sentences]), dtype=torch.int64)
    return tokens, ends


def replay_batches(sentences, before, first, device):
    """(sentences, words_before, first_token) batches that replay the reference's order: one
    CPU worker trains a batch in order, but CUDA trains a batch's sentences at once (Hogwild),
    so there each sentence is its own batch."""
    if device.type == "cpu":
        return [(sentences, before, first)]
    firsts = first + np.concatenate(([0], np.cumsum([len(s) for s in sentences])[:-1]))
    return [([s], [b], int(f)) for s, b, f in zip(sentences, before, firsts)]

