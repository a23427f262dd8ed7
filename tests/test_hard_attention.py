"""Hard attention (Seq2Seq attention_mode='hard'): the REINFORCE estimator against the exact
gradient of the expected reward on enumerable cases, baselines that leave its expectation
alone, argmax at inference, padding never drawn, soft mode untouched, float64, checkpoints,
command line."""

import itertools
import math

import pytest
import torch

from fastsoftmax.models.seq2seq import BOS, PAD, Seq2Seq
from fastsoftmax.models.seq2seq import hard_attention as hard

# A fixed reward for each of 3 positions, and scores that make them unequally likely.
REWARD = torch.tensor([1.0, -0.5, 2.0], dtype=torch.float64)
SCORES = [0.3, -1.2, 0.8]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def policy(scores=SCORES, mask=(True, True, True)):
    """θ (the score network's output, a leaf) and log α [1, 1, S] of its masked softmax."""
    theta = torch.tensor(scores, dtype=torch.float64, requires_grad=True)
    return theta, hard.masked_log_softmax(theta.view(1, 1, -1), torch.tensor([mask]))


def exact_gradient(theta, log_alpha):
    """∇_θ E_{z~α}[R(z)], by autograd through Σ_z α_z R(z)."""
    return torch.autograd.grad((log_alpha.exp()[0, 0] * REWARD).sum(), theta)[0]


def per_draw_gradients(theta, log_alpha, baseline=0.0):
    """g(z) = ∇_θ of minus the surrogate, for every position z: rows [S, S]."""
    rows = []
    for z in range(log_alpha.shape[-1]):
        term = hard.reinforce_term(log_alpha[0, 0, z], REWARD[z], baseline)
        rows.append(torch.autograd.grad(-term, theta, retain_graph=True)[0])
    return torch.stack(rows)


def test_estimator_expectation_equals_exact_gradient_by_enumeration():
    theta, log_alpha = policy()
    alpha = log_alpha.exp()[0, 0].detach()
    expected = (alpha[:, None] * per_draw_gradients(theta, log_alpha)).sum(0)
    torch.testing.assert_close(expected, exact_gradient(theta, log_alpha), rtol=1e-12, atol=1e-12)


def test_estimator_sample_mean_is_within_its_standard_error():
    """The mean of N draws' gradients differs from the exact gradient by less than 5 standard
    errors per coordinate (σ_k from exact enumeration of the estimator's variance)."""
    N = 20000
    for baseline in (0.0, 0.9):
        theta, log_alpha = policy()
        exact = exact_gradient(theta, log_alpha)
        theta, log_alpha = policy()
        g = per_draw_gradients(theta, log_alpha, baseline)
        alpha = log_alpha.exp()[0, 0].detach()
        std = ((alpha[:, None] * g**2).sum(0) - exact**2).clamp(min=0).sqrt()
        torch.manual_seed(1)
        draws = hard.choose_positions(log_alpha.detach().expand(1, N, 3), sample=True)[0]
        log_chosen = log_alpha[0, 0][draws]
        surrogate = hard.reinforce_term(log_chosen, REWARD[draws], baseline).mean()
        mean = torch.autograd.grad(-surrogate, theta, retain_graph=True)[0]
        assert torch.all((mean - exact).abs() <= 5 * std / math.sqrt(N)), (baseline, mean, exact)
        # The draws follow α (so the test would catch a sampler drawing the wrong law).
        freq = torch.bincount(draws, minlength=3).double() / N
        assert torch.all((freq - alpha).abs() <= 5 * (alpha * (1 - alpha) / N).sqrt())


@pytest.mark.parametrize("baseline", [-3.0, 0.7, float(REWARD.mean())])
def test_a_constant_baseline_leaves_the_expectation_unchanged(baseline):
    theta, log_alpha = policy()
    alpha = log_alpha.exp()[0, 0].detach()
    plain = (alpha[:, None] * per_draw_gradients(theta, log_alpha)).sum(0)
    shifted = (alpha[:, None] * per_draw_gradients(theta, log_alpha, baseline)).sum(0)
    torch.testing.assert_close(shifted, plain, rtol=1e-12, atol=1e-12)
    # ...while it does change the single draws (it is not a no-op).
    assert not torch.allclose(per_draw_gradients(theta, log_alpha, baseline),
                              per_draw_gradients(theta, log_alpha))


