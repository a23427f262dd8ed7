"""The patched loss and every parameter's gradient, to float64's rounding.

For each supported architecture (a tiny random model from a local config, as in
test_hf_patch.py; Gemma 2/3 with their final_logit_softcapping), the reference is
tests/reference_hf.py's float64 causal-LM loss on the unpatched model's own float64 logits,
differentiated back through the unpatched model: the patched model must give the same loss
and the same gradient for every parameter (named_parameters, the embeddings and each decoder
weight included) within 1e-9 relative, with ignored (-100) labels, shift_labels and
num_items_in_batch. A float32 model is held to 1e-5 against the unpatched float32 model with
transformers' own loss.
"""

import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")

from fastsoftmax.integrations.transformers import SUPPORTED, patch  # noqa: E402
from reference import causal_lm_loss_reference  # noqa: E402
from test_hf_patch import B, CAP, T, V, tiny_configs  # noqa: E402


@pytest.fixture(scope="module")
def float64_models():
    """{architecture: (unpatched, patched)}, the same float64 weights."""
    built = {}
    for name, config in tiny_configs().items():
        torch.manual_seed(0)
        model = getattr(transformers, name)(config).double().eval()
        built[name] = model, patch(copy.deepcopy(model))
    return built


def _inputs(case):
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(3, V, (B, T), generator=g)
    labels = ids.clone()
    labels[0, :4] = -100  # a masked prompt
    labels[2, 6:] = -100  # padding at the end
    if case == "shift_labels":
        shifted = torch.randint(0, V, (B, T), generator=g)
        shifted[1, ::3] = -100
        return dict(input_ids=ids, labels=labels, shift_labels=shifted)
    if case == "num_items_in_batch":  # a micro-batch's share of a larger accumulated batch
        return dict(input_ids=ids, labels=labels, num_items_in_batch=torch.tensor(40))
    return dict(input_ids=ids, labels=labels)


def _grads(model, loss):
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters()}


def _reference_step(model, inputs):
    """The float64 reference loss on the unpatched model's logits, and its gradients."""
    logits = model(input_ids=inputs["input_ids"]).logits
    loss = causal_lm_loss_reference(logits, inputs["labels"], inputs.get("shift_labels"),
                                    inputs.get("num_items_in_batch"))
    return loss.detach(), _grads(model, loss)


def _assert_close_relative(got, want, rel, what):
    # Relative to the tensor's largest entry, so entries near zero are held to the same scale.
    scale = want.abs().max().item()
    assert scale > 0, f"{what}: the reference is zero, the comparison would prove nothing"
    torch.testing.assert_close(got, want, rtol=rel, atol=rel * scale, msg=what)


@pytest.mark.parametrize("case", ["ignored_labels", "shift_labels", "num_items_in_batch"])
@pytest.mark.parametrize("arch", list(SUPPORTED))
def test_float64_loss_and_every_gradient_to_1e9(float64_models, arch, case):
    ref, ours = float64_models[arch]
    inputs = _inputs(case)
    want_loss, want = _reference_step(ref, inputs)
    got_loss = ours(**inputs).loss
    assert got_loss.dtype == torch.float64
    got = _grads(ours, got_loss)
    _assert_close_relative(got_loss.detach(), want_loss, 1e-9, "loss")
    assert got.keys() == want.keys() and len(want) > 5
    for name in want:
        _assert_close_relative(got[name], want[name], 1e-9, name)


def test_the_softcap_is_in_the_float64_comparison(float64_models):
    # Gemma's cap must change the reference at this scale, or the test above would not see a
    # patch that left it out.
    ref, _ = float64_models["Gemma2ForCausalLM"]
    assert ref.config.final_logit_softcapping == CAP
    inputs = _inputs("ignored_labels")
    capped, _ = _reference_step(ref, inputs)
    ref.config.final_logit_softcapping = None
    try:
        uncapped, _ = _reference_step(ref, inputs)
    finally:
        ref.config.final_logit_softcapping = CAP
    assert abs(capped - uncapped) > 1e-3


@pytest.mark.parametrize("arch", ["LlamaForCausalLM", "Gemma2ForCausalLM", "GPT2LMHeadModel"])
def test_float32_loss_and_every_gradient_to_1e5(float64_models, arch):
    ref = copy.deepcopy(float64_models[arch][0]).float()
    ours = patch(copy.deepcopy(ref))
    inputs = _inputs("num_items_in_batch")
    want_loss = ref(**inputs).loss  # transformers' own loss on full float32 logits
    want = _grads(ref, want_loss)
    got_loss = ours(**inputs).loss
    assert got_loss.dtype == want_loss.dtype == torch.float32
    got = _grads(ours, got_loss)
    _assert_close_relative(got_loss.detach(), want_loss.detach(), 1e-5, "loss")
    assert got.keys() == want.keys()
    for name in want:
        _assert_close_relative(got[name], want[name], 1e-5, name)


@pytest.mark.parametrize("arch", ["LlamaForCausalLM", "Gemma2ForCausalLM"])
def test_blocks_of_a_few_rows_give_the_same_float64_figures(float64_models, arch):
    # 4 rows of logits a block (chunk_bytes), so the 30 rows take 8 blocks, the last short.
    ref, _ = float64_models[arch]
    ours = patch(copy.deepcopy(ref), chunk_bytes=4 * V * 8)
    inputs = _inputs("num_items_in_batch")
    want_loss, want = _reference_step(ref, inputs)
    got_loss = ours(**inputs).loss
    got = _grads(ours, got_loss)
    _assert_close_relative(got_loss.detach(), want_loss, 1e-9, "loss")
    for name in want:
        _assert_close_relative(got[name], want[name], 1e-9, name)


def test_a_label_outside_the_vocabulary_is_a_sentence(float64_models):
    _, ours = float64_models["LlamaForCausalLM"]
    inputs = _inputs("ignored_labels")
    inputs["labels"][1, 3] = V
    with pytest.raises(ValueError, match=rf"label ids must lie in \[0, {V}\) or equal ignore_index; found {V}"):
        ours(**inputs)
