"""Recurrent language models (fastsoftmax.models.lm and python -m fastsoftmax.cli.lm).

Corpora are generated per test: a small vocabulary with a strong, learnable bigram structure,
so a few hundred tokens are enough for the loss to fall.
"""

import math
import os
import random
import shutil
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import fastsoftmax
from fastsoftmax.cli import lm as cli
from fastsoftmax.models import RNNLanguageModel, lm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


ALL_HEADS = ["full", "sampled", "nce", "neg"]


def write_corpus(folder, n_train=300, n_eval=40, vocab=24, seed=0, names=None):
    """Sentences where each word is mostly followed by (word + 1) mod vocab."""
    rng = random.Random(seed)

    def sentence():
        w = rng.randrange(vocab)
        out = []
        for _ in range(rng.randint(3, 9)):
            out.append(f"w{w}")
            w = (w + 1) % vocab if rng.random() < 0.9 else rng.randrange(vocab)
        return " ".join(out)

    names = names or {"train": "train.txt", "valid": "valid.txt", "test": "test.txt"}
    os.makedirs(folder, exist_ok=True)
    for split, n in (("train", n_train), ("valid", n_eval), ("test", n_eval)):
        with open(os.path.join(folder, names[split]), "w") as f:
            f.write("\n".join(sentence() for _ in range(n)) + "\n")
    return str(folder)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """These models are tiny: intra-op threads only add synchronisation, which on a shared
    machine costs far more than the arithmetic."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"))


def small_model(vocab, output="full", **kw):
    args = dict(
        embed_dim=16, hidden_size=16, num_layers=2, output=output, num_sampled=8, counts=vocab.counts
    )
    args.update(kw)
    return RNNLanguageModel(len(vocab), **args)


# ---------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------
def test_corpus_vocabulary_and_batching(tmp_path):
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "ptb.train.txt").write_text("a b a\n\nc a b\n")
    (folder / "ptb.valid.txt").write_text("a z\n")
    (folder / "ptb.test.txt").write_text("b\n")
    corpus = lm.Corpus(str(folder))
    v = corpus.vocab
    # Frequency order (a:3, b:2, <eos>:3 ties broken by first appearance), specials present.
    assert v.itos[:4] == ["a", "<eos>", "b", "c"] and "<unk>" in v.stoi
    assert v.counts[v.stoi["a"]] == 3 and v.counts[v.stoi["<unk>"]] == 0
    # <eos> after every line, blank ones included; unknown words become <unk>.
    assert v.decode(corpus["train"]) == ["a", "b", "a", "<eos>", "<eos>", "c", "a", "b", "<eos>"]
    assert v.decode(corpus["valid"]) == ["a", "<unk>", "<eos>"]

    ids = torch.arange(23)
    data = lm.batchify(ids, 4)
    assert data.shape == (4, 5) and data[1].tolist() == [5, 6, 7, 8, 9]
    pairs = list(lm.bptt_batches(data, 3))
    assert [x.shape[1] for x, _ in pairs] == [3, 1] == [y.shape[1] for _, y in pairs]
    assert torch.equal(pairs[0][1], data[:, 1:4]) and lm.num_bptt_batches(data, 3) == 2
    assert torch.equal(lm.shard_rows(data, 1, 2), data[2:4])


def test_bad_input_gives_clear_errors(tmp_path, capsys):
    folder = write_corpus(tmp_path / "ok", n_train=20, n_eval=5)
    with open(os.path.join(folder, "valid.txt"), "w") as f:
        f.write("\n  \n")
    with pytest.raises(ValueError, match="valid.txt is empty"):
        lm.Corpus(folder)
    os.remove(os.path.join(folder, "valid.txt"))
    with pytest.raises(FileNotFoundError, match="no valid split"):
        lm.Corpus(folder)
    with pytest.raises(FileNotFoundError, match="data directory not found"):
        lm.Corpus(str(tmp_path / "nowhere"))
    assert cli.main(["train", "--data", folder, "--no-progress"]) == 2
    assert "no valid split" in capsys.readouterr().err

    with pytest.raises(ValueError, match="tie_weights needs embed_dim == hidden_size"):
        RNNLanguageModel(30, embed_dim=8, hidden_size=12, tie_weights=True)
    with pytest.raises(ValueError, match="rnn_type"):
        RNNLanguageModel(30, rnn_type="rnn")
    with pytest.raises(ValueError, match="output must be one of"):
        RNNLanguageModel(30, output="hierarchical")
    with pytest.raises(ValueError, match="too few"):
        lm.batchify(torch.arange(5), 4)
    with pytest.raises(ValueError, match="not divisible"):
        lm.shard_rows(torch.zeros(5, 3), 0, 2)
    with pytest.raises(ValueError, match="not a fastsoftmax language-model checkpoint"):
        torch.save({"x": 1}, tmp_path / "bad.pt")
        lm.load_checkpoint(str(tmp_path / "bad.pt"))


def test_tied_weights_share_one_parameter():
    m = RNNLanguageModel(30, embed_dim=8, hidden_size=8, tie_weights=True)
    assert m.head.linear_weight is m.embedding.weight
    p = RNNLanguageModel(30, embed_dim=8, hidden_size=12, tie_weights=True, projection=True)
    assert p.head.linear_weight is p.embedding.weight and p.proj.weight.shape == (8, 12)
    loss, _ = p(torch.randint(30, (2, 5)), torch.randint(30, (2, 5)))
    loss.backward()
    assert p.embedding.weight.grad is not None and p.proj.weight.grad.abs().sum() > 0
    n_untied = sum(q.numel() for q in RNNLanguageModel(30, embed_dim=8, hidden_size=8).parameters())
    assert sum(q.numel() for q in m.parameters()) == n_untied - 30 * 8


# ---------------------------------------------------------------------------------------
# Exact evaluation
# ---------------------------------------------------------------------------------------
def direct_perplexity(model, data):
    """The whole stream in one pass (carrying state exactly as BPTT chunks do), all logits
    at once from the head's weight and bias, plain cross entropy."""
    with torch.no_grad():
        was_training = model.training
        model.eval()
        x, y = data[:, :-1], data[:, 1:]
        out, _ = model.rnn(model.embedding(x))
        logits = F.linear(out, model.head.linear_weight, model.head.linear_bias)
        model.train(was_training)
        return math.exp(F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1)).item())


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
def test_evaluate_equals_direct_full_softmax(corpus_dir, rnn_type):
    corpus = lm.Corpus(corpus_dir)
    torch.manual_seed(0)
    model = small_model(corpus.vocab, rnn_type=rnn_type, dropout=0.5)
    model.head.chunk_bytes = 4 * 21 * 7  # blocks of 7 classes for the 21 rows of a batch
    model.train()  # evaluate must switch dropout off itself
    data = lm.batchify(corpus["valid"], 3)
    ppl = lm.evaluate(model, data, bptt=7)
    assert model.training
    assert ppl == pytest.approx(direct_perplexity(model, data), rel=1e-5)
    assert ppl > 1.0


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("head", ALL_HEADS)
def test_every_head_trains_and_is_evaluated_exactly(corpus_dir, head):
    corpus = lm.Corpus(corpus_dir)
    torch.manual_seed(1)
    model = small_model(corpus.vocab, output=head, embed_dim=24, hidden_size=24, tie_weights=True)
    train = lm.batchify(corpus["train"], 8)
    valid = lm.batchify(corpus["valid"], 4)
    before = lm.evaluate(model, valid, 10)
    opt = lm.make_optimizer(model, "adam", 0.02)
    losses = [lm.train_epoch(model, train, opt, bptt=10, clip=5.0)["loss"] for _ in range(4)]
    after = lm.evaluate(model, valid, 10)
    assert losses[-1] < losses[0], losses
    assert after == pytest.approx(direct_perplexity(model, valid), rel=1e-5)
    if head in ("full", "sampled"):
        # The corpus is ~90% deterministic bigrams over 24 words: a model that learned it is
        # far below the uniform perplexity it starts near. (NCE and negative sampling fit
        # unnormalised scores; on a vocabulary this small their softmax is no better than
        # uniform after a few epochs, so only their own loss is required to fall.)
        assert before > 20 and after < 0.5 * before, (before, after)


