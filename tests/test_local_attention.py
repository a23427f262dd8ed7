"""Local attention (Seq2Seq alignment='local-m' / 'local-p', Luong et al. 2015): the model's
weights against a per-example reference that loops over positions, the window's edges, length-1
sources, padding, gradcheck of local_weights in float64, greedy decoding's step positions,
options, and checkpoints with resume."""

import math
import random

import pytest
import torch

from fastsoftmax.cli import seq2seq as cli
from fastsoftmax.models import seq2seq as s2s
from fastsoftmax.models.seq2seq import BOS, EOS, PAD, Seq2Seq, local_weights
from test_hard_attention import one_thread  # noqa: F401 (autouse: one intra-op thread)


# ---------------------------------------------------------------------------------------
# The reference: one example, one target step, one source position at a time
# ---------------------------------------------------------------------------------------
def reference_score(model, h_s, h_t):
    if model.attention == "dot":
        return float(h_s @ h_t)
    if model.attention == "general":
        return float(h_s @ (model.attn_W.weight @ h_t))
    # concat: v · tanh(W [h_t; h_s]) (the model's W keeps h_t's columns first)
    return float(model.attn_v.weight[0] @ torch.tanh(model.attn_W.weight @ torch.cat([h_t, h_s])))


def reference_center(model, h_t, length, t):
    if model.alignment == "local-m":
        return float(min(t, length - 1))
    lp = model.local_p
    return length / (1 + math.exp(-float(lp.v_p.weight[0] @ torch.tanh(lp.W_p.weight @ h_t))))


def reference_weights(model, memory, dec, length, offset=0):
    """Weights [T, S] of one example: memory [S, H] (the first `length` rows real), decoder
    states dec [T, H]; written from the paper's definition, position by position."""
    D, T, S = model.window, dec.shape[0], memory.shape[0]
    out = torch.zeros(T, S, dtype=torch.float64)
    for t in range(T):
        p = reference_center(model, dec[t], length, offset + t)
        window = [s for s in range(math.ceil(p - D), math.floor(p + D) + 1) if 0 <= s < length]
        scores = {s: reference_score(model, memory[s], dec[t]) for s in window}
        top = max(scores.values())
        z = sum(math.exp(v - top) for v in scores.values())
        for s, v in scores.items():
            w = math.exp(v - top) / z
            if model.alignment == "local-p":
                w *= math.exp(-(s - p) ** 2 / (2 * (D / 2) ** 2))
            out[t, s] = w
    return out


def model_of(attention, alignment, window, seed=0, **kw):
    torch.manual_seed(seed)
    model = Seq2Seq(9, 8, embed_dim=5, hidden_size=6, attention=attention, alignment=alignment,
                    window=window, **kw).double().eval()
    with torch.no_grad():  # scores large enough that the softmax is far from uniform
        for p in model.parameters():
            p.mul_(3.0)
    return model


def batch(lengths, T, seed=0):
    g = torch.Generator().manual_seed(seed)
    S = max(lengths)
    src = torch.randint(1, 9, (len(lengths), S), generator=g)
    for b, n in enumerate(lengths):
        src[b, n:] = PAD
    tgt_in = torch.randint(3, 8, (len(lengths), T), generator=g)
    tgt_in[:, 0] = BOS
    return src, torch.tensor(lengths), tgt_in


def decoder_states(model, src, src_len, tgt_in):
    memory, _, state, _ = model.encode(src, src_len)
    dec, _ = model.decoder(model.tgt_embed(tgt_in), state)
    return memory, dec


ALIGNMENTS = [("local-m", 1), ("local-m", 2), ("local-p", 1), ("local-p", 3)]


@pytest.mark.parametrize("attention", ["dot", "general", "concat"])
@pytest.mark.parametrize("alignment,window", ALIGNMENTS)
def test_model_weights_equal_the_per_example_reference(attention, alignment, window):
    # Lengths 1 (a one-position source), 3 and 7 in one padded batch; 9 target steps run past
    # the ends of every source, and windows of 1-3 cross both edges.
    model = model_of(attention, alignment, window)
    src, src_len, tgt_in = batch([7, 1, 3], T=9)
    got = model.attention_weights(src, src_len, tgt_in)
    memory, dec = decoder_states(model, src, src_len, tgt_in)
    for b, n in enumerate(src_len.tolist()):
        with torch.no_grad():
            want = reference_weights(model, memory[b], dec[b], n)
        torch.testing.assert_close(got[b], want, rtol=1e-10, atol=1e-12)
        assert (got[b][:, n:] == 0).all()  # padding gets exactly nothing


