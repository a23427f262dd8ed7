"""Plain float64 definition of transformers' causal-LM loss (ForCausalLMLoss in
transformers.loss.loss_utils), for the tests of fastsoftmax.integrations.transformers.

Written from its documented semantics, on whole [B, T, V] logits: position t predicts label
t + 1 (the last position predicts nothing) unless `shift_labels` gives each position's target;
targets equal to `ignore_index` count for nothing; the mean over the counted targets, or with
`num_items_in_batch` their sum divided by it (what a micro-batch of an accumulated step
contributes). transformers rounds the logits to float32 first; this keeps `dtype`, so that
the patched float64 model can be held to float64's rounding."""

import torch


def causal_lm_loss_reference(logits, labels, shift_labels=None, num_items_in_batch=None,
                             ignore_index=-100, dtype=torch.float64):
    """The loss of logits [B, T, V] (softcap, where the model has one, already applied, as
    the model's forward applies it) for labels [B, T]; differentiable."""
    if shift_labels is None:
        shift_labels = torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], ignore_index)],
                                 1)
    target = shift_labels.reshape(-1)
    log_p = torch.log_softmax(logits.to(dtype).reshape(target.numel(), -1), 1)
    counted = target != ignore_index
    picked = log_p[counted].gather(1, target[counted][:, None])
    total = -picked.sum()
    if num_items_in_batch is None:
        return total / counted.sum()
    return total / num_items_in_batch