def test_sgd_schedule_divides_lr_when_validation_stalls():
    s = lm.LRSchedule(1.0, factor=4.0)
    assert [s.step(e, p) for e, p in enumerate([100, 90, 95, 80, 80], 1)] == [
        1.0,
        1.0,
        0.25,
        0.25,
        0.0625,
    ]
    z = lm.LRSchedule(1.0, factor=2.0, decay_after=4)
    assert [z.step(e, 100 - e) for e in range(1, 7)] == [1.0, 1.0, 1.0, 0.5, 0.25, 0.125]


def test_gradient_clipping_and_detached_hidden_state(corpus_dir):
    corpus = lm.Corpus(corpus_dir)
    torch.manual_seed(2)
    model = small_model(corpus.vocab)
    seen = []
    handle = model.rnn.register_forward_pre_hook(lambda _m, inputs: seen.append(inputs[1]))

    class Probe(torch.optim.SGD):
        def step(self, closure=None):
            norms.append(
                float(torch.norm(torch.stack([p.grad.norm() for p in model.parameters()])))
            )
            return super().step(closure)

    norms = []
    stats = lm.train_epoch(
        model,
        lm.batchify(corpus["train"], 4),
        Probe(model.parameters(), lr=1.0),
        bptt=5,
        clip=1e-3,
        max_steps=3,
    )
    handle.remove()
    assert stats["steps"] == 3 and len(norms) == 3 and max(norms) <= 1e-3 * (1 + 1e-4)
    # The state starts at zero, then is carried (non-zero) with the graph behind it cut.
    assert seen[0] is None and len(seen) == 3
    for h in seen[1:]:
        assert all(not t.requires_grad and t.grad_fn is None and t.abs().sum() > 0 for t in h)


