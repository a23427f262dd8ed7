"""The seq2seq command line (python -m fastsoftmax.cli.seq2seq) and its progress bar;
the models themselves are tested in tests/test_seq2seq.py."""

import io
import random

import pytest

from fastsoftmax.cli import seq2seq as cli
from test_seq2seq import make_pairs


def test_cli_train_translate_eval(tmp_path, monkeypatch, capsys):
    data = tmp_path / "pairs.tsv"
    words = ["red", "blue", "green", "cat", "dog", "big", "small"]
    rng = random.Random(0)
    lines = []
    for _ in range(120):
        s = [rng.choice(words) for _ in range(rng.randint(1, 3))]
        lines.append(" ".join(s) + "\t" + " ".join(reversed(s)))
    data.write_text("\n".join(lines) + "\n")
    ck = tmp_path / "m.pt"
    argv = [
        "train",
        "--data",
        str(data),
        "--task",
        "pairs",
        "--attention",
        "concat",
        "--epochs",
        "2",
        "--hidden-size",
        "16",
        "--embed-dim",
        "8",
        "--checkpoint",
        str(ck),
        "--no-progress",
        "--bidirectional",
        "--threads",
        "1",
    ]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "epoch 2:" in err and "BLEU" in err and "exact match" in err
    monkeypatch.setattr("sys.stdin", io.StringIO("red cat\nbig dog green\n"))
    assert cli.main(["translate", "--checkpoint", str(ck), "--beam-size", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2
    assert cli.main(["eval", "--checkpoint", str(ck)]) == 0
    assert "exact match" in capsys.readouterr().out


def test_cli_heatmap(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    data = tmp_path / "d.txt"
    data.write_text("".join(f"{s}_{s[::-1]}\n" for s, _ in make_pairs("copy", n=60)))
    png = tmp_path / "h.png"
    assert (
        cli.main(
            [
                "train",
                "--data",
                str(data),
                "--task",
                "chars",
                "--epochs",
                "1",
                "--hidden-size",
                "16",
                "--no-progress",
                "--heatmap",
                str(png),
                "--checkpoint",
                str(tmp_path / "h.pt"),
            ]
        )
        == 0
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["train", "--data", "x", "--task", "pairs", "--attention", "bahdanau"])
    assert e.value.code == 2
    assert "invalid choice: 'bahdanau'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["train", "--data", "x", "--task", "pairs", "--frobnicate"])
    assert "unrecognized arguments: --frobnicate" in capsys.readouterr().err
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\nmissing tab\n")
    assert cli.main(["train", "--data", str(bad), "--task", "pairs", "--no-progress"]) == 2
    assert f"{bad}:2: no TAB" in capsys.readouterr().err
    assert cli.main(["eval", "--checkpoint", str(tmp_path / "nope.pt")]) == 2
    assert "no such checkpoint" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["train", "--data", str(bad), "--task", "pairs", "--resume"])
    assert "--resume: expected one argument" in capsys.readouterr().err


def test_progress_bar_draws_to_its_stream():
    from fastsoftmax.models.progress import progress_bar

    stream = io.StringIO()
    bar = progress_bar(3, "epoch 1", enabled=True, file=stream)
    for i in range(3):
        bar.set_postfix_str(f"loss {i}", refresh=False)
        bar.update(1)
    bar.close()
    text = stream.getvalue()
    assert "\r" in text and "3/3" in text and "loss 2" in text and text.endswith("\n")
    quiet = io.StringIO()
    progress_bar(2, "x", enabled=False, file=quiet).update(2)
    assert quiet.getvalue() == ""
