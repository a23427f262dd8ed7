"""Recurrent language models (fastsoftmax.models.lm and python -m fastsoftmax.cli.lm).

Corpora are generated per test: a small vocabulary with a strong, learnable bigram structure,
so a few hundred tokens are enough for the loss to fall.
"""

import math
import os
import random

import pytest
import torch
import torch.nn.functional as F

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


def test_output_tree_options_are_refused_before_any_file_is_read(tmp_path, monkeypatch):
    """lm.training.check_options, run by resolve: the refusals name the option, and come before
    the data folder is read or the checkpoint claimed."""
    from fastsoftmax.models.lm.training import check_options, resolve

    missing = str(tmp_path / "no-such-folder")
    for options, message in [
        (dict(hs_tree="balanced", output="hs"),
         r"hs_tree must be one of \('huffman', 'context', 'features'\), got 'balanced'"),
        (dict(hs_tree="context"), "hs_tree 'context' needs output 'hs'"),
        (dict(hs_tree="features", output="hs"), "--hs-tree-model goes with --hs-tree features"),
        (dict(hs_tree_model="x.pt", output="hs"), "--hs-tree-model goes with"),
    ]:
        config = lm.TrainConfig(data=missing, checkpoint=str(tmp_path / "c.pt"), **options)
        with pytest.raises(ValueError, match=message):
            check_options(config)
        with pytest.raises(ValueError, match=message):
            lm.fit(config)
        assert not os.path.exists(config.checkpoint)
    check_options(lm.TrainConfig(output="hs", hs_tree="context"))
    monkeypatch.chdir(tmp_path)
    resolved = resolve(lm.TrainConfig(data=missing, optimizer="adam"), None)
    assert resolved.lr == 1e-3 and resolved.device in ("cpu", "cuda")
    assert os.path.basename(resolved.checkpoint).startswith("lm-full-")


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
