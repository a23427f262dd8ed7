"""Seq2Seq: learning tiny tasks, search, masking, batch independence, checkpoints, CLI, errors."""

import math
import random

import pytest
import torch

from fastsoftmax.models import seq2seq as s2s
from fastsoftmax.models import Seq2Seq
from fastsoftmax.models.seq2seq import (
    EOS, PAD, Batch, build_vocabulary, corpus_bleu, decode_output, parse_pairs, tokenize)


TASKS = {
    "copy": lambda s: s,
    "reverse": lambda s: s[::-1],
    "sort": lambda s: "".join(sorted(s)),
}


def make_pairs(kind, n=1200, max_len=5, seed=0, alphabet="012345"):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, max_len)))
        out.append((s, TASKS[kind](s)))
    return out


def tiny_data(kind, **kw):
    return s2s.split_task(make_pairs(kind, **kw), "chars", valid_fraction=0.15, seed=0)


SETTINGS = {
    "attention": "general",
    "embed_dim": 16,
    "hidden_size": 96,
    "epochs": 10,
    "batch_size": 16,
    "lr": 3e-3,
    "seed": 0,
}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """These tiny models gain nothing from more threads, and on a busy machine spinning OpenMP
    workers slow them down several times."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def fit(settings, folder, **kw):
    """fit() as the tests use it: no progress bar, no log, the checkpoint in `folder`."""
    config = dict(settings, progress=False)
    config.setdefault("checkpoint", str(folder / "run.pt"))
    return s2s.fit(config, log=lambda m: None, **kw)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One model per task, trained once and shared by the tests below (about 10 s each)."""
    return {
        k: fit(SETTINGS, tmp_path_factory.mktemp(k), data=tiny_data(k), eval_every=100)
        for k in TASKS
    }


@pytest.mark.parametrize("kind", list(TASKS))
def test_learns_tiny_task_exactly(trained, kind):
    res = trained[kind]
    assert res["history"][-1]["exact"] == 100.0, res["history"][-1]


def test_fit_returns_the_held_out_scores_as_its_test(trained):
    res = trained["reverse"]
    d = res["data"]
    assert set(res) == {"model", "history", "test", "data", "config", "checkpoint"}
    fresh = s2s.evaluate(res["model"], d["valid_pairs"], d["valid"], d["task"], d["tgt_vocab"])
    assert res["test"] == dict(loss=pytest.approx(fresh["loss"], rel=1e-12),
                               exact=fresh["exact"], pairs=len(d["valid_pairs"]))
    assert res["test"]["exact"] == res["history"][-1]["exact"]


def test_beam_search_on_trained_model(trained):
    res = trained["reverse"]
    d = res["data"]
    ev = s2s.evaluate(
        res["model"], d["valid_pairs"], d["valid"], "chars", d["tgt_vocab"], beam_size=4
    )
    assert ev["exact"] == 100.0


def random_batch(vocab=11, lengths=(5, 1, 7, 3), tgt_lengths=(4, 2, 6, 1), seed=0):
    g = torch.Generator().manual_seed(seed)
    ex = [
        (
            torch.randint(4, vocab, (s,), generator=g).tolist(),
            torch.randint(4, vocab, (t,), generator=g).tolist(),
        )
        for s, t in zip(lengths, tgt_lengths)
    ]
    return ex, Batch(ex)


VARIANTS = [
    {"attention": "dot"},
    {"attention": "general", "bidirectional": True},
    {"attention": "concat", "reverse_source": True, "num_layers": 2},
    {"attention": None},
    {"attention": None, "peeky": True, "reverse_source": True},
    {"attention": "general", "peeky": True, "bidirectional": True, "reverse_source": True},
]


def make_model(seed=0, **kw):
    torch.manual_seed(seed)
    return Seq2Seq(11, 13, embed_dim=8, hidden_size=16, **kw).eval()