@pytest.mark.parametrize("alignment,window", ALIGNMENTS)
def test_an_example_does_not_depend_on_its_batch(alignment, window):
    model = model_of("general", alignment, window)
    src, src_len, tgt_in = batch([6, 2, 4], T=5, seed=1)
    together = model.attention_weights(src, src_len, tgt_in)
    for b, n in enumerate(src_len.tolist()):
        alone = model.attention_weights(src[b:b + 1, :n], src_len[b:b + 1], tgt_in[b:b + 1])
        torch.testing.assert_close(together[b, :, :n], alone[0], rtol=1e-12, atol=1e-14)


def test_local_m_edges_and_a_one_position_source():
    # Uniform scores make the window visible: local-m's weights are 1/|window ∩ [0, len)|.
    scores = torch.zeros(2, 6, 5, dtype=torch.float64)
    lengths = torch.tensor([5, 1])
    centers = s2s.local_attention.monotonic_centers(lengths, 6)
    assert centers[0].tolist() == [0, 1, 2, 3, 4, 4] and centers[1].tolist() == [0] * 6
    w = local_weights(scores, lengths, centers, 2, gaussian=False)
    assert w[0, 0].tolist() == [1 / 3] * 3 + [0, 0]  # window [-2, 2] cut at the start
    assert w[0, 2].tolist() == [1 / 5] * 5
    assert w[0, 5].tolist() == [0, 0, 1 / 3, 1 / 3, 1 / 3]  # past the end: held at len - 1
    assert (w[1, :, 0] == 1).all() and (w[1, :, 1:] == 0).all()  # one real position
    # A step past the end of a one-token source still sees that token (offset of a decoder).
    late = s2s.local_attention.monotonic_centers(lengths, 1, offset=40)
    assert late.tolist() == [[4.0], [0.0]]


def test_local_p_gaussian_and_edges():
    scores = torch.zeros(1, 3, 8, dtype=torch.float64)
    centers = torch.tensor([[0.0, 2.5, 4.0]], dtype=torch.float64)  # 4.0 = len: the far edge
    w = local_weights(scores, torch.tensor([4]), centers, 2, gaussian=True)
    g = lambda d: math.exp(-d * d / 2)  # σ = D / 2 = 1
    want = [[g(0) / 3, g(1) / 3, g(2) / 3, 0, 0, 0, 0, 0],
            [0, g(1.5) / 3, g(0.5) / 3, g(0.5) / 3, 0, 0, 0, 0],  # 1-3 of [0.5, 4.5] are real
            [0, 0, g(2) / 2, g(1) / 2, 0, 0, 0, 0]]  # 4.0 ± 2 holds 2, 3 and padding 4-6
    torch.testing.assert_close(w[0], torch.tensor(want, dtype=torch.float64))


def test_an_empty_window_gives_zero_weights_not_nan():
    w = local_weights(torch.randn(1, 1, 4), torch.tensor([2]), torch.tensor([[9.0]]), 1, True)
    assert (w == 0).all()


@pytest.mark.parametrize("gaussian", [False, True])
def test_local_weights_gradcheck_in_float64(gaussian):
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(2, 3, 6, dtype=torch.float64, generator=g, requires_grad=True)
    # Centres away from the window's edges (|s - p| = D), where the mask is a step.
    centers = torch.tensor([[0.3, 2.6, 4.4], [1.2, 0.7, 2.1]], dtype=torch.float64,
                           requires_grad=True)
    lengths = torch.tensor([6, 3])
    assert torch.autograd.gradcheck(
        lambda s, c: local_weights(s, lengths, c, 2, gaussian), (scores, centers))
    if gaussian:  # the Gaussian carries a gradient to p_t; the plain window cannot
        local_weights(scores, lengths, centers, 2, True).sum().backward()
        assert centers.grad.abs().sum() > 0


