"""End-to-end memory networks (fastsoftmax.models.memn2n, python -m fastsoftmax.cli.memn2n).

The generator is checked against an interpreter written here from the stories' text alone;
the model against a plain re-statement of the paper's equations in float64, with gradcheck;
training on a small single-fact task must get far above chance.
"""

import math
import os

import pytest
import torch
from test_lm import one_thread  # noqa: F401 (autouse: one intra-op thread)

from fastsoftmax.models import MemN2N, memn2n as mn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUMBERS = ("none", "one", "two", "three")


# ---------------------------------------------------------------------------------------
# The generator: deterministic, and its answers follow from the story
# ---------------------------------------------------------------------------------------
def interpret(sentences, question, strict=True):
    """The answer a reader gets from `sentences` (word lists): people's places, what each
    carries, where dropped things lie. Verbs are told apart by their words only. `strict`
    also checks the world's rules (no one takes what is carried or drops what he lacks);
    without it, a story cut down to its supporting facts is read as it stands."""
    where, carried, lying = {}, {}, {}
    for words in sentences:
        text = " ".join(words).rstrip(" .")
        person, thing = words[0], text.split(" the ")[-1]
        verb = text[len(person) + 1: -len(thing) - 5]
        if verb in mn.data.MOVE:
            where[person] = thing
        elif verb in mn.data.GRAB:
            assert not strict or thing not in carried, f"{thing} taken while carried: {text}"
            carried[thing] = person
            lying.pop(thing, None)
        elif verb in mn.data.DROP:
            holder = carried.pop(thing, None)
            assert not strict or holder == person, f"{person} drops what he lacks: {text}"
            lying[thing] = where.get(person)
        else:
            raise AssertionError(f"unknown sentence {text!r}")
    q = question[:-1]
    if q[:3] == ["where", "is", "the"]:
        thing = q[3]
        return where[carried[thing]] if thing in carried else lying[thing]
    if q[:2] == ["where", "is"]:
        return where[q[2]]
    if q[0] == "is":
        return "yes" if where.get(q[1]) == q[4] else "no"
    assert q[:3] == ["how", "many", "objects"]
    return NUMBERS[sum(1 for p in carried.values() if p == q[4])]


@pytest.mark.parametrize("task", mn.TASKS)
def test_answers_follow_from_the_story_and_from_its_supporting_facts(task):
    world = mn.World(entities=3, locations=4, objects=3, distractors=6)
    stories = mn.generate(task, 300, seed=3, world=world)
    for s in stories:
        assert interpret(s.sentences, s.question) == s.answer
        assert len(s.sentences) - len(s.support) == world.distractors
        assert s.support and len(set(s.support)) == len(s.support)
        assert s.chain == (task == "two")
        if task == "two":  # read in order: the object's fact, then its carrier's move
            first, then = (s.sentences[i] for i in s.support)
            assert first[-2] == s.question[3] and then[0] == first[0]
            assert " ".join(then[1:-3]) in mn.data.MOVE
        facts = [s.sentences[i] for i in sorted(s.support)]
        assert interpret(facts, s.question, strict=False) == s.answer
        # For where-questions no fewer sentences would do: without any one fact the answer is
        # lost or changes. (A count needs each grab and drop, but a lost grab-drop pair, or a
        # "no" without its fact, can leave the answer as it was.)
        for drop in range(len(facts) if task in ("single", "two") else 0):
            try:
                rest = interpret(facts[:drop] + facts[drop + 1:], s.question, strict=False)
            except KeyError:
                continue
            assert rest != s.answer, (s, drop)
    answers = {s.answer for s in stories}
    assert answers <= set(mn.answer_words(task, world)) and len(answers) >= 2


def test_generator_is_deterministic_and_train_test_are_apart():
    a = mn.generate("two", 50, seed=7)
    b = mn.generate("two", 50, seed=7)
    c = mn.generate("two", 50, seed=8)
    assert [(s.sentences, s.question, s.answer, s.support) for s in a] == \
        [(s.sentences, s.question, s.answer, s.support) for s in b]
    assert [s.sentences for s in a] != [s.sentences for s in c]
    split = mn.make_task("single", train_size=200, test_size=100, seed=1,
                         world=mn.World(entities=2, locations=3, distractors=1))
    key = lambda s: (tuple(map(tuple, s.sentences)), tuple(s.question))  # noqa: E731
    assert len(split["train"]) == 180 and len(split["valid"]) == 20 and len(split["test"]) == 100
    assert not {key(s) for s in split["test"]} & {key(s) for s in split["train"] + split["valid"]}


