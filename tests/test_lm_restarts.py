"""The language model's restarts (fastsoftmax-lm train --restarts N): seeds seed ... seed +
N - 1 trained on a tiny generated corpus, the run of lowest validation perplexity kept (its
checkpoint, which evaluates to its test perplexity), and what restarts cannot do refused
before any training."""

import os
import re

import pytest

from fastsoftmax.cli import lm as cli
from fastsoftmax.models import lm
from fastsoftmax.models.checkpoints import load_checkpoint

from test_lm import one_thread, write_corpus  # noqa: F401 (one_thread: an autouse fixture)

TINY = dict(embed_dim=8, hidden_size=8, layers=1, epochs=1, batch_size=4, bptt=5, max_steps=4,
            device="cpu", progress=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"), n_train=80, n_eval=20)


def test_restarts_keep_the_lowest_validation_perplexity(corpus, tmp_path):
    path = str(tmp_path / "lm.pt")
    res = lm.fit(lm.TrainConfig(data=corpus, restarts=3, seed=7, checkpoint=path, **TINY),
                 log=lambda line: None)
    rows = res["restarts"]
    assert [r["seed"] for r in rows] == [7, 8, 9]
    kept = min(rows, key=lambda r: r["valid_ppl"])  # by validation, whatever the test says
    assert res["config"].seed == kept["seed"] and res["config"].restarts == 3
    assert res["history"][-1]["val_ppl"] == kept["valid_ppl"]
    assert res["test_ppl"] == res["test"]["ppl"] == kept["test_ppl"]
    assert res["checkpoint"] == path and os.listdir(tmp_path) == ["lm.pt"]
    state = load_checkpoint(path, "lm")
    assert state["restarts"]["kept_seed"] == kept["seed"] and state["restarts"]["count"] == 3
    assert state["train_config"]["seed"] == kept["seed"]
    assert lm.evaluate_checkpoint(path, corpus, device="cpu")["ppl"] == pytest.approx(
        kept["test_ppl"], rel=1e-9)
    # the first restart is the plain run of its seed
    single = lm.fit(lm.TrainConfig(data=corpus, seed=7, checkpoint=str(tmp_path / "one.pt"),
                                   **TINY), log=lambda line: None)
    assert single["history"][-1]["val_ppl"] == rows[0]["valid_ppl"]


def test_restarts_are_refused_under_torchrun(corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="--restarts 2 trains its runs one after another in "
                                         "one process, not under torchrun"):
        lm.fit(lm.TrainConfig(data=corpus, restarts=2, checkpoint=str(tmp_path / "r.pt"),
                              **TINY))
    assert os.listdir(tmp_path) == []


def test_command_line_restarts(corpus, tmp_path, capsys):
    path = str(tmp_path / "c.pt")
    args = ["train", "--data", corpus, "--embed-dim", "8", "--hidden-size", "8", "--layers",
            "1", "--epochs", "1", "--batch-size", "4", "--bptt", "5", "--max-steps", "3",
            "--device", "cpu", "--no-progress", "--checkpoint", path]
    assert cli.main(args + ["--restarts", "2", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"restart 1/2 \(seed 3\): validation ppl \d+\.\d\d, test ppl \d+\.\d\d\n",
                     out)
    assert re.search(rf"kept restart [12] of 2 \(seed [34], lowest validation ppl\): {path}\n",
                     out)
    assert sorted(os.listdir(tmp_path)) == ["c.pt"]
    assert cli.main(args + ["--restarts", "2", "--resume", path]) == 2
    assert "give one or the other" in capsys.readouterr().err
