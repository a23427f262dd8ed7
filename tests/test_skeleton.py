"""What every model's training module shares around the loop (fastsoftmax.models.skeleton):
the number checks and their sentences, the resume-or-build prologue of fit, checkpoints of the
right kind only, the Trainer of a resumed run, evaluate_checkpoint's start, and the epoch pass
of trainer.Trainer."""

import logging
import math
from dataclasses import dataclass, fields

import pytest
import torch
from torch import nn

from fastsoftmax.models import skeleton as sk
from fastsoftmax.models.checkpoints import save_checkpoint
from fastsoftmax.models.trainer import Trainer

logger = logging.getLogger("tests.skeleton")


@dataclass
class Config(sk.TrainOptions):
    width: int = 3
    rate: float = 0.5
    lr: float = 0.1  # a default of its own


def check(config: Config) -> None:
    sk.check_fields(config, sk.POSITIVE_INT, "width", "epochs")
    sk.check_fields(config, sk.FRACTION, "rate")


RECIPE = sk.Recipe("toy", Config, logger, check)


# ---------------------------------------------------------------------------------------
# TrainOptions and the number checks
# ---------------------------------------------------------------------------------------
def test_a_model_keeps_its_own_defaults_over_the_shared_options():
    assert Config().lr == 0.1 and sk.TrainOptions().lr == 1e-3
    assert Config().clip == 5.0 and Config().seed == 0 and Config().epochs == 10
    names = [f.name for f in fields(Config)]
    assert names[:5] == ["device", "checkpoint", "resume", "force", "progress"]
    assert {"lr", "clip", "epochs", "batch_size", "seed", "width", "rate"} <= set(names)


@pytest.mark.parametrize("rule, good, bad", [
    (sk.POSITIVE, [1e-9, 3], [0, -1.0, math.nan, math.inf, True, "1"]),
    (sk.NON_NEGATIVE, [0, 0.0, 2.5], [-1e-9, math.nan, math.inf]),
    (sk.CLIP, [0, 40.0], [-1.0, math.nan]),
    (sk.FRACTION, [0, 0.0, 0.999], [1, 1.0, -0.1, math.nan]),
    (sk.POSITIVE_INT, [1, 64], [0, -3, 2.0, True, None]),
    (sk.COUNT_OR_OFF, [0, 5], [-1, 1.5, False]),
    (sk.one_of(("a", "b")), ["a", "b"], ["c", None]),
])
def test_each_rule_holds_for_its_values_only(rule, good, bad):
    assert all(rule.holds(v) for v in good)
    assert not any(rule.holds(v) for v in bad)


def test_check_fields_names_the_first_bad_field_in_the_sentence_of_today():
    with pytest.raises(ValueError, match=r"^width must be a positive integer, got 0$"):
        check(Config(width=0, epochs=-1))
    with pytest.raises(ValueError, match=r"^epochs must be a positive integer, got -1$"):
        check(Config(epochs=-1))
    with pytest.raises(ValueError, match=r"^rate must be in \[0, 1\), got 1\.0$"):
        check(Config(rate=1.0))
    choice = sk.one_of(("1k", "10k"))
    assert choice.text == "one of ('1k', '10k')"
    with pytest.raises(ValueError, match=r"^size must be one of \('1k', '10k'\), got '2k'$"):
        sk.check_fields(type("C", (), {"size": "2k"})(), choice, "size")
    check(Config())  # the defaults pass


# ---------------------------------------------------------------------------------------
# Recipe: checkpoints, the prologue of fit, the Trainer, evaluate_checkpoint's start
# ---------------------------------------------------------------------------------------
def _toy_checkpoint(path, **train_config):
    model = nn.Linear(3, 2)
    config = Config(**train_config)
    save_checkpoint(str(path), "toy", dict(
        model_config=dict(in_features=3, out_features=2), model=model.state_dict(),
        train_config=config.to_dict(), optimizer=torch.optim.SGD(model.parameters(), lr=0.1)
        .state_dict(), history=[dict(epoch=1)], epoch=1, rng=dict(
            torch=torch.get_rng_state(), python=__import__("random").getstate())))
    return model


