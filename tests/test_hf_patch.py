"""fastsoftmax.integrations.transformers.patch against transformers' own loss.

Every supported architecture is built from a tiny local config (no download), in float64.
Each test runs the unpatched model (transformers' ForCausalLMLoss on full logits, computed
the normal way) and a patched deep copy on the same inputs, and compares the loss and the
gradients of lm_head's weight and of a parameter inside the decoder. transformers computes
its loss in float32 whatever the model's dtype (logits.float()); the patch keeps a float64
model's loss in float64, so the tolerances here are float32's (test_hf_exact.py holds the
patch to float64's against a float64 reference).
"""

import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")

from fastsoftmax.integrations.transformers import (SUPPORTED, is_patched, patch,  # noqa: E402
                                                   unpatch)

V, B, T = 61, 3, 10
# check_dtype=False: the float64 patched loss against transformers' float32 one.
TOL = dict(rtol=2e-5, atol=2e-6, check_dtype=False)
# Gemma's final_logit_softcapping: small, so that capping changes a tiny random model's loss.
CAP = 0.05
COMMON = dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
              pad_token_id=0, bos_token_id=1, eos_token_id=2, attn_implementation="eager")


def tiny_configs():
    t = transformers
    return {
        "LlamaForCausalLM": t.LlamaConfig(**COMMON),
        "MistralForCausalLM": t.MistralConfig(**COMMON, sliding_window=None),
        "Qwen2ForCausalLM": t.Qwen2Config(**COMMON),
        "Qwen3ForCausalLM": t.Qwen3Config(**COMMON, head_dim=8),
        "Gemma2ForCausalLM": t.Gemma2Config(**COMMON, head_dim=8, final_logit_softcapping=CAP),
        "Gemma3ForCausalLM": t.Gemma3TextConfig(**COMMON, head_dim=8,
                                                final_logit_softcapping=CAP),
        "Phi3ForCausalLM": t.Phi3Config(**COMMON),
        "GPT2LMHeadModel": t.GPT2Config(vocab_size=V, n_embd=32, n_layer=1, n_head=4,
                                        n_positions=64, bos_token_id=1, eos_token_id=2,
                                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                        attn_implementation="eager"),
    }


ARCHS = list(SUPPORTED)


@pytest.fixture(scope="module")
def models():
    built = {}
    for name, config in tiny_configs().items():
        torch.manual_seed(0)
        built[name] = getattr(transformers, name)(config).double().eval()
    return built


def _pair(models, arch, **options):
    """(unpatched, patched) copies of the architecture's tiny model, same weights."""
    ref = copy.deepcopy(models[arch])
    return ref, patch(copy.deepcopy(models[arch]), **options)


def _batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, V, (B, T), generator=g)
    labels = ids.clone()
    labels[0, :4] = -100  # a masked prompt
    labels[2, 7:] = -100  # padding at the end
    return ids, labels


def _inner(model):
    # A parameter of the first decoder layer: its gradient comes through the hidden states.
    return next(p for n, p in model.named_parameters() if ".0." in n and p.dim() == 2)


def _loss_and_grads(model, **inputs):
    model.zero_grad(set_to_none=True)
    out = model(**inputs)
    out.loss.backward()
    return out, model.lm_head.weight.grad.clone(), _inner(model).grad.clone()


def _assert_same(ref, ours, **inputs):
    want, want_head, want_inner = _loss_and_grads(ref, **inputs)
    got, got_head, got_inner = _loss_and_grads(ours, **inputs)
    # transformers rounds a float64 model's logits to float32; the patch keeps float64.
    assert want.loss.dtype == torch.float32
    assert got.loss.dtype == torch.promote_types(ours.dtype, torch.float32)
    torch.testing.assert_close(got.loss.float(), want.loss, **TOL)
    torch.testing.assert_close(got_head, want_head, **TOL)
    torch.testing.assert_close(got_inner, want_inner, **TOL)
    return want, got


@pytest.mark.parametrize("arch", ARCHS)
def test_loss_and_grads_with_ignored_labels(models, arch):
    ref, ours = _pair(models, arch)
    ids, labels = _batch()
    _, got = _assert_same(ref, ours, input_ids=ids, labels=labels)
    assert got.logits is None  # no [tokens, V] logits when labels are given


@pytest.mark.parametrize("arch", ARCHS)
def test_training_mode_and_attention_mask(models, arch):
    ref, ours = _pair(models, arch)
    ref.train(), ours.train()  # dropout is 0 in these configs: the same function
    ids, labels = _batch(2)
    mask = torch.ones_like(ids)
    mask[2, 7:] = 0
    _assert_same(ref, ours, input_ids=ids, attention_mask=mask, labels=labels)


