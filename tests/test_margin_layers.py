"""The margin output layers (MultiMarginLoss, SampledMarginRankingLoss, WARPLoss): the heads
registry, training against eval, torch.nn.MultiMarginLoss, torch.compile, and the sampled
ranking loss against the exact one in expectation."""

import itertools

import pytest
import reference as R
import torch

import fastsoftmax as fs
from fastsoftmax import functional as FF

N, D, V, K = 6, 5, 9, 3


def data(device="cpu", seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, D, generator=g).to(device=device, dtype=dtype)
    t = torch.randint(0, V, (N,), generator=g).to(device)
    return x, t


def test_heads_are_registered():
    assert fs.nn.HEADS["multi_margin"] is fs.MultiMarginLoss
    assert fs.nn.HEADS["margin_ranking"] is fs.SampledMarginRankingLoss
    assert fs.nn.HEADS["warp"] is fs.WARPLoss
    for name in ("MultiMarginLoss", "SampledMarginRankingLoss", "WARPLoss"):
        assert getattr(fs.nn, name) is getattr(fs, name) and name in fs.nn.__all__
    head = fs.make_head("margin_ranking", D, V, num_sampled=K, margin=0.5, bias=True)
    assert isinstance(head, fs.SampledMarginRankingLoss) and head.num_sampled == K
    assert head.margin == 0.5 and head.linear_bias is not None
    assert isinstance(fs.make_head("warp", D, V, num_sampled=K), fs.WARPLoss)
    assert isinstance(fs.make_head("multi_margin", D, V, p=2), fs.MultiMarginLoss)
    with pytest.raises(ValueError, match="needs a sample count"):
        fs.make_head("margin_ranking", D, V)


@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_layer_is_torchs_in_training_and_eval(device, p):
    torch.manual_seed(0)
    cw = torch.rand(V)
    m = fs.MultiMarginLoss(D, V, p=p, margin=0.8, bias=True, weight=cw).to(device)
    torch.nn.init.normal_(m.linear.bias)
    x, t = data(device)
    theirs = torch.nn.MultiMarginLoss(p=p, margin=0.8, weight=cw.to(device))(m.linear(x), t)
    torch.testing.assert_close(m(x, t), theirs)
    m.eval()
    torch.testing.assert_close(m(x, t), theirs)
    assert m.predict(x).tolist() == m.linear(x).argmax(1).tolist()


def test_ranking_layer_trains_on_its_sampler_and_evaluates_exactly(device):
    torch.manual_seed(0)
    m = fs.SampledMarginRankingLoss(D, V, num_sampled=K, margin=0.7, bias=True).to(device)
    x, t = data(device)
    loss = m(x, t, generator=torch.Generator().manual_seed(4))
    neg = m.sampler.sample(N, K, generator=torch.Generator().manual_seed(4))
    want = FF.sampled_margin_ranking_loss(x, m.linear.weight, t, sampled=neg, margin=0.7,
                                          linear_bias=m.linear.bias)
    torch.testing.assert_close(loss, want)
    m.eval()
    ref = R.full_ranking_reference(x.cpu(), m.linear.weight.detach().cpu(),
                                   m.linear.bias.detach().cpu(), t.cpu(), 0.7)
    torch.testing.assert_close(m(x, t).double().cpu(), ref.mean(), rtol=1e-5, atol=1e-5)
    m.negatives_reduction = "mean"
    torch.testing.assert_close(m(x, t).double().cpu(), ref.mean() / (V - 1), rtol=1e-5,
                               atol=1e-5)