# ---------------------------------------------------------------------------------------
# Checkpoints, resume, generation, command line
# ---------------------------------------------------------------------------------------
def _train_args(data, ckpt, epochs, extra=()):
    return [
        "train",
        "--data",
        data,
        "--embed-dim",
        "16",
        "--hidden-size",
        "16",
        "--dropout",
        "0.3",
        "--batch-size",
        "4",
        "--bptt",
        "8",
        "--epochs",
        str(epochs),
        "--lr",
        "2",
        "--checkpoint",
        ckpt,
        "--no-progress",
        *extra,
    ]


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


def test_generation_is_reproducible_with_a_seed(corpus_dir):
    corpus = lm.Corpus(corpus_dir)
    torch.manual_seed(3)
    model = small_model(corpus.vocab)
    v = corpus.vocab
    state = torch.get_rng_state()
    one = lm.generate(model, v, "w1 w2", max_tokens=30, seed=11)
    assert one == lm.generate(model, v, "w1 w2", max_tokens=30, seed=11)
    assert one != lm.generate(model, v, "w1 w2", max_tokens=30, seed=12)
    assert torch.equal(state, torch.get_rng_state())  # global RNG untouched
    assert len(one) == 30 and all(w in v.stoi for w in one)
    # top-1 sampling is greedy decoding; top-k only ever picks among the k likeliest.
    greedy = lm.generate(model, v, "w1", max_tokens=10, temperature=0)
    assert lm.generate(model, v, "w1", max_tokens=10, top_k=1, seed=4) == greedy
    with torch.no_grad():
        logp, _ = model.log_prob(torch.tensor(v.encode(["<eos>", "w1"]))[None])
    top3 = set(v.decode(logp[0, -1].topk(3).indices))
    firsts = {
        lm.generate(model, v, "w1", max_tokens=1, top_k=3, temperature=5.0, seed=s)[0]
        for s in range(40)
    }
    assert firsts <= top3 and len(firsts) > 1
    with pytest.raises(ValueError, match="temperature"):
        lm.generate(model, v, "w1", temperature=-1)


