"""The memory network's switchable departures toward the authors' Matlab code
(MemN2N-babi-matlab): position weights of the longest sentence or theirs, their empty memory
slots in the softmax, their random noise in the time indices only, per-matrix gradient
clipping, and their parser's dropped punctuation. Each against its formula, written out."""

import math
import random

import pytest
import torch
from test_lm import one_thread  # noqa: F401 (autouse: one intra-op thread)
from test_memn2n_babi import single, write_task  # noqa: F401 (the fixture of task 1 files)

from fastsoftmax.models import memn2n as mn
from fastsoftmax.models.memn2n import babi_data, clipping, training
from fastsoftmax.models.memn2n.model import authors_weights

WORDS = torch.tensor([[3, 4, 0], [5, 0, 0]])


def test_longest_position_weights_are_the_papers_formula_with_one_length():
    D, L = 4, 5
    got = mn.position_encoding(WORDS, D, torch.float64, length=L)
    for b, sentence in enumerate(WORDS.tolist()):
        for j, word in enumerate(sentence, 1):
            for k in range(1, D + 1):
                want = (1 - j / L) - (k / D) * (1 - 2 * j / L) if word else 0.0
                assert got[b, j - 1, k - 1].item() == pytest.approx(want, abs=1e-12)
    # each sentence's own length (the default) weighs the same position differently
    own = mn.position_encoding(WORDS, D, torch.float64)
    assert not torch.allclose(own[1, 0], got[1, 0])
    assert own[1, 0].tolist() == pytest.approx([k / D for k in range(1, D + 1)])


def test_authors_weights_are_build_model_m_and_the_model_uses_them():
    D, J = 4, 3
    w = authors_weights(J, J, D, torch.float64)
    for j in range(1, J + 1):
        for k in range(1, D + 1):
            want = 1 + 4 * (k - (D + 1) / 2) * (j - (J + 1) / 2) / (D * J)
            assert w[j - 1, k - 1].item() == pytest.approx(want, abs=1e-12)
    # the model: J = longest sentence + the time word's slot, that slot weighing T
    model = mn.MemN2N(8, 8, embed_dim=D, position_weights="authors", sentence_length=J - 1)
    assert torch.allclose(model._weights(WORDS)[0, :2], w[:2].float())
    assert not model._weights(WORDS)[0, 2].any()  # padding
    assert torch.allclose(model._time_weight(), w[-1].float())
    assert mn.MemN2N(8, 8, embed_dim=D)._time_weight() is None
    with pytest.raises(ValueError, match="sentence_length must be a positive int"):
        mn.MemN2N(8, 8, position_weights="longest")
    with pytest.raises(ValueError, match="position_weights must be one of"):
        mn.MemN2N(8, 8, position_weights="paper")


def test_empty_slots_take_softmax_mass_with_score_zero():
    u = torch.tensor([[1.0, 0.0]])
    memory = torch.tensor([[[2.0, 0.0], [-1.0, 0.0], [9.0, 9.0]]])
    mask = torch.tensor([[True, True, False]])
    o, p, _ = mn.attend(u, memory, memory, mask, empty=torch.tensor([3]))
    z = math.exp(2) + math.exp(-1) + 3  # three empty slots: exp(0) each
    assert p[0].tolist() == pytest.approx([math.exp(2) / z, math.exp(-1) / z, 0.0])
    assert o[0, 0].item() == pytest.approx((2 * math.exp(2) - math.exp(-1)) / z)
    # no empty slot: the masked softmax
    _, q, _ = mn.attend(u, memory, memory, mask, empty=torch.tensor([0]))
    assert torch.allclose(q, mn.attend(u, memory, memory, mask)[1])
    # the model: S slots, a story of n sentences leaves S - n; linear start has no softmax
    torch.manual_seed(0)
    model = mn.MemN2N(10, 10, embed_dim=6, memory_size=8, empty_slots=5)
    story = torch.randint(1, 10, (2, 3, 4))
    mask = torch.tensor([[True, True, True], [True, False, False]])
    _, attention = model.features(story, mask, torch.randint(1, 10, (2, 3)))
    assert all((p.sum(-1) < 1).all() for p in attention)
    plain = mn.MemN2N(10, 10, embed_dim=6, memory_size=8)
    plain.load_state_dict(model.state_dict())
    linear = [model.features(story, mask, story[:, 0], linear=True)[0],
              plain.features(story, mask, story[:, 0], linear=True)[0]]
    assert torch.equal(*linear)


