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
    batch, which one CPU worker, or on CUDA one warp, trains in order."""
    return [(sentences, before, first)]


def topic_corpus(seed=0, sentences=3000, length=12, topics=12, per_topic=40, function=30,
                 noise=0.0):
    """A corpus with the shape of real text and a known answer: `function` words drawn from a
    Zipf law make up 45 % of the tokens (the frequent rows that many updates a round hit, as
    "the" and "," do), the rest are content words of the sentence's topic, Zipfian within it,
    or with probability `noise` of a random topic. Returns (sentences, {content word: its
    topic})."""
    rng = np.random.default_rng(seed)
    zipf = lambda n: (1.0 / np.arange(1, n + 1)) / (1.0 / np.arange(1, n + 1)).sum()  # noqa: E731
    shape = (sentences, length)
    topic = np.where(rng.random(shape) < noise, rng.integers(topics, size=shape),
                     rng.integers(topics, size=(sentences, 1)))
    content = rng.choice(per_topic, size=shape, p=zipf(per_topic))
    function_word = rng.choice(function, size=shape, p=zipf(function))
    is_function = rng.random(shape) < 0.45
    out = [[f"f{f}" if is_f else f"t{t}_{c}" for f, is_f, t, c in zip(*row)]
           for row in zip(function_word, is_function, topic, content)]
    topic_of = {f"t{t}_{i}": t for t in range(topics) for i in range(per_topic)}
    return out, topic_of


def topic_precision(wv, topic_of, k=10, min_count=5):
    """Mean over the content words seen min_count times of the share of their k nearest
    content words (cosine) that are of their own topic: 1 / topics by chance."""
    words = [w for w in wv.index_to_key if w in topic_of and wv.get_vecattr(w, "count")
             >= min_count]
    vectors = np.stack([wv[w] for w in words]).astype(np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    sim = vectors @ vectors.T
    np.fill_diagonal(sim, -np.inf)
    nearest = np.argsort(-sim, axis=1)[:, :k]
    topics = np.array([topic_of[w] for w in words])
    return float((topics[nearest] == topics[:, None]).mean())
