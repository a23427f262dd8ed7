"""What users have: Counter/dict counts with a vocabulary, numpy integers, Python lists; clear
errors for a dtype move and non-numeric weights; error texts; the warning when targets
contradict the log-uniform sampler's sorted-ids assumption."""

import math
import warnings
from collections import Counter

import numpy as np
import pytest
import torch

import fastsoftmax as fs
from fastsoftmax.samplers.fit import LogUniformFitCheck


def test_counter_and_dict_counts_with_vocab():
    counts = Counter({"the": 50, "cat": 10, "sat": 5})
    vocab = ["sat", "the", "cat", "mat"]  # id order; "mat" was never counted
    s = fs.UnigramSampler(counts, power=1.0, vocab=vocab)
    torch.testing.assert_close(s.probs, torch.tensor([5, 50, 10, 0]) / 65.0)
    by_id = fs.AliasSampler(dict(counts), vocab={"the": 0, "cat": 1, "sat": 2})
    torch.testing.assert_close(by_id.probs, torch.tensor([50, 10, 5]) / 65.0)
    with pytest.raises(ValueError, match="give vocab="):
        fs.UnigramSampler(counts)
    with pytest.raises(ValueError, match="not in vocab .first: 'sat'"):
        fs.UnigramSampler(counts, vocab=["the", "cat"])
    with pytest.raises(ValueError, match="ids 0..len"):
        fs.AliasSampler(counts, vocab={"the": 0, "cat": 2, "sat": 3})
    with pytest.raises(ValueError, match="lists an entry twice"):
        fs.AliasSampler(counts, vocab=["the", "the", "cat", "sat"])
    with pytest.raises(TypeError, match="the entry 'cat' has 'x'"):
        fs.AliasSampler({"the": 1, "cat": "x"}, vocab=["the", "cat"])
    with pytest.raises(ValueError, match="already in id order"):
        fs.AliasSampler([1.0, 2.0], vocab=["a", "b"])


def test_numpy_integers_sizes_and_shapes():
    s = fs.LogUniformSampler(np.int64(10))
    assert s.num_classes == 10 and type(s.num_classes) is int
    assert s.sample(np.int64(3)).shape == (3,)
    assert s.sample(np.int32(2), np.int64(4)).shape == (2, 4)
    assert s.sample((np.int64(2), 3)).shape == (2, 3)
    assert fs.UniformSampler(np.uint16(7)).num_classes == 7
    out = s.candidates(torch.tensor([1, 2]), np.int64(4))
    assert out.sampled_candidates.shape == (4,)
    with pytest.raises(TypeError, match="num_classes must be an int, got float"):
        fs.UniformSampler(10.0)
    with pytest.raises(TypeError, match="num_classes must be an int, got a bool"):
        fs.UniformSampler(True)
    with pytest.raises(ValueError, match="sample shape must be non-negative ints"):
        s.sample(2.5)


def test_python_lists_in_candidates_and_log_prob():
    s = fs.UnigramSampler([5, 3, 2, 1])
    torch.testing.assert_close(s.log_prob([0, 3]), s.log_prob(torch.tensor([0, 3])))
    torch.testing.assert_close(s.log_prob(np.array([1, 2])), s.log_prob(torch.tensor([1, 2])))
    a = s.candidates([[0], [2]], 2, generator=torch.Generator().manual_seed(0))
    b = s.candidates(torch.tensor([[0], [2]]), 2, generator=torch.Generator().manual_seed(0))
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y)
    assert s.log_prob([]).shape == (0,)
    with pytest.raises(TypeError, match="int64 .or int32. tensor, got torch.float32"):
        s.log_prob([0.5])
    with pytest.raises(ValueError, match=r"found values in \[0, 9\]"):
        s.log_prob([0, 9])