def test_command_line_eval_generate_compare(corpus_dir, tmp_path, capsys):
    ckpt, plot = str(tmp_path / "m.pt"), str(tmp_path / "m.png")
    cli.main(_train_args(corpus_dir, ckpt, 2, ["--plot", plot, "--rnn", "gru", "--progress"]))
    captured = capsys.readouterr()
    out = captured.out
    assert "epoch 2 [####" in captured.err and "tok/s loss" in captured.err
    assert "epoch   2 | train loss" in out and "valid ppl" in out and "test ppl" in out
    test_ppl = float(out.split("test ppl ")[1].split()[0])
    cli.main(["eval", "--checkpoint", ckpt, "--data", corpus_dir])
    assert float(capsys.readouterr().out.split("test ppl ")[1].split()[0]) == pytest.approx(
        test_ppl, abs=0.01)
    cli.main(
        ["generate", "--checkpoint", ckpt, "--prompt", "w5", "--seed", "1", "--max-tokens", "5"]
    )
    assert capsys.readouterr().out.startswith("w5 ")
    cmp_png = str(tmp_path / "cmp.png")
    cli.main(["compare", ckpt, ckpt, "--labels", "a", "b", "--plot", cmp_png])
    for png in (plot, cmp_png):
        with open(png, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------------------
# Sampled heads: the adapter's wiring, with a stand-in module where the real one is missing
# ---------------------------------------------------------------------------------------
class _RecordingLoss(fastsoftmax.OutputLayer):
    """Stand-in head with negative sampling's constructor (no bias argument); its training
    loss is a full cross entropy + 1000, its eval path the family's exact softmax. Used only
    to test how the model wires a head taken from the registry."""

    num_samples_arg = "num_sampled"

    def __init__(self, in_features, num_classes, num_sampled, *, sampler=None,
                 linear_weight=None, counts=None, power=0.75, **kw):
        super().__init__(in_features, num_classes, bias=False, linear_weight=linear_weight,
                         weight=None, label_smoothing=0.0, reduction="mean", ignore_index=-100)
        self.args = dict(num_sampled=num_sampled, kw=kw)
        self.sampler = fastsoftmax.nn.make_sampler(sampler, counts, power, num_classes, "uniform")
        self.calls = 0

    def training_loss(self, input, target):
        self.calls += 1
        return F.cross_entropy(F.linear(input, self.linear_weight).reshape(-1, self.num_classes),
                               target.reshape(-1)) + 1000.0


def test_sampled_head_wiring(monkeypatch, corpus_dir, tmp_path):
    monkeypatch.setitem(fastsoftmax.nn.HEADS, "neg", _RecordingLoss)
    vocab = lm.Corpus(corpus_dir).vocab
    m = small_model(vocab, output="neg", tie_weights=True, num_sampled=5, power=0.5)
    loss_mod = m.head
    assert m.head.linear_weight is m.embedding.weight and m.head.linear_bias is None
    assert "bias" not in loss_mod.args["kw"]  # negative sampling has no bias
    assert loss_mod.args["num_sampled"] == 5
    want = vocab.counts**0.5
    torch.testing.assert_close(loss_mod.sampler.probs, (want / want.sum()).float())
    x, y = torch.randint(len(vocab), (2, 6)), torch.randint(len(vocab), (2, 6))
    train_loss, _ = m(x, y)
    assert loss_mod.calls == 1 and train_loss.item() > 1000  # training goes to the module
    m.eval()
    eval_loss, _ = m(x, y)
    assert loss_mod.calls == 1 and eval_loss.item() < 1000  # evaluation is the exact softmax
    path = str(tmp_path / "neg.pt")
    lm.save_checkpoint(path, model=m, vocab=vocab)
    restored, _ = lm.model_from_checkpoint(lm.load_checkpoint(path))
    assert restored.head.linear_weight is restored.embedding.weight
    lu = small_model(vocab, output="neg", sampler="log_uniform")
    assert isinstance(lu.head.sampler, fastsoftmax.LogUniformSampler)
    with pytest.raises(ValueError, match="num_sampled"):
        small_model(vocab, output="neg", num_sampled=len(vocab))


# ---------------------------------------------------------------------------------------
# Data parallel
# ---------------------------------------------------------------------------------------
def _torchrun_train(argv):
    """`python -m fastsoftmax.cli.lm argv` in 2 gloo processes under torchrun."""
    env = dict(
        os.environ,
        PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
        OMP_NUM_THREADS="1",
    )
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         "-m", "fastsoftmax.cli.lm", *argv],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("head", ["full"])
def test_ddp_two_processes_match_single_process_step(corpus_dir, tmp_path, head):
    """One SGD step (lr 1, no clipping) on a global batch of 4 streams: 2 gloo processes with
    2 streams each must move every parameter exactly as one process with all 4 does. (A
    sampled head cannot: each rank draws its own candidates, tests/test_trainer.py.)"""
    common = [
        "--data",
        corpus_dir,
        "--embed-dim",
        "12",
        "--hidden-size",
        "12",
        "--batch-size",
        "4",
        "--bptt",
        "6",
        "--epochs",
        "1",
        "--max-steps",
        "1",
        "--lr",
        "1",
        "--clip",
        "0",
        "--output",
        head,
        "--num-sampled",
        "8",
        "--no-progress",
        "--device",
        "cpu",
    ]
    single, multi = str(tmp_path / "single.pt"), str(tmp_path / "ddp.pt")
    cli.main(["train", *common, "--checkpoint", single])
    run = _torchrun_train(["train", *common, "--checkpoint", multi])
    assert run.returncode == 0, run.stderr[-3000:]
    assert "processes 2" in run.stdout
    a, b = lm.load_checkpoint(single), lm.load_checkpoint(multi)
    torch.manual_seed(1234)  # the run's seed: rebuild the initial model to see the step moved it
    init = RNNLanguageModel(
        len(a["vocab"]["itos"]), 12, 12, 2, output=head, num_sampled=8, counts=a["vocab"]["counts"]
    )
    moved = 0.0
    for k, p0 in init.state_dict().items():
        torch.testing.assert_close(b["model"][k], a["model"][k], rtol=1e-5, atol=1e-6, msg=k)
        moved += float((a["model"][k] - p0).abs().sum())
    assert moved > 1e-3
    if head == "full":
        # Each rank really trained on its half: rank 0 reports the loss of streams 0-1 alone.
        data = lm.batchify(
            lm.Corpus(corpus_dir, vocab=lm.Vocabulary.from_state_dict(a["vocab"]))["train"], 4
        )
        x, y = next(lm.bptt_batches(data[:2], 6))
        half_loss = init(x, y)[0].item()
        assert b["history"][0]["train_loss"] == pytest.approx(half_loss, rel=1e-5)
        assert abs(a["history"][0]["train_loss"] - half_loss) > 1e-5  # all four streams differ


