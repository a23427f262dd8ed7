"""The one training loop of the sequence models (fastsoftmax.models.trainer) and what it rests
on: the optimiser that mixes Adam and SparseAdam, per-rank random streams under data
parallelism, progress through logging, and no host synchronisation per batch."""

import copy
import logging
import os
import random
import subprocess
import sys

import pytest
import torch

from fastsoftmax.optim import CombinedOptimizer, make_optimizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_corpus(folder, n_train=200, n_eval=20, vocab=30, seed=0):
    rng = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    for split, n in (("train", n_train), ("valid", n_eval), ("test", n_eval)):
        lines = (" ".join(f"w{rng.randrange(vocab)}" for _ in range(6)) for _ in range(n))
        with open(os.path.join(folder, f"{split}.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    return str(folder)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# ---------------------------------------------------------------------------------------
# CombinedOptimizer is a torch.optim.Optimizer
# ---------------------------------------------------------------------------------------
def sparse_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(10, 4, sparse=True), torch.nn.Linear(4, 3))


def step(model, opt, ids):
    opt.zero_grad()
    model(ids).square().sum().backward()
    opt.step()


def test_combined_optimizer_takes_lr_schedulers_and_round_trips_its_state():
    model = sparse_model()
    opt = make_optimizer(model, "adam", 0.1, [model[0].weight])
    assert isinstance(opt, CombinedOptimizer) and isinstance(opt, torch.optim.Optimizer)
    schedule = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    ids = torch.tensor([1, 2, 3])
    step(model, opt, ids)
    schedule.step()
    # The schedule reaches both the dense Adam and the SparseAdam inside.
    assert [g["lr"] for o in opt.optimizers for g in o.param_groups] == [0.05, 0.05]
    saved = opt.state_dict()
    assert set(saved) == {"state", "param_groups"} and len(saved["state"]) == 3

    twin = sparse_model()
    twin.load_state_dict(model.state_dict())
    twin_opt = make_optimizer(twin, "adam", 0.1, [twin[0].weight])
    twin_opt.load_state_dict(copy.deepcopy(saved))  # state_dict() shares the tensors
    assert [g["lr"] for o in twin_opt.optimizers for g in o.param_groups] == [0.05, 0.05]
    for _ in range(2):  # the restored moments step both copies alike
        step(model, opt, ids)
        step(twin, twin_opt, ids)
    for a, b in zip(model.parameters(), twin.parameters()):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="does not match"):
        twin_opt.load_state_dict(dict(combined=[]))  # the older form, of another optimiser


def test_make_optimizer_is_plain_sgd_or_adam_unless_parameters_are_sparse():
    """The one make_optimizer every model uses: its names, and a refusal that names them."""
    model = sparse_model()
    sgd, adam = make_optimizer(model, "sgd", 0.5), make_optimizer(model, "adam", 0.5)
    assert type(sgd) is torch.optim.SGD and type(adam) is torch.optim.Adam
    for opt in (sgd, adam):
        assert [p for g in opt.param_groups for p in g["params"]] == list(model.parameters())
        assert all(g["lr"] == 0.5 for g in opt.param_groups)
    combined = make_optimizer(model, "adam", 0.5, [model[0].weight])
    assert [type(o) for o in combined.optimizers] == [torch.optim.Adam, torch.optim.SparseAdam]
    with pytest.raises(ValueError, match="optimizer must be 'sgd' or 'adam', got 'adagrad'"):
        make_optimizer(model, "adagrad", 0.5)


# ---------------------------------------------------------------------------------------
# Data-parallel ranks draw from streams of their own
# ---------------------------------------------------------------------------------------
@pytest.mark.skipif(not torch.distributed.is_available(), reason="needs torch.distributed")
def test_data_parallel_ranks_draw_different_candidates_reproducibly(tmp_path):
    data = write_corpus(tmp_path / "data")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT)
    draws = []
    for run in ("first", "again"):
        out = tmp_path / run
        out.mkdir()
        done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                               "--nproc_per_node", "2", os.path.join(ROOT, "tests", "ddp_draws.py"),
                               data, str(out)], env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        draws.append([torch.load(out / f"rank{r}.pt") for r in range(2)])
    assert not torch.equal(draws[0][0], draws[0][1])  # each rank its own stream
    assert all(torch.equal(a, b) for a, b in zip(draws[0], draws[1]))  # seeded: drawn again


