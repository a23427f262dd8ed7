"""gensim 4 API parity of KeyedVectors that gensim's own test suite (make gensim-suite)
found missing or different: evaluation options, item assignment, vectors_for_all,
most_similar_to_given, relative_cosine_similarity and gensim's word2vec-format arguments."""

import numpy as np
import pytest

from fastsoftmax.models import KeyedVectors

from w2v_helpers import random_vectors


def _kv(V=40, D=6, seed=0):
    keys, vectors = random_vectors(V, D, seed)
    kv = KeyedVectors(D)
    kv.add_vectors(keys, vectors)
    return kv


def test_analogies_by_3cosmul_and_dummy4unknown(tmp_path):
    kv = _kv()
    rng = np.random.default_rng(1)
    questions = [[f"w{i}" for i in rng.choice(len(kv), 4, replace=False)] for _ in range(30)]
    f = tmp_path / "q.txt"
    f.write_text(": s\n" + "".join(" ".join(q) + "\n" for q in questions) + "w1 w2 w3 nope\n")
    for name, query in (("most_similar", kv.most_similar),
                        ("most_similar_cosmul", kv.most_similar_cosmul)):
        _, sections = kv.evaluate_word_analogies(str(f), case_insensitive=False,
                                                 similarity_function=name)
        correct = {tuple(q) for q in sections[0]["correct"]}
        for a, b, c, d in questions:
            best = query(positive=[b, c], negative=[a], topn=1)[0][0]
            assert ((a, b, c, d) in correct) == (best == d), (name, a, b, c, d)
        assert len(sections[0]["correct"]) + len(sections[0]["incorrect"]) == 30
    acc, sections = kv.evaluate_word_analogies(str(f), dummy4unknown=True)
    assert len(sections[-1]["correct"]) + len(sections[-1]["incorrect"]) == 31
    assert ("W1", "W2", "W3", "NOPE") in sections[-1]["incorrect"]
    with pytest.raises(ValueError, match="similarity_function"):
        kv.evaluate_word_analogies(str(f), similarity_function="cosine")