@pytest.mark.parametrize("arch", ARCHS)
def test_num_items_in_batch_accumulates_to_the_full_batch_mean(models, arch):
    ref, ours = _pair(models, arch)
    ids, labels = _batch(3)
    full = ref(input_ids=ids, labels=labels).loss
    count = (labels[:, 1:] != -100).sum()  # the Trainer's num_items_in_batch
    total = 0
    for rows in (slice(0, 1), slice(1, 3)):
        part = dict(input_ids=ids[rows], labels=labels[rows], num_items_in_batch=count)
        _, got = _assert_same(ref, ours, **part)
        total = total + got.loss
    torch.testing.assert_close(total, full, **TOL)
    # A plain int, as a custom training loop may pass it.
    _assert_same(ref, ours, input_ids=ids, labels=labels, num_items_in_batch=int(count))


@pytest.mark.parametrize("arch", ARCHS)
def test_shift_labels_replace_the_shift(models, arch):
    ref, ours = _pair(models, arch)
    ids, labels = _batch(4)
    shifted = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(5))
    shifted[1, ::3] = -100
    _assert_same(ref, ours, input_ids=ids, labels=labels, shift_labels=shifted)


@pytest.mark.parametrize("arch", ARCHS)
def test_logits_to_keep(models, arch):
    ref, ours = _pair(models, arch)
    ids, labels = _batch(6)
    keep = 4
    # Labels for the kept positions only, shifted inside them (as transformers does).
    _assert_same(ref, ours, input_ids=ids, labels=labels[:, -keep:], logits_to_keep=keep)
    shifted = labels[:, -keep:].clone()
    _assert_same(ref, ours, input_ids=ids, labels=labels, shift_labels=shifted,
                 logits_to_keep=keep)
    positions = torch.tensor([0, 3, 5])
    _assert_same(ref, ours, input_ids=ids, labels=labels[:, positions],
                 logits_to_keep=positions)
    with pytest.raises(ValueError, match="logits_to_keep"):
        ours(input_ids=ids, labels=labels, logits_to_keep=keep)


@pytest.mark.parametrize("arch", ARCHS)
def test_logits_without_labels_and_with_return_logits(models, arch):
    ref, ours = _pair(models, arch)
    ids, labels = _batch(7)
    want = ref(input_ids=ids, labels=labels)
    torch.testing.assert_close(ours(input_ids=ids).logits, want.logits, rtol=0, atol=0)
    torch.testing.assert_close(ours(input_ids=ids, logits_to_keep=1).logits,
                               ref(input_ids=ids, logits_to_keep=1).logits, rtol=0, atol=0)
    both = patch(ours, return_logits=True)(input_ids=ids, labels=labels)
    torch.testing.assert_close(both.logits, want.logits, rtol=0, atol=0)
    torch.testing.assert_close(both.loss, want.loss, **TOL)
    # return_dict=False: a tuple as transformers gives it (loss, logits, past_key_values).
    as_tuple = ours(input_ids=ids, labels=labels, return_dict=False)
    assert isinstance(as_tuple, tuple)
    torch.testing.assert_close(as_tuple[0], want.loss, **TOL)


@pytest.mark.parametrize("arch", ["Gemma2ForCausalLM", "Gemma3ForCausalLM"])
def test_gemma_softcap_matters_and_is_matched(models, arch):
    ref, ours = _pair(models, arch)
    ids, labels = _batch(8)
    capped = ours(input_ids=ids, labels=labels).loss
    ref.config.final_logit_softcapping = None
    uncapped = ref(input_ids=ids, labels=labels).loss
    assert abs(capped.item() - uncapped.item()) > 1e-3  # the test would see a missing cap
    ref.config.final_logit_softcapping = CAP
    _assert_same(ref, ours, input_ids=ids, labels=labels)


@pytest.mark.parametrize("arch", ARCHS)
def test_generate_unchanged(models, arch):
    ref, ours = _pair(models, arch)
    ids, _ = _batch(9)
    options = dict(max_new_tokens=5, do_sample=False, pad_token_id=0,
                   attention_mask=torch.ones_like(ids[:, :4]))
    assert torch.equal(ours.generate(ids[:, :4], **options), ref.generate(ids[:, :4], **options))


def test_bfloat16_model_gets_float32_statistics(models):
    ref = copy.deepcopy(models["LlamaForCausalLM"]).to(torch.bfloat16)
    ours = patch(copy.deepcopy(ref))
    ids, labels = _batch(10)
    want, got = ref(input_ids=ids, labels=labels).loss, ours(input_ids=ids, labels=labels).loss
    assert got.dtype == want.dtype == torch.float32
    # Both take float32 statistics of bfloat16 logits: the same loss to bfloat16's rounding.
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)