def test_warp_layer_trains_on_its_sampler_and_evaluates_exactly(device):
    torch.manual_seed(0)
    m = fs.WARPLoss(D, V, K, margin=0.5).to(device)
    x, t = data(device)
    loss = m(x, t, generator=torch.Generator().manual_seed(9))
    neg = m.sampler.sample(N, K, generator=torch.Generator().manual_seed(9))
    ref = R.warp_reference(x.cpu(), m.linear.weight.detach().cpu(), None, t.cpu(), neg.cpu(),
                           0.5)
    torch.testing.assert_close(loss.double().cpu(), ref.mean(), rtol=1e-5, atol=1e-5)
    m.eval()
    ref = R.full_warp_reference(x.cpu(), m.linear.weight.detach().cpu(), None, t.cpu(), 0.5)
    torch.testing.assert_close(m(x, t).double().cpu(), ref.mean(), rtol=1e-5, atol=1e-5)


def test_sampled_ranking_equals_exact_in_expectation_by_enumeration():
    """Uniform negatives with replacement, hits left out: E[sum over K negatives] =
    K / V * sum_{c != y} hinge_c. Enumerating all V^K ordered draws gives the expectation
    exactly, so V / K times it is the exact loss (and its gradient) to rounding."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(N, D, generator=g, dtype=torch.float64)
    w = torch.randn(V, D, generator=g, dtype=torch.float64)
    t = torch.randint(0, V, (N,), generator=g)
    k = 2
    x.requires_grad_(), w.requires_grad_()
    draws = torch.tensor(list(itertools.product(range(V), repeat=k)))  # [V^k, k]
    rows = x.repeat(draws.shape[0], 1)
    sampled = draws.repeat_interleave(N, 0)
    loss = FF.sampled_margin_ranking_loss(rows, w, t.repeat(draws.shape[0]), sampled=sampled,
                                          reduction="none")
    expectation = loss.reshape(-1, N).mean(0)
    exact = FF.full_margin_ranking_loss(x, w, t, reduction="none")
    torch.testing.assert_close(expectation * V / k, exact, rtol=1e-12, atol=1e-12)
    # The gradient is linear in the loss: the same holds for it (what SGD sees on average).
    for a, b in zip(torch.autograd.grad((expectation * V / k).sum(), (x, w)),
                    torch.autograd.grad(exact.sum(), (x, w))):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_sampled_ranking_equals_exact_in_expectation_with_the_sampler():
    """The same with the real UniformSampler: the mean over M draws is within 5 standard
    errors of the exact loss for every row."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(N, D, generator=g, dtype=torch.float64)
    w = torch.randn(V, D, generator=g, dtype=torch.float64)
    t = torch.randint(0, V, (N,), generator=g)
    m, k = 4000, 4
    loss = FF.sampled_margin_ranking_loss(
        x.repeat(m, 1), w, t.repeat(m), num_sampled=k, sampler=fs.UniformSampler(V),
        generator=torch.Generator().manual_seed(3), reduction="none").reshape(m, N) * V / k
    exact = FF.full_margin_ranking_loss(x, w, t, reduction="none")
    stderr = loss.std(0) / m ** 0.5
    assert bool(((loss.mean(0) - exact).abs() <= 5 * stderr + 1e-12).all())
    assert bool((stderr > 0).all())  # the check above has teeth


@pytest.mark.parametrize("cls,kw", [(fs.MultiMarginLoss, dict(p=2)),
                                    (fs.SampledMarginRankingLoss, dict(num_sampled=K)),
                                    (fs.WARPLoss, dict(num_sampled=K))])
def test_compile_fullgraph(cls, kw):
    # The layers share OutputLayer.forward with every other compiled head of the suite: start
    # from an empty cache so earlier tests' compilations do not count toward the recompile limit.
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = cls(D, V, bias=True, **kw)
    x, t = data()
    compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
    xc, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch.manual_seed(1)
    loss = compiled(xc, t)
    loss.backward()
    grad_compiled = m.linear_weight.grad.clone()
    m.zero_grad()
    torch.manual_seed(1)
    eager = m(xe, t)
    eager.backward()
    torch.testing.assert_close(loss, eager)
    torch.testing.assert_close(xc.grad, xe.grad)
    torch.testing.assert_close(grad_compiled, m.linear_weight.grad)
    m.eval()
    torch.testing.assert_close(torch.compile(m, fullgraph=True, backend="aot_eager")(x, t),
                               m(x, t))


