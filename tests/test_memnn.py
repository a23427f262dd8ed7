"""The strongly supervised memory network: its scores s = Φxᵀ UᵀU Φy and the write-time
comparisons against plain float64 references built in the paper's feature space, the O
module's chain of choices, the margin losses against loops, and training on tiny generated
bAbI files (fastsoftmax.models.memnn; the command line is tested in test_memnn_cli.py)."""


import pytest
import torch
import babi_files
from test_lm import one_thread  # noqa: F401 (autouse: one intra-op thread)

from fastsoftmax.models import memnn as mm
from fastsoftmax.models.babi import Story
from fastsoftmax.models.memnn.model import NOT_OLDER

V, D = 9, 5


def model_and_batch(hops=2, time_features=True, seed=0, B=4, M=6, J=4):
    torch.manual_seed(seed)
    model = mm.MemNN(V, embed_dim=D, hops=hops, time_features=time_features,
                     init_std=1.0).double()
    g = torch.Generator().manual_seed(seed + 1)
    lengths = [M, M - 2, 3, 1][:B]
    story = torch.randint(1, V, (B, M, J), generator=g)
    story[:, :, -1] = 0  # some padding words
    mask = torch.zeros(B, M, dtype=torch.bool)
    for b, n in enumerate(lengths):
        mask[b, :n] = True
        story[b, n:] = 0
    query = torch.randint(1, V, (B, 3), generator=g)
    return model, story, mask, query


def phi(blocks: int, words_by_block, time=None) -> torch.Tensor:
    """A feature vector of the paper's space: word counts per |W| block, then the time
    features when given."""
    x = torch.zeros(blocks * V + (3 if time is not None else 0), dtype=torch.float64)
    for k, words in enumerate(words_by_block):
        for w in words.tolist():
            x[k * V + w] += 1
    if time is not None:
        x[blocks * V:] = torch.tensor(time, dtype=torch.float64)
    return x


def s_ref(model, which, x_blocks, y_words, time=None):
    """Φx(x)ᵀ UᵀU Φy(y) (O: κ x-blocks; R: κ + 1), y one-hot in the last block."""
    U = model.U(which).detach()
    n = model.hops + 1 if which == "O" else model.hops + 2
    zero = torch.zeros(0, dtype=torch.int64)
    x = phi(n, list(x_blocks) + [zero] * (n - len(x_blocks)),
            None if time is None else [0, 0, 0])
    y = phi(n, [zero] * (n - 1) + [y_words], time)
    return float(x @ U.T @ U @ y)


def test_scores_are_phi_x_U_U_phi_y():
    model, story, mask, query = model_and_batch(time_features=False)
    memories = model.memories(story)
    fact = story[:, 2]
    g1, _ = model.o_terms(query, [], memories)
    g2, _ = model.o_terms(query, [fact], memories)
    chosen = torch.tensor([[2, 0], [1, 3], [0, 2], [0, 0]])
    r = model.r_input(story, query, chosen)
    for b in range(story.shape[0]):
        for i in range(story.shape[1]):
            assert g1[b, i].item() == pytest.approx(
                s_ref(model, "O", [query[b]], story[b, i]), abs=1e-10)
            assert g2[b, i].item() == pytest.approx(
                s_ref(model, "O", [query[b], fact[b]], story[b, i]), abs=1e-10)
        scores = model.answer_scores(r)[b]
        facts = [story[b, chosen[b, k]] for k in range(2)]
        for w in range(2, V):
            assert scores[w].item() == pytest.approx(
                s_ref(model, "R", [query[b], *facts], torch.tensor([w])), abs=1e-10)
        assert scores[:2].eq(float("-inf")).all()  # <pad> and <unk> are never answers