def test_ddp_resumes_a_mid_epoch_checkpoint(corpus_dir, tmp_path, monkeypatch):
    """A mid-epoch checkpoint holds the whole batch's hidden state: 2 gloo processes resuming
    it (each taking its streams, and gathering them again at the next --save-every) end where
    one process resuming it does."""
    args = [
        "train", "--data", corpus_dir, "--embed-dim", "12", "--hidden-size", "12",
        "--batch-size", "4", "--bptt", "6", "--epochs", "1", "--lr", "1", "--clip", "0",
        "--save-every", "7", "--no-progress", "--device", "cpu",
    ]  # fmt: skip
    mid = str(tmp_path / "mid.pt")
    _train_killed_after_save(monkeypatch, [*args, "--checkpoint", mid], epoch=1, step=14)
    assert lm.load_checkpoint(mid)["position"]["hidden"][0].shape == (2, 4, 12)
    single, multi = str(tmp_path / "single.pt"), str(tmp_path / "multi.pt")
    shutil.copy(mid, single)
    shutil.copy(mid, multi)
    cli.main(_resume_args(corpus_dir, single, 1, 7))
    run = _torchrun_train(_resume_args(corpus_dir, multi, 1, 7))
    assert run.returncode == 0, run.stderr[-3000:]
    a, b = lm.load_checkpoint(single), lm.load_checkpoint(multi)
    assert a["epoch"] == b["epoch"] == 1
    for k in a["model"]:
        torch.testing.assert_close(b["model"][k], a["model"][k], rtol=1e-5, atol=1e-6, msg=k)
    assert a["history"][0]["val_ppl"] == pytest.approx(b["history"][0]["val_ppl"], rel=1e-5)


