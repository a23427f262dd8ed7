"""The strongly supervised memory network's command line (python -m fastsoftmax.cli.memnn):
train, resume, eval, and bad input as one sentence; the model is tested in test_memnn.py."""

import os

import pytest
from test_lm import one_thread  # noqa: F401 (autouse: one intra-op thread)
from test_memnn import write_task

import fastsoftmax
from fastsoftmax.cli import memnn as cli
from fastsoftmax.models import memnn as mm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def babi_root(tmp_path_factory):
    return write_task(tmp_path_factory.mktemp("babi"), 1, 40)


def train_args(root, *extra):
    return ["train", "--babi-dir", root, "--babi-task", "1", "--embed-dim", "8", "--epochs", "1",
            "--no-progress", *extra]


def test_help_shows_every_default():
    text = " ".join(cli.build_parser().subcommands["train"].format_help().split())
    assert "(the paper's κ) (default: 2)" in text and "γ of every ranking term (default: 0.1)" \
        in text and "--no-time-features" in text
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    assert exit_.value.code == 0


def test_train_checkpoints_here_resumes_and_evaluates(babi_root, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(train_args(babi_root)) == 0
    saved = [f for f in os.listdir(tmp_path) if f.startswith("memnn-task1-")]
    out = capsys.readouterr().out
    assert len(saved) == 1 and f"checkpoint: {tmp_path / saved[0]}" in out
    assert "epoch   1 | train loss" in out and "test accuracy" in out
    # Never overwritten, unless resumed or forced.
    before = os.stat(saved[0]).st_mtime_ns
    assert cli.main(train_args(babi_root, "--checkpoint", saved[0])) == 2
    assert "already exists" in capsys.readouterr().err
    assert os.stat(saved[0]).st_mtime_ns == before
    assert cli.main(["train", "--resume", saved[0], "--hops", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--hops 3 (the checkpoint has 2)" in err
    # The data folder is the run's when not given again.
    assert cli.main(["train", "--resume", saved[0], "--epochs", "3", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"resuming {saved[0]}: 1 epochs done, training to epoch 3" in out
    state = mm.load_checkpoint(saved[0])
    assert state["epoch"] == 3 and [h["epoch"] for h in state["history"]] == [1, 2, 3]
    assert cli.main(["eval", "--checkpoint", saved[0], "--explain", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("task 1: 60 test questions, accuracy ")
    assert out[1].startswith("where is ") and "(true: " in out[1]
    assert out[2].startswith("  o1: line ") and out[3].startswith("  o2: line ")


def test_resume_continues_the_run_it_was_cut_from(babi_root, tmp_path):
    whole = mm.fit(dict(data=babi_root, embed_dim=8, epochs=2, progress=False,
                        checkpoint=str(tmp_path / "a.pt")), log=lambda m: None)
    mm.fit(dict(data=babi_root, embed_dim=8, epochs=1, progress=False,
                checkpoint=str(tmp_path / "b.pt")), log=lambda m: None)
    resumed = mm.fit(dict(resume=str(tmp_path / "b.pt"), epochs=2, progress=False),
                     log=lambda m: None)
    a, b = whole["model"].state_dict(), resumed["model"].state_dict()
    assert all((a[k] == b[k]).all() for k in a)


def test_bad_input_is_one_sentence(babi_root, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("FASTSOFTMAX_BABI", raising=False)
    other = str(tmp_path / "lm.pt")
    fastsoftmax.models.checkpoints.save_checkpoint(other, "lm", {})
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint")
    broken = tmp_path / "broken" / "en"
    broken.mkdir(parents=True)
    (broken / "qa1_single-supporting-fact_train.txt").write_text(
        "1 Mary went to the office.\n2 Where is Mary?\toffice\n")
    (broken / "qa1_single-supporting-fact_test.txt").write_text("1 x.\n")
    cases = [
        (["eval", "--checkpoint", other], "holds a language-model model"),
        (["eval", "--checkpoint", str(garbage)], "cannot be read"),
        (["eval", "--checkpoint", str(tmp_path / "missing.pt")], "no such checkpoint"),
        (["train", "--babi-task", "1", "--no-progress"], "no bAbI folder given"),
        (train_args(str(tmp_path)), "does not exist"),
        (train_args(str(tmp_path / "broken")), "qa1_single-supporting-fact_train.txt:2:"),
        (train_args(babi_root, "--margin", "-1"), "margin must be a positive number"),
        (train_args(babi_root, "--lr", "nan"), "lr must be a positive number"),
        (train_args(babi_root, "--checkpoint", str(tmp_path)), "is a directory"),
        (train_args(babi_root, "--device", "tpu"), "not a device"),
    ]
    for argv, message in cases:
        capsys.readouterr()
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "--babi-task", "21"])
    assert exit_.value.code == 2 and "invalid choice: 21" in capsys.readouterr().err


def test_console_script_is_declared():
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        assert 'fastsoftmax-memnn = "fastsoftmax.cli.memnn:main"' in f.read()