def test_padding_is_never_drawn_and_gets_no_mass():
    theta, log_alpha = policy([0.3, -1.2, 0.8, 50.0], (True, True, True, False))
    assert log_alpha[0, 0, 3] == float("-inf")
    torch.manual_seed(0)
    draws = hard.choose_positions(log_alpha.detach().expand(1, 5000, 4), sample=True)
    assert int(draws.max()) <= 2 and set(draws.unique().tolist()) == {0, 1, 2}
    assert int(hard.choose_positions(log_alpha, sample=False)) == 2  # argmax ignores padding
    # Entropy and its gradient stay finite with a padded position (no 0·-inf).
    h = hard.entropy(log_alpha)
    (grad,) = torch.autograd.grad(h.sum(), theta)
    assert torch.isfinite(h).all() and torch.isfinite(grad).all() and grad[3] == 0
    alpha = log_alpha.exp()[0, 0, :3]
    assert float(h.detach()) == pytest.approx(float(-(alpha * alpha.log()).sum().detach()),
                                              abs=1e-12)


def test_entropy_and_log_softmax_gradcheck_in_float64():
    mask = torch.tensor([[True, True, False], [True, True, True]])
    scores = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: hard.entropy(hard.masked_log_softmax(s, mask)),
                                    (scores,))


# ---------------------------------------------------------------------------------------
# The model's estimator, enumerated exactly over every draw of a tiny batch
# ---------------------------------------------------------------------------------------
def tiny_model(**kw):
    torch.manual_seed(0)
    model = Seq2Seq(7, 6, embed_dim=4, hidden_size=6, attention_mode="hard", **kw).double()
    # Scores large enough that α is far from uniform (a stronger test of the weighting).
    with torch.no_grad():
        model.attn_W.weight.mul_(4.0)
    return model


def tiny_batch():
    """Two sources of lengths 3 and 2 (one padded position), two target steps, the second
    target ending after one token (its second step is padding)."""
    src = torch.tensor([[1, 2, 3], [4, 5, PAD]])
    tgt_in = torch.tensor([[BOS, 2], [BOS, 3]])
    tgt_out = torch.tensor([[3, 4], [5, PAD]])
    return src, torch.tensor([3, 2]), tgt_in, tgt_out


def forced(monkeypatch, positions, seen):
    """Makes every draw (and argmax) return `positions`, recording the log α it was given."""
    def choose(log_alpha, sample):
        seen.append(log_alpha)
        return positions
    monkeypatch.setattr(hard, "choose_positions", choose)


def enumerate_draws(model, monkeypatch, reset=None):
    """(Σ_z p(z) g(z) over every joint draw z of the batch, ∇ of the exact expected loss
    Σ_z p(z) ℓ(z) minus the entropy bonus), both over the parameters outside the value head."""
    params = [p for n, p in model.named_parameters() if not n.startswith("reward_baseline")]
    src, src_len, tgt_in, tgt_out = tiny_batch()
    estimate = [torch.zeros_like(p) for p in params]
    expected_loss = 0.0
    choices = [range(3), range(3), range(2), range(2)]  # (b, t) = (0,0), (0,1), (1,0), (1,1)
    for z in itertools.product(*choices):
        positions = torch.tensor(z).view(2, 2)
        seen = []
        forced(monkeypatch, positions, seen)
        if reset is not None:
            reset(model)
        model.train()
        grads = torch.autograd.grad(model(src, src_len, tgt_in, tgt_out), params,
                                    allow_unused=True)
        log_p = seen[0].gather(-1, positions[..., None]).sum()
        estimate = [e + log_p.exp().detach() * (g if g is not None else 0)
                    for e, g in zip(estimate, grads)]
        model.eval()  # the same positions, no REINFORCE terms: ℓ(z) with its path gradient
        seen.clear()
        loss = model(src, src_len, tgt_in, tgt_out)
        log_p = seen[0].gather(-1, positions[..., None]).sum()
        expected_loss = expected_loss + log_p.exp() * loss
    log_alpha = seen[0]
    valid = (tgt_out != PAD).double()
    mean_entropy = (hard.entropy(log_alpha) * valid).sum() / valid.sum()
    objective = expected_loss - model.entropy_bonus * mean_entropy
    exact = torch.autograd.grad(objective, params, allow_unused=True)
    exact = [g if g is not None else torch.zeros_like(p) for g, p in zip(exact, params)]
    return estimate, exact


