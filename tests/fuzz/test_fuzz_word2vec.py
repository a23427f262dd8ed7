"""Property-based test of the word2vec training op with one worker against the plain float64
trainer of tests/reference.py (w2v_train_reference): same random choices (subsampling,
windows, negatives), so the same number of predictions and kept tokens exactly, and vectors
and loss within a bound derived from float32 and the op's logistic tables. Also: the CPU op
with one worker is bit-identical run to run. The same for lockstep rounds (round_size > 0,
the CUDA trainer's order) against w2v_rounds_reference."""

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

import reference as R
from fastsoftmax import UnigramSampler, ops
from fuzz_support import passed

EPS32 = float(np.finfo(np.float32).eps)
# The CPU op evaluates sigmoid and softplus by linear interpolation in tables on [-16, 16]
# (4096 steps): |error| <= h^2/8 max|f''| with h = 1/128, i.e. < 2e-6 (csrc/cpu/word2vec.cpp),
# and saturates outside (error < e^-16).
TABLE_ERROR = 2e-6


@st.composite
def w2v_cases(draw):
    V = draw(st.integers(1, 8))
    D = draw(st.integers(1, 6))
    window = draw(st.integers(1, 3))
    negative = draw(st.integers(1, 3))
    words = st.integers(0, V - 1)
    sentences = draw(st.lists(st.lists(words, max_size=10), max_size=4))
    before = np.cumsum([0] + [len(s) for s in sentences])[:-1]
    total = float(draw(st.integers(1, 60)))
    counts = draw(st.lists(st.integers(0, 50), min_size=V, max_size=V))
    if not any(counts):
        counts[0] = 1
    keep = draw(st.lists(st.sampled_from([0.0, 0.3, 0.8, 1.0]), min_size=V, max_size=V))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    # Scores stay inside (-6, 6): outside it a prediction is skipped (gensim's rule), and a
    # score within float32 rounding of +-6 would be skipped on one side only (tested in
    # tests/test_word2vec.py instead).
    scale = draw(st.sampled_from([0.01, 0.5, 1.0]))
    syn0 = ((torch.rand(V, D, generator=g) - 0.5) * scale).numpy()
    syn1 = ((torch.rand(V, D, generator=g) - 0.5) * scale).numpy()
    alpha = draw(st.sampled_from([1e-3, 0.025, 0.1]))
    return dict(
        syn0=syn0, syn1=syn1, sentences=[np.array(s, dtype=np.int64) for s in sentences],
        before=[int(b) for b in before], keep=np.array(keep, dtype=np.float32),
        table=UnigramSampler(torch.tensor(counts, dtype=torch.float64), 0.75)._table,
        seed=draw(st.integers(-(2**63), 2**63 - 1)), first_token=draw(st.integers(0, 2**40)),
        sg=draw(st.booleans()), cbow_mean=draw(st.booleans()), window=window,
        negative=negative, shrink=draw(st.booleans()), alpha=alpha,
        min_alpha=alpha * draw(st.sampled_from([0.0, 0.1, 1.0])), total_words=total)


def run_op(c, round_size=0):
    syn0, syn1 = torch.tensor(c["syn0"]), torch.tensor(c["syn1"])
    tokens = torch.tensor(np.concatenate(c["sentences"]) if c["sentences"] else [],
                          dtype=torch.int32)
    ends = torch.tensor(np.cumsum([len(s) for s in c["sentences"]]), dtype=torch.int64)
    prob, alias = c["table"]
    stats = ops.word2vec_train(
        syn0, syn1, tokens, ends, torch.tensor(c["before"], dtype=torch.int64),
        torch.tensor(c["keep"]), prob, alias, c["seed"], c["first_token"], c["sg"],
        c["cbow_mean"], c["window"], c["negative"], c["shrink"], c["alpha"], c["min_alpha"],
        c["total_words"], 1, round_size=round_size)
    return syn0, syn1, stats


@given(c=w2v_cases())
def test_word2vec_one_worker_matches_reference(c):
    check_one_worker(c)
    passed("word2vec_train (1 worker)")


@given(c=w2v_cases(), round_size=st.integers(1, 12))
def test_word2vec_rounds_match_reference(c, round_size):
    check_one_worker(c, round_size)
    passed("word2vec_train (rounds)")


def check_one_worker(c, round_size=0):
    """The op (one worker; round_size > 0: lockstep rounds) against its float64 reference."""
    syn0, syn1, stats = run_op(c, round_size)
    prob, alias = c["table"]
    reference = R.w2v_rounds_reference if round_size else R.w2v_train_reference
    extra = dict(round_size=round_size) if round_size else {}
    r0, r1, loss, examples, kept = reference(
        c["syn0"], c["syn1"], c["sentences"], c["before"], c["keep"], prob.numpy(),
        alias.numpy(), seed=c["seed"], first_token=c["first_token"], sg=c["sg"],
        cbow_mean=c["cbow_mean"], window=c["window"], negative=c["negative"],
        shrink=c["shrink"], alpha=c["alpha"], min_alpha=c["min_alpha"],
        total_words=c["total_words"], **extra)
    assert stats[1].item() == examples and stats[2].item() == kept
    # Each of the `updates` dot-product/axpy steps adds at most alpha * TABLE_ERROR * |v| (a
    # logistic off by TABLE_ERROR) plus float32 rounding of D-term sums of |v|^2-sized
    # products. Summed over the updates (later steps do not amplify these errors measurably:
    # over 300 cases the largest error was 3e-4 of this sum), times a safety factor of 4.
    D = syn0.shape[1]
    big = 1.0 + max(np.abs(r0).max(initial=0), np.abs(r1).max(initial=0),
                    np.abs(c["syn0"]).max(), np.abs(c["syn1"]).max())
    updates = examples * (c["negative"] + 1) * (2 * c["window"] + 1)
    step = c["alpha"] * TABLE_ERROR * big + 4 * (D + 2) * EPS32 * big**2
    bound = 4 * updates * step + 2 * EPS32 * big
    np.testing.assert_allclose(syn0.numpy(), r0, rtol=0, atol=bound)
    np.testing.assert_allclose(syn1.numpy(), r1, rtol=0, atol=bound)
    assert abs(stats[0].item() - loss) <= updates * (TABLE_ERROR + 8 * D * EPS32 * big**2) * 4
    # One worker: a pure function of the inputs.
    again = run_op(c, round_size)
    assert torch.equal(again[0], syn0) and torch.equal(again[1], syn1)
    assert torch.equal(again[2], stats)
