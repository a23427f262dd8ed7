"""word2vec's random draws are made a sentence at a time (csrc/cpu/word2vec_cpu.h: the tokens'
in KeptSentence::fill, the negatives in draw_negatives_at): eight lanes of AVX-512 where the
CPU has them (and, for negatives, the alias table is flat or interleaved), one by one otherwise
(FASTSOFTMAX_NO_AVX512=1, any other CPU, other strides).
Both must train the same vectors bit for bit, in both update orders, and both must agree with
the float64 reference (test_word2vec.py, test_word2vec_batched.py hold that for the default
path)."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from fastsoftmax import UnigramSampler, ops

from w2v_helpers import token_batch

HERE = os.path.dirname(os.path.abspath(__file__))
V, D, W, K = 300, 16, 4, 5


def train(update, sg, layout="interleaved"):
    """Vectors after one pass over a random corpus whose sentences' draws end in every tail
    length (the vector path takes multiples of eight, the rest is drawn one by one)."""
    rng = np.random.default_rng(5)
    counts = rng.zipf(1.3, V).clip(1, 10_000)
    sentences = [rng.integers(0, V, n) for n in range(1, 60)]
    prob, alias = UnigramSampler(torch.tensor(counts, dtype=torch.float64), 0.75)._table
    if layout == "flat":
        prob, alias = prob.contiguous(), alias.contiguous()
    elif layout == "strided":
        wide = torch.zeros(V, 3, dtype=torch.int32)
        wide[:, 0], wide[:, 2] = prob.view(torch.int32), alias
        prob, alias = wide[:, 0].view(torch.float32), wide[:, 2]
    syn0 = torch.tensor(rng.random((V, D), dtype=np.float32) - 0.5)
    syn1 = torch.tensor((rng.random((V, D), dtype=np.float32) - 0.5) * 0.5)
    tokens, ends = token_batch(sentences)
    before = torch.tensor(np.concatenate([[0], np.cumsum([len(s) for s in sentences])[:-1]]))
    args = (syn0, syn1, tokens, ends, before, torch.full((V,), 0.9), prob, alias, 3, 0, sg,
            True, W, K, True, 0.05, 1e-3, float(len(tokens)), 1)
    if update == "batched":
        ops.word2vec_train_batched(*args, group=2 if sg else 1)
    else:
        ops.word2vec_train(*args)
    return np.concatenate([syn0.numpy(), syn1.numpy()])


CASES = [("pairs", 0), ("pairs", 1), ("batched", 0), ("batched", 1)]


@pytest.mark.parametrize("update,sg", CASES)
def test_every_table_layout_trains_the_same(update, sg):
    want = train(update, sg)
    for layout in ("flat", "strided"):
        np.testing.assert_array_equal(train(update, sg, layout), want, err_msg=layout)


def test_portable_draws_train_the_same():
    code = (
        "import sys; sys.path[:0] = [%r, %r]\n"
        "import numpy as np, test_word2vec_draws as t\n"
        "np.save(sys.argv[1], np.stack([t.train(u, sg) for u, sg in t.CASES]))\n"
        % (HERE, os.path.dirname(HERE)))
    out = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"w2v_draws_{os.getpid()}.npy")
    env = dict(os.environ, FASTSOFTMAX_NO_AVX512="1")
    run = subprocess.run([sys.executable, "-c", code, out], env=env, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    portable = np.load(out)
    os.remove(out)
    for (update, sg), got in zip(CASES, portable):
        np.testing.assert_array_equal(got, train(update, sg), err_msg=f"{update}, sg={sg}")