# ---------------------------------------------------------------------------------------
# Progress goes through logging; the loop syncs with the device once per log interval
# ---------------------------------------------------------------------------------------
def test_training_logs_progress_and_prints_nothing(tmp_path, capsys, caplog):
    from fastsoftmax.models import lm, memn2n, seq2seq

    data = write_corpus(tmp_path / "data")
    with caplog.at_level(logging.INFO, logger="fastsoftmax"):
        lm_run = lm.fit(lm.TrainConfig(data=data, embed_dim=8, hidden_size=8, layers=1, epochs=1,
                                       batch_size=4, bptt=5, max_steps=3, device="cpu",
                                       progress=False, checkpoint=str(tmp_path / "lm.pt")))
        pairs = tmp_path / "pairs.txt"
        pairs.write_text("".join(f"a{i % 5} b{i % 3}\tb{i % 3} a{i % 5}\n" for i in range(40)))
        seq2seq.fit(dict(data=str(pairs), epochs=1, hidden_size=8, embed_dim=8, progress=False,
                         checkpoint=str(tmp_path / "s2s.pt")))
        memn2n.fit(dict(train_size=40, test_size=10, epochs=1, embed_dim=8, progress=False,
                        device="cpu", checkpoint=str(tmp_path / "mn.pt")))
    assert capsys.readouterr().out == ""
    text = caplog.text
    for name in ("lm.pt", "s2s.pt", "mn.pt"):
        assert f"saved {tmp_path / name}" in text
    assert "valid ppl" in text and "train loss" in text and "test accuracy" in text
    # The LM's fit returns finish_run's entries, as the other models' do, and test_ppl and
    # vocab; its test perplexity is the one evaluate_checkpoint computes from the saved run.
    assert set(lm_run) == {"model", "history", "test", "data", "config", "checkpoint",
                           "test_ppl", "vocab"}
    assert lm_run["test"]["ppl"] == lm_run["test_ppl"] == pytest.approx(
        lm.evaluate_checkpoint(lm_run["checkpoint"], data, device="cpu")["ppl"], rel=1e-9)


class ItemCounter:
    """Counts the host synchronisations that the training code asks for: item(), float(),
    int(), bool() of a tensor, called from fastsoftmax/models or fastsoftmax/optim.py. (The
    losses' own input checks are the ops' business, not the loop's.)"""

    def __init__(self, monkeypatch):
        self.calls = 0
        training_code = (os.path.join("fastsoftmax", "models"), os.path.join("fastsoftmax", "optim"))
        for name in ("item", "__float__", "__int__", "__bool__"):
            original = getattr(torch.Tensor, name)

            def counted(tensor, *args, _original=original):
                caller = sys._getframe(1).f_code.co_filename
                self.calls += any(part in caller for part in training_code)
                return _original(tensor, *args)

            monkeypatch.setattr(torch.Tensor, name, counted)


def test_an_epoch_syncs_once_per_log_interval_not_per_batch(tmp_path, monkeypatch):
    from fastsoftmax.models import lm

    corpus = lm.Corpus(write_corpus(tmp_path / "data", n_train=400))
    data = lm.batchify(corpus["train"], 4)
    batches = lm.num_bptt_batches(data, 5)
    assert batches >= 100
    torch.manual_seed(0)
    model = lm.RNNLanguageModel(len(corpus.vocab), 8, 8, 1, counts=corpus.vocab.counts)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    counter = ItemCounter(monkeypatch)
    stats = lm.train_epoch(model, data, opt, bptt=5, clip=0.25, log_every=50)
    monkeypatch.undo()
    assert stats["steps"] == batches
    assert counter.calls <= batches // 50 + 4, counter.calls