@pytest.mark.parametrize("head", ["full", "sampled"])
def test_sparse_gradients_train_like_dense(corpus_dir, head):
    """sparse=True changes how gradients are stored, not what SGD (with clipping) does."""
    corpus = lm.Corpus(corpus_dir)
    data = lm.batchify(corpus["train"], 4)
    states = []
    for sparse in (False, True):
        torch.manual_seed(5)
        model = small_model(corpus.vocab, output=head, sparse=sparse, tie_weights=True)
        opt = lm.make_optimizer(model, "sgd", 0.5)
        lm.train_epoch(model, data, opt, bptt=6, clip=0.5, max_steps=4)
        states.append(model.state_dict())
    assert model.embedding.weight.grad.is_sparse or head == "full"
    for k in states[0]:
        torch.testing.assert_close(states[1][k], states[0][k], rtol=1e-5, atol=1e-6, msg=k)
    # Adam takes dense gradients only: the sparse parameters (untied) go to SparseAdam.
    model = small_model(corpus.vocab, output=head, sparse=True)
    opt = lm.make_optimizer(model, "adam", 0.1, model.sparse_parameters())
    kinds = {type(o).__name__: o for o in getattr(opt, "optimizers", [opt])}
    sparse_ids = {id(p) for g in kinds["SparseAdam"].param_groups for p in g["params"]}
    assert id(model.embedding.weight) in sparse_ids
    assert (id(model.head.linear_weight) in sparse_ids) == (head != "full")
    before = model.embedding.weight.detach().clone()
    lm.train_epoch(model, data, opt, bptt=6, clip=0.5, max_steps=2)
    assert not torch.equal(before, model.embedding.weight)


def test_every_option_shows_its_default():
    """--help of every subcommand of both command lines lists each option's default."""
    from fastsoftmax.cli import seq2seq as s2s_cli

    for build in (cli.build_parser, s2s_cli.build_parser):
        for name, sub in build().subcommands.items():
            text = sub.format_help()
            for action in sub._actions:
                if action.option_strings and action.dest != "help" and not action.required:
                    assert action.help, (name, action.dest)
            assert text.count("(default:") >= len(
                [a for a in sub._actions if a.option_strings and a.dest != "help"
                 and not a.required]), name


def test_context_tree_groups_words_by_their_left_context():
    from fastsoftmax.models.lm.hs_tree import build_tree, left_context_vectors

    # Words 1 and 2 only ever follow 0, words 4 and 5 only ever follow 3: a next-word
    # predictor sees the same history before each of a pair, so each pair shares a subtree.
    g = torch.Generator().manual_seed(0)
    pick = torch.randint(0, 2, (400,), generator=g)
    follow = torch.randint(0, 2, (400,), generator=g)
    ids = torch.stack((pick * 3, 1 + pick * 3 + follow), 1).reshape(-1)
    vec = left_context_vectors(ids, 6, dim=4, window=1)
    assert vec.shape == (6, 4) and vec.dtype == torch.float32
    torch.testing.assert_close(vec[1], vec[2])
    torch.testing.assert_close(vec[4], vec[5])
    counts = torch.bincount(ids, minlength=6).clamp(min=1)
    tree = build_tree("context", ids, counts)
    links = tree.links.long()
    assert links[1] >> 1 == links[2] >> 1 and links[4] >> 1 == links[5] >> 1
    huffman = fastsoftmax.ClassTree.huffman(counts)
    assert torch.equal(build_tree("huffman", ids, counts).links, huffman.links)
    with pytest.raises(ValueError, match="hs_tree must be one of"):
        build_tree("balanced", ids, counts)
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 6\)"):
        left_context_vectors(ids + 1, 6)