def test_world_options_shape_the_stories():
    world = mn.World(entities=12, locations=3, distractors=0)
    stories = mn.generate("single", 200, seed=0, world=world)
    assert all(len(s.sentences) == 1 for s in stories)
    people = {s.sentences[0][0] for s in stories}
    places = {s.answer for s in stories}
    assert len(people) == 12 and "person12" in people and len(places) == 3
    vocab = mn.build_vocabulary("single", world)
    assert vocab.itos[0] == mn.PAD and all(w in vocab.stoi for s in stories for w in
                                           sum(s.sentences, s.question))
    with pytest.raises(ValueError, match="locations must be an integer ≥ 2"):
        mn.generate("single", 1, seed=0, world=mn.World(locations=1))
    with pytest.raises(ValueError, match="task must be one of"):
        mn.generate("three", 1, seed=0)


def test_noise_inserts_empty_memories_and_keeps_supporting_facts():
    import random

    item = ([[5, 6], [7], [8, 9], [10]], [3], 1, [(0, 1), (2, 2)])
    out = mn.add_noise(item, 0.9, random.Random(0))
    sentences, _, _, support = out
    assert [w for w in sentences if w] == item[0] and len(sentences) > 4
    assert [(sentences[i], r) for i, r in support] == [([5, 6], 1), ([8, 9], 2)]
    b = mn.collate([out, item], memory_size=50)
    assert b.mask[0].sum() == len(sentences) and b.mask[1].sum() == 4
    assert b.story[1, 2].tolist()[:2] == [8, 9]
    assert b.support[1, :4].tolist() == [1, 0, 2, 0] and not b.support[1, 4:].any()
    # Keeping only the latest memories drops the oldest sentences, and their facts.
    small = mn.collate([item], memory_size=2)
    assert small.story.shape[1] == 2 and small.support[0].tolist() == [2, 0]


# ---------------------------------------------------------------------------------------
# The model against the paper's equations
# ---------------------------------------------------------------------------------------
def reference_features(model, story, mask, query):
    """Sukhbaatar et al. §2 written out story by story, sentence by sentence, in float64."""
    cfg = model.config
    D, out, attention = cfg["embed_dim"], [], [[] for _ in range(cfg["hops"])]

    def sentence(E, words):
        words = [w for w in words.tolist() if w != 0]
        J, vec = len(words), torch.zeros(D, dtype=torch.float64)
        for j, w in enumerate(words, 1):
            k = torch.arange(1, D + 1, dtype=torch.float64)
            l = (1 - j / J) - (k / D) * (1 - 2 * j / J)  # noqa: E741
            vec = vec + l * E.weight[w]
        return vec

    for b in range(story.shape[0]):
        n = int(mask[b].sum())
        u = sentence(model.embeddings[0], query[b])
        for hop in range(cfg["hops"]):
            a, c = (hop, hop + 1) if cfg["tying"] == "adjacent" else (1, 2)
            m, cm = (torch.stack([sentence(model.embeddings[e], story[b, i])
                                  + model.temporal[e][n - 1 - i] for i in range(n)])
                     for e in (a, c))
            p = torch.softmax(m @ u, 0)
            u = (model.H(u) if cfg["tying"] == "layerwise" else u) + p @ cm
            attention[hop].append(p)
        out.append(u)
    return torch.stack(out), attention


def tiny_batch(seed=0, task="two"):
    world = mn.World(entities=3, locations=4, objects=3, distractors=4)
    stories = mn.generate(task, 6, seed=seed, world=world)
    vocab = mn.build_vocabulary(task, world)
    items = mn.encode(stories, vocab, mn.answer_words(task, world))
    return mn.collate(items, memory_size=10), vocab, world


@pytest.mark.parametrize("tying", mn.TYINGS)
def test_model_matches_the_equations_in_float64(tying):
    b, vocab, _ = tiny_batch()
    torch.manual_seed(0)
    model = MemN2N(len(vocab), 4, embed_dim=6, hops=3, memory_size=10, tying=tying).double()
    u, attention = model.features(b.story, b.mask, b.query)
    ref_u, ref_att = reference_features(model, b.story, b.mask, b.query)
    torch.testing.assert_close(u, ref_u)
    assert len(attention) == 3
    for p, ref in zip(attention, ref_att):
        assert p.shape == b.mask.shape
        torch.testing.assert_close(p.sum(1), torch.ones(len(b), dtype=torch.float64))
        assert (p[~b.mask] == 0).all()
        for i, r in enumerate(ref):
            torch.testing.assert_close(p[i, : r.numel()], r)
    n_embeddings = 4 if tying == "adjacent" else 3
    assert len(model.embeddings) == n_embeddings and (model.H is None) == (tying == "adjacent")


