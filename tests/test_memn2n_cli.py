"""The memory network's command line (python -m fastsoftmax.cli.memn2n): train, eval and
answer; the model and its training are tested in tests/test_memn2n.py."""

import io
import os
import sys

import pytest
from test_lm import one_thread  # noqa: F401 (autouse: one intra-op thread)

import fastsoftmax
from fastsoftmax.cli import memn2n as cli
from fastsoftmax.models import memn2n as mn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------
def train_args(*extra):
    return ["train", "--task", "single", "--entities", "3", "--locations", "4",
            "--distractors", "2", "--train-size", "120", "--test-size", "40", "--epochs", "1",
            "--embed-dim", "8", "--no-progress", *extra]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("memn2n") / "m.pt")
    assert cli.main(train_args("--epochs", "5", "--train-size", "500", "--test-size", "200",
                               "--batch-size", "16", "--embed-dim", "16", "--anneal-every", "4",
                               "--checkpoint", path)) == 0
    return path


def answer(monkeypatch, capsys, ckpt, text, *extra):
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    capsys.readouterr()
    code = cli.main(["answer", "--checkpoint", ckpt, *extra])
    return code, capsys.readouterr()


def test_learns_single_supporting_fact_far_above_chance(ckpt, capsys):
    # The fixture's run: 450 stories, 5 epochs (seeds 0-3 of this recipe: 95.5-98.5%).
    res = mn.evaluate_checkpoint(ckpt)
    assert res["stories"] == 200 and res["accuracy"] > 80.0  # chance: 25%
    model, vocab, answers = mn.model_from_checkpoint(mn.load_checkpoint(ckpt))
    assert answers == ["kitchen", "garden", "bathroom", "office"] and not model.training
    assert cli.main(["eval", "--checkpoint", ckpt]) == 0
    assert f"200 test stories: accuracy {res['accuracy']:.2f}%" in capsys.readouterr().out


def test_cli_train_checkpoints_beside_the_run_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(train_args()) == 0
    saved = [f for f in os.listdir(tmp_path) if f.startswith("memn2n-full-")]
    out = capsys.readouterr().out
    assert len(saved) == 1 and f"checkpoint: {tmp_path / saved[0]}" in out
    assert cli.main(train_args("--checkpoint", saved[0])) == 2
    assert "already exists" in capsys.readouterr().err
    assert cli.main(["train", "--resume", saved[0], "--hops", "2", "--epochs", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--hops 2 (the checkpoint has 3)" in err
    assert cli.main(["train", "--resume", saved[0], "--epochs", "2", "--no-progress"]) == 0
    assert f"resuming {saved[0]}: 1 epochs done, training to epoch 2" in capsys.readouterr().out
    assert mn.load_checkpoint(saved[0])["epoch"] == 2
    assert "(default: 3)" in cli.build_parser().subcommands["train"].format_help()


def test_cli_answer_reads_stories_on_stdin(ckpt, monkeypatch, capsys):
    story = ("1 mary went to the kitchen.\n2 john moved to the garden .\n"
             "3 where is mary?\n\njohn went to the office .\nmary went to the bathroom .\n"
             "where is john ?\n")
    code, res = answer(monkeypatch, capsys, ckpt, story, "--explain")
    assert code == 0, res.err
    lines = res.out.splitlines()
    answers = [ln for ln in lines if not ln.startswith("  ")]
    assert answers == ["kitchen", "office"]
    assert sum("hop" in ln for ln in lines) == 6 and "on line 1 (mary went to the kitchen .)" in \
        res.out


@pytest.mark.parametrize("text, message", [
    ("", "stdin is empty"),
    ("mary went to the moon .\nwhere is mary ?\n",
     "line 1 has words the model does not know: moon"),
    ("mary went to the kitchen .\n", "does not end with a question"),
    ("where is mary ?\n", "has no story before it"),
])
def test_cli_answer_bad_input_is_one_sentence(ckpt, monkeypatch, capsys, text, message):
    code, res = answer(monkeypatch, capsys, ckpt, text)
    assert code == 2 and res.err.count("\n") == 1 and message in res.err, res.err
    assert "Traceback" not in res.err


def test_cli_eval_and_plot_never_overwrite(ckpt, tmp_path, capsys):
    plot = tmp_path / "attention.png"
    assert cli.main(["eval", "--checkpoint", ckpt, "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "200 test stories: accuracy" in out and plot.stat().st_size > 0
    before = plot.stat().st_mtime_ns
    assert cli.main(["eval", "--checkpoint", ckpt, "--plot", str(plot)]) == 2
    assert "already exists" in capsys.readouterr().err and plot.stat().st_mtime_ns == before
    assert cli.main(["eval", "--checkpoint", ckpt, "--plot", str(plot), "--force"]) == 0


def test_cli_bad_files_are_one_sentence(ckpt, tmp_path, capsys):
    other = str(tmp_path / "lm.pt")
    fastsoftmax.models.checkpoints.save_checkpoint(other, "lm", {})
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    cases = [
        (["eval", "--checkpoint", other], "holds a language-model model"),
        (["eval", "--checkpoint", str(garbage)], "cannot be read"),
        (["eval", "--checkpoint", str(tmp_path / "missing.pt")], "no such checkpoint"),
        (train_args("--checkpoint", str(blocker / "m.pt")), "is not a folder"),
        (train_args("--checkpoint", str(tmp_path)), "is a directory"),
        (train_args("--output", "sampled"), "num_sampled (16) must be smaller than num_classes"),
    ]
    for argv, message in cases:
        capsys.readouterr()
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err


def test_console_script_is_declared():
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        assert 'fastsoftmax-memn2n = "fastsoftmax.cli.memn2n:main"' in f.read()


def test_cli_switches_each_departure_from_the_authors_code(tmp_path):
    # Each of the five options reaches the run's TrainConfig, both ways for the switches.
    path = str(tmp_path / "d.pt")
    assert cli.main(train_args("--noise-style", "time", "--position-weights", "sentence",
                               "--no-empty-slots", "--clip-style", "global", "--punctuation",
                               "--checkpoint", path)) == 0
    saved = mn.load_checkpoint(path)["train_config"]
    assert (saved["noise_style"], saved["position_weights"], saved["empty_slots"],
            saved["clip_style"], saved["punctuation"]) == ("time", "sentence", False,
                                                           "global", True)
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["train", "--clip-style", "max"])