def test_load_checkpoint_refuses_another_kind(tmp_path):
    path = tmp_path / "other.pt"
    save_checkpoint(str(path), "lm", dict(model={}))
    with pytest.raises(ValueError, match="not a fastsoftmax toy checkpoint: it holds a "
                                         "language-model model"):
        RECIPE.load_checkpoint(str(path))


def test_start_checks_resolves_and_claims_files_before_reading(tmp_path):
    with pytest.raises(ValueError, match="width must be"):
        RECIPE.start(dict(width=0, resume=str(tmp_path / "missing.pt")))
    config, state = RECIPE.start(dict(checkpoint=str(tmp_path / "new.pt"), width=4))
    assert state is None and isinstance(config, Config) and config.width == 4
    assert config.device in ("cpu", "cuda")
    taken = tmp_path / "taken.pt"
    taken.write_bytes(b"")
    with pytest.raises(ValueError, match="already exists"):
        RECIPE.start(Config(checkpoint=str(taken)))


def test_start_on_resume_takes_the_checkpoints_options_and_settle_sees_them(tmp_path):
    path = tmp_path / "run.pt"
    _toy_checkpoint(path, width=7, epochs=2)
    seen = {}

    def settle(values, state):
        seen.update(width=values["width"], epoch=state["epoch"])

    config, state = RECIPE.start(Config(resume=str(path), epochs=5), {"epochs"}, settle)
    assert (config.width, config.epochs, config.checkpoint) == (7, 5, str(path))
    assert seen == dict(width=7, epoch=1) and state["epoch"] == 1
    with pytest.raises(ValueError, match="cannot resume .* --width 2 .*the checkpoint has 7"):
        RECIPE.start(Config(resume=str(path), width=2), {"width"})


def test_trainer_of_a_resumed_run_continues_it_and_says_so(tmp_path):
    path = tmp_path / "run.pt"
    _toy_checkpoint(path, epochs=3)
    config, state = RECIPE.start(Config(resume=str(path), epochs=3), {"epochs"})
    model = sk.restore_model(nn.Linear, state)
    lines = []
    trainer = RECIPE.trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), config, state,
                             state=lambda: dict(model=model.state_dict()), log=lines.append)
    assert trainer.epoch == 1 and trainer.history == [dict(epoch=1)]
    assert lines == [f"resuming {path}: 1 epochs done, training to epoch 3"]
    fresh = RECIPE.trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), config, None,
                           state=dict, log=lines.append)
    assert fresh.epoch == 0 and len(lines) == 1 and fresh.saves


class TaggedTrainer(Trainer):
    """A Trainer subclass with a keyword of its own, as the vocabulary-parallel one has."""

    def __init__(self, *args, tag: str, **kw):
        super().__init__(*args, **kw)
        self.tag, self.resumed_from = tag, None

    def resume(self, saved: dict) -> None:
        self.resumed_from = saved["epoch"]
        super().resume(saved)


def test_trainer_builds_the_class_asked_for_with_its_options(tmp_path):
    path = tmp_path / "run.pt"
    _toy_checkpoint(path, epochs=3)
    config, state = RECIPE.start(Config(resume=str(path), epochs=3), {"epochs"})
    model = sk.restore_model(nn.Linear, state)
    trainer = RECIPE.trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), config, state,
                             state=dict, log=lambda line: None, cls=TaggedTrainer, tag="v1",
                             saves=False)
    assert type(trainer) is TaggedTrainer and trainer.tag == "v1" and not trainer.saves
    assert trainer.resumed_from == 1 and trainer.epoch == 1  # its own resume ran
    assert trainer.save() is None  # a trainer that does not save writes nothing


def test_model_and_data_restores_or_builds_from_the_seed():
    calls = []

    def load_data(config, *saved):
        calls.append(saved)
        return dict(n=4)

    config = Config(seed=3)
    model, data = RECIPE.model_and_data(config, None, None, restore=None, load_data=load_data,
                                        build=lambda c, d: nn.Linear(d["n"], 1))
    torch.manual_seed(3)
    assert torch.equal(model.weight, nn.Linear(4, 1).weight) and calls == [()]
    restored = nn.Linear(2, 2)
    model, data = RECIPE.model_and_data(config, dict(epoch=1), dict(n=9),
                                        restore=lambda s: (restored, "vocab"),
                                        load_data=load_data, build=None)
    assert model is restored and data == dict(n=9) and calls == [()]


