"""Text from a trained language model, drawn from the exact softmax."""

from typing import List, Optional

import torch

from ..vocabulary import Vocabulary
from .data import EOS
from .model import RNNLanguageModel


@torch.no_grad()
def generate(
    model: RNNLanguageModel,
    vocab: Vocabulary,
    prompt: str = "",
    *,
    max_tokens: int = 50,
    temperature: float = 1.0,
    top_k: Optional[int] = None,
    seed: Optional[int] = None,
) -> List[str]:
    """Words continuing `prompt` (which starts after an `<eos>`), drawn from the exact
    softmax at `temperature` (0: greedy), restricted to the `top_k` likeliest words when
    given (None or 0: no restriction). A `seed` makes the continuation reproducible and
    leaves global RNGs untouched."""
    if temperature < 0:
        raise ValueError(f"temperature must be ≥ 0, got {temperature}")
    if top_k is not None and top_k < 0:
        raise ValueError(f"top_k must be ≥ 0 (0: off), got {top_k}")
    was_training = model.training
    model.eval()
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    device = next(model.parameters()).device
    ids = torch.tensor(vocab.encode([EOS] + prompt.split()), device=device)
    feats, hidden = model.features(ids[None], None)
    out: List[int] = []
    for _ in range(max_tokens):
        logp = model.head.log_prob(feats[0, -1:])[0].float().cpu()
        if temperature == 0:
            choice = int(logp.argmax())
        else:
            logits = logp / temperature
            ids_k = None
            if top_k and top_k < logits.numel():
                logits, ids_k = logits.topk(top_k)
            pick = int(torch.multinomial(torch.softmax(logits, 0), 1, generator=gen))
            choice = int(ids_k[pick]) if ids_k is not None else pick
        out.append(choice)
        feats, hidden = model.features(torch.tensor([[choice]], device=device), hidden)
    model.train(was_training)
    return vocab.decode(out)
