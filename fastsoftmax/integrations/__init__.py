"""fastsoftmax's output layers inside other libraries' models.

Each integration is a submodule of its own and imports its library only when imported
itself, so `import fastsoftmax` never needs them:

- `fastsoftmax.integrations.transformers`: Hugging Face causal language models trained with
  the exact streamed softmax or a sampled softmax instead of [tokens, V] logits
  (`pip install fastsoftmax[transformers]`; see docs/huggingface.md).
"""
