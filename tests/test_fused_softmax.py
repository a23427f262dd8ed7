"""The fused exact softmax (fastsoftmax/losses/fused.py; its ops in ops/fused_softmax.py, Triton
kernels in ops/_triton_softmax.py) against tests/reference.py: every option of full_softmax_loss in
float64 (losses, lse, gradients, gradcheck), float16/bfloat16 within stated tolerances and
returning a float32 loss, the forward's class splits, the ops under opcheck and
torch.compile, and the refusals. Without a GPU the kernels run under Triton's interpreter,
switched on below before anything imports them."""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import itertools  # noqa: E402

import pytest  # noqa: E402
import reference as R  # noqa: E402

from fastsoftmax import FullSoftmaxLoss  # noqa: E402
from fastsoftmax import functional as FF  # noqa: E402
from fastsoftmax.losses import fused  # noqa: E402
from fastsoftmax.ops import fused_softmax as fused_op  # noqa: E402

pytest.importorskip("triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu" and not fused.interpreted():
    pytest.skip("the Triton kernels were imported for a GPU; CPU tensors need the interpreter",
                allow_module_level=True)

N, D, V = 13, 20, 70  # under the interpreter: 1 block of rows, 5 tiles of classes, 2 of D


def _case(seed=0, dtype=torch.float64, rows=N, classes=V):
    g = torch.Generator().manual_seed(seed)
    h = (2 * torch.randn(rows, D, generator=g, dtype=dtype)).to(DEVICE).requires_grad_()
    w = torch.randn(classes, D, generator=g, dtype=dtype).to(DEVICE).requires_grad_()
    b = torch.randn(classes, generator=g, dtype=dtype).to(DEVICE).requires_grad_()
    target = torch.randint(0, classes, (rows,), generator=g)
    target[[2, rows - 1]] = -100
    class_weight = torch.rand(classes, generator=g, dtype=dtype) + 0.5
    return h, w, b, target.to(DEVICE), class_weight.to(DEVICE)


OPTIONS = list(itertools.product([None, 1.5], [0.0, 0.05], [False, True], [0.0, 0.2],
                                 [False, True]))


@pytest.mark.parametrize("softcap,z_loss,weighted,eps,bias", OPTIONS)
def test_every_option_matches_the_reference(softcap, z_loss, weighted, eps, bias):
    h, w, b, target, cw = _case()
    cw, b = (cw if weighted else None), (b if bias else None)
    for reduction in ("none", "sum", "mean"):
        want, want_lse = R.full_softmax_extras_reference(h, w, b, target, cw, eps, z_loss,
                                                         softcap)
        got, lse = FF.full_softmax_loss(h, w, target, linear_bias=b, weight=cw,
                                        label_smoothing=eps, reduction=reduction,
                                        z_loss=z_loss, softcap=softcap, return_lse=True,
                                        fused=True)
        ref = R.weighted_reduce_reference(want, target[:, None], reduction, cw)
        torch.testing.assert_close(got, ref)
        torch.testing.assert_close(lse, want_lse)
        params = (h, w) if b is None else (h, w, b)
        grads = torch.autograd.grad(got.sum() + 0.3 * lse.sum(), params)
        ref_grads = torch.autograd.grad(ref.sum() + 0.3 * want_lse.sum(), params)
        for ours, theirs in zip(grads, ref_grads):
            torch.testing.assert_close(ours, theirs)


def test_several_true_classes_and_ignored_rows():
    h, w, b, _, _ = _case(1)
    target = torch.randint(0, V, (N, 3), generator=torch.Generator().manual_seed(3))
    target[4] = -100
    target = target.to(DEVICE)
    got = FF.full_softmax_loss(h, w, target, linear_bias=b, reduction="sum", fused=True)
    want = R.reduce_reference(R.full_softmax_reference(h, w, b, target), target, "sum")
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.autograd.grad(got, (h, w, b)),
                               torch.autograd.grad(want, (h, w, b)))


@pytest.mark.parametrize("softcap,eps", [(None, 0.0), (2.0, 0.1)])
def test_gradcheck(softcap, eps):
    """fast_mode: the interpreter runs each forward in about 0.1 s, and the slow mode's one
    forward per input element would take minutes; the full-gradient comparisons above are
    element-wise already."""
    h, w, b, target, cw = _case(2, rows=5, classes=40)

    def loss(h, w, b):
        return FF.full_softmax_loss(h, w, target, linear_bias=b, weight=cw,
                                    label_smoothing=eps, softcap=softcap, z_loss=0.01,
                                    fused=True, reduction="none")
    assert torch.autograd.gradcheck(loss, (h, w, b), fast_mode=True)