def test_write_time_comparison_is_phi_x_U_U_of_the_difference_and_time_features():
    model, story, mask, query = model_and_batch()
    memories = model.memories(story)
    fact = story[:, 3]
    g, t = model.o_terms(query, [fact], memories)
    x_time = torch.tensor([3, 3, 1, NOT_OLDER])
    U = model.U("O").detach()
    zero = torch.zeros(0, dtype=torch.int64)
    for b in range(story.shape[0]):
        x = phi(3, [query[b], fact[b], zero], [0, 0, 0])
        for i in range(story.shape[1]):
            for j in range(story.shape[1]):
                feats = [float(x_time[b] < i), float(x_time[b] < j), float(i < j)]
                diff = (phi(3, [zero, zero, story[b, i]], feats)
                        - phi(3, [zero, zero, story[b, j]], [0, 0, 0]))
                want = float(x @ U.T @ U @ diff)
                got = model.compare(g, t, x_time, torch.tensor([i] * 4),
                                    torch.tensor([j] * 4))[b]
                assert got.item() == pytest.approx(want, abs=1e-10)


def reference_choice(model, story, mask, query, b, facts, x_time):
    """Hop's choice for story b by the paper's definitions, one memory at a time."""
    n = int(mask[b].sum())
    if not model.config["time_features"]:
        scores = [s_ref(model, "O", [query[b], *facts], story[b, i]) for i in range(n)]
        return max(range(n), key=lambda i: (scores[i], -i))  # the first of equal maxima
    U = model.U("O").detach()
    blocks = model.hops + 1
    zero = torch.zeros(0, dtype=torch.int64)
    x = phi(blocks, [query[b], *facts] + [zero] * (blocks - 1 - len(facts)), [0, 0, 0])

    def s_ot(y, y2):
        feats = [float(x_time < y), float(x_time < y2), float(y < y2)]
        diff = (phi(blocks, [zero] * model.hops + [story[b, y]], feats)
                - phi(blocks, [zero] * model.hops + [story[b, y2]], [0, 0, 0]))
        return float(x @ U.T @ U @ diff)

    winner = 0
    for i in range(1, n):
        if s_ot(winner, i) < 0:
            winner = i
    return winner