def test_attention_and_position_encoding_gradcheck():
    torch.manual_seed(1)
    u = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    m_in = torch.randn(3, 5, 4, dtype=torch.float64, requires_grad=True)
    m_out = torch.randn(3, 5, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.bool)
    for linear in (False, True):
        assert torch.autograd.gradcheck(lambda *t: mn.attend(*t, mask, linear)[:2],
                                        (u, m_in, m_out))
    o, p, _ = mn.attend(u, m_in, m_out, mask, linear=True)
    torch.testing.assert_close(p, torch.einsum("bd,bmd->bm", u, m_in) * mask)
    words = torch.tensor([[4, 5, 6, 0], [7, 0, 0, 0]])
    enc = mn.position_encoding(words, 3, torch.float64)
    assert enc.shape == (2, 4, 3) and (enc[0, 3] == 0).all() and (enc[1, 1:] == 0).all()
    # J = 3, j = 2, k = 1: (1 - 2/3) - (1/3)(1 - 4/3)
    assert enc[0, 1, 0].item() == pytest.approx(1 / 3 + 1 / 9)


@pytest.mark.parametrize("tying", mn.TYINGS)
def test_whole_model_gradcheck_through_the_head(tying):
    b, vocab, _ = tiny_batch(seed=2, task="single")
    torch.manual_seed(0)
    model = MemN2N(len(vocab), 4, embed_dim=3, hops=2, memory_size=8, tying=tying).double()
    names = [n for n, _ in model.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_() for p in model.parameters())

    def loss(*values):
        state = dict(zip(names, values))
        return torch.func.functional_call(model, state, (b.story, b.mask, b.query, b.answer))[0]

    assert torch.autograd.gradcheck(loss, params, fast_mode=True)


def test_padding_changes_nothing_and_loss_is_exact_cross_entropy():
    b, vocab, _ = tiny_batch(seed=4)
    torch.manual_seed(0)
    model = MemN2N(len(vocab), 4, embed_dim=8, memory_size=12).double().eval()
    u, _ = model.features(b.story, b.mask, b.query)
    def pad(t, n, dim):
        return torch.cat([t, t.new_zeros(t.shape[:dim] + (n,) + t.shape[dim + 1:])], dim)

    u2, att2 = model.features(pad(pad(b.story, 2, 1), 3, 2), pad(b.mask, 2, 1), pad(b.query, 2, 1))
    torch.testing.assert_close(u, u2)
    assert all((p[:, -2:] == 0).all() for p in att2)
    logits = u @ model.head.linear_weight.T
    loss, _ = model(b.story, b.mask, b.query, b.answer)
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(logits, b.answer))
    torch.testing.assert_close(model.log_prob(b.story, b.mask, b.query),
                               torch.log_softmax(logits, -1))


@pytest.mark.parametrize("output", ["full", "sampled", "nce", "hs"])
def test_heads_over_the_whole_vocabulary(output):
    b, vocab, _ = tiny_batch(seed=5)
    answers = b.answer + 10  # any word ids: the classes are the vocabulary
    torch.manual_seed(0)
    model = MemN2N(len(vocab), len(vocab), embed_dim=8, memory_size=10, output=output,
                   num_sampled=5, counts=torch.ones(len(vocab)))
    loss, attention = model.train()(b.story, b.mask, b.query, answers)
    loss.backward()
    assert math.isfinite(loss.item()) and model.embeddings[0].weight.grad is not None
    model.eval()
    log_p = model.log_prob(b.story, b.mask, b.query)
    assert log_p.shape == (len(b), len(vocab))
    torch.testing.assert_close(log_p.exp().sum(1), torch.ones(len(b)))
    exact, _ = model(b.story, b.mask, b.query, answers)
    torch.testing.assert_close(exact, -log_p.gather(1, answers[:, None]).mean())


def test_bad_model_options():
    with pytest.raises(ValueError, match="tying must be one of"):
        MemN2N(10, 3, tying="rnn")
    with pytest.raises(ValueError, match="output must be one of"):
        MemN2N(10, 3, output="softmax")
    with pytest.raises(ValueError, match="needs the answers' training counts"):
        MemN2N(10, 8, output="sampled", num_sampled=2)
    with pytest.raises(ValueError, match="hops must be a positive int"):
        MemN2N(10, 3, hops=0)
    with pytest.raises(ValueError, match=r"num_sampled \(16\) must be smaller than num_classes"):
        MemN2N(10, 4, output="sampled", num_sampled=16, counts=torch.ones(4))


