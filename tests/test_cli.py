"""The command lines as a new user meets them: nothing they run loses work, every mistake is
one sentence that names the file or flag (fastsoftmax.cli.lm and fastsoftmax.cli.seq2seq)."""

import io
import os

import pytest
import torch
from test_lm import one_thread, write_corpus  # noqa: F401 (one_thread: an autouse fixture)

import fastsoftmax
from fastsoftmax.cli import lm as lm_cli
from fastsoftmax.cli import seq2seq as s2s_cli
from fastsoftmax.models import lm


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"), n_train=120, n_eval=20)


def lm_train(data, *extra):
    return ["train", "--data", data, "--embed-dim", "8", "--hidden-size", "8", "--batch-size",
            "4", "--bptt", "8", "--epochs", "1", "--lr", "2", "--no-progress", *extra]


@pytest.fixture(scope="module")
def sampled_ckpt(corpus, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("run") / "sampled.pt")
    assert lm_cli.main(lm_train(corpus, "--output", "sampled", "--num-sampled", "6",
                                "--checkpoint", path)) == 0
    return path


# ---------------------------------------------------------------------------------------
# Training never loses work
# ---------------------------------------------------------------------------------------
def test_lm_train_always_checkpoints_beside_the_run(corpus, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert lm_cli.main(lm_train(corpus)) == 0
    saved = [f for f in os.listdir(tmp_path) if f.startswith("lm-full-") and f.endswith(".pt")]
    assert len(saved) == 1
    out = capsys.readouterr().out
    assert f"checkpoint: {tmp_path / saved[0]}" in out and f"saved {tmp_path / saved[0]}" in out
    assert lm.load_checkpoint(saved[0])["epoch"] == 1
    # A second run never reuses that name, and an explicit existing file is refused.
    assert lm_cli.main(lm_train(corpus)) == 0
    assert len([f for f in os.listdir(tmp_path) if f.startswith("lm-full-")]) == 2
    before = os.path.getmtime(saved[0])
    assert lm_cli.main(lm_train(corpus, "--checkpoint", saved[0])) == 2
    err = capsys.readouterr().err
    assert f"checkpoint {saved[0]} already exists" in err and "--force" in err
    assert os.path.getmtime(saved[0]) == before
    assert lm_cli.main(lm_train(corpus, "--checkpoint", saved[0], "--force")) == 0


def test_lm_resume_says_so_and_refuses_conflicting_flags(corpus, sampled_ckpt, tmp_path, capsys):
    capsys.readouterr()
    assert lm_cli.main(["train", "--resume", sampled_ckpt, "--output", "full", "--optimizer",
                        "adam", "--lr", "0.001"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and sampled_ckpt in err
    for flag in ("--output full (the checkpoint has sampled)",
                 "--optimizer adam (the checkpoint has sgd)", "--lr 0.001 (the checkpoint has 2"):
        assert flag in err, err
    # Flags that may change (epochs, the schedule) are taken; the rest comes from the file.
    copy = str(tmp_path / "copy.pt")
    with open(sampled_ckpt, "rb") as f, open(copy, "wb") as g:
        g.write(f.read())
    assert lm_cli.main(["train", "--resume", copy, "--epochs", "2", "--lr-decay", "4",
                        "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"resuming {copy}: 1 epochs done, training to epoch 2" in out
    state = lm.load_checkpoint(copy)
    assert state["epoch"] == 2 and state["model_config"]["output"] == "sampled"
    assert state["train_config"]["lr_decay"] == 4 and state["train_config"]["optimizer"] == "sgd"
    assert "--lr-decay" in lm_cli.build_parser().subcommands["train"].format_help()


def test_lm_max_steps_is_a_total(corpus, tmp_path):
    per_epoch = lm.num_bptt_batches(lm.batchify(lm.Corpus(corpus)["train"], 4), 8)
    path = str(tmp_path / "m.pt")
    assert lm_cli.main(lm_train(corpus, "--epochs", "3", "--max-steps", str(per_epoch + 2),
                                "--checkpoint", path)) == 0
    history = lm.load_checkpoint(path)["history"]
    assert [h["steps"] for h in history] == [per_epoch, 2]


def test_lm_sparse_adam_trains(corpus, tmp_path):
    path = str(tmp_path / "sparse.pt")
    with pytest.warns(UserWarning, match="SparseAdam"):  # its lazy moments are not Adam's
        assert lm_cli.main(lm_train(corpus, "--sparse", "--optimizer", "adam", "--lr", "0.01",
                                    "--output", "sampled", "--num-sampled", "6",
                                    "--checkpoint", path)) == 0
    saved = lm.load_checkpoint(path)["optimizer"]
    assert len(saved["param_groups"]) == 2  # Adam's and SparseAdam's


# ---------------------------------------------------------------------------------------
# Evaluation and generation
# ---------------------------------------------------------------------------------------
def test_lm_eval_reports_oov_and_refuses_another_vocabulary(corpus, sampled_ckpt, tmp_path,
                                                            capsys):
    capsys.readouterr()
    assert lm_cli.main(["eval", "--checkpoint", sampled_ckpt, "--data", corpus]) == 0
    out = capsys.readouterr()
    assert "0.0% of the words outside the vocabulary" in out.out and "warning" not in out.err
    other = write_corpus(tmp_path / "other", n_train=40, n_eval=10, vocab=40, seed=3)
    assert lm_cli.main(["eval", "--checkpoint", sampled_ckpt, "--data", other]) == 2
    err = capsys.readouterr().err
    assert f"the vocabulary of {other} does not match the checkpoint {sampled_ckpt}" in err
    assert lm_cli.main(["eval", "--checkpoint", sampled_ckpt, "--data", other,
                        "--allow-vocab-mismatch"]) == 0
    res = capsys.readouterr()
    oov = float(res.out.split("tokens, ")[1].split("%")[0])
    assert oov > 20 and "warning:" in res.err and "not comparable" in res.err


def test_generate_top_k_zero_is_off(corpus, sampled_ckpt, capsys):
    runs = []
    for extra in ([], ["--top-k", "0"]):
        assert lm_cli.main(["generate", "--checkpoint", sampled_ckpt, "--prompt", "w1",
                            "--seed", "3", "--max-tokens", "12", *extra]) == 0
        runs.append(capsys.readouterr().out)
    assert runs[0] == runs[1]
    model, vocab = lm.model_from_checkpoint(lm.load_checkpoint(sampled_ckpt))
    assert lm.generate(model, vocab, "w1", top_k=0, seed=5) == lm.generate(
        model, vocab, "w1", top_k=None, seed=5)


def test_compare_never_overwrites_a_plot(sampled_ckpt, tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "compare.png").write_bytes(b"my own figure")
    assert lm_cli.main(["compare", sampled_ckpt]) == 0
    assert "best valid ppl" in capsys.readouterr().out
    assert (tmp_path / "compare.png").read_bytes() == b"my own figure"
    assert lm_cli.main(["compare", sampled_ckpt, "--plot", "compare.png"]) == 2
    assert "compare.png already exists" in capsys.readouterr().err
    assert (tmp_path / "compare.png").read_bytes() == b"my own figure"
    assert lm_cli.main(["compare", sampled_ckpt, "--plot", "compare.png", "--force"]) == 0
    assert (tmp_path / "compare.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_has_integer_epochs_a_wall_clock_axis_and_a_title():
    pytest.importorskip("matplotlib")
    history = [dict(epoch=e, val_ppl=100.0 / e, seconds=30.0 * e) for e in (1, 2, 3)]
    fig = lm.runs_figure([("full", history), ("sampled", history[:2])], "full vs sampled")
    by_epoch, by_time = fig.axes
    fig.canvas.draw()
    ticks = [t for t in by_epoch.get_xticks() if 1 <= t <= 3]
    assert ticks and all(float(t).is_integer() for t in ticks)
    assert "wall clock" in by_time.get_xlabel()
    assert by_time.lines[0].get_xdata()[-1] == pytest.approx(3.0)  # 30+60+90 s = 3 min
    assert fig._suptitle.get_text() == "full vs sampled"
    one = lm.runs_figure([("full", history[:1])], "one epoch")  # no 0.95, 1.0, 1.05 ticks
    assert list(one.axes[0].get_xticks()) == [1]


# ---------------------------------------------------------------------------------------
# Bad input: one sentence naming the file
# ---------------------------------------------------------------------------------------
def test_corrupt_checkpoints_are_named(sampled_ckpt, tmp_path, capsys):
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(open(sampled_ckpt, "rb").read()[:1000])
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint at all\n")
    capsys.readouterr()
    for path in (truncated, garbage):
        assert lm_cli.main(["eval", "--checkpoint", str(path), "--data", "x"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {path} is not a fastsoftmax language-model checkpoint")
        assert err.count("\n") == 1
    assert s2s_cli.main(["translate", "--checkpoint", sampled_ckpt]) == 2
    assert (f"{sampled_ckpt} is not a fastsoftmax seq2seq checkpoint: it holds a language-model"
            in capsys.readouterr().err)


def test_non_utf8_corpus_names_file_line_and_encoding(tmp_path, capsys):
    folder = write_corpus(tmp_path / "latin", n_train=30, n_eval=8)
    train = os.path.join(folder, "train.txt")
    lines = open(train).read().splitlines()
    lines[2] += " caf\xe9"
    with open(train, "wb") as f:
        f.write("\n".join(lines).encode("latin-1") + b"\n")
    assert lm_cli.main(lm_train(folder, "--checkpoint", str(tmp_path / "a.pt"))) == 2
    err = capsys.readouterr().err
    assert f"{train}:3: not utf-8 text" in err and "--encoding" in err
    assert lm_cli.main(lm_train(folder, "--encoding", "latin-1",
                                "--checkpoint", str(tmp_path / "b.pt"))) == 0
    pairs = tmp_path / "pairs.tsv"
    pairs.write_bytes(b"a b\tb a\nc\xe9\td\n")
    assert s2s_cli.main(["train", "--data", str(pairs), "--checkpoint",
                         str(tmp_path / "c.pt")]) == 2
    assert f"{pairs}:2: not utf-8 text" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# seq2seq
# ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def s2s_ckpt(tmp_path_factory):
    folder = tmp_path_factory.mktemp("s2s")
    words = ["red", "blue", "cat", "dog"]
    lines = [f"{a} {b}\t{b} {a}" for a in words for b in words] * 3
    (folder / "pairs.tsv").write_text("\n".join(lines) + "\n")
    path = str(folder / "m.pt")
    assert s2s_cli.main(["train", "--data", str(folder / "pairs.tsv"), "--epochs", "1",
                         "--hidden-size", "8", "--embed-dim", "8", "--checkpoint", path,
                         "--no-progress"]) == 0
    return path


def test_seq2seq_translates_every_line_and_names_bad_ones(s2s_ckpt, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("red cat\n\nblue dog\n   \n"))
    capsys.readouterr()
    assert s2s_cli.main(["translate", "--checkpoint", s2s_ckpt]) == 0
    res = capsys.readouterr()
    out = res.out.split("\n")[:-1]
    assert len(out) == 4 and out[0] and out[2] and out[1] == out[3] == ""
    assert "input line 2: empty line" in res.err and "input line 4: empty line" in res.err


def test_seq2seq_resume_and_checkpoint_rules(s2s_ckpt, tmp_path, monkeypatch, capsys):
    copy = str(tmp_path / "copy.pt")
    with open(s2s_ckpt, "rb") as f, open(copy, "wb") as g:
        g.write(f.read())
    capsys.readouterr()
    assert s2s_cli.main(["train", "--resume", copy, "--hidden-size", "16"]) == 2
    assert "--hidden-size 16 (the checkpoint has 8)" in capsys.readouterr().err
    assert s2s_cli.main(["train", "--resume", copy, "--epochs", "2", "--no-progress"]) == 0
    assert f"resuming {copy}: 1 epochs done" in capsys.readouterr().err
    assert fastsoftmax.models.seq2seq.load_checkpoint(copy)["epoch"] == 2
    monkeypatch.chdir(tmp_path)
    data = fastsoftmax.models.seq2seq.load_checkpoint(copy)["train_config"]["data"]
    assert s2s_cli.main(["train", "--data", data, "--epochs", "1", "--hidden-size", "8",
                         "--no-progress"]) == 0
    saved = [f for f in os.listdir(tmp_path) if f.startswith("seq2seq-full-")]
    assert len(saved) == 1 and f"checkpoint: {tmp_path / saved[0]}" in capsys.readouterr().err
    assert lm_cli.main(["eval", "--checkpoint", copy, "--data", "x"]) == 2
    assert "is not a fastsoftmax language-model checkpoint: it holds a seq2seq" in \
        capsys.readouterr().err


def test_sparse_aware_clip_is_exported():
    """fastsoftmax.clip_grad_norm clips sparse and dense gradients by one global norm, as
    torch's clip does for dense ones."""
    g = torch.Generator().manual_seed(0)
    dense = [torch.nn.Parameter(torch.randn(5, 3, generator=g)) for _ in range(2)]
    sparse = [torch.nn.Parameter(p.detach().clone()) for p in dense]
    for d, s in zip(dense, sparse):
        d.grad = torch.randn(5, 3, generator=g)
        s.grad = d.grad.to_sparse()
    ref = [torch.nn.Parameter(p.detach().clone()) for p in dense]
    for r, d in zip(ref, dense):
        r.grad = d.grad.clone()
    norm = fastsoftmax.clip_grad_norm(sparse, 0.5)
    torch_norm = torch.nn.utils.clip_grad_norm_(ref, 0.5)
    assert norm == pytest.approx(float(torch_norm), rel=1e-6)
    for s, r in zip(sparse, ref):
        torch.testing.assert_close(s.grad.to_dense(), r.grad)
