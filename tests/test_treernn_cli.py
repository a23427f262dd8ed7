"""The Tree-RNN's command line (python -m fastsoftmax.cli.treernn): --help, train, resume,
eval and value; the model and its data are tested in tests/test_treernn.py, kill-and-resume
in tests/test_atomic_files.py (tests/kill_training.py)."""

import io
import os
import subprocess
import sys

import pytest
import torch

from fastsoftmax.cli import treernn as cli
from fastsoftmax.models import treernn as tr
from test_hard_attention import one_thread  # noqa: F401 (autouse: one intra-op thread)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def train_args(*extra):
    return ["train", "--train-size", "120", "--test-size", "30", "--max-depth", "3",
            "--hidden-size", "8", "--epochs", "1", "--no-progress", *extra]


def test_help_shows_the_defaults():
    run = subprocess.run([sys.executable, "-m", "fastsoftmax.cli.treernn", "train", "--help"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert run.returncode == 0, run.stderr
    assert "--max-depth MAX_DEPTH" in run.stdout and "(default: 4)" in run.stdout
    assert "{tree,lstm}" in run.stdout and "--supervise {root,nodes}" in run.stdout
    top = cli.build_parser().format_help()
    assert "train" in top and "value" in top and "eval" in top


def test_train_checkpoints_here_refuses_overwrite_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(train_args()) == 0
    saved = [f for f in os.listdir(tmp_path) if f.startswith("treernn-full-")]
    out = capsys.readouterr().out
    assert len(saved) == 1 and f"checkpoint: {tmp_path / saved[0]}" in out
    assert "test accuracy" in out and "epoch   1 |" in out
    assert cli.main(train_args("--checkpoint", saved[0])) == 2
    assert "already exists" in capsys.readouterr().err
    assert cli.main(["train", "--resume", saved[0], "--hidden-size", "16", "--epochs", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--hidden-size 16 (the checkpoint has 8)" in err
    assert cli.main(["train", "--resume", saved[0], "--epochs", "2", "--no-progress"]) == 0
    assert f"resuming {saved[0]}: 1 epochs done, training to epoch 2" in capsys.readouterr().out
    assert tr.load_checkpoint(saved[0])["epoch"] == 2


@pytest.mark.parametrize("model", ["tree", "lstm"])
def test_resumed_run_equals_an_uninterrupted_one(tmp_path, model):
    a, b = str(tmp_path / "a.pt"), str(tmp_path / "b.pt")
    assert cli.main(train_args("--model", model, "--checkpoint", a)) == 0
    assert cli.main(["train", "--resume", a, "--epochs", "3", "--no-progress"]) == 0
    assert cli.main(train_args("--model", model, "--checkpoint", b, "--epochs", "3")) == 0
    sa, sb = tr.load_checkpoint(a), tr.load_checkpoint(b)
    assert sa["model"]["config"]["model"] == model and sa["epoch"] == sb["epoch"] == 3
    for key, value in sb["model"]["state_dict"].items():
        assert torch.equal(sa["model"]["state_dict"][key], value), key
    assert [h["train_loss"] for h in sa["history"]] == [h["train_loss"] for h in sb["history"]]


def test_eval_and_value(tmp_path, monkeypatch, capsys):
    ckpt = str(tmp_path / "m.pt")
    assert cli.main(train_args("--checkpoint", ckpt)) == 0
    res = tr.evaluate_checkpoint(ckpt)
    capsys.readouterr()
    assert cli.main(["eval", "--checkpoint", ckpt]) == 0
    assert f"30 test expressions: accuracy {res['accuracy']:.2f}%" in capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", io.StringIO("( 3 + 4 )\n( 3 + )\n((2*3)-9)\n"))
    assert cli.main(["value", "--checkpoint", ckpt]) == 0
    out, err = capsys.readouterr()
    lines = out.split("\n")
    assert lines[0].endswith("(true 7)") and lines[1] == "" and lines[2].endswith("(true 7)")
    assert "input line 2: bad expression '( 3 + )'" in err
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n"))
    assert cli.main(["value", "--checkpoint", ckpt]) == 2
    assert "stdin is empty" in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    (["train", "--min-depth", "5", "--max-depth", "2"], "min_depth ≤ max_depth"),
    (["train", "--train-size", "5000", "--max-depth", "1"], "could not draw"),
    (["train", "--model", "gru"], "invalid choice: 'gru'"),
    (["train", "--lr", "0"], "lr must be a positive number"),
    (["eval", "--checkpoint", "missing.pt"], "no such checkpoint"),
    (["train", "--device", "tpu"], "not a device"),
])
def test_bad_input_is_one_error_line(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) if "invalid choice" in message else _no_exit():
        assert cli.main(argv + ["--no-progress"] * (argv[0] == "train")) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".pt")]  # nothing written


class _no_exit:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_checkpoint_of_another_kind_is_refused(tmp_path, capsys):
    from fastsoftmax.models.checkpoints import save_checkpoint

    other = str(tmp_path / "lm.pt")
    save_checkpoint(other, "lm", dict(model={}))
    assert cli.main(["eval", "--checkpoint", other]) == 2
    err = capsys.readouterr().err
    assert "lm.pt" in err and err.count("\n") == 1


def test_console_script_is_declared():
    # tools/installed_smoke.py (make wheel-check) then runs `fastsoftmax-treernn -h` from the
    # installed wheel, as it does every script pyproject declares.
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        assert 'fastsoftmax-treernn = "fastsoftmax.cli.treernn:main"' in f.read()