def test_layers_learn_to_rank_the_target_first():
    """A few hundred steps of SGD on the sampled ranking loss put the target at rank 1 on a
    separable toy problem (each class owns a direction)."""
    torch.manual_seed(0)
    Vb = 20
    m = fs.SampledMarginRankingLoss(Vb, Vb, num_sampled=4)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(0)
    for _ in range(300):
        t = torch.randint(0, Vb, (32,), generator=g)
        x = torch.nn.functional.one_hot(t, Vb).float() + 0.1 * torch.randn(32, Vb, generator=g)
        opt.zero_grad()
        m(x, t, generator=g).backward()
        opt.step()
    t = torch.arange(Vb)
    m.eval()
    assert m.predict(torch.nn.functional.one_hot(t, Vb).float()).tolist() == t.tolist()


def test_layer_arguments_are_checked():
    with pytest.raises(ValueError, match="does not take a per-class weight"):
        fs.SampledMarginRankingLoss(D, V, K, weight=torch.ones(V))
    with pytest.raises(ValueError, match="does not support label_smoothing"):
        fs.WARPLoss(D, V, K, label_smoothing=0.1)
    with pytest.raises(ValueError, match="margin must be a finite number >= 0"):
        fs.SampledMarginRankingLoss(D, V, K, margin=-0.5)
    with pytest.raises(ValueError, match="p must be 1 or 2"):
        fs.MultiMarginLoss(D, V, p=0)
    with pytest.raises(ValueError, match="negatives_reduction must be"):
        fs.SampledMarginRankingLoss(D, V, K, negatives_reduction="none")
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        fs.MultiMarginLoss(D, V, num_sampled=3)


@pytest.mark.parametrize("loss", ["multi_margin", "ranking", "warp"])
def test_exact_losses_keep_no_block_of_scores_for_backward(loss):
    """Training the exact losses saves the inputs and per-row values for the backward, not
    the [N, V] scores: the blocks are made again in the backward."""
    g = torch.Generator().manual_seed(0)
    n, d, v = 64, 4, 1000
    h = torch.randn(n, d, generator=g, requires_grad=True)
    w = torch.randn(v, d, generator=g, requires_grad=True)
    t = torch.randint(0, v, (n,), generator=g)
    fn = {"multi_margin": FF.multi_margin_loss, "ranking": FF.full_margin_ranking_loss,
          "warp": FF.full_warp_loss}[loss]
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda x: saved.append(x.numel()) or x,
                                                  lambda x: x):
        out = fn(h, w, t, chunk_bytes=4 * n * 100)  # blocks of 100 classes
    assert sum(saved) < n * v / 4, saved
    out.backward()
    assert h.grad is not None and bool(h.grad.abs().sum() > 0)


def test_compile_fullgraph_functionals_with_given_samples():
    """The functionals with samples drawn as a separate step (as a model passes them)
    compile without a graph break and give the eager loss and gradients."""
    g = torch.Generator().manual_seed(0)
    h = torch.randn(N, D, generator=g, requires_grad=True)
    w = torch.randn(V, D, generator=g, requires_grad=True)
    t = torch.randint(0, V, (N,), generator=g)
    neg = torch.randint(0, V, (N, K), generator=g)
    torch._dynamo.reset()

    def f(h, w, t, neg):
        return (FF.sampled_margin_ranking_loss(h, w, t, sampled=neg, margin=0.5)
                + FF.warp_loss(h, w, t, sampled=neg) + FF.multi_margin_loss(h, w, t, p=2))

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(h, w, t, neg)
    eager = f(h, w, t, neg)
    torch.testing.assert_close(compiled, eager)
    for a, b in zip(torch.autograd.grad(compiled, (h, w)), torch.autograd.grad(eager, (h, w))):
        torch.testing.assert_close(a, b)
