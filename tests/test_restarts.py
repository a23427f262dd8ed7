"""Restarts (fastsoftmax.models.restarts, Recipe.restartable): N seeds trained, the run of
lowest validation error kept with its checkpoint and test figure, N = 1 the plain run, bad N
refused in one sentence."""

import logging
import os
import re
from dataclasses import dataclass

import pytest

from fastsoftmax.cli import memn2n as memn2n_cli
from fastsoftmax.models import memn2n as mn
from fastsoftmax.models import skeleton as sk
from fastsoftmax.models.checkpoints import load_checkpoint, save_checkpoint
from fastsoftmax.models.restarts import PERPLEXITY, Measure, seeded_path, validation_error


@dataclass
class Config(sk.TrainOptions):
    valid_fraction: float = 0.1
    plot: str = None


RECIPE = sk.Recipe("toy", Config, logging.getLogger("tests.restarts"),
                   run_options=sk.RUN_OPTIONS + ("plot",))
# Per seed: (validation accuracy, test accuracy). Seed 2 is best on validation, seed 3 on test.
SCORES = {0: (60.0, 50.0), 1: (70.0, 55.0), 2: (90.0, 60.0), 3: (80.0, 99.0)}


@RECIPE.restartable
def toy_fit(config, *, data=None, given=None, log=None):
    """A run whose scores are SCORES[seed], writing a checkpoint and a plot as a model does."""
    config, _ = RECIPE.start(config, given)
    valid, test = SCORES[config.seed]
    history = [dict(epoch=1, valid_accuracy=valid - 5), dict(epoch=2, valid_accuracy=valid)]
    save_checkpoint(config.checkpoint, "toy", dict(train_config=config.to_dict(),
                                                   history=history, data=data))
    if config.plot:
        open(config.plot, "w").write(f"seed {config.seed}")
    return dict(history=history, test=dict(accuracy=test), config=config,
                checkpoint=config.checkpoint)


def test_the_run_of_lowest_validation_error_is_kept_not_the_best_test(tmp_path):
    lines = []
    path, plot = str(tmp_path / "run.pt"), str(tmp_path / "run.png")
    res = toy_fit(dict(restarts=4, checkpoint=path, plot=plot), data="given", log=lines.append)
    assert [r["seed"] for r in res["restarts"]] == [0, 1, 2, 3]
    assert [r["valid_error"] for r in res["restarts"]] == [40.0, 30.0, 10.0, 20.0]
    assert res["test"] == dict(accuracy=60.0) and res["config"].seed == 2
    assert res["checkpoint"] == path and res["config"].restarts == 4
    assert lines[0] == "restart 1/4 (seed 0): validation error 40.00%, test error 50.00%"
    assert lines[-1] == f"kept restart 3 of 4 (seed 2, lowest validation error): {path}"
    assert len(lines) == 5
    state = load_checkpoint(path, "toy")
    assert state["train_config"]["seed"] == 2 and state["train_config"]["restarts"] == 4
    assert state["restarts"]["kept_seed"] == 2 and state["restarts"]["count"] == 4
    assert state["data"] == "given"  # every restart trained on the data given
    assert open(plot).read() == "seed 2"
    assert sorted(os.listdir(tmp_path)) == ["run.png", "run.pt"]  # the others' files removed


def test_one_restart_is_the_plain_run(tmp_path):
    path = str(tmp_path / "run.pt")
    res = toy_fit(dict(seed=3, checkpoint=path), log=lambda m: None)
    assert "restarts" not in res and res["checkpoint"] == path
    assert "restarts" not in load_checkpoint(path, "toy")
    assert os.listdir(tmp_path) == ["run.pt"]


def test_a_run_without_validation_scores_ranks_last():
    assert validation_error([dict(valid_accuracy=float("nan"))]) == float("inf")
    exact = Measure("exact", None)
    assert validation_error([dict(epoch=1), dict(exact=75.0), dict(epoch=3)], exact) == 25.0
    assert validation_error([dict(val_ppl=9.5), dict(val_ppl=7.25)], PERPLEXITY) == 7.25
    assert validation_error([dict(val_ppl=float("nan"))], PERPLEXITY) == float("inf")
    assert seeded_path("/a/b.pt", 7) == "/a/b.seed7.pt"


PPL_RECIPE = sk.Recipe("toy-ppl", Config, logging.getLogger("tests.restarts"),
                       validation=PERPLEXITY)
# Per seed: (validation perplexity, test perplexity). Seed 1 is best on validation, 2 on test.
PERPLEXITIES = {0: (30.0, 31.0), 1: (12.5, 14.0), 2: (13.0, 9.0)}


