"""Language-model checkpoints: model, vocabulary (with the counts that rebuild the sampler
exactly), optimiser, schedule, history, training configuration and every RNG stream, in the
one checkpoint format of fastsoftmax.models.checkpoints (kind 'lm')."""

from typing import Optional, Tuple

from .. import checkpoints
from ..checkpoints import rng_state, set_rng_state  # noqa: F401 (re-exported)
from ..vocabulary import Vocabulary
from .model import RNNLanguageModel

KIND = "lm"


def save_checkpoint(path: str, *, model: RNNLanguageModel, vocab: Vocabulary, optimizer=None,
                    schedule=None, epoch: int = 0, history: Optional[list] = None,
                    train_config: Optional[dict] = None, position: Optional[dict] = None) -> str:
    """`epoch` counts finished epochs; a mid-epoch checkpoint adds `position` (the epoch under
    way, steps taken, the carried hidden state and the running totals of train_epoch)."""
    return checkpoints.save_checkpoint(path, KIND, dict(
        model_config=model.config,
        model=model.state_dict(),
        vocab=vocab.state_dict(),
        optimizer=None if optimizer is None else optimizer.state_dict(),
        schedule=None if schedule is None else schedule.state_dict(),
        epoch=epoch,
        history=list(history or []),
        train_config=dict(train_config or {}),
        position=position,
        rng=rng_state(),
    ))


def load_checkpoint(path: str, map_location="cpu") -> dict:
    return checkpoints.load_checkpoint(path, KIND, map_location)


def model_from_checkpoint(state: dict) -> Tuple[RNNLanguageModel, Vocabulary]:
    vocab = Vocabulary.from_state_dict(state["vocab"])
    model = RNNLanguageModel(counts=vocab.counts, **state["model_config"])
    model.load_state_dict(state["model"])
    return model, vocab