@pytest.mark.parametrize("time_features", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_o_picks_its_chain_like_the_reference(time_features, seed):
    model, story, mask, query = model_and_batch(hops=3, time_features=time_features, seed=seed)
    with torch.no_grad():
        chosen = model.select(story, mask, query)
    for b in range(story.shape[0]):
        facts, x_time = [], NOT_OLDER
        for k in range(3):
            o = reference_choice(model, story, mask, query, b, facts, x_time)
            assert chosen[b, k].item() == o, (b, k)
            facts.append(story[b, o])
            x_time = o
        assert chosen[b].max() < mask[b].sum()  # never a padded memory


@pytest.mark.parametrize("time_features", [False, True])
def test_supporting_fact_loss_is_the_loop_of_margins(time_features):
    model, story, mask, query = model_and_batch(time_features=time_features)
    targets = torch.tensor([[4, 1], [0, 3], [2, 2], [0, -1]])  # the last lost its 2nd fact
    margin = 0.5
    got = model.o_loss(story, mask, query, targets, margin)
    memories = model.memories(story)
    total = 0.0
    for k in range(2):
        rows = []
        for b in range(story.shape[0]):
            if (targets[b, :k + 1] < 0).any():
                continue
            facts = [story[b, targets[b, h]] for h in range(k)]
            x_time = targets[b, k - 1] if k else NOT_OLDER
            g, t = model.o_terms(query[b:b + 1], [f[None] for f in facts], memories[b:b + 1])
            f, row = int(targets[b, k]), 0.0
            for j in range(int(mask[b].sum())):
                if j == f:
                    continue
                older, newer = min(f, j), max(f, j)
                s = model.compare(g, t, torch.tensor([x_time]), torch.tensor([older]),
                                  torch.tensor([newer])).item()
                row += max(0.0, margin - (s if f == older else -s))
            rows.append(row)
        total += sum(rows) / len(rows)
    assert got.item() == pytest.approx(total, rel=1e-10)
    got.backward()
    assert model.o_in[0].weight.grad.abs().sum() > 0


def test_answer_loss_is_the_loop_of_margins_over_the_sampled_words():
    model, story, mask, query = model_and_batch()
    chosen = torch.tensor([[2, 0], [1, 3], [0, 2], [0, 0]])
    r = model.r_input(story, query, chosen)
    answer = torch.tensor([3, 5, 5, 8])
    sampled = torch.tensor([[5, 2, 7], [5, 4, 4], [0, 1, 6], [8, 3, 2]])  # hits left out
    got = model.answer_loss(r, answer, num_sampled=3, sampler=None, margin=0.3,
                            sampled=sampled)
    W = model.answer_weight
    want = 0.0
    for b in range(4):
        pos = float(r[b].detach() @ W[answer[b]].detach())
        want += sum(max(0.0, 0.3 - pos + float(r[b].detach() @ W[w].detach())) for w in sampled[b].tolist()
                    if w != answer[b]) / 4
    assert got.item() == pytest.approx(want, rel=1e-10)
    exact = model.exact_answer_loss(r, answer, margin=0.3)
    want = 0.0
    for b in range(4):
        pos = float(r[b].detach() @ W[answer[b]].detach())
        want += sum(max(0.0, 0.3 - pos + float(r[b].detach() @ W[w].detach()))
                    for w in range(V) if w != answer[b]) / 4
    assert exact.item() == pytest.approx(want, rel=1e-10)


def test_hop_targets_follow_the_chain_and_repeat_its_last_fact():
    assert mm.hop_targets([4], 2) == [4, 4]
    assert mm.hop_targets([5, 2, 7], 2) == [5, 2]
    items = mm.encode([Story([["a"]] * 6, ["q"], "a", [1, 5])], mm.build_vocabulary(
        [Story([["a"]], ["q"], "a", [0])]))
    batch = mm.collate(items, memory_size=4, hops=3)
    assert batch.story.shape[1] == 4 and batch.targets.tolist() == [[-1, 3, 3]]


MEMNN_PEOPLE = ("mary", "john", "sandra")


def write_task(root, seed: int, stories: int) -> str:
    """`stories` training and half as many test stories of three questions, each after two
    moves (so the write-time comparisons are needed)."""
    return babi_files.write_task(root, train=stories, test=stories // 2, seed=seed,
                                 sentences=2, questions=3, people=MEMNN_PEOPLE)


@pytest.fixture(scope="module")
def tiny_babi(tmp_path_factory):
    return write_task(tmp_path_factory.mktemp("babi"), 0, 120)


def test_learns_a_tiny_task_perfectly(tiny_babi, tmp_path):
    res = mm.fit(dict(data=str(tiny_babi), task=1, embed_dim=16, epochs=8, progress=False,
                      device="cpu", checkpoint=str(tmp_path / "m.pt")), log=lambda m: None)
    assert len(res["data"]["test"]) == 180
    assert res["test"]["accuracy"] == 100.0 and res["test"]["support_hits"] == [100.0, 100.0]
    assert res["history"][-1]["valid_answer_loss"] < res["history"][0]["valid_answer_loss"]
    again = mm.evaluate_checkpoint(str(tmp_path / "m.pt"))
    assert again["accuracy"] == 100.0 and again["questions"] == 180


def test_fit_refuses_bad_options_by_name(tiny_babi, tmp_path):
    base = dict(data=str(tiny_babi), progress=False, checkpoint=str(tmp_path / "m.pt"))
    for change, message in [(dict(task=0), "task must be a bAbI task"),
                            (dict(margin=0.0), "margin must be a positive number"),
                            (dict(hops=0), "hops must be a positive integer"),
                            (dict(valid_fraction=1.0), "valid_fraction must be in [0, 1)"),
                            (dict(task=2), "does not exist")]:
        with pytest.raises((ValueError, FileNotFoundError), match=message.replace("[", r"\[")
                           .replace(")", r"\)")):
            mm.fit(dict(base, **change), log=lambda m: None)
    assert not (tmp_path / "m.pt").exists()


def test_a_split_that_leaves_nothing_to_train_on_is_refused(tmp_path):
    root = babi_files.write_task(tmp_path, train=2, test=1)  # 80% holds out both questions
    config = mm.TrainConfig(data=root, valid_fraction=0.8, checkpoint=str(tmp_path / "m.pt"))
    with pytest.raises(ValueError, match="2 training questions leave none to train on"):
        mm.load_data(config)
    with pytest.raises(ValueError, match="leave none to train on"):
        mm.fit(config, log=lambda m: None)
    assert not (tmp_path / "m.pt").exists()
    assert len(mm.load_data(mm.TrainConfig(data=root, valid_fraction=0.4))["train"]) == 1