def test_bfloat16_autocast(models):
    ref = copy.deepcopy(models["LlamaForCausalLM"]).float()
    ours = patch(copy.deepcopy(ref))
    ids, labels = _batch(17)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want, got = ref(input_ids=ids, labels=labels).loss, ours(input_ids=ids, labels=labels).loss
    assert got.dtype == want.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)
    got.backward()
    assert ours.lm_head.weight.grad.dtype == torch.float32


def test_small_blocks_stream_the_same_loss(models):
    ref, ours = _pair(models, "LlamaForCausalLM", chunk_bytes=4 * 8 * 7)  # 7 classes a block
    ids, labels = _batch(11)
    _assert_same(ref, ours, input_ids=ids, labels=labels)


def test_every_label_ignored_is_nan_as_transformers(models):
    ref, ours = _pair(models, "Qwen2ForCausalLM", chunk_bytes=4 * 8 * 7)
    ids, labels = _batch(16)
    labels[:] = -100
    assert torch.isnan(ref(input_ids=ids, labels=labels).loss)
    assert torch.isnan(ours(input_ids=ids, labels=labels).loss)


def test_sampled_loss_trains_and_evaluates_exactly(models):
    ref, ours = _pair(models, "LlamaForCausalLM", loss="sampled", num_sampled=16,
                      generator=torch.Generator().manual_seed(0))
    ids, labels = _batch(12)
    _assert_same(ref, ours, input_ids=ids, labels=labels)  # eval mode: the exact loss
    ours.train()
    sampled = ours(input_ids=ids, labels=labels).loss
    assert sampled.dtype == torch.float64 and torch.isfinite(sampled)  # the model's dtype
    assert abs(sampled.item() - ref(input_ids=ids, labels=labels).loss.item()) > 1e-3
    ours.zero_grad(set_to_none=True)
    sampled.backward()
    # Only the rows of the true and sampled classes get a gradient.
    touched = (ours.lm_head.weight.grad.abs().sum(1) > 0).sum().item()
    assert 1 < touched <= 16 + int((labels != -100).sum())


def test_sampled_with_every_class_is_the_full_softmax(models):
    # Uniform sampling of all V classes, accidental hits removed: each row's candidates are
    # all classes once and logQ is a constant, so the sampled softmax is the exact one.
    ref, ours = _pair(models, "LlamaForCausalLM", loss="sampled", num_sampled=V,
                      sampler="uniform")
    ids, labels = _batch(13)
    want = ref(input_ids=ids, labels=labels).loss
    ours.train()
    got = ours(input_ids=ids, labels=labels).loss
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, check_dtype=False)


def test_sampled_counts_and_bad_options(models):
    llama = copy.deepcopy(models["LlamaForCausalLM"])
    counts = torch.arange(V, 0, -1).double()
    patch(llama, loss="sampled", num_sampled=8, counts=counts).train()
    ids, labels = _batch(14)
    assert torch.isfinite(llama(input_ids=ids, labels=labels).loss)
    with pytest.raises(ValueError, match="num_sampled"):
        patch(llama, loss="sampled")
    with pytest.raises(ValueError, match="entries"):
        patch(llama, loss="sampled", num_sampled=8, counts=counts[:-1])
    with pytest.raises(TypeError, match="num_sampled"):
        patch(llama, loss="exact", num_sampled=8)
    with pytest.raises(ValueError, match="chunk_bytes must be a positive int"):
        patch(llama, loss="exact", chunk_bytes=0)
    with pytest.raises(ValueError, match="'exact' or 'sampled'"):
        patch(llama, loss="full")
    with pytest.raises(ValueError, match="final_logit_softcapping"):
        patch(copy.deepcopy(models["Gemma2ForCausalLM"]), loss="sampled", num_sampled=8)


def test_unsupported_model_names_the_supported_ones():
    config = transformers.OPTConfig(vocab_size=V, hidden_size=16, num_hidden_layers=1,
                                    ffn_dim=32, num_attention_heads=2, word_embed_proj_dim=16)
    with pytest.raises(TypeError, match="LlamaForCausalLM.*GPT2LMHeadModel.*OPTForCausalLM"):
        patch(transformers.OPTForCausalLM(config))
    with pytest.raises(TypeError, match="supports"):
        patch(torch.nn.Linear(2, 2))


def test_patch_is_per_instance_and_undone(models):
    ref, ours = _pair(models, "GPT2LMHeadModel")
    ids, labels = _batch(15)
    assert is_patched(ours) and not is_patched(ref)
    assert ours(input_ids=ids, labels=labels).logits is None
    twin = copy.deepcopy(ours)  # the copy's forward runs the copy's weights
    with torch.no_grad():
        twin.lm_head.weight.mul_(2)
    assert not torch.allclose(twin(input_ids=ids, labels=labels).loss,
                              ours(input_ids=ids, labels=labels).loss)
    unpatch(ours)
    assert not is_patched(ours)
    assert ours(input_ids=ids, labels=labels).logits is not None