@pytest.mark.parametrize("entropy_bonus", [0.0, 0.3])
def test_model_estimator_matches_exact_expected_gradient(monkeypatch, entropy_bonus):
    """Every parameter (score network, decoder, encoder, head): E_z[∇ loss] = ∇(E_z[ℓ] - λH)."""
    model = tiny_model(baseline="none", entropy_bonus=entropy_bonus)
    estimate, exact = enumerate_draws(model, monkeypatch)
    for e, x in zip(estimate, exact):
        torch.testing.assert_close(e, x, rtol=1e-9, atol=1e-11)
    names = [n for n, _ in model.named_parameters() if not n.startswith("reward_baseline")]
    assert float(exact[names.index("attn_W.weight")].abs().sum()) > 1e-3


@pytest.mark.parametrize("kind", ["mean", "value"])
def test_model_baselines_leave_the_expectation_unchanged(monkeypatch, kind):
    model = tiny_model(baseline=kind, entropy_bonus=0.0)

    def reset(m):  # one baseline for every draw of the enumeration, far from 0
        m.reward_baseline.running_sum.fill_(-1.7)
        m.reward_baseline.running_weight.fill_(1.0)

    with torch.no_grad():
        if kind == "value":
            model.reward_baseline.value.bias.fill_(-1.3)
    estimate, exact = enumerate_draws(model, monkeypatch, reset)
    for e, x in zip(estimate, exact):
        torch.testing.assert_close(e, x, rtol=1e-9, atol=1e-11)


def test_mean_baseline_tracks_the_reward_and_value_head_learns():
    model = tiny_model(baseline="value")
    src, src_len, tgt_in, tgt_out = tiny_batch()
    model.train()
    loss = model(src, src_len, tgt_in, tgt_out)
    # First batch: the bias-corrected moving average is that batch's mean reward.
    assert model.reward_baseline.mean == pytest.approx(-float(loss.detach()), rel=1e-9)
    loss.backward()
    assert model.reward_baseline.value.weight.grad.abs().sum() > 0


# ---------------------------------------------------------------------------------------
# Inference, padding, soft mode, float64 through the model
# ---------------------------------------------------------------------------------------
def soft_twin(model):
    """A soft-attention model with the same weights: its attention weights are α."""
    twin = Seq2Seq(7, 6, embed_dim=4, hidden_size=6).double()
    twin.load_state_dict({k: v for k, v in model.state_dict().items()
                          if not k.startswith("reward_baseline")})
    return twin.eval()


def test_inference_takes_the_argmax_position():
    model = tiny_model().eval()
    src, src_len, tgt_in, _ = tiny_batch()
    alpha = soft_twin(model).attention_weights(src, src_len, tgt_in)
    chosen = model.attention_weights(src, src_len, tgt_in)
    assert torch.equal(chosen, torch.nn.functional.one_hot(alpha.argmax(-1), 3).double())
    tokens, _, attn = model.greedy(src, src_len, max_len=4)
    steps = torch.cat([torch.full((2, 1), BOS), tokens[:, :-1].clamp(min=1)], 1)
    alpha = soft_twin(model).attention_weights(src, src_len, steps)
    live = tokens != PAD  # finished rows are zeroed by greedy
    expect = torch.nn.functional.one_hot(alpha.argmax(-1), 3).double() * live[..., None]
    assert torch.equal(attn, expect)
    assert torch.equal(model.beam_search(src, src_len, beam_size=1, max_len=4)[0], tokens)
    # Eval mode is deterministic; training mode draws (and so differs across calls).
    assert torch.equal(model.attention_weights(src, src_len, tgt_in), chosen)
    model.train()
    torch.manual_seed(0)
    draws = {tuple(model.attention_weights(src, src_len, tgt_in).argmax(-1).view(-1).tolist())
             for _ in range(20)}
    assert len(draws) > 1


