"""Named regression tests, one per failure the property-based tests found (docs/reliability.md,
"Found and fixed"). Each reproduces the smallest failing input hypothesis reported."""

import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import fastsoftmax as fs
import reference as R
from fastsoftmax import functional as FF
from fastsoftmax import ops

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_unique_candidates_refuse_a_weight_below_float32_resolution():
    """weights [1, 1e-46]: the second class gets no mass in the float32 alias table, but was
    counted as drawable, so unique draws of 2 candidates looped 2^32 times (minutes) before
    failing. Now refused at once, and 1 candidate is the only drawable class."""
    sampler = fs.AliasSampler(torch.tensor([1.0, 1e-46], dtype=torch.float64))
    assert sampler._num_possible == 1
    with pytest.raises(ValueError, match="distinct"):
        sampler.candidates(torch.tensor([[0]]), 2, unique=True)
    assert sampler.candidates(torch.tensor([[1]]), 1, unique=True).sampled_candidates.tolist() == [0]


def test_negative_sampling_with_zero_negatives_per_row():
    """negatives of shape [N, 0] raised a RuntimeError from reshape(-1, 0) (also for N = 0);
    K = 0 is the positive terms alone."""
    h = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([1, 4, 0])
    for rows in (3, 0):
        neg = torch.empty(rows, 0, dtype=torch.int64)
        loss = FF.negative_sampling_loss(h[:rows], w, target[:rows], negatives=neg,
                                         reduction="sum")
        ref = R.negative_sampling_reference(h[:rows], w, target[:rows, None], neg).sum()
        torch.testing.assert_close(loss, ref)


@pytest.mark.parametrize("kind", ["softmax", "nce", "negsamp"])
def test_losses_with_zero_features(kind):
    """input [N, 0] and weight [V, 0] (every logit is its offset) raised a RuntimeError from
    reshape(-1, 0) instead of computing the loss."""
    h, w = torch.empty(2, 0, dtype=torch.float64), torch.empty(3, 0, dtype=torch.float64)
    target = torch.tensor([2, 0])
    if kind == "negsamp":
        neg = torch.tensor([[1, 2], [0, 0]])
        loss = FF.negative_sampling_loss(h, w, target, negatives=neg, reduction="none")
        ref = R.negative_sampling_reference(h, w, target[:, None], neg)
    else:
        sampled = fs.SampledValues(torch.tensor([1, 2]), torch.ones(2), torch.ones(2))
        fn = FF.sampled_softmax_loss if kind == "softmax" else FF.nce_loss
        loss = fn(h, w, target, sampled=sampled, reduction="none")
        ref_fn = R.sampled_softmax_reference if kind == "softmax" else R.nce_reference
        ref = ref_fn(h, w, None, target[:, None], sampled[0], sampled[1][:, None], sampled[2],
                     kind == "softmax")
    torch.testing.assert_close(loss, ref)


@pytest.mark.parametrize("lead", [(), (2,), (0,)])
def test_hierarchical_softmax_with_zero_features(lead):
    """input [0] with target () (one row of D = 0 features, weight [V - 1, 0]) raised a
    RuntimeError from reshape(-1, 0); every path logit is then 0 and each row's loss is its
    code length times log 2."""
    tree = fs.ClassTree.huffman(torch.tensor([3, 1, 1]))
    h = torch.empty(lead + (0,), dtype=torch.float64, requires_grad=True)
    w = torch.empty(2, 0, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 2][:lead[0]] if lead else 2, dtype=torch.int64)
    loss = fs.hierarchical_softmax_loss(h, w, target, tree, reduction="none")
    ref = R.hierarchical_softmax_reference(h.reshape(target.numel(), 0), w, target.reshape(-1),
                                           *tree.paths()).reshape(lead)
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(loss, tree.lengths[target].double() * math.log(2.0))