@PPL_RECIPE.restartable
def toy_ppl_fit(config, log=None):
    """A run of a lower-is-better validation score, PERPLEXITIES[seed]."""
    config, _ = PPL_RECIPE.start(config)
    valid, test = PERPLEXITIES[config.seed]
    history = [dict(epoch=1, val_ppl=valid * 2), dict(epoch=2, val_ppl=valid)]
    save_checkpoint(config.checkpoint, "toy-ppl", dict(train_config=config.to_dict()))
    return dict(history=history, test=dict(ppl=test), config=config,
                checkpoint=config.checkpoint)


def test_a_lower_is_better_score_keeps_the_lowest_validation_perplexity(tmp_path):
    lines, path = [], str(tmp_path / "lm.pt")
    res = toy_ppl_fit(dict(restarts=3, checkpoint=path), log=lines.append)
    assert res["restarts"] == [dict(seed=0, valid_ppl=30.0, test_ppl=31.0),
                               dict(seed=1, valid_ppl=12.5, test_ppl=14.0),
                               dict(seed=2, valid_ppl=13.0, test_ppl=9.0)]
    assert res["config"].seed == 1 and res["test"] == dict(ppl=14.0)
    assert lines[1] == "restart 2/3 (seed 1): validation ppl 12.50, test ppl 14.00"
    assert lines[-1] == f"kept restart 2 of 3 (seed 1, lowest validation ppl): {path}"
    assert load_checkpoint(path, "toy-ppl")["restarts"]["kept_seed"] == 1
    assert os.listdir(tmp_path) == ["lm.pt"]


@pytest.mark.parametrize("kw, message", [
    (dict(restarts=0), "restarts must be a positive integer, got 0"),
    (dict(restarts=-2), "restarts must be a positive integer, got -2"),
    (dict(restarts=2, resume="x.pt"), "give one or the other"),
    (dict(restarts=2, valid_fraction=0.0), "valid_fraction must be above 0"),
])
def test_bad_restarts_are_one_sentence(kw, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        toy_fit(dict(kw, checkpoint=str(tmp_path / "r.pt")), log=lambda m: None)
    assert os.listdir(tmp_path) == []


def test_an_existing_restart_file_is_refused_before_training(tmp_path):
    (tmp_path / "r.seed1.pt").write_text("")
    with pytest.raises(ValueError, match="r.seed1.pt already exists"):
        toy_fit(dict(restarts=2, checkpoint=str(tmp_path / "r.pt")), log=lambda m: None)
    assert os.listdir(tmp_path) == ["r.seed1.pt"]


def test_a_fit_without_restarts_refuses_more_than_one():
    with pytest.raises(ValueError, match="restarts must be 1 for the toy model"):
        RECIPE.resolve(Config(restarts=2), None, None)


TINY = dict(task="single", entities=3, locations=4, distractors=2, train_size=60, test_size=20,
            embed_dim=8, batch_size=16, epochs=1, device="cpu", progress=False)


def test_memn2n_restarts_keep_a_checkpoint_that_evaluates_as_reported(tmp_path):
    """A real model: the kept checkpoint is the chosen seed's run, whose test figure
    evaluate_checkpoint reproduces, and its first restart is the run of restarts=1."""
    path = str(tmp_path / "m.pt")
    res = mn.fit(dict(TINY, restarts=3, checkpoint=path), log=lambda m: None)
    rows = res["restarts"]
    kept = min(rows, key=lambda r: r["valid_error"])
    assert res["config"].seed == kept["seed"] and os.listdir(tmp_path) == ["m.pt"]
    again = mn.evaluate_checkpoint(path)
    assert again["accuracy"] == res["test"]["accuracy"] == 100 - kept["test_error"]
    single = mn.fit(dict(TINY, checkpoint=str(tmp_path / "one.pt")), log=lambda m: None)
    assert 100 - single["history"][-1]["valid_accuracy"] == rows[0]["valid_error"]


def test_memn2n_cli_restarts(tmp_path, capsys):
    path = str(tmp_path / "c.pt")
    args = ["train", "--train-size", "60", "--test-size", "20", "--embed-dim", "8",
            "--epochs", "1", "--device", "cpu", "--no-progress", "--checkpoint", path]
    assert memn2n_cli.main(args + ["--restarts", "2", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "restart 1/2 (seed 5): validation error" in out
    assert "restart 2/2 (seed 6)" in out
    assert re.search(rf"kept restart [12] of 2 \(seed [56], lowest validation error\): {path}\n",
                     out)
    assert load_checkpoint(path, "memn2n")["train_config"]["restarts"] == 2
    with pytest.raises(SystemExit) as exit:
        memn2n_cli.main(args + ["--restarts", "0", "--force"])
    assert exit.value.code == 2
    assert "--restarts: must be a positive integer, got 0" in capsys.readouterr().err
