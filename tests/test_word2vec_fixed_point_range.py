"""The range of word2vec's fixed-point sums (deterministic CUDA rounds, csrc/cuda/
word2vec_rounds.cuh): each update is checked against 2^20, but sums only reach 2^31, so
2^11 or more in-range updates of one coordinate in a round could wrap around into finite
garbage. A row whose updates could leave the range must come out NaN instead (a diverged
run, as the per-update check already reports), in the same rows whatever the warps' order;
a row that stays in range must still match the CPU replay and the float sums."""

import numpy as np
import pytest
import torch

from fastsoftmax import UnigramSampler, ops

from conftest import CUDA_EMU
from cuda_emulator import emulated_cuda
from w2v_helpers import token_batch

pytestmark = pytest.mark.skipif(not CUDA_EMU, reason="no emulated CUDA build")

# CBOW over one word repeated, all inputs 1 and the output rows 0: every centre scores 0, so
# every centre adds alpha / 2 = 2^19 (in range) to each coordinate of syn1neg row 0, with the
# same sign, in a single round. Its bound, 0.025 alpha |h|^2 = 52429, stays below the CUDA
# clamp (65536), so the CPU replay and the float kernels follow the same rule: the row moves by
# (sum of updates) / (sum of bounds) = 10.
ALPHA = 2.0 ** 20
D = 2


def _train(centres, *, cuda, deterministic=False, workers=8, policy="random"):
    """syn1neg after one round over `centres` tokens of word 0 (of 3)."""
    counts = torch.tensor([1000.0, 1.0, 1.0], dtype=torch.float64)
    prob, alias = UnigramSampler(counts, 0.75)._table
    syn0, syn1neg = torch.ones(3, D), torch.zeros(3, D)
    tokens, ends = token_batch([np.zeros(centres, dtype=np.int64)])
    args = (syn0, syn1neg, tokens, ends, torch.tensor([0]), torch.ones(3), prob, alias, 9, 0,
            False, True, 2, 1, False, ALPHA, ALPHA, float(centres))
    torch.use_deterministic_algorithms(deterministic)
    try:
        if cuda:
            with emulated_cuda(policy, seed=workers):
                ops.word2vec_train(*args, workers, round_size=centres)
        else:
            ops.word2vec_train(*args, 1, round_size=centres)
    finally:
        torch.use_deterministic_algorithms(False)
    return syn1neg.numpy()


def test_sums_past_the_fixed_point_range_are_nan_not_wrapped():
    # 5000 updates of 2^19: 2.6e9 > 2^31 in row 0, which two's complement would wrap negative.
    replay = _train(5000, cuda=False)
    floats = _train(5000, cuda=True)
    np.testing.assert_allclose(replay[0], 10.0, rtol=1e-3)
    np.testing.assert_allclose(floats, replay, rtol=1e-4)
    runs = [_train(5000, cuda=True, deterministic=True, workers=w, policy=p)
            for w, p in ((8, "random"), (3, "reverse"), (1, "forward"))]
    for fixed in runs:
        assert np.isnan(fixed[0]).all()  # not a finite value of either sign
        np.testing.assert_allclose(fixed[1:], replay[1:], rtol=1e-4, atol=1e-6)
        np.testing.assert_array_equal(fixed, runs[0])


def test_sums_in_range_still_match_the_replay():
    # 1000 updates of 2^19 (5.2e8, below the row limit of 2^29): summed exactly, no NaN.
    replay = _train(1000, cuda=False)
    fixed = _train(1000, cuda=True, deterministic=True)
    np.testing.assert_allclose(replay[0], 10.0, rtol=1e-3)
    np.testing.assert_allclose(fixed, replay, rtol=1e-4, atol=1e-6)
