"""The language model's checkpoints: a run split by --resume, or killed right after a mid-epoch
save and resumed, ends with the weights and history of the straight run (python -m
fastsoftmax.cli.lm train --resume)."""

import pytest
import torch

from fastsoftmax.cli import lm as cli
from fastsoftmax.models import lm
from test_lm import corpus_dir as corpus_dir_fixture  # noqa: F401 (the module's corpus)
from test_lm import _train_args
from test_lm import one_thread  # noqa: F401 (autouse: one intra-op thread)

corpus_dir = corpus_dir_fixture


def test_checkpoint_resume_is_exact(corpus_dir, tmp_path, capsys):
    straight, split = str(tmp_path / "straight.pt"), str(tmp_path / "split.pt")
    cli.main(_train_args(corpus_dir, straight, 3))
    cli.main(_train_args(corpus_dir, split, 1))
    torch.manual_seed(999)  # whatever happens in between must not matter
    cli.main(
        [
            "train",
            "--data",
            corpus_dir,
            "--resume",
            split,
            "--epochs",
            "3",
            "--checkpoint",
            split,
            "--no-progress",
        ]
    )
    a, b = lm.load_checkpoint(straight), lm.load_checkpoint(split)
    assert a["epoch"] == b["epoch"] == 3
    assert a["model"].keys() == b["model"].keys()
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k
    assert [h["val_ppl"] for h in a["history"]] == [h["val_ppl"] for h in b["history"]]
    assert a["schedule"] == b["schedule"] and torch.equal(a["rng"]["torch"], b["rng"]["torch"])
    # And the resumed model continues text exactly as the uninterrupted one.
    ma, va = lm.model_from_checkpoint(a)
    mb, vb = lm.model_from_checkpoint(b)
    assert lm.generate(ma, va, "w3 w4", max_tokens=15, seed=5) == lm.generate(
        mb, vb, "w3 w4", max_tokens=15, seed=5
    )


class _Interrupted(Exception):
    pass


def _train_killed_after_save(monkeypatch, argv, epoch, step):
    """Run `cli.main(argv)` as if killed right after the mid-epoch checkpoint at (epoch,
    step); returns the positions of every checkpoint written until then."""
    from fastsoftmax.models import checkpoints

    save, saved = checkpoints.save_checkpoint, []

    def save_then_die(path, kind, state):
        save(path, kind, state)
        saved.append(state.get("position"))
        if saved[-1] and (saved[-1]["epoch"], saved[-1]["step"]) == (epoch, step):
            raise _Interrupted

    with monkeypatch.context() as m:
        m.setattr(checkpoints, "save_checkpoint", save_then_die)
        with pytest.raises(_Interrupted):
            cli.main(argv)
    return saved


def _resume_args(data, checkpoint, epochs, save_every):
    return ["train", "--data", data, "--resume", checkpoint, "--checkpoint", checkpoint,
            "--no-progress", "--epochs", str(epochs), "--save-every", str(save_every)]  # fmt: skip


def test_mid_epoch_checkpoint_resumes_exactly(corpus_dir, tmp_path, monkeypatch):
    """A run killed in the middle of epoch 2 and resumed from its last --save-every
    checkpoint ends bit-identical to one that was never interrupted."""
    straight, split = str(tmp_path / "straight.pt"), str(tmp_path / "split.pt")
    extra = ("--save-every", "10", "--output", "sampled", "--num-sampled", "8")
    cli.main(_train_args(corpus_dir, straight, 3, extra))

    saved = _train_killed_after_save(
        monkeypatch, _train_args(corpus_dir, split, 3, extra), epoch=2, step=20
    )
    state = lm.load_checkpoint(split)
    assert state["epoch"] == 1 and state["position"]["step"] == 20
    assert saved[0] == dict(saved[0], epoch=1, step=10)  # mid-epoch saves from epoch 1 on

    torch.manual_seed(999)  # whatever happens in between must not matter
    cli.main(_resume_args(corpus_dir, split, 3, 10))
    a, b = lm.load_checkpoint(straight), lm.load_checkpoint(split)
    assert a["epoch"] == b["epoch"] == 3 and b["position"] is None
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k
    # The interrupted epoch's mean training loss is over all its steps, not just the resumed.
    for ha, hb in zip(a["history"], b["history"]):
        assert ha["train_loss"] == pytest.approx(hb["train_loss"], rel=1e-12)
        assert ha["val_ppl"] == hb["val_ppl"]