@pytest.mark.parametrize("kw", VARIANTS, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_beam_one_equals_greedy(kw):
    model = make_model(**kw)
    _, b = random_batch()
    greedy, gscore, _ = model.greedy(b.src, b.src_len, max_len=12)
    beam, bscore = model.beam_search(b.src, b.src_len, beam_size=1, max_len=12, alpha=0.0)
    assert torch.equal(greedy, beam)
    torch.testing.assert_close(gscore, bscore)


@pytest.mark.parametrize("kw", VARIANTS, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_results_do_not_depend_on_batch_composition(kw):
    model = make_model(**kw)
    ex, b = random_batch()
    full_lp = model.log_prob(b.src, b.src_len, b.tgt_in)
    full_greedy = model.greedy(b.src, b.src_len, max_len=10)[0]
    full_beam = model.beam_search(b.src, b.src_len, beam_size=3, max_len=10)[0]
    for i, e in enumerate(ex):
        one = Batch([e])
        T = one.tgt_in.shape[1]
        lp = model.log_prob(one.src, one.src_len, one.tgt_in)
        torch.testing.assert_close(lp[0], full_lp[i, :T], atol=1e-5, rtol=1e-5)
        g = model.greedy(one.src, one.src_len, max_len=10)[0][0]
        assert g.tolist() == full_greedy[i, : len(g)].tolist()
        assert (full_greedy[i, len(g) :] == PAD).all()
        bm = model.beam_search(one.src, one.src_len, beam_size=3, max_len=10)[0][0]
        assert bm.tolist() == full_beam[i, : len(bm)].tolist()
        assert (full_beam[i, len(bm) :] == PAD).all()


@pytest.mark.parametrize("attention", ["dot", "general", "concat"])
def test_padding_gets_zero_attention(attention):
    model = make_model(attention=attention, bidirectional=True, reverse_source=True)
    _, b = random_batch()
    w = model.attention_weights(b.src, b.src_len, b.tgt_in)
    S = b.src.shape[1]
    pad = torch.arange(S)[None, :] >= b.src_len[:, None]
    assert pad.any()
    assert (w.masked_select(pad[:, None, :].expand_as(w)) == 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:2]))
    assert (w.masked_select(~pad[:, None, :].expand_as(w)) > 0).all()
    _, _, greedy_w = model.greedy(b.src, b.src_len, max_len=6)
    assert (greedy_w.masked_select(pad[:, None, :].expand_as(greedy_w)) == 0).all()


def test_reversal_keeps_padding_in_place():
    x = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0], [6, 7, 8, 9]])
    r = Seq2Seq._reverse_within_length(x, torch.tensor([3, 2, 4]))
    assert r.tolist() == [[3, 2, 1, 0], [5, 4, 0, 0], [9, 8, 7, 6]]


def test_reverse_source_changes_what_the_encoder_reads():
    _, b = random_batch()
    torch.manual_seed(0)
    fwd = Seq2Seq(11, 13, embed_dim=8, hidden_size=16, attention=None).eval()
    torch.manual_seed(0)
    rev = Seq2Seq(11, 13, embed_dim=8, hidden_size=16, attention=None, reverse_source=True).eval()
    flipped = Seq2Seq._reverse_within_length(b.src, b.src_len)
    torch.testing.assert_close(
        rev.log_prob(b.src, b.src_len, b.tgt_in), fwd.log_prob(flipped, b.src_len, b.tgt_in)
    )
    assert not torch.allclose(
        rev.log_prob(b.src, b.src_len, b.tgt_in), fwd.log_prob(b.src, b.src_len, b.tgt_in)
    )


def test_training_loss_is_exact_cross_entropy_for_full_head():
    model = make_model(attention="concat")
    _, b = random_batch()
    lp = model.log_prob(b.src, b.src_len, b.tgt_in)
    keep = b.tgt_out != PAD
    expected = -lp.gather(-1, b.tgt_out[..., None]).squeeze(-1)[keep].mean()
    torch.testing.assert_close(model(b.src, b.src_len, b.tgt_in, b.tgt_out), expected)


def test_beam_search_length_normalisation_picks_by_mean_log_prob():
    model = make_model(attention="general", seed=3)
    _, b = random_batch()
    for alpha in (0.0, 1.0):
        tokens, score = model.beam_search(b.src, b.src_len, beam_size=4, max_len=12, alpha=alpha)
        # Rescore the chosen outputs by teacher forcing: score == sum log p / len**alpha.
        rows = []
        for row in tokens.tolist():
            n = row.index(EOS) + 1 if EOS in row else len(row)
            rows.append(row[:n])
        T = max(len(r) for r in rows)
        tgt_in = torch.full((len(rows), T), PAD)
        tgt_out = torch.full((len(rows), T), PAD)
        for i, r in enumerate(rows):
            tgt_in[i, 0] = 2
            tgt_in[i, 1 : len(r)] = torch.tensor(r[:-1])
            tgt_out[i, : len(r)] = torch.tensor(r)
        lp = model.log_prob(b.src, b.src_len, tgt_in).gather(-1, tgt_out[..., None]).squeeze(-1)
        total = (lp * (tgt_out != PAD)).sum(1)
        lens = torch.tensor([float(len(r)) for r in rows])
        torch.testing.assert_close(score, total / lens.pow(alpha), atol=1e-4, rtol=1e-4)