def test_hs_context_tree_is_kept_by_checkpoints(corpus_dir, tmp_path, capsys):
    """--hs-tree context: the tree is built from the training text, saved with the model, and
    a resumed run ends bit-identical to an uninterrupted one (same tree, same weights)."""
    straight, split = str(tmp_path / "straight.pt"), str(tmp_path / "split.pt")
    extra = ("--output", "hs", "--hs-tree", "context")
    cli.main(_train_args(corpus_dir, straight, 2, extra))
    cli.main(_train_args(corpus_dir, split, 1, extra))
    cli.main(_resume_args(corpus_dir, split, 2, 0))
    a, b = lm.load_checkpoint(straight), lm.load_checkpoint(split)
    assert a["train_config"]["hs_tree"] == b["train_config"]["hs_tree"] == "context"
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k
    model, vocab = lm.model_from_checkpoint(a)
    huffman = fastsoftmax.ClassTree.huffman(vocab.counts)
    assert torch.equal(model.head.tree.links, a["model"]["head.tree_links"])
    assert not torch.equal(model.head.tree.links, huffman.links)
    capsys.readouterr()
    argv = _train_args(corpus_dir, str(tmp_path / "x.pt"), 1, ("--hs-tree", "context"))
    assert cli.main(argv) == 2
    assert "hs_tree 'context' needs output 'hs'" in capsys.readouterr().err


def test_feature_vectors_are_the_mean_features_before_each_word(corpus_dir):
    from fastsoftmax.models.lm.hs_tree import feature_vectors

    corpus = lm.Corpus(corpus_dir)
    torch.manual_seed(0)
    model = small_model(corpus.vocab)
    ids = corpus["train"][:203]
    got = feature_vectors(model, ids, batch_size=3, bptt=7)
    # By hand: the same streams, one pass over the whole of each, no truncation needed for
    # the forward values.
    data = lm.batchify(ids, 3)
    with torch.no_grad():
        feats, _ = model.features(data[:, :-1])
    target = data[:, 1:].reshape(-1)
    feats = feats.reshape(-1, feats.shape[-1]).double()
    V = len(corpus.vocab)
    want = torch.zeros(V, feats.shape[1], dtype=torch.float64).index_add_(0, target, feats)
    want /= torch.bincount(target, minlength=V).clamp(min=1)[:, None]
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)
    assert model.training  # its mode is given back


def test_hs_features_tree_from_a_trained_model(corpus_dir, tmp_path, capsys):
    first, second = str(tmp_path / "first.pt"), str(tmp_path / "second.pt")
    cli.main(_train_args(corpus_dir, first, 1, ("--output", "hs", "--hs-tree", "context")))
    extra = ("--output", "hs", "--hs-tree", "features", "--hs-tree-model", first)
    assert cli.main(_train_args(corpus_dir, second, 1, extra)) == 0
    state = lm.load_checkpoint(second)
    assert state["train_config"]["hs_tree_model"] == first
    fastsoftmax.ClassTree(state["model"]["head.tree_links"])
    capsys.readouterr()
    bad = ("--output", "hs", "--hs-tree", "features")
    assert cli.main(_train_args(corpus_dir, str(tmp_path / "x.pt"), 1, bad)) == 2
    assert "--hs-tree-model goes with --hs-tree features" in capsys.readouterr().err