def test_time_noise_moves_ages_only_and_only_in_training():
    rng = random.Random(0)
    for n in (1, 4, 10, 30):
        for _ in range(50):
            ages = mn.data.time_noise(n, 0.1, 50, rng)
            assert len(ages) == n and ages == sorted(set(ages), reverse=True)
            assert all(a >= n - 1 - i for i, a in enumerate(ages))  # gaps only widen
            assert ages[0] <= n - 1 + math.ceil(0.1 * n)  # at most ceil(10%) blanks
    assert mn.data.time_noise(6, 0.9, 4, random.Random(1))[0] == 3  # past the memory: M - 1
    items = [([[5, 6], [7], [8]], [3], 1, [(0, 1)]), ([[4]], [3], 2, [(0, 1)])] * 20
    kw = dict(batch_size=8, memory_size=50, seed=3)
    noisy = list(mn.batches(items, noise=0.5, noise_style="time", shuffle=True, **kw))
    plain = list(mn.batches(items, shuffle=True, **kw))
    assert all(b.age is not None and torch.equal(b.mask, c.mask) and torch.equal(b.story, c.story)
               for b, c in zip(noisy, plain))  # no memory added
    assert any((b.age != c.mask.sum(-1, keepdim=True) - 1 - torch.arange(b.mask.shape[1]))
               .masked_select(b.mask).any() for b, c in zip(noisy, plain))
    assert all(b.age is None for b in plain)  # evaluation's batches: no noise, no ages
    # the model's default ages are the noiseless ones
    model = mn.MemN2N(10, 4, embed_dim=6)
    b = plain[0]
    default = (b.mask.sum(-1, keepdim=True) - 1 - torch.arange(b.mask.shape[1])).clamp(min=0)
    assert torch.equal(model.features(b.story, b.mask, b.query)[0],
                       model.features(b.story, b.mask, b.query, age=default)[0])
    with pytest.raises(ValueError, match="noise_style must be one of"):
        next(mn.batches(items, noise=0.1, noise_style="gaps", **kw))


def test_clipping_per_matrix_rescales_only_the_groups_above_the_norm():
    model = mn.MemN2N(6, 4, embed_dim=3, memory_size=2)
    groups = clipping.clip_groups(model)
    assert len(groups) == 4 + 1  # E_0..E_3 with their temporal vectors, the answer layer
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    model.embeddings[0].weight.grad[1] = torch.tensor([60.0, 0.0, 0.0])
    model.temporal[0].grad[0] = torch.tensor([0.0, 80.0, 0.0])  # the group: Frobenius 100
    model.embeddings[1].weight.grad[1:4] = 20 * torch.eye(3)  # Frobenius 34.6, spectral 20
    model.embeddings[2].weight.grad[1:3, 0] = 30.0  # rank one: Frobenius = spectral 42.4
    assert clipping.clip_per_group(groups, 40.0, "tensor") == 2
    assert model.embeddings[0].weight.grad[1, 0].item() == pytest.approx(24.0)
    assert model.temporal[0].grad[0, 1].item() == pytest.approx(32.0)
    assert torch.equal(model.embeddings[1].weight.grad[1:4], 20 * torch.eye(3))
    assert model.embeddings[2].weight.grad.norm().item() == pytest.approx(40.0)
    model.embeddings[1].weight.grad[1:4] = 30 * torch.eye(3)  # Frobenius 52, spectral 30
    assert clipping.clip_per_group(groups[1:2], 40.0, "spectral") == 0
    assert clipping.clip_per_group(groups[1:2], 40.0, "tensor") == 1


def test_fit_with_every_departure_records_them_and_resumes(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(training, "clip_per_group",
                        lambda *a: calls.append(a[1:]) or clipping.clip_per_group(*a))
    options = dict(task="single", train_size=60, test_size=20, epochs=2, embed_dim=8,
                   batch_size=16, progress=False, device="cpu", noise=0.3,
                   noise_style="time", position_weights="authors", empty_slots=True,
                   clip_style="spectral", clip=0.5, checkpoint=str(tmp_path / "m.pt"))
    res = mn.fit(options)
    assert calls and set(calls) == {(0.5, "spectral")}
    config = res["model"].config
    longest = max(len(w) for s in res["data"]["train"] + res["data"]["valid"]
                  for w in s.sentences + [s.question])
    assert config["sentence_length"] == longest and config["position_weights"] == "authors"
    assert config["empty_slots"] == 6  # min(memory 50, the stories' 1 fact + 5 distractors)
    again = mn.evaluate_checkpoint(options["checkpoint"])
    assert again["accuracy"] == res["test"]["accuracy"]
    with pytest.raises(ValueError, match="clip_style must be one of"):
        mn.fit(dict(options, clip_style="matrix", checkpoint=str(tmp_path / "x.pt")))
    # generated stories keep their punctuation either way
    kept = mn.fit(dict(options, punctuation=True, epochs=1, checkpoint=str(tmp_path / "y.pt")))
    assert "." in kept["data"]["vocab"].stoi and "." in res["data"]["vocab"].stoi


def test_no_punctuation_drops_the_full_stops_and_question_marks(single):  # noqa: F811
    config = mn.TrainConfig(babi_dir=str(single), babi_task="1", punctuation=False)
    data = babi_data.load_babi(config)
    assert "." not in data["vocab"].stoi and "?" not in data["vocab"].stoi
    kept = babi_data.load_babi(mn.TrainConfig(babi_dir=str(single), babi_task="1",
                                              punctuation=True))
    assert [w for w in kept["train"][0].sentences[0] if w != "."] == data["train"][0].sentences[0]
    assert len(kept["train"][0].sentences) == len(data["train"][0].sentences)


def test_bench_rows_keep_an_older_files_columns(tmp_path):
    import csv
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "bench", "bench_memn2n_babi.py")
    spec = importlib.util.spec_from_file_location("bench_memn2n_babi", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    row = {f: str(i) for i, f in enumerate(bench.FIELDS)}
    new, old = tmp_path / "new.csv", tmp_path / "old.csv"
    bench.append(str(new), [row])
    assert list(csv.DictReader(open(new))) == [row]
    old.write_text("mode,task,error\n")  # a file from before variant and train_error
    bench.append(str(old), [row])
    assert list(csv.DictReader(open(old))) == [{"mode": "0", "task": "1", "error": "3"}]