# -- sampled head ----------------------------------------------------------------------------
def test_sampled_and_full_agree_in_eval_mode():
    torch.manual_seed(0)
    counts = torch.arange(1, 51, dtype=torch.float64)
    sampled = Seq2Seq(
        11,
        50,
        embed_dim=8,
        hidden_size=16,
        attention="general",
        output="sampled",
        num_sampled=8,
        counts=counts,
    )
    full = Seq2Seq(11, 50, embed_dim=8, hidden_size=16, attention="general", output="full")
    state = {k: v for k, v in sampled.state_dict().items() if not k.startswith("head.")}
    full.load_state_dict(state, strict=False)
    full.head.linear_weight.data.copy_(sampled.head.linear_weight.data)
    full.head.linear_bias.data.copy_(sampled.head.linear_bias.data)
    _, b = random_batch(vocab=11)
    b.tgt_out.clamp_(max=49)
    sampled.eval()
    full.eval()
    torch.testing.assert_close(
        sampled(b.src, b.src_len, b.tgt_in, b.tgt_out), full(b.src, b.src_len, b.tgt_in, b.tgt_out)
    )
    torch.testing.assert_close(
        sampled.log_prob(b.src, b.src_len, b.tgt_in), full.log_prob(b.src, b.src_len, b.tgt_in)
    )
    assert torch.equal(sampled.greedy(b.src, b.src_len, 8)[0], full.greedy(b.src, b.src_len, 8)[0])
    # Training mode: the sampled loss differs from the exact one but trains.
    sampled.train()
    loss = sampled(b.src, b.src_len, b.tgt_in, b.tgt_out)
    assert torch.isfinite(loss)
    loss.backward()
    assert sampled.head.linear_weight.grad is not None


def test_sampled_checkpoint_round_trip(tmp_path):
    data = tiny_data("copy", n=200)
    ck = tmp_path / "s.pt"
    res = fit(dict(SETTINGS, epochs=1, output="sampled", num_sampled=4, checkpoint=str(ck)),
              tmp_path, data=data)
    model, *_ = s2s.model_from_checkpoint(s2s.load_checkpoint(str(ck)))
    _, b = random_batch(vocab=len(data["src_vocab"]))
    torch.testing.assert_close(
        model.log_prob(b.src, b.src_len, b.tgt_in),
        res["model"].eval().log_prob(b.src, b.src_len, b.tgt_in),
    )


# -- checkpoints -----------------------------------------------------------------------------
def test_resume_matches_uninterrupted_training(tmp_path):
    data = tiny_data("reverse", n=200)
    settings = dict(SETTINGS, hidden_size=16, epochs=2)
    straight = fit(settings, tmp_path, data=data)
    ck = str(tmp_path / "m.pt")
    fit(dict(settings, epochs=1, checkpoint=ck), tmp_path, data=data)
    torch.manual_seed(999)  # whatever happens in between must not matter
    resumed = fit(dict(settings, epochs=2, resume=ck, checkpoint=ck), tmp_path, data=data)
    assert [h["epoch"] for h in resumed["history"]] == [1, 2]
    for (k, a), (_, c) in zip(
        straight["model"].state_dict().items(), resumed["model"].state_dict().items()
    ):
        torch.testing.assert_close(a, c, msg=k)
    assert s2s.load_checkpoint(ck)["epoch"] == 2
    # resumed at its end, no epoch trains: the held-out scores are the same model's, scored anew
    again = fit(dict(settings, epochs=2, resume=ck, checkpoint=ck), tmp_path, data=data)
    assert again["history"] == resumed["history"]
    assert again["test"] == dict(resumed["test"], loss=pytest.approx(resumed["test"]["loss"]))


