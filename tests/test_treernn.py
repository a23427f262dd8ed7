"""The Tree-RNN package (fastsoftmax.models.treernn): expressions (generator, parser, splits),
level-by-level batching against a per-node recursive reference in float64, the LSTM
baseline's independence from padding, training, and bad options."""

import random

import pytest
import torch
import torch.nn.functional as F

from fastsoftmax.models import treernn as tr
from test_hard_attention import one_thread  # noqa: F401 (autouse: one intra-op thread)


def python_value(text: str) -> int:
    """The expression's value mod 10 by Python's own integer arithmetic: mod 10 commutes with
    + - *, so reducing once at the end equals reducing at every node."""
    return eval(text) % 10  # the text is ours: digits, + - *, brackets and spaces only


# ---------------------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(5))
def test_generated_trees_round_trip_and_have_the_right_values(seed):
    trees = tr.generate(300, min_depth=1, max_depth=5, seed=seed)
    assert len({str(t) for t in trees}) == 300  # distinct
    assert all(1 <= t.depth <= 5 for t in trees)
    assert {t.depth for t in trees} >= {1, 2, 3, 4, 5}
    for t in trees:
        text = str(t)
        assert tr.parse(text) == t and tr.parse(text.replace(" ", "")) == t
        assert t.value == python_value(text)
        assert len(t.tokens()) == len(text.split())


def test_generation_is_seeded_and_splits_never_overlap():
    a = tr.make_task(500, 200, seed=3, max_depth=4)
    b = tr.make_task(500, 200, seed=3, max_depth=4)
    assert [str(t) for t in a["train"]] == [str(t) for t in b["train"]]
    assert (len(a["train"]), len(a["valid"]), len(a["test"])) == (450, 50, 200)
    splits = [{str(t) for t in a[k]} for k in ("train", "valid", "test")]
    assert sum(map(len, splits)) == len(set.union(*splits)) == 700
    other = tr.make_task(500, 200, seed=4, max_depth=4)
    assert [str(t) for t in other["test"]] != [str(t) for t in a["test"]]
    # Depth controls difficulty: only depth-3 trees when min = max = 3.
    assert {t.depth for t in tr.generate(50, min_depth=3, max_depth=3, seed=0)} == {3}