def test_reload_rebuilds_the_runs_config_with_overrides_and_moves_the_model(tmp_path):
    path = tmp_path / "run.pt"
    saved = _toy_checkpoint(path, width=5, seed=2)
    model, config, data = RECIPE.reload(
        str(path), lambda s: (sk.restore_model(nn.Linear, s), "vocab"),
        lambda c, vocab: dict(width=c.width, vocab=vocab), "cpu", seed=9, rate=None)
    assert torch.equal(model.weight, saved.weight)
    assert (config.resume, config.checkpoint, config.seed, config.rate) == (None, None, 9, 0.5)
    assert data == dict(width=5, vocab="vocab")


def test_restore_model_passes_sizes_by_position_and_options_by_name():
    class Net(nn.Module):
        def __init__(self, vocab, answers, *, hidden, counts=None):
            super().__init__()
            self.args = (vocab, answers, hidden, counts)
            self.lin = nn.Linear(hidden, answers)

    net = Net(10, 3, hidden=4)
    state = dict(model_config=dict(vocab_size=10, num_answers=3, hidden=4),
                 model=net.state_dict())
    again = sk.restore_model(Net, state, "vocab_size", "num_answers", counts="c")
    assert again.args == (10, 3, 4, "c") and torch.equal(again.lin.weight, net.lin.weight)
    assert state["model_config"] == dict(vocab_size=10, num_answers=3, hidden=4)


# ---------------------------------------------------------------------------------------
# The small helpers
# ---------------------------------------------------------------------------------------
def test_halving_lr_sets_every_group_and_counts_finished_epochs():
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    assert sk.halving_lr(opt, 0.8, 0, 2) == 0.8
    assert sk.halving_lr(opt, 0.8, 5, 2) == 0.2 and opt.param_groups[0]["lr"] == 0.2
    assert sk.halving_lr(opt, 0.8, -3, 2) == 0.8
    assert sk.halving_lr(opt, 0.8, 9, 0) == 0.8


def test_epoch_seed_and_the_fit_epilogue(tmp_path):
    assert sk.epoch_seed(0, 1) == 0 and sk.epoch_seed(2, 3) == 200008
    model = nn.Linear(2, 1)
    lines = []
    config = Config(checkpoint=str(tmp_path / "c.pt"))
    trainer = RECIPE.trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), config, None,
                             state=dict, log=lines.append)
    out = sk.finish_run(trainer, "data", dict(accuracy=1.0), "test accuracy 1%")
    assert lines == ["test accuracy 1%", f"saved {config.checkpoint}"]
    assert out == dict(model=model, history=[], test=dict(accuracy=1.0), data="data",
                       config=config, checkpoint=config.checkpoint)
    assert sk.count_parameters(model) == 3


def test_trainer_train_epoch_clips_and_counts_its_bar_from_the_batch_size(tmp_path,
                                                                          monkeypatch):
    from fastsoftmax.models import trainer as tr

    model = nn.Linear(2, 1, bias=False)
    config = Config(batch_size=4, clip=1e-3, progress=False,
                    checkpoint=str(tmp_path / "c.pt"))
    trainer = RECIPE.trainer(model, torch.optim.SGD(model.parameters(), lr=1.0), config, None,
                             state=dict)
    bars = []
    monkeypatch.setattr(tr, "progress_bar", lambda total, desc, enabled=None: bars.append(
        (total, desc, enabled)))
    before = model.weight.detach().clone()
    batches = [torch.full((4, 2), 100.0)] * 3
    stats = trainer.train_epoch(2, lambda b: (model(b).sum(), len(b)), batches, 10)
    assert bars == [(3, "epoch 2", False)]  # ceil(10 / 4) steps
    assert stats["steps"] == 3 and stats["examples"] == 12
    # Clipping to 1e-3 keeps each of the three unit-lr steps that small.
    assert (model.weight - before).norm() <= 3e-3 + 1e-6
