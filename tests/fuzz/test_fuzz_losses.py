"""Property-based tests of the losses against the float64 reference of tests/reference.py,
through the public functionals and through the raw forward/backward ops.

Properties, for every dtype (float64, float32, float16, bfloat16), layout and shape drawn:
  * the forward output and every gradient agree with the reference within the dtype-derived
    bound of loss_cases.py, and there is no NaN where the reference has none;
  * the CPU forward and backward are bit-identical when run again;
  * raw ops: the sparse weight gradient is the dense one's touched rows, ids ascending.
"""

import torch
from hypothesis import given
from hypothesis import strategies as st

import reference as R
from fastsoftmax import functional as FF
from fuzz_support import passed
from loss_cases import (assert_within, backward_bounds, forward_bound, loss_cases,
                        output_row_grads, reference_rows)


def run_functional(case):
    if case.kind == "negsamp":
        return FF.negative_sampling_loss(case.input, case.weight, case.target,
                                         negatives=case.negatives, reduction=case.reduction,
                                         ignore_index=case.ignore_index)
    loss = FF.sampled_softmax_loss if case.kind == "softmax" else FF.nce_loss
    extra = {} if case.kind == "softmax" else {"log_z": case.log_z}
    return loss(case.input, case.weight, case.target, linear_bias=case.bias, sampled=case.sampled,
                num_true=case.num_true, remove_accidental_hits=case.remove_hits,
                reduction=case.reduction, ignore_index=case.ignore_index, **extra)


def grads(output, case, upstream):
    out = torch.autograd.grad(output, case.params(), grad_outputs=upstream, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for g, p in zip(out, case.params())]


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    def raw(x):  # a fresh contiguous copy, read as bytes (NaN payloads and -0.0 included)
        return torch.empty(x.shape, dtype=x.dtype).copy_(x.detach()).reshape(-1).view(torch.uint8)

    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(raw(a), raw(b))


def check_functional(case, repeat_bits=True):
    """repeat_bits: also the CPU's promise that a second run gives the same bits (not the CUDA
    backward's, whose atomic additions may land in another order)."""
    ours = run_functional(case)
    assert ours.dtype == case.dtype
    ref_rows = reference_rows(case)
    _, t2 = case.rows
    ref = R.reduce_reference(ref_rows, t2, case.reduction, case.ignore_index)
    if case.reduction == "none":
        assert ours.shape == case.lead
        ref = ref.reshape(case.lead)
    else:
        assert ours.shape == ()
    bound = forward_bound(case, ref_rows, case.reduction)
    assert_within("loss", ours, ref, bound.reshape(ref.shape), case.dtype)
    if case.reduction == "mean" and int((t2[:, 0] != case.ignore_index).sum()) == 0:
        return  # the mean of no rows is NaN, as F.cross_entropy's: no gradient to compare
    ours_grads = grads(ours, case, case.upstream)
    ref_grads = grads(ref, case, case.upstream.double())
    names = ["input", "weight"] + ["bias"] * (case.bias is not None) + [
        "log_z"] * isinstance(case.log_z, torch.Tensor)
    bounds = backward_bounds(case, output_row_grads(case))
    for name, p, a, b, tol in zip(names, case.params(), ours_grads, ref_grads, bounds):
        assert a.dtype == p.dtype and a.shape == p.shape, name
        # A gradient is rounded once more to its parameter's dtype (log_z may be float32).
        coarser = p.dtype if torch.finfo(p.dtype).eps > torch.finfo(case.dtype).eps else case.dtype
        assert_within(f"grad {name}", a, b, tol, coarser)
    if not repeat_bits:
        return
    # The CPU forward and backward are bit-identical run to run.
    again = run_functional(case)
    assert same_bits(again, ours)
    for a, b in zip(grads(again, case, case.upstream), ours_grads):
        assert same_bits(a, b)


@given(case=loss_cases("softmax"))
def test_sampled_softmax_loss_matches_reference(case):
    check_functional(case)
    passed("sampled_softmax_loss")


@given(case=loss_cases("nce"))
def test_nce_loss_matches_reference(case):
    check_functional(case)
    passed("nce_loss")


@given(case=loss_cases("negsamp"))
def test_negative_sampling_loss_matches_reference(case):
    check_functional(case)
    passed("negative_sampling_loss")


# ---------------------------------------------------------------------------------------
# raw ops
# ---------------------------------------------------------------------------------------


def acc_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def check_sparse(backward, args, dense_index, sparse):
    """The backward's outputs, checked: sparse weight rows are the dense gradient's touched
    rows with ascending ids, and a second run gives the same bits."""
    dense = backward(*args, False)
    out = backward(*args, sparse)
    for a, b in zip(backward(*args, sparse), out):
        assert same_bits(a, b)
    if sparse:
        rows, ids = out[dense_index], out[-1]
        assert bool((ids[1:] > ids[:-1]).all())
        assert same_bits(rows, dense[dense_index][ids])
        untouched = torch.ones(dense[dense_index].shape[0], dtype=torch.bool)
        untouched[ids] = False
        assert bool((dense[dense_index][untouched] == 0).all())
    else:
        assert out[-1].numel() == 0
    return dense


