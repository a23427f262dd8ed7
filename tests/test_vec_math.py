"""The CPU loss kernels take softplus and sigmoid of a block of float scores with their own
vectorised exp and log1p (csrc/cpu/vec_math.h). Through negative sampling's forward, whose
loss is softplus(-s) + sum softplus(s_k) and whose saved coefficients are sigmoids, every
score from -200 to 200 (both tails, zero, the underflow edge) must match float64 to a few
ulp."""

import torch

import fastsoftmax  # noqa: F401  (registers the ops)

ops = torch.ops.fastsoftmax


def scores():
    edges = torch.tensor([0.0, -0.0, 1e-8, -1e-8, 86.9, -86.9, 87.1, -87.1, 88.5, -88.5,
                          103.0, -103.0, 200.0, -200.0, 0.3465736, -0.3465736])
    return torch.cat([edges, torch.linspace(-40, 40, 4001), torch.randn(2000) * 5]).double()


def test_softplus_and_sigmoid_of_every_score_match_float64():
    s = scores()
    n = s.numel()
    # Row n scores s[n] against its true class and s[n] against each of its K negatives:
    # h = [s[n]], w = [[1.0]], every id 0.
    h = s.float()[:, None]
    w = torch.ones(1, 1)
    target = torch.zeros(n, 1, dtype=torch.long)
    negatives = torch.zeros(n, 3, dtype=torch.long)
    loss, coef = ops.negative_sampling_forward(h, w, target, negatives, -100, False, True)
    x = h.double()[:, 0]  # the float32 score the kernel saw
    softplus = torch.nn.functional.softplus
    expected_loss = softplus(-x) + 3 * softplus(x)
    torch.testing.assert_close(loss.double(), expected_loss, rtol=2e-6, atol=1e-30)
    torch.testing.assert_close(coef[:, 0].double(), -torch.sigmoid(-x), rtol=1e-6, atol=1e-30)
    torch.testing.assert_close(coef[:, 1:].double(), torch.sigmoid(x)[:, None].expand(n, 3),
                               rtol=1e-6, atol=1e-30)

    # Alone, the true class's loss softplus(-x) of a large x is e^-x: it must keep its
    # relative accuracy down to where e^-x leaves the normal floats (x = 87).
    only_true = torch.zeros(n, 0, dtype=torch.long)
    alone, _ = ops.negative_sampling_forward(h, w, target, only_true, -100, False, False)
    normal = x < 87
    torch.testing.assert_close(alone[normal].double(), softplus(-x)[normal], rtol=2e-6, atol=0)
    assert (alone[~normal] < 1e-37).all()