def test_support_loss_is_minus_log_mass_on_each_hops_facts():
    # Story 0: facts of one rank (a set); story 1: a chain, fact 1 then fact 2; story 2 knows
    # no fact and is left out.
    scores = [torch.tensor([[1.0, 2.0, 0.5, -math.inf], [0.0, 0.5, 3.0, 1.0],
                            [0.0, 0.0, 3.0, 1.0]]) * (k + 1) for k in range(3)]
    support = torch.tensor([[1, 0, 1, 0], [0, 2, 1, 0], [0, 0, 0, 0]])
    expected = 0.0
    for k, s in enumerate(scores):
        p0, p1 = torch.softmax(s[0], 0), torch.softmax(s[1], 0)
        chain = 2 if k == 0 else 1  # hop 1 → fact 1 (memory 2); hops 2, 3 → fact 2 (memory 1)
        expected += (-torch.log(p0[0] + p0[2]) - torch.log(p1[chain])) / 2
    torch.testing.assert_close(mn.support_loss(scores, support), expected / 3)


# ---------------------------------------------------------------------------------------
# Training, checkpoints, resume
# ---------------------------------------------------------------------------------------
SMALL = dict(task="single", entities=3, locations=4, distractors=2, train_size=500,
             test_size=200, epochs=5, embed_dim=16, linear_start=0, anneal_every=4,
             batch_size=16, progress=False, force=True)


def test_linear_start_drops_the_softmax_for_the_first_epochs_only(tmp_path):
    res = mn.fit(dict(SMALL, train_size=200, test_size=50, epochs=4, linear_start=2,
                      checkpoint=str(tmp_path / "ls.pt")), log=lambda *a: None)
    linear = [h["linear"] for h in res["history"]]
    assert linear[0] and not any(linear[2:])  # at most 2 epochs, fewer once valid loss stalls


def test_linear_start_validates_the_linear_model(tmp_path):
    res = mn.fit(dict(SMALL, train_size=200, test_size=50, epochs=2, linear_start=2,
                      linear_fixed=True, checkpoint=str(tmp_path / "ls.pt")),
                 log=lambda *a: None)
    valid = res["data"]["encoded"]["valid"]
    linear = mn.evaluate(res["model"], valid, linear=True)["loss"]
    assert res["history"][-1]["linear"]
    assert res["history"][-1]["valid_loss"] == pytest.approx(linear, rel=1e-6)
    assert mn.evaluate(res["model"], valid)["loss"] != pytest.approx(linear, rel=1e-3)


def test_fixed_linear_start_runs_its_epochs_and_delays_the_annealing(tmp_path):
    # A learning rate so large the valid loss rises: the paper's rule would end linear start
    # after epoch 1; fixed, it lasts its 3 epochs and the halving starts after them. (All
    # gradients clipped together: per matrix, these steps happen to lower the loss.)
    base = dict(SMALL, train_size=200, test_size=50, epochs=5, linear_start=3, anneal_every=1,
                optimizer="sgd", lr=50.0, clip_style="global")
    rows = {}
    for fixed in (False, True):
        res = mn.fit(dict(base, linear_fixed=fixed, checkpoint=str(tmp_path / f"{fixed}.pt")),
                     log=lambda *a: None)
        rows[fixed] = res["history"]
    assert [h["linear"] for h in rows[True]] == [True, True, True, False, False]
    assert [h["lr"] for h in rows[True]] == [50.0, 50.0, 50.0, 50.0, 25.0]
    assert [h["lr"] for h in rows[False]] == [50.0, 25.0, 12.5, 6.25, 3.125]
    assert not all(h["linear"] for h in rows[False][:3])


def test_supporting_facts_option_trains_the_attention(tmp_path):
    base = dict(SMALL, train_size=300, test_size=100, epochs=2,
                checkpoint=str(tmp_path / "a.pt"))
    plain = mn.fit(base, log=lambda *a: None)
    sup = mn.fit(dict(base, supporting_facts=True, checkpoint=str(tmp_path / "b.pt")),
                 log=lambda *a: None)
    # The same data, initialisation and batches: only the extra loss differs.
    assert sup["test"]["support_hits"] > plain["test"]["support_hits"] + 5  # seed 0: 38 → 58%


@pytest.mark.parametrize("output", ["full", "sampled"])
def test_resume_matches_uninterrupted_training(tmp_path, output):
    kw = dict(SMALL, train_size=200, test_size=50, epochs=2, answers="vocabulary",
              output=output, num_sampled=4)
    full = mn.fit(dict(kw, checkpoint=str(tmp_path / "full.pt")), log=lambda *a: None)
    mn.fit(dict(kw, epochs=1, checkpoint=str(tmp_path / "half.pt")), log=lambda *a: None)
    lines = []
    resumed = mn.fit(dict(resume=str(tmp_path / "half.pt"), epochs=2), given={"epochs"},
                     log=lines.append)
    assert any(line.startswith(f"resuming {tmp_path / 'half.pt'}: 1 epochs done") for line in lines)
    for a, b in zip(full["model"].state_dict().values(), resumed["model"].state_dict().values()):
        torch.testing.assert_close(a, b)
    assert resumed["config"].output == output