@pytest.mark.parametrize("alignment", ["local-m", "local-p"])
def test_greedy_steps_attend_as_teacher_forcing_does(alignment):
    # Greedy runs one step at a time: its step t must use p_t = t as the forced run does.
    model = model_of("dot", alignment, 1, seed=2)
    src, src_len, _ = batch([5, 3], T=1, seed=3)
    tokens, _, attn = model.greedy(src, src_len, max_len=6)
    tgt_in = torch.cat([torch.full((2, 1), BOS), tokens[:, :-1]], dim=1)
    forced = model.attention_weights(src, src_len, tgt_in)
    # Greedy's step t ran on the same inputs while no earlier output ended the sequence.
    ordinary = torch.cat([torch.ones(2, 1, dtype=torch.bool), tokens[:, :-1] != EOS], 1)
    live = ordinary.cumprod(1).bool()
    assert live.sum() >= 6
    torch.testing.assert_close(attn[live], forced[live])


@pytest.mark.parametrize("kw,message", [
    (dict(alignment="local-x"), "unknown alignment 'local-x'"),
    (dict(window=4), "window applies to local alignment only"),
    (dict(alignment="local-m", window=0), "window must be an integer ≥ 1"),
    (dict(alignment="local-p", attention=None), "needs a score"),
    (dict(alignment="local-m", attention_mode="hard"), "soft attention only"),
])
def test_bad_options_are_one_sentence(kw, message):
    with pytest.raises(ValueError, match=message):
        Seq2Seq(5, 5, **dict(dict(attention="dot"), **kw))


# ---------------------------------------------------------------------------------------
# Training, checkpoints and resume
# ---------------------------------------------------------------------------------------
def reverse_pairs(n=200, seed=0):
    rng = random.Random(seed)
    return [(s, s[::-1]) for s in ("".join(rng.choice("01234") for _ in range(rng.randint(1, 6)))
                                    for _ in range(n))]


SETTINGS = dict(attention="general", alignment="local-p", window=3, embed_dim=8, hidden_size=16,
                batch_size=16, seed=0, progress=False)


def test_checkpoint_resume_keeps_the_alignment_and_is_exact(tmp_path):
    data = s2s.split_task(reverse_pairs(), "chars", valid_fraction=0.1, seed=0)
    quiet = dict(data=data, log=lambda m: None)
    part = s2s.fit(dict(SETTINGS, epochs=1, checkpoint=str(tmp_path / "a.pt")), **quiet)
    state = s2s.load_checkpoint(part["checkpoint"])
    model = s2s.model_from_checkpoint(state)[0]
    assert model.config["alignment"] == "local-p" and model.window == 3
    assert state["train_config"]["window"] == 3 and hasattr(model, "local_p")
    with pytest.raises(ValueError, match="window"):
        s2s.fit(dict(resume=part["checkpoint"], epochs=2, window=5), given={"window"}, **quiet)
    resumed = s2s.fit(dict(resume=part["checkpoint"], epochs=2), given={"epochs"}, **quiet)
    straight = s2s.fit(dict(SETTINGS, epochs=2, checkpoint=str(tmp_path / "b.pt")), **quiet)
    assert resumed["model"].alignment == "local-p"
    for k, v in straight["model"].state_dict().items():
        assert torch.equal(resumed["model"].state_dict()[k], v), k


def test_default_window_is_stored_and_cli_takes_the_option(tmp_path, capsys):
    path = tmp_path / "pairs.txt"
    path.write_text("\n".join(f"{s}_{t}" for s, t in reverse_pairs(40)) + "\n")
    ckpt = str(tmp_path / "m.pt")
    assert cli.main(["train", "--data", str(path), "--task", "chars", "--alignment", "local-m",
                     "--hidden-size", "8", "--embed-dim", "4", "--epochs", "1",
                     "--checkpoint", ckpt, "--no-progress"]) == 0
    assert "(local-m, window 10)" in capsys.readouterr().err
    assert s2s.model_from_checkpoint(s2s.load_checkpoint(ckpt))[0].window == 10
    # The default stored filled in: naming it on resume is no conflict; another value is.
    assert cli.main(["train", "--resume", ckpt, "--epochs", "2", "--window", "10",
                     "--no-progress"]) == 0
    assert cli.main(["train", "--resume", ckpt, "--epochs", "3", "--alignment", "local-p"]) == 2
    assert "--window" in cli.build_parser().subcommands["train"].format_help()