def test_clear_errors_for_dtype_move_and_non_numeric_weights():
    s = fs.UniformSampler(5)
    with pytest.raises(TypeError, match="moves between devices only"):
        s.to(torch.float64)
    with pytest.raises(TypeError, match="sampler.to takes a device"):
        s.to(3.5)
    for bad in (["a", "b"], np.array(["x", "y"]), [1.0, None], "abc"):
        with pytest.raises(TypeError, match="weights must be numbers"):
            fs.AliasSampler(bad)
    with pytest.raises(TypeError, match="counts must be numbers"):
        fs.UnigramSampler(["a", "b"])
    with pytest.raises(TypeError, match="must be real numbers"):
        fs.AliasSampler([True, False])
    # a list of floats keeps float64 precision (not rounded through float32 first)
    w = fs.AliasSampler([1e-300, 1.0])
    assert w.probs[0] == 0.0 and w.probs[1] == 1.0


def test_target_shape_error_names_a_real_shape():
    layer = fs.SampledSoftmaxLoss(4, 10, 3)
    with pytest.raises(ValueError) as info:
        layer(torch.randn(8, 4), torch.zeros(8, 2, 3, dtype=torch.int64))
    message = str(info.value)
    assert "None" not in message
    assert "(8,) or (8, num_true)" in message and "got (8, 2, 3)" in message


def test_eval_out_of_range_carries_found_detail():
    layer = fs.SampledSoftmaxLoss(4, 10, 3)
    target = torch.tensor([1, 12, -3, 4])
    with pytest.raises(ValueError) as train_error:
        layer(torch.randn(4, 4), target)
    layer.eval()
    with pytest.raises(ValueError) as eval_error:
        layer(torch.randn(4, 4), target)
    for info in (train_error, eval_error):
        assert "found -3 (min offending) and 12 (max offending)" in str(info.value)


def zipf_targets(v, n, seed, sorted_ids):
    g = torch.Generator().manual_seed(seed)
    p = 1.0 / torch.arange(1, v + 1, dtype=torch.float64)
    ranks = torch.multinomial(p / p.sum(), n, replacement=True, generator=g)
    if sorted_ids:
        return ranks
    return torch.randperm(v, generator=g)[ranks]


@pytest.mark.parametrize("v", [100, 10_000, 100_000])
def test_log_uniform_fit_statistic_separates_sorted_from_permuted(v):
    for sorted_ids, warns in ((True, False), (False, True)):
        check = LogUniformFitCheck(v)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for step in range(8):
                check.observe(zipf_targets(v, 700, step, sorted_ids), -100)
        assert check.done
        assert len(caught) == int(warns), (sorted_ids, [str(w.message) for w in caught])


def test_random_ids_fit_worse_than_uniform_for_every_vocabulary_size():
    """The claim behind the threshold: for ids in random order, the mean NLL under
    log-uniform exceeds log V once V > 15 (a uniform target is the average case)."""
    for v in (16, 100, 10_000, 10**7):
        c = torch.arange(v, dtype=torch.float64)
        h = (math.log(math.log1p(v)) - torch.log(torch.log1p(1 / (c + 1)))).mean()
        assert h > math.log(v), v


def test_layer_warns_once_for_unsorted_ids_and_says_what_to_do():
    v = 5000
    layer = fs.SampledSoftmaxLoss(8, v, 50)
    h = torch.randn(1000, 8)
    with pytest.warns(UserWarning, match="Renumber the classes by falling frequency") as caught:
        for step in range(6):
            layer(h, zipf_targets(v, 1000, step, sorted_ids=False))
    assert sum("log-uniform sampler assumes" in str(w.message) for w in caught) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sorted_layer = fs.SampledSoftmaxLoss(8, v, 50)
        uniform_layer = fs.SampledSoftmaxLoss(8, v, 50, sampler="uniform")
        for step in range(6):  # sorted ids and other samplers stay silent
            sorted_layer(h, zipf_targets(v, 1000, step, sorted_ids=True))
            uniform_layer(h, zipf_targets(v, 1000, step, sorted_ids=False))
        assert sorted_layer._log_uniform_fit.done