def test_few_rows_split_the_classes_and_the_splits_agree():
    """With one block of rows the forward splits the classes over several programs
    (4 under the interpreter): 300 classes are 19 tiles of 16, in 4 splits of 5 (the last
    4). The combined log-sum-exp is the whole row's."""
    h, w, b, target, _ = _case(3, rows=3, classes=300)
    _, lse = FF.full_softmax_loss(h, w, target, linear_bias=b, return_lse=True, fused=True)
    torch.testing.assert_close(lse, torch.logsumexp(h @ w.T + b, 1))


# Stated tolerances of 16-bit inputs, against the float64 loss of the same (rounded) inputs:
# the logits are summed in float32, so the loss and lse are float32-exact; the gradients are
# products of the logit gradient rounded to the input's dtype (as autograd's F.linear
# backward rounds it), so they carry its 8 (bfloat16) or 11 (float16) bit mantissa.
LOW = {torch.bfloat16: dict(loss=2e-5, grad=2e-2), torch.float16: dict(loss=2e-5, grad=3e-3)}


@pytest.mark.parametrize("dtype", list(LOW))
def test_low_precision_inputs_give_a_float32_loss_within_tolerance(dtype):
    h, w, b, target, _ = _case(4, dtype=dtype, rows=24, classes=90)
    got, lse = FF.full_softmax_loss(h, w, target, linear_bias=b, return_lse=True,
                                    label_smoothing=0.1, fused=True)
    assert got.dtype == lse.dtype == torch.float32
    grads = torch.autograd.grad(got, (h, w, b))
    assert [g.dtype for g in grads] == [dtype] * 3
    exact = [t.detach().double().requires_grad_() for t in (h, w, b)]
    want = FF.full_softmax_loss(*exact[:2], target, linear_bias=exact[2], label_smoothing=0.1,
                                fused=False)
    want_grads = torch.autograd.grad(want, exact)
    assert abs(got.item() - want.item()) <= LOW[dtype]["loss"] * abs(want.item())
    for ours, theirs in zip(grads, want_grads):
        error = (ours.double() - theirs).norm() / theirs.norm()
        assert error <= LOW[dtype]["grad"], error
    streamed = FF.full_softmax_loss(h, w, target, linear_bias=b, label_smoothing=0.1,
                                    fused=False)
    assert streamed.dtype == torch.float32


def test_eval_without_autograd_matches_training_forward():
    h, w, b, target, _ = _case(5)
    with torch.no_grad():
        got = FF.full_softmax_loss(h, w, target, linear_bias=b, fused=True)
    torch.testing.assert_close(got, FF.full_softmax_loss(h, w, target, linear_bias=b,
                                                         fused=False))


def test_the_module_takes_fused():
    h, w, _, target, _ = _case(6)
    layer = FullSoftmaxLoss(D, V, fused=True, dtype=torch.float64, device=DEVICE)
    with torch.no_grad():
        layer.linear.weight.copy_(w)
    want = FF.full_softmax_loss(h, w, target, fused=False)
    torch.testing.assert_close(layer(h, target), want)
    with pytest.raises(TypeError, match="fused must be None, True or False"):
        FullSoftmaxLoss(D, V, fused="yes")


def test_opcheck_both_ops():
    h, w, b, target, cw = _case(7)
    args = (h.detach().requires_grad_(), w.detach().requires_grad_(),
            b.detach().requires_grad_(), target.clamp(min=0)[:, None], cw, 2.0)
    torch.library.opcheck(fused_op.fused_softmax_stats, args)
    lse = fused_op.fused_softmax_stats(*args)[0].detach()
    g = torch.randn(3, N, dtype=torch.float64, device=DEVICE)
    torch.library.opcheck(fused_op.fused_softmax_stats_backward,
                          tuple(a.detach() if torch.is_tensor(a) else a for a in args)
                          + (lse, g[0], g[1], g[2]))


def test_compile_fullgraph_matches_eager():
    h, w, b, target, cw = _case(8)

    def loss(h, w, b):
        return FF.full_softmax_loss(h, w, target, linear_bias=b, weight=cw, z_loss=0.01,
                                    softcap=2.0, label_smoothing=0.1, fused=True)

    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    ours, eager = compiled(h, w, b), loss(h, w, b)
    torch.testing.assert_close(ours, eager)
    torch.testing.assert_close(torch.autograd.grad(ours, (h, w, b)),
                               torch.autograd.grad(eager, (h, w, b)))


