"""The dynamic memory network's command line (python -m fastsoftmax.cli.dmn): train, resume
and eval on tiny bAbI-format files, --help, and bad input as one sentence."""

import os

import pytest
import torch
from babi_files import write_task
from test_lm import one_thread  # noqa: F401 (autouse: one intra-op thread)

import fastsoftmax
from fastsoftmax.cli import dmn as cli
from fastsoftmax.models import dmn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def babi(tmp_path, monkeypatch):
    monkeypatch.delenv("FASTSOFTMAX_BABI", raising=False)
    return write_task(tmp_path / "babi", train=60, test=20)


def train_args(babi, *extra):
    return ["train", "--babi-dir", babi, "--babi-task", "1", "--size", "1k", "--hidden", "6",
            "--epochs", "1", "--batch-size", "20", "--no-progress", *extra]


def test_help_shows_every_default(capsys):
    text = cli.build_parser().subcommands["train"].format_help()
    for shown in ("(default: 32)", "(default: softmax)", "(default: 10k)", "--init-embeddings",
                  "--supporting-facts", "--resume"):
        assert shown in text, shown
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    assert exit_.value.code == 0 and "fastsoftmax-dmn train --babi-dir BABI" in capsys.readouterr().out


def test_train_checkpoints_resumes_and_evaluates(babi, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(train_args(babi, "--supporting-facts")) == 0
    saved = [f for f in os.listdir(tmp_path) if f.startswith("dmn-full-")]
    out = capsys.readouterr().out
    assert len(saved) == 1 and f"checkpoint: {tmp_path / saved[0]}" in out
    assert "test accuracy" in out and "epoch   1 |" in out
    assert cli.main(train_args(babi, "--checkpoint", saved[0])) == 2
    assert "already exists" in capsys.readouterr().err
    assert cli.main(["train", "--resume", saved[0], "--passes", "2", "--epochs", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--passes 2 (the checkpoint has 3)" in err
    # The data folder comes from the checkpoint; only --epochs changes.
    assert cli.main(["train", "--resume", saved[0], "--epochs", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"resuming {saved[0]}: 1 epochs done, training to epoch 2" in out
    state = dmn.load_checkpoint(saved[0])
    assert state["epoch"] == 2 and len(state["history"]) == 2
    assert state["train_config"]["supporting_facts"] is True
    assert cli.main(["eval", "--checkpoint", saved[0]]) == 0
    res = dmn.evaluate_checkpoint(saved[0])
    assert f"20 test questions: accuracy {res['accuracy']:.2f}%" in capsys.readouterr().out


def test_resume_continues_as_an_uninterrupted_run(babi, tmp_path):
    whole, part = str(tmp_path / "whole.pt"), str(tmp_path / "part.pt")
    assert cli.main(train_args(babi, "--epochs", "2", "--checkpoint", whole)) == 0
    assert cli.main(train_args(babi, "--checkpoint", part)) == 0
    assert cli.main(["train", "--resume", part, "--epochs", "2", "--no-progress"]) == 0
    a, b = dmn.load_checkpoint(whole), dmn.load_checkpoint(part)
    assert a["model"].keys() == b["model"].keys()
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    assert [r["train_loss"] for r in a["history"]] == [r["train_loss"] for r in b["history"]]


def test_init_embeddings_from_the_command_line(babi, tmp_path, capsys):
    kv = fastsoftmax.models.KeyedVectors(6)
    kv.add_vectors(["mary", "kitchen"], [[0.5] * 6, [-0.5] * 6])
    vectors = str(tmp_path / "w2v.txt")
    kv.save_word2vec_format(vectors)
    ckpt = str(tmp_path / "d.pt")
    assert cli.main(train_args(babi, "--init-embeddings", vectors, "--checkpoint", ckpt)) == 0
    assert f"2 of 17 word embeddings start from {vectors}" in capsys.readouterr().out
    bad = train_args(babi, "--init-embeddings", vectors, "--hidden", "8", "--checkpoint",
                     str(tmp_path / "e.pt"))
    assert cli.main(bad) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "w2v.txt: vectors of size 6" in err


def test_bad_input_is_one_sentence(babi, tmp_path, capsys):
    other = str(tmp_path / "lm.pt")
    fastsoftmax.models.checkpoints.save_checkpoint(other, "lm", {})
    broken = tmp_path / "broken"
    write_task(broken, train=5, test=5)
    path = broken / "en" / "qa1_single-supporting-fact_train.txt"
    path.write_text(path.read_text().replace("3 ", "7 ", 1))
    cases = [
        (train_args(str(tmp_path / "nowhere")), "does not exist"),
        (train_args(babi, "--size", "10k"), "en-10k/qa1_single-supporting-fact_train.txt does "
                                             "not exist"),
        (train_args(str(broken)), "qa1_single-supporting-fact_train.txt:3: line id 7"),
        (train_args(babi, "--lr", "nan"), "lr must be a positive number"),
        (train_args(babi, "--init-embeddings", str(tmp_path / "none.txt")), "none.txt"),
        (train_args(babi, "--output", "sampled"),
         "num_sampled (16) must be smaller than num_classes"),
        (["eval", "--checkpoint", other], "holds a language-model model"),
        (["eval", "--checkpoint", str(tmp_path / "missing.pt")], "no such checkpoint"),
    ]
    for argv, message in cases:
        capsys.readouterr()
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
        assert "Traceback" not in err
    with pytest.raises(SystemExit):
        cli.main(train_args(babi, "--babi-task", "21"))
    assert "bAbI tasks are numbered 1 to 20" in capsys.readouterr().err


def test_no_data_folder_names_the_variable(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("FASTSOFTMAX_BABI", raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "--epochs", "1"]) == 2
    assert "FASTSOFTMAX_BABI" in capsys.readouterr().err


def test_console_script_is_declared():
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        assert 'fastsoftmax-dmn = "fastsoftmax.cli.dmn:main"' in f.read()