def test_model_never_draws_a_padded_position():
    model = tiny_model().train()
    src, src_len, tgt_in, _ = tiny_batch()
    torch.manual_seed(0)
    counts = sum(model.attention_weights(src, src_len, tgt_in) for _ in range(300))
    assert counts[1, :, 2].sum() == 0 and (counts[1, :, :2] > 0).all()
    assert (counts[0] > 0).any(0).all()  # row 0 uses every one of its 3 positions


def test_soft_mode_is_unchanged():
    """Soft attention: the loss is the plain Luong computation written out here; it draws no
    random numbers and owns no new parameters or buffers."""
    torch.manual_seed(0)
    model = Seq2Seq(7, 6, embed_dim=4, hidden_size=6, bidirectional=True).train()
    assert model.config["attention_mode"] == "soft" and model.config["baseline"] is None
    assert not any("baseline" in k for k in model.state_dict())
    src, src_len, tgt_in, tgt_out = tiny_batch()
    rng = torch.get_rng_state()
    loss = model(src, src_len, tgt_in, tgt_out)
    assert torch.equal(torch.get_rng_state(), rng)
    memory, mask, state, _ = model.encode(src, src_len)
    dec, _ = model.decoder(model.tgt_embed(tgt_in), state)
    scores = (model.attn_W(dec) @ memory.transpose(1, 2)).masked_fill(~mask[:, None], -math.inf)
    context = torch.softmax(scores, -1) @ memory
    feats = torch.tanh(model.combine(torch.cat([context, dec], -1)))
    logits = feats @ model.head.linear_weight.t() + model.head.linear_bias
    ref = torch.nn.functional.cross_entropy(logits.view(-1, 6), tgt_out.view(-1),
                                            ignore_index=PAD)
    torch.testing.assert_close(loss, ref, rtol=1e-6, atol=1e-7)


def test_float64_path():
    model = tiny_model(baseline="value")
    src, src_len, tgt_in, tgt_out = tiny_batch()
    loss = model.train()(src, src_len, tgt_in, tgt_out)
    loss.backward()
    assert loss.dtype == torch.float64
    for p in model.parameters():
        assert p.grad is None or (p.grad.dtype == torch.float64 and torch.isfinite(p.grad).all())
    assert model.eval()(src, src_len, tgt_in, tgt_out).dtype == torch.float64


@pytest.mark.parametrize("output", ["sampled", "nce", "neg", "hs"])
def test_every_head_trains_hard_attention(output):
    """The reward is each token's training loss, so every head must give one per token."""
    torch.manual_seed(0)
    model = Seq2Seq(7, 12, embed_dim=4, hidden_size=6, attention_mode="hard", output=output,
                    num_sampled=3, counts=torch.arange(1.0, 13.0))
    src, src_len, tgt_in, tgt_out = tiny_batch()
    loss = model.train()(src, src_len, tgt_in, tgt_out)
    loss.backward()
    assert loss.dim() == 0 and torch.isfinite(loss)
    assert model.attn_W.weight.grad.abs().sum() > 0
    exact = model.eval()(src, src_len, tgt_in, tgt_out)
    logp = model.log_prob(src, src_len, tgt_in)  # argmax positions, exact softmax
    ref = -logp.gather(-1, tgt_out.clamp(min=0)[..., None]).squeeze(-1)[tgt_out != PAD].mean()
    torch.testing.assert_close(exact, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kw, message", [
    (dict(attention_mode="hard", attention=None), "hard attention needs a score"),
    (dict(attention_mode="glimpse"), "unknown attention_mode 'glimpse'"),
    (dict(baseline="mean"), "baseline applies to hard attention only"),
    (dict(entropy_bonus=0.1), "entropy_bonus applies to hard attention only"),
    (dict(attention_mode="hard", baseline="critic"), "unknown baseline 'critic'"),
    (dict(attention_mode="hard", entropy_bonus=-0.1), "entropy_bonus must be a finite number"),
    (dict(attention_mode="hard", entropy_bonus=float("nan")), "entropy_bonus must be a finite"),
])
def test_bad_options_are_one_sentence(kw, message):
    with pytest.raises(ValueError, match=message):
        Seq2Seq(7, 6, **kw)