def raw_inputs(case):
    h, t = case.rows
    h = h.detach().requires_grad_()
    w = case.weight.detach().requires_grad_()
    b = None if case.bias is None else case.bias.detach().requires_grad_()
    return h, w, b, t


@given(case=loss_cases("negsamp"), sparse=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_negative_sampling_ops_match_reference(case, sparse, seed):
    h, w, _, t = raw_inputs(case)
    neg = case.negatives
    neg = neg if neg.dim() == 1 else neg.reshape(h.shape[0], neg.shape[-1])
    ops = torch.ops.fastsoftmax
    loss, coef = ops.negative_sampling_forward(h.detach(), w.detach(), t, neg,
                                               case.ignore_index, sparse, True)
    assert loss.dtype == coef.dtype == acc_dtype(case.dtype)
    eval_loss, no_coef = ops.negative_sampling_forward(h.detach(), w.detach(), t, neg,
                                                       case.ignore_index, sparse, False)
    assert torch.equal(eval_loss, loss) and no_coef.shape[0] == 0
    case.input, case.weight, case.target, case.negatives = h, w, t, neg
    case.lead, case.num_true = (h.shape[0],), t.shape[1]
    ref = reference_rows(case)
    assert_within("loss", loss, ref, forward_bound(case, ref, "none"), case.dtype)
    g = torch.rand(h.shape[0], generator=torch.Generator().manual_seed(seed)).to(loss.dtype)
    args = (g, h.detach(), w.detach(), t, neg, coef, case.ignore_index)
    grad_input, grad_weight, _ = check_sparse(ops.negative_sampling_backward, args, 1, sparse)
    ref_h, ref_w = torch.autograd.grad(ref, [h, w], grad_outputs=g.double(), allow_unused=True)
    tol = backward_bounds(case, g.double())
    assert_within("grad input", grad_input, ref_h, tol[0], case.dtype)
    assert_within("grad weight", grad_weight, ref_w, tol[1], case.dtype)
    passed("negative_sampling_forward/backward")


@given(case=st.one_of(loss_cases("softmax"), loss_cases("nce")), sparse=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_sampled_logits_ops_match_reference(case, sparse, seed):
    h, w, b, t = raw_inputs(case)
    cand, tq, sq = case.sampled
    tq = tq.reshape(t.shape)
    z = case.log_z
    log_z = (z.detach() if isinstance(z, torch.Tensor) else torch.tensor(z)).reshape(())
    mode = 0 if case.kind == "softmax" else 1
    ops = torch.ops.fastsoftmax
    forward_args = (h.detach(), w.detach(), None if b is None else b.detach(), t, cand, tq, sq,
                    log_z, mode, case.remove_hits, case.ignore_index, sparse)
    loss, grad_logits, grad_true = ops.sampled_logits_forward(*forward_args, True)
    assert loss.dtype == grad_true.dtype == acc_dtype(case.dtype)
    eval_loss, no_logits, no_true = ops.sampled_logits_forward(*forward_args, False)
    assert torch.equal(eval_loss, loss) and no_logits.shape[0] == no_true.shape[0] == 0
    assert grad_logits.dtype == case.dtype
    case.input, case.weight, case.bias, case.target = h, w, b, t
    case.lead, case.num_true, case.log_z = (h.shape[0],), t.shape[1], float(log_z)
    ref = reference_rows(case)
    assert_within("loss", loss, ref, forward_bound(case, ref, "none"), case.dtype)
    g = torch.rand(h.shape[0], generator=torch.Generator().manual_seed(seed)).to(loss.dtype)
    args = (g, h.detach(), w.detach(), t, cand, grad_logits, grad_true, b is not None,
            case.ignore_index)
    grad_input, grad_weight, grad_bias, _ = check_sparse(ops.sampled_logits_backward, args, 1,
                                                         sparse)
    params = [h, w] + ([b] if b is not None else [])
    ref_grads = torch.autograd.grad(ref, params, grad_outputs=g.double(), allow_unused=True)
    tol = backward_bounds(case, g.double())
    assert_within("grad input", grad_input, ref_grads[0], tol[0], case.dtype)
    assert_within("grad weight", grad_weight, ref_grads[1], tol[1], case.dtype)
    if b is not None:
        assert_within("grad bias", grad_bias, ref_grads[2], tol[2], case.dtype)
    else:
        assert grad_bias.numel() == 0
    passed("sampled_logits_forward/backward")