def test_unique_expected_count_of_a_class_below_float64_resolution():
    """p = 2.6e-16 with unique sampling (11 tries): the expected count 1 - (1 - p)^11 is 11 p;
    computed naively in float64 (1 - p rounds to 1 - 2.2e-16) it is 16% off. The library's
    -expm1(tries log1p(-p)) was right; the reference was not, and now computes it with 50
    digits. Both are checked here."""
    sampler = fs.AliasSampler(torch.tensor([3e-16, 0.88, 0.12], dtype=torch.float64))
    true = torch.tensor([[0]])
    out = sampler.candidates(true, 2, unique=True, generator=torch.Generator().manual_seed(0))
    key = int(ops.draw_seed(torch.Generator().manual_seed(0), torch.device("cpu")))
    prob, alias = sampler._table
    _, tries = R.unique_reference(ops.KIND_ALIAS, key, 3, 2, prob.numpy(), alias.numpy())
    assert tries > 2  # rejections happened, so the unique formula applies
    p = sampler._prob_of(true).double()
    exact = tries * p * (1 - (tries - 1) / 2 * p)  # the binomial series, to p^2
    torch.testing.assert_close(out.true_expected_count.double(), exact, rtol=1e-6, atol=0)
    torch.testing.assert_close(R.expected_count(p, 2, tries, True), exact, rtol=1e-12, atol=0)


def test_target_with_zero_columns_is_a_value_error():
    """A target [N, 0] (no true class) is refused with a sentence, not a reshape error."""
    with pytest.raises(ValueError, match="target"):
        FF.negative_sampling_loss(torch.randn(2, 3), torch.randn(4, 3),
                                  torch.empty(2, 0, dtype=torch.int64),
                                  negatives=torch.tensor([1, 2]))


def test_word2vec_diverged_vectors_do_not_crash():
    """word2vec_train on the CPU read its logistic tables at int(NaN) once the vectors held
    a NaN (e.g. Word2Vec with a huge alpha): a segmentation fault. NaN now propagates. Run in
    a child process so that a crash fails this test instead of ending the session."""
    code = textwrap.dedent("""
        import random, math, torch
        from fastsoftmax import UnigramSampler, ops
        from fastsoftmax.models import Word2Vec
        V, D = 5, 4
        prob, alias = UnigramSampler(torch.ones(V, dtype=torch.float64))._table
        syn0, syn1 = torch.full((V, D), float("nan")), torch.zeros(V, D)
        stats = ops.word2vec_train(
            syn0, syn1, torch.tensor([0, 1, 2, 3, 4, 0, 1], dtype=torch.int32),
            torch.tensor([7]), torch.zeros(1, dtype=torch.int64), torch.ones(V), prob, alias,
            1, 0, True, True, 2, 2, True, 0.1, 0.0, 10.0, 1)
        assert math.isnan(stats[0].item()) and stats[1].item() > 0, stats
        random.seed(0)
        sentences = [[random.choice("abcdefgh") for _ in range(20)] for _ in range(50)]
        Word2Vec(sentences, vector_size=8, min_count=1, alpha=1e30, min_alpha=1e30,
                 epochs=2, workers=1, sample=0)
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_nce_float_log_z_keeps_float64_precision():
    """A Python float log_z became a float32 tensor, so float64 NCE was off by ~1e-11
    relative (log_z = 0.05, V = 1, D = 0). It is now held in float64."""
    h, w = torch.empty(1, 0, dtype=torch.float64), torch.empty(1, 0, dtype=torch.float64)
    target = torch.tensor([0])
    sampled = fs.SampledValues(torch.tensor([0]), torch.ones(1), torch.ones(1))
    loss = FF.nce_loss(h, w, target, sampled=sampled, log_z=0.05, reduction="sum")
    ref = R.nce_reference(h, w, None, target[:, None], sampled[0], sampled[1][:, None],
                          sampled[2], False, 0.05).sum()
    assert abs(loss.item() - ref.item()) <= 4 * torch.finfo(torch.float64).eps * ref.item()


def test_nce_log_z_gradient_in_float64_for_float64_input():
    """The log_z gradient summed sigmoid(x) - 1 + sigmoid(x_s) in float32 even for float64
    input; the terms nearly cancel, so it was off by 3e-5 relative (h = 0.03, w = -0.03)."""
    h = torch.tensor([[0.03]], dtype=torch.float64)
    w = torch.tensor([[-0.03]], dtype=torch.float64)
    target = torch.tensor([0])
    sampled = fs.SampledValues(torch.tensor([0]), torch.ones(1), torch.ones(1))
    log_z = torch.tensor(0.0, requires_grad=True)  # float32, learnable
    FF.nce_loss(h, w, target, sampled=sampled, log_z=log_z, reduction="sum").backward()
    z64 = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    R.nce_reference(h, w, None, target[:, None], sampled[0], sampled[1][:, None], sampled[2],
                    False, z64).sum().backward()
    torch.testing.assert_close(log_z.grad.double(), z64.grad, rtol=2 * 2.0**-23, atol=0)
