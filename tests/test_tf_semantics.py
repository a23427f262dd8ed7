"""Accidental hits when a true class appears more than once among the candidates: TensorFlow
masks one position per (row, true id), fastsoftmax masks every position. Both pinned here.

TensorFlow's compute_accidental_hits maps each candidate value to one position (the last
position holding it) and masks that position for every row whose true classes include the
value; with unique candidates (every layer's draw) that is every hit, and the two agree. With
a repeated candidate (sampler.candidates(..., unique=False), or `sampled=` given by the
caller) TF keeps the other copies in the row's softmax as negatives of its own true class,
so its loss pushes the true class against itself. fastsoftmax removes them all.
"""

import pytest
import torch
import torch.nn.functional as F

import fastsoftmax as fs
from reference import nce_reference, sampled_softmax_reference

D, V = 5, 12


def tf_hit_positions(target: torch.Tensor, sampled: torch.Tensor) -> torch.Tensor:
    """TensorFlow's compute_accidental_hits as a mask [N, S]: one position per candidate value
    (its last), marked in each row whose true classes [N, T] hold that value."""
    last = {}
    for position, value in enumerate(sampled.tolist()):
        last[value] = position
    mask = torch.zeros(target.shape[0], sampled.shape[0], dtype=torch.bool)
    for row, ids in enumerate(target.tolist()):
        for value in ids:
            if value in last:
                mask[row, last[value]] = True
    return mask


def every_hit_position(target: torch.Tensor, sampled: torch.Tensor) -> torch.Tensor:
    """fastsoftmax's hits [N, S]: every position whose candidate is one of the row's true
    classes."""
    return (sampled[None, None, :] == target[:, :, None]).any(1)


def loss_with_hits(kind, x, w, b, target, sampled, true_expected, sampled_expected, hits):
    """TensorFlow's _compute_sampled_logits with the positions `hits` [N, S] masked, then
    sampled softmax or NCE (sigmoid cross entropy) per row, in float64."""
    true_logits = (x[:, None, :] * w[target]).sum(-1) + b[target] - true_expected.log()
    sampled_logits = x @ w[sampled].T + b[sampled] - sampled_expected.log()
    sampled_logits = sampled_logits.masked_fill(hits, -torch.finfo(x.dtype).max)
    logits = torch.cat([true_logits, sampled_logits], 1)
    labels = torch.cat([torch.full_like(true_logits, 1.0 / target.shape[1]),
                        torch.zeros_like(sampled_logits)], 1)
    if kind == "sampled_softmax":
        return -(labels * logits.log_softmax(1)).sum(1)
    return -(labels * F.logsigmoid(logits) + (1 - labels) * F.logsigmoid(-logits)).sum(1)


def case(duplicate: bool):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1, D, generator=g, dtype=torch.float64)
    w = torch.randn(V, D, generator=g, dtype=torch.float64)
    b = torch.randn(V, generator=g, dtype=torch.float64)
    target = torch.tensor([[4]])
    sampled = torch.tensor([4, 7, 4, 2] if duplicate else [4, 7, 9, 2])
    true_expected = torch.full((1, 1), 0.3, dtype=torch.float64)
    sampled_expected = torch.tensor([0.3, 0.2, 0.3, 0.4], dtype=torch.float64)
    return x, w, b, target, sampled, true_expected, sampled_expected


LOSSES = {
    "sampled_softmax": (fs.functional.sampled_softmax_loss, sampled_softmax_reference),
    "nce": (fs.functional.nce_loss, nce_reference),
}


def ours(name, x, w, b, target, sampled, true_expected, sampled_expected):
    loss = LOSSES[name][0]
    return loss(x, w, target, linear_bias=b, sampled=fs.SampledValues(
        sampled, true_expected, sampled_expected), remove_accidental_hits=True,
        reduction="none")


def test_tf_hit_positions_marks_the_last_copy_only():
    mask = tf_hit_positions(torch.tensor([[4], [7]]), torch.tensor([4, 7, 4, 2]))
    assert mask.tolist() == [[False, False, True, False], [False, True, False, False]]


@pytest.mark.parametrize("name", list(LOSSES))
def test_repeated_true_class_masks_every_copy_unlike_tensorflow(name):
    args = case(duplicate=True)
    target, sampled = args[3], args[4]
    got = ours(name, *args)
    mask_all = loss_with_hits(name, *args, every_hit_position(target, sampled))
    tf_style = loss_with_hits(name, *args, tf_hit_positions(target, sampled))
    torch.testing.assert_close(got, mask_all, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got, LOSSES[name][1](*args, remove_accidental_hits=True),
                               rtol=1e-12, atol=1e-12)  # the project's reference
    assert (got - tf_style).abs().max() > 1e-3  # TF keeps one copy as a negative


@pytest.mark.parametrize("name", list(LOSSES))
def test_without_repeats_tensorflow_and_fastsoftmax_agree(name):
    args = case(duplicate=False)
    target, sampled = args[3], args[4]
    assert torch.equal(tf_hit_positions(target, sampled), every_hit_position(target, sampled))
    got = ours(name, *args)
    torch.testing.assert_close(got, loss_with_hits(name, *args, tf_hit_positions(
        target, sampled)), rtol=1e-12, atol=1e-12)