def test_refusals_say_why(monkeypatch):
    h, w, b, target, cw = _case(9)
    with pytest.raises(TypeError, match="fused must be None, True or False"):
        FF.full_softmax_loss(h, w, target, fused=1)
    with pytest.raises(ValueError, match="share one dtype"):
        FF.full_softmax_loss(h, w.float(), target, fused=True)
    with pytest.raises(ValueError, match="per-class weight that requires"):
        FF.full_softmax_loss(h, w, target, weight=cw.requires_grad_(), fused=True)
    bad = target.clone()
    bad[0] = V
    for path in (True, False):  # the same clear error on both paths
        with pytest.raises(ValueError, match="target"):
            FF.full_softmax_loss(h, w, bad, fused=path)
    monkeypatch.setattr(fused, "HAS_TRITON", False)
    with pytest.raises(ValueError, match="Triton is not installed"):
        FF.full_softmax_loss(h, w, target, fused=True)
    # ...and by default the streamed path runs unchanged without Triton
    torch.testing.assert_close(FF.full_softmax_loss(h, w, target),
                               FF.full_softmax_loss(h, w, target, fused=False))


@pytest.mark.skipif(DEVICE == "cpu", reason="the interpreter's atomics are deterministic")
def test_deterministic_mode_takes_the_streamed_path():
    h, w, _, target, _ = _case(11)
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        assert not fused.resolve(None, h, w, None)
        with pytest.raises(ValueError, match="use_deterministic_algorithms"):
            FF.full_softmax_loss(h.float(), w.float(), target, fused=True)
    finally:
        torch.use_deterministic_algorithms(previous)


def test_cpu_tensors_need_the_interpreter(monkeypatch):
    monkeypatch.setattr(fused, "interpreted", lambda: False)
    h, w, _, target, _ = _case(10)
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        FF.full_softmax_loss(h.cpu(), w.cpu(), target.cpu(), fused=True)
    assert not fused.resolve(None, h.cpu(), w.cpu(), None)


def _count_fused_calls(monkeypatch) -> list:
    calls, original = [], fused_op.fused_softmax_stats
    monkeypatch.setattr(fused_op, "fused_softmax_stats",
                        lambda *a: calls.append(1) or original(*a))
    return calls


def test_a_vocabulary_shard_gives_the_streamed_shard_figures(monkeypatch):
    """The vocabulary-parallel loss computes each rank's (lse, true, total) over its rows
    [start, start + rows) with targets shifted by start, so that a target another rank owns
    (below 0 or past the shard) counts in no row's true: the fused shard figures and their
    gradients equal the streamed ones, float64."""
    from fastsoftmax.vocab_parallel.functional import shard_stats
    h, w, b, target, cw = _case(5)
    start, rows = 30, 25
    local = (target.clamp(min=0) - start)[:, None]
    assert bool((local < 0).any()) and bool((local >= rows).any())
    shard = [w[start:start + rows], b[start:start + rows]]
    figures, calls = {}, _count_fused_calls(monkeypatch)
    for fused_path in (True, False):
        stats = shard_stats(h, *shard, local, cw[start:start + rows], 1 << 12, 1.5,
                            fused_path, None)
        grads = torch.autograd.grad(sum((k + 1) * s.sum() for k, s in enumerate(stats)),
                                    (h, *shard))
        figures[fused_path] = (stats, grads)
    assert len(calls) == 1, "fused=True did not take the fused kernels"
    torch.testing.assert_close(figures[True], figures[False])


def test_the_vocabulary_parallel_layer_takes_fused(tmp_path, monkeypatch):
    """shard_layer keeps FullSoftmaxLoss's `fused`, and the sharded loss of a one-rank group
    (gloo) then runs the fused kernels: the same loss and gradient as the single-process
    layer. A `fused` that is not None or a bool is refused."""
    import torch.distributed as dist

    from fastsoftmax.vocab_parallel import VocabParallelLayer, shard_layer
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed has no gloo backend here")
    h, _, _, target, _ = _case(6)
    layer = FullSoftmaxLoss(D, V, bias=True, fused=True, dtype=torch.float64).to(DEVICE)
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1),
                            rank=0, world_size=1)
    try:
        sharded = shard_layer(layer)
        assert sharded.fused is True
        calls = _count_fused_calls(monkeypatch)
        got = sharded.full_loss(h, target)
        assert calls, "the sharded loss did not take the fused kernels"
        want = layer.full_loss(h, target)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(torch.autograd.grad(got, h), torch.autograd.grad(want, h))
        with pytest.raises(TypeError, match="fused must be None, True or False"):
            VocabParallelLayer(D, V, fused="yes")
    finally:
        dist.destroy_process_group()