@pytest.mark.parametrize("text,message", [
    ("", "expected a digit or '(' at the end"),
    ("( 3 + )", "expected a digit or '(', found ')' at column 7"),
    ("3 4", "unexpected text after the expression at column 3"),
    ("( 3 + 4", "expected ')' at the end"),
    ("( 3 / 4 )", "expected an operator"),
    ("12", "unexpected text"),
    ("x", "found 'x' at column 1"),
    ("(" * 5000 + "1", "nested deeper than"),
])
def test_bad_expressions_are_one_clear_error(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        tr.parse(text)


@pytest.mark.parametrize("kw,message", [
    (dict(n=5, min_depth=3, max_depth=2), "min_depth ≤ max_depth"),
    (dict(n=5, leaf_p=1.0), "leaf_p must be in"),
    (dict(n=500, min_depth=1, max_depth=1), "could not draw 500 distinct expressions"),
])
def test_bad_generator_options(kw, message):
    with pytest.raises(ValueError, match=message):
        tr.generate(**kw)


def test_collate_groups_nodes_by_height():
    trees = [tr.parse("( 3 + 4 )"), tr.parse("( ( 1 * 2 ) - 5 )"), tr.parse("7")]
    b = tr.collate(trees)
    assert b.leaves.tolist() == [3, 4, 1, 2, 5, 7]
    assert len(b.levels) == 2 and b.roots.tolist() == [6, 8, 5]
    (ops1, l1, r1), (ops2, l2, r2) = b.levels
    assert ops1.tolist() == [0, 2] and l1.tolist() == [0, 2] and r1.tolist() == [1, 3]
    assert ops2.tolist() == [1] and l2.tolist() == [7] and r2.tolist() == [4]
    assert b.values.tolist() == [7, 7, 7]
    assert b.tokens.shape == (3, 9) and b.lengths.tolist() == [5, 9, 1]
    assert b.node_values.tolist() == [3, 4, 1, 2, 5, 7, 7, 2, 7]  # node order: by level
    assert b.token_values.tolist() == [[-1, 3, -1, 4, 7, -1, -1, -1, -1],
                                       [-1, -1, 1, -1, 2, 2, -1, 5, 7],
                                       [7, -1, -1, -1, -1, -1, -1, -1, -1]]
    with pytest.raises(ValueError, match="at least one tree"):
        tr.collate([])


# ---------------------------------------------------------------------------------------
# Level-by-level evaluation against a per-node recursive reference
# ---------------------------------------------------------------------------------------
def reference_vector(model, tree):
    """A node's vector from the model's parameters, one node at a time (recursion)."""
    if tree.op is None:
        return model.leaf.weight[tree.value]
    x = torch.cat([reference_vector(model, tree.left), reference_vector(model, tree.right)])
    h = torch.tanh(F.linear(x[None], model.W.weight, model.W.bias)[0]
                   + model.op.weight[tr.OPS.index(tree.op)])
    if model.W2 is not None:
        h = torch.tanh(F.linear(h[None], model.W2.weight, model.W2.bias)[0])
    return h


def exact_compose(op, left, right):
    """A composition whose float64 arithmetic is exact (small integers), so that the batched
    and the recursive evaluation must agree bit for bit whatever the summation order."""
    return (3 * left + 5 * right.flip(-1) + op[:, None]) % 1009


@pytest.mark.parametrize("layers", [1, 2])
def test_level_by_level_equals_the_recursive_reference(layers, monkeypatch):
    torch.manual_seed(0)
    model = tr.TreeRNN(16, layers=layers).double()
    trees = tr.generate(40, min_depth=0, max_depth=6, seed=1)
    trees.append(trees[3])  # the same tree twice in one batch
    batch = tr.collate(trees)
    got = model.features(batch)
    want = torch.stack([reference_vector(model, t) for t in trees])
    # A matrix product of N rows is blocked differently by BLAS than one of 1 row, so the
    # real composition agrees to float64 rounding (measured: at most 3.3e-16), not bit for bit.
    torch.testing.assert_close(got, want, rtol=0, atol=2e-15)
    # The batching itself (levels, child indices, roots) is exact: with an exactly computed
    # composition both ways give identical bits.
    with torch.no_grad():
        model.leaf.weight.copy_(torch.randint(0, 1009, model.leaf.weight.shape))
    monkeypatch.setattr(model, "compose", exact_compose)
    exact = model.features(batch)
    assert torch.equal(exact, torch.stack([model.encode_tree(t) for t in trees]))
    assert len(set(exact[:, 0].tolist())) > 20  # the vectors differ: a test that can fail
    # Gradients flow to every parameter through the levels.
    monkeypatch.undo()
    model(batch).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_a_tree_does_not_depend_on_its_batch():
    torch.manual_seed(0)
    trees = tr.generate(30, max_depth=5, seed=2)
    for model in (tr.TreeRNN(8).double(), tr.SequenceLSTM(8, embed_dim=4).double()):
        together = model.log_prob(tr.collate(trees))
        alone = torch.cat([model.log_prob(tr.collate([t])) for t in trees])
        torch.testing.assert_close(together, alone, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_node_targets_are_every_subexpression_value(seed):
    # Each ')' closes the subexpression that starts at its matching '(': its target is that
    # text's value; a digit's is the digit; the tree's node targets are the same multiset.
    for t in tr.generate(50, max_depth=5, seed=seed):
        toks, vals, opened = t.tokens(), t.token_values(), []
        for i, (tok, v) in enumerate(zip(toks, vals)):
            if tok == "(":
                opened.append(i)
            if tok == ")":
                assert v == python_value(" ".join(toks[opened.pop():i + 1]))
            assert v == (int(tok) if tok.isdigit() else v if tok == ")" else -1)
        b = tr.collate([t])
        assert sorted(b.node_values.tolist()) == sorted(v for v in vals if v >= 0)


def test_node_loss_covers_every_node():
    torch.manual_seed(0)
    trees = tr.generate(20, max_depth=4, seed=0)
    b = tr.collate(trees)
    for model in (tr.TreeRNN(8).double(), tr.SequenceLSTM(8, embed_dim=4).double()):
        model.eval()
        feats, targets = model.all_features(b)
        # k operations: 2k + 1 nodes, 4k + 1 tokens
        assert len(targets) == len(b.node_values) == sum((len(t.tokens()) - 1) // 2 + 1
                                                         for t in trees)
        want = -model.head.log_prob(feats).gather(1, targets[:, None]).mean()
        torch.testing.assert_close(model.node_loss(b), want)
    # The LSTM's state at a tree's last token is its root feature.
    lstm = tr.SequenceLSTM(8, embed_dim=4).double()
    feats, targets = lstm.all_features(b)
    # The root's ')' (or digit) is each row's last target.
    counts = (b.token_values >= 0).sum(1).cumsum(0) - 1
    torch.testing.assert_close(feats[counts], lstm.features(b))
    assert torch.equal(targets[counts], b.values)


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("model,output,supervise", [
    ("tree", "full", "root"), ("lstm", "full", "root"), ("tree", "sampled", "root"),
    ("tree", "full", "nodes"), ("lstm", "full", "nodes")])
def test_training_reduces_the_loss_on_a_tiny_set(model, output, supervise, tmp_path):
    res = tr.fit(dict(model=model, output=output, supervise=supervise, train_size=200, test_size=20,
                      valid_fraction=0.0, max_depth=2, epochs=15, batch_size=16, lr=1e-2,
                      hidden_size=32, progress=False, checkpoint=str(tmp_path / "t.pt")),
                 log=lambda m: None)
    first, last = res["history"][0]["train_loss"], res["history"][-1]["train_loss"]
    assert last < 0.6 * first, res["history"]
    train = tr.evaluate(res["model"], res["data"]["train"])
    assert train["accuracy"] > 50.0  # chance: 10%


@pytest.mark.parametrize("kw,message", [
    (dict(model="gru"), "unknown model 'gru'"),
    (dict(hidden_size=0), "hidden_size must be a positive"),
    (dict(lr=float("nan")), "lr must be a positive number"),
    (dict(clip=-1.0), "clip must be"),
    (dict(output="softmax"), "unknown output 'softmax'"),
    (dict(layers=3), "layers must be 1 or 2"),
    (dict(supervise="leaves"), "unknown supervise 'leaves'"),
])
def test_bad_options_are_one_sentence(kw, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        tr.fit(dict(dict(train_size=20, test_size=5, epochs=1, progress=False,
                         checkpoint=str(tmp_path / "x.pt")), **kw), log=lambda m: None)
    assert not (tmp_path / "x.pt").exists()


def test_random_tree_respects_max_depth():
    rng = random.Random(0)
    assert all(tr.random_tree(rng, d).depth <= d for d in range(6) for _ in range(50))
