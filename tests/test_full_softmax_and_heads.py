"""The full softmax member of the loss-module family and the head registry: FullSoftmaxLoss
is cross entropy in training and eval, the streamed logsumexp and the exact eval beyond one
block against one-shot PyTorch, gradcheck against tests/reference.py, and make_head /
register_head building every model head and refusing bad names and classes. The sampled
modules are in tests/test_loss_modules.py, FullSoftmaxLoss's extras (z_loss, softcap, ...)
in tests/test_full_softmax_extras.py."""

import pytest
import torch
import torch.nn.functional as F
from conftest import random_batch
from reference import full_softmax_reference, reduce_reference

import fastsoftmax as fs
from fastsoftmax.losses import _streaming
from fastsoftmax import functional as FF

D, V = 16, 64


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_full_softmax_loss_is_cross_entropy_in_training_and_eval(device, reduction):
    torch.manual_seed(0)
    m = fs.FullSoftmaxLoss(D, V, reduction=reduction, bias=True).to(device)
    torch.nn.init.normal_(m.linear_bias)
    m.chunk_bytes = 4 * 15 * 7  # blocks of 7 classes for 15 rows
    x, t = random_batch(device, D, V)
    t[0, 1] = -100
    x.requires_grad_()
    ref_x = x.detach().clone().requires_grad_()
    logits = F.linear(ref_x, m.linear_weight, m.linear_bias)
    ref = F.cross_entropy(logits.reshape(-1, V), t.reshape(-1),
                          reduction=reduction).reshape(t.shape if reduction == "none" else ())
    for train in (True, False):
        m.train(train)
        torch.testing.assert_close(m(x, t), ref, rtol=1e-5, atol=1e-5)
    m.train()
    m(x, t).sum().backward()
    ref.sum().backward()
    torch.testing.assert_close(x.grad, ref_x.grad, rtol=1e-5, atol=1e-6)
    assert torch.equal(m.predict(x), F.linear(x, m.linear_weight, m.linear_bias).argmax(-1))


@pytest.mark.parametrize("rows,classes,chunk", [(7, 13, 4 * 5), (33, 50, 4 * 64), (4, 9, 1 << 22),
                                                (5, 2000, 4 * 1100), (50, 2000, 4 * 400)])
