"""A patched model under TRL's SFTTrainer: a few steps with gradient accumulation give the
unpatched model's losses. Pre-tokenized rows and a word-level tokenizer built in memory, so
nothing is downloaded.

What TRL 1.16 does with the model (trl.trainer.utils.add_fused_lm_head): SFTTrainer wraps
the model's forward with its own chunked LM head, which computes the per-token
log-probabilities from the decoder's hidden states without forming the logits, and its
compute_loss calls that head, not the model's loss. The patched forward is kept underneath
(TRL calls it for generation and for the paths that need logits); the test checks that the
two stay out of each other's way: the same losses, the patch still in place."""

import pytest
import torch

transformers = pytest.importorskip("transformers")
trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")
pytest.importorskip("accelerate")

from tokenizers import Tokenizer  # noqa: E402 (transformers' own dependency)
from tokenizers.models import WordLevel  # noqa: E402

from fastsoftmax.integrations.transformers import is_patched, patch  # noqa: E402
from test_hf_training import V, tiny_llama  # noqa: E402


def word_tokenizer():
    vocab = {f"t{i}": i for i in range(V)}
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(WordLevel(vocab, unk_token="t3")),
        pad_token="t0", bos_token="t1", eos_token="t2", unk_token="t3")


def rows(n=8, length=8):
    """Token rows with a prompt of varying length (completion_mask 0), so the accumulated
    micro-batches hold different numbers of targets."""
    g = torch.Generator().manual_seed(7)
    ids = [torch.randint(3, V, (length,), generator=g).tolist() for _ in range(n)]
    prompts = [1 + (i * 3) % (length - 2) for i in range(n)]
    masks = [[0] * p + [1] * (length - p) for p in prompts]
    return datasets.Dataset.from_dict({"input_ids": ids, "completion_mask": masks})


def sft_losses(model, tmp_path):
    args = trl.SFTConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=2, gradient_accumulation_steps=2,
        max_steps=2, learning_rate=1e-2, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, seed=0, data_seed=0, dataloader_num_workers=0, disable_tqdm=True,
        completion_only_loss=True, max_length=None)
    trainer = trl.SFTTrainer(model=model, args=args, train_dataset=rows(),
                             processing_class=word_tokenizer())
    trainer.train()
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]


def test_sft_trainer_gives_the_unpatched_losses(tmp_path):
    want = sft_losses(tiny_llama(torch.float32), tmp_path / "ref")
    model = patch(tiny_llama(torch.float32))
    got = sft_losses(model, tmp_path / "ours")
    assert len(got) == len(want) == 2
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-6, atol=1e-6)
    assert is_patched(model)
