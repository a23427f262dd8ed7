"""A patched Hugging Face model in the training set-ups it meets: transformers' Trainer with
gradient accumulation, PEFT LoRA (a frozen lm_head), gradient checkpointing and
torch.compile. Each compares with the same set-up unpatched (transformers' own loss on full
logits). Tiny models from local configs, CPU only, nothing downloaded."""

import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")

from fastsoftmax.integrations.transformers import is_patched, patch, unpatch  # noqa: E402

V = 53
# check_dtype=False: a float64 patched loss (float64) against transformers' (float32).
TOL = dict(rtol=2e-5, atol=2e-6, check_dtype=False)


def tiny_llama(dtype=torch.float64):
    config = transformers.LlamaConfig(
        vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, attn_implementation="eager")
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to(dtype)


def batch(seed=1, rows=3, length=9):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, V, (rows, length), generator=g)
    labels = ids.clone()
    labels[0, :3] = -100
    labels[-1, 6:] = -100
    return ids, labels


def grads(model, **inputs):
    model.zero_grad(set_to_none=True)
    loss = model(**inputs).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()
                           if p.grad is not None}


def assert_same_step(ref, ours, **inputs):
    want_loss, want = grads(ref, **inputs)
    got_loss, got = grads(ours, **inputs)
    torch.testing.assert_close(got_loss, want_loss, **TOL)
    assert got.keys() == want.keys() and want
    for name in want:
        torch.testing.assert_close(got[name], want[name], **TOL, msg=name)


class Rows(torch.utils.data.Dataset):
    """Sequences of one length with a varying count of ignored labels, so that the
    micro-batches of an accumulated step hold different numbers of targets (the case where
    a per-micro-batch mean would differ from the full batch's)."""

    def __init__(self, n=8, length=8):
        g = torch.Generator().manual_seed(7)
        self.ids = torch.randint(3, V, (n, length), generator=g)
        self.labels = self.ids.clone()
        for i in range(n):
            self.labels[i, : 1 + (i * 3) % (length - 2)] = -100

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def train(model, tmp_path, trainer_out=None):
    pytest.importorskip("accelerate")  # transformers' Trainer needs it
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=2, gradient_accumulation_steps=2,
        max_steps=2, learning_rate=1.0, logging_steps=1, save_strategy="no", report_to="none",
        # SGD: Adam scales each entry by its own gradient's size, so entries whose gradient is
        # float32 noise move by the learning rate either way and the weights cannot be compared.
        optim="sgd",
        use_cpu=True, seed=0, data_seed=0, dataloader_num_workers=0, disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Rows())
    assert trainer.model_accepts_loss_kwargs  # so it passes num_items_in_batch
    trainer.train()
    if trainer_out is not None:
        trainer_out.append(trainer)
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return losses, {n: p.detach().clone() for n, p in model.named_parameters()}


def test_trainer_with_gradient_accumulation_matches_unpatched(tmp_path):
    # float32, as the Trainer's usual run; two optimizer steps of two micro-batches each.
    want_losses, want = train(tiny_llama(torch.float32), tmp_path / "ref")
    seen = []
    model = patch(tiny_llama(torch.float32))
    # Record what reaches the loss: the Trainer's num_items_in_batch, logits never formed.
    model.register_forward_hook(lambda m, a, kw, out: seen.append(
        (kw.get("num_items_in_batch"), out.logits)), with_kwargs=True)
    got_losses, got = train(model, tmp_path / "ours")
    assert len(got_losses) == len(want_losses) == 2
    assert all(n is not None and logits is None for n, logits in seen)
    torch.testing.assert_close(torch.tensor(got_losses), torch.tensor(want_losses),
                               rtol=1e-5, atol=1e-5)
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-5, atol=1e-6, msg=name)


def test_trainer_with_the_sampled_loss_evaluates_exactly(tmp_path):
    trainers = []
    model = patch(tiny_llama(torch.float32), loss="sampled", num_sampled=8,
                  generator=torch.Generator().manual_seed(0))
    losses, _ = train(model, tmp_path, trainers)
    assert len(losses) == 2 and all(0 < loss < 10 for loss in losses)
    # Trainer.evaluate puts the model in eval mode: the exact loss, as the unpatched model's.
    trainer = trainers[0]
    got = trainer.evaluate(eval_dataset=Rows())["eval_loss"]
    plain = copy.deepcopy(model)
    unpatch(plain)
    trainer.model = trainer.model_wrapped = plain
    want = trainer.evaluate(eval_dataset=Rows())["eval_loss"]
    assert got == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize("order", ["patch_then_lora", "lora_then_patch"])
def test_peft_lora_with_frozen_lm_head(order):
    peft = pytest.importorskip("peft")
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                             lora_dropout=0.0, init_lora_weights=False)
    base = tiny_llama()

    def lora(model):  # random (not zero) LoRA weights, the same ones for both models
        torch.manual_seed(5)
        return peft.get_peft_model(model, copy.deepcopy(config))

    ref = lora(copy.deepcopy(base))
    if order == "patch_then_lora":
        ours = lora(patch(copy.deepcopy(base)))
    else:
        ours = patch(lora(copy.deepcopy(base)))
    assert is_patched(ours)
    lm_head = ours.get_base_model().lm_head.weight
    assert not lm_head.requires_grad
    ids, labels = batch(2)
    assert_same_step(ref, ours, input_ids=ids, labels=labels)
    assert lm_head.grad is None
    assert ours(input_ids=ids, labels=labels).logits is None
    # And it trains the same: three SGD steps on the LoRA weights, the same losses.
    want, got = sgd_losses(ref, ids, labels), sgd_losses(ours, ids, labels)
    torch.testing.assert_close(got, want, **TOL)
    assert want[-1] < want[0]  # the steps did train


def sgd_losses(model, ids, labels, steps=3):
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(trainable, lr=0.5)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.detach().float())
    return torch.stack(losses)


def test_gradient_checkpointing():
    ref = tiny_llama()
    ours = patch(copy.deepcopy(ref))
    for model in (ref, ours):
        # transformers 5.23's name for gradient_checkpointing_enable (deprecated there).
        model.activation_checkpointing_enable(
            activation_checkpointing_kwargs={"use_reentrant": False})
        model.train()
    assert ours.is_activation_checkpointing
    ids, labels = batch(3)
    assert_same_step(ref, ours, input_ids=ids, labels=labels, use_cache=False)


def test_torch_compile_matches_eager():
    ref = tiny_llama(torch.float32)
    ours = patch(copy.deepcopy(ref))
    torch._dynamo.reset()
    # aot_eager traces forward and backward with dynamo and AOTAutograd, without inductor's
    # C++ compile (minutes on a 2-core machine); graph breaks are allowed.
    compiled = torch.compile(ours, backend="aot_eager")
    ids, labels = batch(4)
    want_loss, want = grads(ref, input_ids=ids, labels=labels)
    got_loss, got = grads(compiled, input_ids=ids, labels=labels)
    torch.testing.assert_close(got_loss, want_loss, rtol=1e-5, atol=1e-5)
    got = {name.removeprefix("_orig_mod."): grad for name, grad in got.items()}
    assert got.keys() == want.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name],
                                   rtol=1e-4, atol=1e-5, msg=name)