def test_streaming_logsumexp_matches_one_shot(rows, classes, chunk):
    """Blocks of classes and (when few classes fit) of rows give the one-shot value, also for
    logits large enough that a naive sum of exponentials overflows."""
    row_step, class_step = _streaming.blocks(rows, classes, chunk)
    assert row_step * class_step <= max(chunk // 4, class_step)
    g = torch.Generator().manual_seed(rows * classes)
    h = torch.randn(rows, 6, generator=g) * 30
    w, b = torch.randn(classes, 6, generator=g), torch.randn(classes, generator=g)
    t = torch.randint(classes, (rows,), generator=g)
    got = FF.full_softmax_loss(h, w, t, linear_bias=b, reduction="none", chunk_bytes=chunk)
    torch.testing.assert_close(got, F.cross_entropy(F.linear(h, w, b), t, reduction="none"),
                               rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(FF.streaming_logsumexp(h, w, chunk_bytes=chunk),
                               torch.logsumexp(h @ w.t(), 1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_exact_eval_beyond_one_block_without_autograd(dtype):
    """Forward-only exact loss over several blocks (where linear_cross_entropy's chunked path
    serves it, when PyTorch has it) equals the one-shot cross entropy, ignored rows included,
    and equals the streamed autograd path."""
    g = torch.Generator().manual_seed(3)
    h = (torch.randn(40, 6, generator=g) * 10).to(dtype)
    w, b = torch.randn(300, 6, generator=g).to(dtype), torch.randn(300, generator=g).to(dtype)
    t = torch.randint(300, (40,), generator=g)
    t[5] = -100
    chunk = 4 * 300 * 7  # 7 rows of all classes at a time
    with torch.no_grad():
        got = FF.full_softmax_loss(h, w, t, linear_bias=b, reduction="none", chunk_bytes=chunk)
    ref = F.cross_entropy(F.linear(h, w, b), t, reduction="none")
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else {}
    torch.testing.assert_close(got, ref, **tol)
    streamed = FF.full_softmax_loss(h, w.requires_grad_(), t, linear_bias=b, reduction="none",
                                    chunk_bytes=chunk)
    torch.testing.assert_close(got, streamed.detach(), **tol)


def test_full_softmax_loss_matches_reference_and_gradcheck():
    """num_true = 2 and an ignored row, blocks of 3 classes, float64: the value and the
    gradients of the reference, and gradcheck."""
    g = torch.Generator().manual_seed(0)
    h = torch.randn(4, 3, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(11, 3, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(11, generator=g, dtype=torch.float64, requires_grad=True)
    t = torch.tensor([[1, 4], [-100, 0], [10, 2], [3, 3]])
    fn = lambda h, w, b: FF.full_softmax_loss(h, w, t, linear_bias=b, reduction="sum",
                                              chunk_bytes=4 * 4 * 3)
    ours = fn(h, w, b)
    ref = reduce_reference(full_softmax_reference(h, w, b, t), t, "sum")
    torch.testing.assert_close(ours, ref)
    grads = torch.autograd.grad(ours, (h, w, b))
    for a, r in zip(grads, torch.autograd.grad(ref, (h, w, b))):
        torch.testing.assert_close(a, r)
    assert torch.autograd.gradcheck(fn, (h, w, b))


def test_head_registry_builds_every_model_head():
    counts = torch.arange(V, 0, -1).double()
    sampling = dict(sampler="unigram", counts=counts, power=0.5, sparse=False)
    common = dict(sampler=None, counts=None, power=0.75, bias=True, sparse=False)  # unset
    for name, cls in (("full", fs.FullSoftmaxLoss), ("sampled", fs.SampledSoftmaxLoss),
                      ("nce", fs.NCELoss), ("neg", fs.NegativeSamplingLoss)):
        head = fs.make_head(name, D, V, num_sampled=6, bias=name != "neg",
                            **(sampling if name != "full" else {}))
        assert type(head) is cls and head.linear_weight.shape == (V, D)
        assert (head.linear_bias is None) == (name == "neg")
    assert fs.make_head("neg", D, V, num_sampled=6, **sampling).num_negatives == 6
    with pytest.raises(ValueError, match="output must be one of"):
        fs.make_head("no-such-head", D, V)
    with pytest.raises(ValueError, match="needs a sample count"):
        fs.make_head("nce", D, V)
    with pytest.raises(ValueError, match="must be smaller than num_classes"):
        fs.make_head("sampled", D, V, num_sampled=V)
    with pytest.raises(TypeError, match="frobnicate"):
        fs.make_head("full", D, V, frobnicate=1)

    class Doubled(fs.FullSoftmaxLoss):
        def training_loss(self, input, target):
            return 2 * self.full_loss(input, target)

    class Untied(fs.OutputLayer):  # a head that cannot share a weight
        def __init__(self, in_features, num_classes, *, bias=True, reduction="mean",
                     ignore_index=-100):
            super().__init__(in_features, num_classes, reduction=reduction,
                             ignore_index=ignore_index)
            self.linear_weight = torch.nn.Parameter(torch.zeros(num_classes, in_features))

    fs.register_head("doubled", Doubled)
    fs.register_head("untied", Untied)
    try:
        assert type(fs.make_head("doubled", D, V, **common)) is Doubled
        assert type(fs.make_head("untied", D, V, linear_weight=None, **common)) is Untied
        with pytest.raises(TypeError, match="linear_weight"):
            fs.make_head("untied", D, V, linear_weight=torch.nn.Parameter(torch.zeros(V, D)))
    finally:
        del fs.nn.HEADS["doubled"], fs.nn.HEADS["untied"]
    with pytest.raises(TypeError, match="OutputLayer subclass"):
        fs.register_head("bad", torch.nn.Linear)
