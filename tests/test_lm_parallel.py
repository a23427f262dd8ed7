"""Recurrent language models, continued from tests/test_lm.py: the sampled heads' wiring, data
parallelism under torchrun (gloo), sparse gradients, the command line's defaults and the
trees of output 'hs'."""

import os
import shutil
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import fastsoftmax
from fastsoftmax.cli import lm as cli
from fastsoftmax.models import RNNLanguageModel, lm
from test_lm import one_thread  # noqa: F401 (an autouse fixture: one intra-op thread)
from test_lm import _train_args, small_model
from test_lm_resume import _resume_args, _train_killed_after_save
from test_lm import corpus_dir as corpus_dir_fixture

corpus_dir = corpus_dir_fixture  # the fixture, taken by name by the tests below

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------------------------------
# Sampled heads: the adapter's wiring, with a stand-in module where the real one is missing
# ---------------------------------------------------------------------------------------
class _RecordingLoss(fastsoftmax.FullSoftmaxLoss):
    """Stand-in head with negative sampling's constructor (no bias argument); its training
    loss is a full cross entropy + 1000, its eval path the family's exact softmax. Used only
    to test how the model wires a head taken from the registry."""

    num_samples_arg, has_bias = "num_sampled", False  # as negative sampling

    def __init__(self, in_features, num_classes, num_sampled, *, sampler=None,
                 linear_weight=None, counts=None, power=0.75, **kw):
        super().__init__(in_features, num_classes, linear_weight=linear_weight)
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
    # The layer checks its own count: negative sampling repeats negatives, so K >= V is
    # its to take, while the sampled softmax draws distinct classes and refuses S >= V.
    with pytest.raises(ValueError, match="num_sampled"):
        small_model(vocab, output="sampled", num_sampled=len(vocab))


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


def test_max_steps_on_resume_counts_the_steps_already_taken(corpus_dir, tmp_path, monkeypatch):
    """--max-steps is the whole run's step count: a mid-epoch checkpoint at step 5 resumed
    with --max-steps 8 takes 3 more steps, not 8."""
    mid = str(tmp_path / "mid.pt")
    argv = ["train", "--data", corpus_dir, "--embed-dim", "8", "--hidden-size", "8",
            "--batch-size", "4", "--bptt", "6", "--epochs", "1", "--save-every", "5",
            "--no-progress", "--device", "cpu", "--checkpoint", mid]
    _train_killed_after_save(monkeypatch, argv, epoch=1, step=5)
    cli.main(["train", "--resume", mid, "--max-steps", "8", "--no-progress"])
    assert lm.load_checkpoint(mid)["history"][0]["steps"] == 8