def test_a_checkpoint_of_the_old_layout_loads_and_resumes(tmp_path):
    """Checkpoints written before seq2seq took the shared entries held the model as one
    entry (config, counts, state_dict): they still load, and resuming one writes the shared
    entries (model_config, model, counts)."""
    from fastsoftmax.models import checkpoints
    from fastsoftmax.models.checkpoints import rng_state

    data = tiny_data("copy", n=120)
    settings = dict(SETTINGS, hidden_size=8, embed_dim=4, output="sampled", num_sampled=4)
    ck = str(tmp_path / "new.pt")
    res = fit(dict(settings, epochs=1, checkpoint=ck), tmp_path, data=data)
    new = s2s.load_checkpoint(ck)
    assert {"model_config", "model", "counts", "src_vocab", "tgt_vocab"} <= set(new)
    old = str(tmp_path / "old.pt")
    checkpoints.save_checkpoint(old, "seq2seq", dict(
        model=res["model"].state(), optimizer=new["optimizer"], epoch=1, history=new["history"],
        train_config=new["train_config"], src_vocab=new["src_vocab"],
        tgt_vocab=new["tgt_vocab"], rng=rng_state()))
    model, src_vocab, tgt_vocab = s2s.model_from_checkpoint(s2s.load_checkpoint(old))
    assert src_vocab.itos == data["src_vocab"].itos and tgt_vocab.itos == data["tgt_vocab"].itos
    _, b = random_batch(vocab=len(data["src_vocab"]))
    torch.testing.assert_close(model.log_prob(b.src, b.src_len, b.tgt_in),
                               res["model"].eval().log_prob(b.src, b.src_len, b.tgt_in))
    fit(dict(settings, epochs=2, resume=old, checkpoint=old), tmp_path, data=data)
    resumed = s2s.load_checkpoint(old)
    assert resumed["epoch"] == 2 and resumed["model_config"] == new["model_config"]


# -- data, BLEU ------------------------------------------------------------------------------
def test_parse_pairs_formats():
    assert parse_pairs(["Go.\tVa !", "Hi.\tSalut !\tCC-BY attribution"], "pairs") == [
        ("Go.", "Va !"),
        ("Hi.", "Salut !"),
    ]
    assert parse_pairs(["16+75  _91  ", "a_b_c"], "chars") == [("16+75", "91"), ("a", "b_c")]
    assert parse_pairs(["one two three\tun", "a\tb"], "pairs", max_words=2) == [("a", "b")]
    assert tokenize("Il est l\u00e0\u202f! J'ai faim.", "pairs") == [
        "il",
        "est",
        "là",
        "!",
        "j'ai",
        "faim",
        ".",
    ]
    assert tokenize("ab c", "chars") == ["a", "b", " ", "c"]


@pytest.mark.parametrize(
    "lines,task,match",
    [
        (["a\tb", "", "c\td"], "pairs", r"<input>:2: empty line"),
        (["a\tb", "no tab here"], "pairs", r"<input>:2: no TAB"),
        (["abc"], "chars", r"<input>:1: no '_'"),
        (["\tb"], "pairs", r"empty source"),
        (["a_"], "chars", r"empty target"),
    ],
)
def test_bad_input_lines(lines, task, match):
    with pytest.raises(ValueError, match=match):
        parse_pairs(lines, task)


def test_bad_options():
    with pytest.raises(ValueError, match="unknown attention 'bahdanau'"):
        Seq2Seq(5, 5, attention="bahdanau")
    with pytest.raises(ValueError, match="unknown output 'hierarchical'"):
        Seq2Seq(5, 5, output="hierarchical")
    with pytest.raises(ValueError, match="even hidden_size"):
        Seq2Seq(5, 5, hidden_size=7, bidirectional=True)
    with pytest.raises(ValueError, match="unknown task"):
        parse_pairs(["a\tb"], "words")
    with pytest.raises(ValueError, match="beam_size"):
        make_model().beam_search(torch.tensor([[4]]), torch.tensor([1]), beam_size=0)


def test_vocab():
    v = build_vocabulary([["b", "a", "b"], ["c"]], max_size=6)
    assert v.itos == ["<pad>", "<unk>", "<bos>", "<eos>", "b", "a"]
    assert v.encode(["a", "zz"]) == [5, 1]
    assert decode_output(v, [5, 4, EOS, 4]) == ["a", "b"]


def test_corpus_bleu():
    ref = ["the", "cat", "sat", "on", "the", "mat"]
    assert corpus_bleu([ref], [ref]) == pytest.approx(100.0)
    assert corpus_bleu([["dog"]], [ref]) == 0.0
    hyp = ["the", "cat", "sat", "on", "the"]
    # p1..p4 = 5/5, 4/4, 3/3, 2/2; brevity penalty exp(1 - 6/5).
    assert corpus_bleu([hyp], [ref]) == pytest.approx(100 * math.exp(1 - 6 / 5))
    hyp2 = ["the", "the", "cat", "sat", "on", "a", "mat"]
    # p1 = 6/7 (all but "a"), p2 = 3/6, p3 = 2/5, p4 = 1/4; 7 words vs 6: no penalty.
    expected = 100 * math.exp(
        (math.log(6 / 7) + math.log(3 / 6) + math.log(2 / 5) + math.log(1 / 4)) / 4
    )
    assert corpus_bleu([hyp2], [ref]) == pytest.approx(expected)
    with pytest.raises(ValueError):
        corpus_bleu([hyp], [])


# -- command line ----------------------------------------------------------------------------
