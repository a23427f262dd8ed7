"""The loss modules and the properties around the kernels: eval mode is the exact full
softmax, sparse == dense gradients, deterministic mode, clear errors, autocast,
torch.compile, and the sampled-softmax gradient approaching the full one. FullSoftmaxLoss
and the head registry are in tests/test_full_softmax_and_heads.py."""

import pytest
import torch
import torch.nn.functional as F
from conftest import random_batch, requires_cuda

import fastsoftmax as fs
from fastsoftmax import functional as FF

D, V = 16, 64
MODULES = [
    (fs.SampledSoftmaxLoss, {}),
    (fs.NCELoss, {"learn_log_z": True}),
    (fs.NegativeSamplingLoss, {}),
    (fs.NegativeSamplingLoss, {"shared": True}),
]


def data(device, shape=(3, 5), seed=0):
    return random_batch(device, D, V, shape, seed)


@pytest.mark.parametrize("cls,kw", MODULES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_eval_is_full_softmax(device, cls, kw, reduction):
    torch.manual_seed(0)
    m = cls(D, V, 8, reduction=reduction, **kw).to(device).eval()
    if m.linear_bias is not None:
        torch.nn.init.normal_(m.linear_bias)
    m.chunk_bytes = 4 * 15 * 7  # chunks of 7 classes for 15 rows: exercises the chunking
    x, t = data(device)
    t[0, 1] = -100
    ours = m(x, t)
    logits = F.linear(x, m.linear_weight, m.linear_bias)
    ref = F.cross_entropy(logits.reshape(-1, V), t.reshape(-1), reduction=reduction)
    torch.testing.assert_close(ours, ref.reshape(ours.shape), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(m.log_prob(x), F.log_softmax(logits, -1), rtol=1e-5, atol=1e-5)
    assert torch.equal(m.predict(x), logits.argmax(-1))


@pytest.mark.parametrize("cls,kw", MODULES)
def test_float64_eval_is_exact_in_float64(cls, kw):
    torch.manual_seed(0)
    m = cls(D, V, 8, **kw).double().eval()
    if m.linear_bias is not None:
        torch.nn.init.normal_(m.linear_bias)
    x, t = data("cpu")
    x = x.double() * 3
    logits = F.linear(x, m.linear_weight, m.linear_bias)
    ref = F.cross_entropy(logits.reshape(-1, V), t.reshape(-1))
    assert m(x, t).dtype == torch.float64
    torch.testing.assert_close(m(x, t), ref, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(m.log_prob(x), F.log_softmax(logits, -1), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("cls,kw", MODULES)
def test_training_mode_draws_and_trains(device, cls, kw):
    torch.manual_seed(0)
    m = cls(D, V, 8, **kw).to(device)
    x, t = data(device)
    x.requires_grad_()
    loss = m(x, t)
    assert loss.shape == () and torch.isfinite(loss)
    loss.backward()
    assert x.grad.abs().sum() > 0 and m.linear_weight.grad.abs().sum() > 0
    # num_true = 3 via a trailing target dim
    t3 = torch.stack([t, (t + 1) % V, (t + 2) % V], -1)
    assert torch.isfinite(m(x, t3))


@pytest.mark.parametrize("cls,kw", MODULES)
def test_sparse_equals_dense(device, cls, kw):
    x, t = data(device)
    t[1, 2] = -100
    grads = []
    for sparse in (False, True):
        torch.manual_seed(0)
        m = cls(D, V, 8, sparse=sparse, **kw).to(device)
        torch.manual_seed(1)
        m(x, t).backward()
        grads.append(m.linear_weight.grad)
    dense, sparse = grads
    assert sparse.is_sparse and not dense.is_sparse
    assert sparse.coalesce()._nnz() < V  # only touched rows
    torch.testing.assert_close(sparse.to_dense(), dense, rtol=1e-6, atol=1e-7)
    opt = torch.optim.SparseAdam([torch.nn.Parameter(torch.zeros(V, D, device=device))])
    opt.param_groups[0]["params"][0].grad = sparse
    opt.step()


def test_weight_tying_and_sampler_choices():
    emb = torch.nn.Embedding(V, D)
    m = fs.SampledSoftmaxLoss(D, V, 8, linear_weight=emb.weight, bias=False)
    assert m.linear_weight is emb.weight and m.linear_bias is None
    _, t = data("cpu")
    m(emb(t), t).backward()
    assert emb.weight.grad is not None
    counts = torch.arange(V, 0, -1).double()
    assert isinstance(fs.NCELoss(D, V, 4, counts=counts).sampler, fs.UnigramSampler)
    assert isinstance(fs.NCELoss(D, V, 4).sampler, fs.LogUniformSampler)
    assert isinstance(fs.NegativeSamplingLoss(D, V, 4).sampler, fs.UniformSampler)
    assert isinstance(fs.NegativeSamplingLoss(D, V, 4, sampler="log_uniform").sampler,
                      fs.LogUniformSampler)
    with pytest.raises(ValueError, match="needs counts"):
        fs.SampledSoftmaxLoss(D, V, 4, sampler="unigram")
    with pytest.raises(ValueError, match="sampler must be"):
        fs.SampledSoftmaxLoss(D, V, 4, sampler="zipf")
    with pytest.raises(ValueError, match="weight must have shape"):
        fs.SampledSoftmaxLoss(D, V + 1, 4, linear_weight=emb.weight)


@requires_cuda
def test_deterministic_mode_bit_identical():
    """The flag changes only the CUDA weight gradient (atomics vs a sorted reduction); the
    CPU paths are deterministic always (test_cpu_weight_gradient_independent_of_thread_count)."""
    device = torch.device("cuda")
    x, t = data(device, (40,))
    torch.manual_seed(0)
    mods = [fs.SampledSoftmaxLoss(D, V, 16).to(device), fs.NCELoss(D, V, 16).to(device),
            fs.NegativeSamplingLoss(D, V, 6).to(device),
            fs.NegativeSamplingLoss(D, V, 6, shared=True).to(device)]
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        for m in mods:
            runs = []
            for _ in range(2):
                m.zero_grad()
                xi = x.clone().requires_grad_()
                torch.manual_seed(3)
                loss = m(xi, t)
                loss.backward()
                runs.append((loss, xi.grad, m.linear_weight.grad))
            for a, b in zip(*runs):
                assert torch.equal(a, b)
    finally:
        torch.use_deterministic_algorithms(previous)


def test_cpu_weight_gradient_independent_of_thread_count():
    x, t = data("cpu", (64,))
    neg = torch.randint(0, V, (64, 5))
    w = torch.randn(V, D, requires_grad=True)
    out = []
    threads = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            w.grad = None
            FF.negative_sampling_loss(x, w, t, negatives=neg).backward()
            out.append(w.grad.clone())
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(out[0], out[1])


class TestErrors:
    def setup_method(self):
        self.x, self.t = data("cpu", (6,))
        self.w = torch.randn(V, D)
        self.sampled = fs.LogUniformSampler(V).candidates(self.t, 8)

    @pytest.mark.parametrize("bad", [V, -1, -7])
    def test_target_out_of_range(self, bad):
        t = self.t.clone()
        t[2] = bad
        with pytest.raises(ValueError, match=r"target ids must lie in \[0, 64\)"):
            FF.sampled_softmax_loss(self.x, self.w, t, num_sampled=8)
        with pytest.raises(ValueError, match="target ids must lie"):
            FF.negative_sampling_loss(self.x, self.w, t, num_negatives=3)
        with pytest.raises(ValueError, match="target ids must lie"):
            FF.nce_loss(self.x, self.w, t, sampled=self.sampled)

    def test_negatives_and_sampled_out_of_range(self):
        with pytest.raises(ValueError, match="negatives ids must lie"):
            FF.negative_sampling_loss(self.x, self.w, self.t, negatives=torch.full((6, 2), V))
        bad = self.sampled._replace(sampled_candidates=self.sampled[0] - V)
        with pytest.raises(ValueError, match="sampled ids must lie"):
            FF.sampled_softmax_loss(self.x, self.w, self.t, sampled=bad)

    def test_ignore_index_mixed_row(self):
        t = torch.stack([self.t, self.t], 1)
        t[0, 1] = -100
        with pytest.raises(ValueError, match="mixes ignore_index"):
            FF.sampled_softmax_loss(self.x, self.w, t, num_sampled=8, num_true=2)

    def test_shapes_dtypes_counts(self):
        with pytest.raises(ValueError, match="features per class"):
            FF.sampled_softmax_loss(self.x, torch.randn(V, D + 1), self.t, num_sampled=8)
        with pytest.raises(ValueError, match="target must have shape"):
            FF.sampled_softmax_loss(self.x, self.w, self.t[:4], num_sampled=8)
        with pytest.raises(TypeError, match="int64"):
            FF.negative_sampling_loss(self.x, self.w, self.t.int(), num_negatives=2)
        with pytest.raises(TypeError, match="same dtype"):
            FF.nce_loss(self.x.double(), self.w, self.t, num_sampled=8)
        with pytest.raises(TypeError, match="same dtype"):
            FF.nce_loss(self.x, self.w, self.t, linear_bias=torch.zeros(V, dtype=torch.float64),
                        num_sampled=8)
        for bad in (0, -3):
            with pytest.raises(ValueError, match="num_sampled must be positive"):
                FF.sampled_softmax_loss(self.x, self.w, self.t, num_sampled=bad)
            with pytest.raises(ValueError, match="num_negatives must be positive"):
                FF.negative_sampling_loss(self.x, self.w, self.t, num_negatives=bad)
        with pytest.raises(ValueError, match="give either num_sampled"):
            FF.sampled_softmax_loss(self.x, self.w, self.t)
        with pytest.raises(ValueError, match="reduction"):
            FF.nce_loss(self.x, self.w, self.t, num_sampled=8, reduction="avg")
        with pytest.raises(ValueError, match="negatives must have shape"):
            FF.negative_sampling_loss(self.x, self.w, self.t, negatives=torch.zeros(5, 2).long())
        with pytest.raises(ValueError, match="sampler draws from"):
            FF.sampled_softmax_loss(self.x, self.w, self.t, num_sampled=4,
                                    sampler=fs.UniformSampler(V + 1))

    def test_empty_batch_is_well_defined(self):
        x, t = torch.zeros(0, D, requires_grad=True), torch.zeros(0, dtype=torch.int64)
        for fn, kw in ((FF.sampled_softmax_loss, {"num_sampled": 4}),
                       (FF.nce_loss, {"num_sampled": 4}),
                       (FF.negative_sampling_loss, {"num_negatives": 4})):
            assert fn(x, self.w, t, reduction="none", **kw).shape == (0,)
            total = fn(x, self.w, t, reduction="sum", **kw)
            assert total.item() == 0.0
            total.backward()
            assert torch.isnan(fn(x, self.w, t, reduction="mean", **kw))  # as F.cross_entropy

    @requires_cuda
    def test_device_mismatch_and_bad_ids_on_cuda(self):
        with pytest.raises(ValueError, match="is on"):
            FF.negative_sampling_loss(self.x.cuda(), self.w, self.t.cuda(), num_negatives=2)
        t = self.t.cuda().clone()
        t[0] = V + 3
        with pytest.raises(ValueError, match="target ids must lie"):
            FF.sampled_softmax_loss(self.x.cuda(), self.w.cuda(), t, num_sampled=8)
        torch.cuda.synchronize()  # no device-side assert was left behind


def test_autocast_runs_in_float32(device):
    torch.manual_seed(0)
    proj = torch.nn.Linear(D, D).to(device)
    m = fs.SampledSoftmaxLoss(D, V, 8).to(device)
    n = fs.NegativeSamplingLoss(D, V, 4).to(device)
    x, t = data(device)
    lowp = torch.bfloat16
    with torch.autocast(device.type, dtype=lowp):
        h = proj(x)
        assert h.dtype == lowp
        torch.manual_seed(1)
        loss = m(h, t) + n(h, t)
    assert loss.dtype == torch.float32
    loss.backward()
    assert proj.weight.grad is not None and m.linear_weight.grad.dtype == torch.float32
    torch.manual_seed(1)
    ref = m(h.detach().float(), t) + n(h.detach().float(), t)
    torch.testing.assert_close(loss, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("cls,kw", MODULES[:3])
def test_compile_fullgraph(cls, kw):
    torch.manual_seed(0)
    m = cls(D, V, 8, **kw)
    x, t = data("cpu")

    compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
    xc, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch.manual_seed(1)
    loss = compiled(xc, t)
    loss.backward()
    grad_compiled = m.linear_weight.grad.clone()
    m.zero_grad()
    torch.manual_seed(1)
    eager = m(xe, t)
    eager.backward()
    torch.testing.assert_close(loss, eager)
    torch.testing.assert_close(xc.grad, xe.grad)
    torch.testing.assert_close(grad_compiled, m.linear_weight.grad)
    m.eval()
    torch.testing.assert_close(torch.compile(m, fullgraph=True, backend="aot_eager")(x, t),
                               m(x, t))


def test_sampled_gradient_approaches_full_gradient():
    """The sampled-softmax input gradient, averaged over draws, tends to the full-softmax one
    as num_sampled grows (log-uniform proposal with log-Q correction)."""
    g = torch.Generator().manual_seed(0)
    Vb, Db, Nb = 1000, 8, 16
    w = torch.randn(Vb, Db, generator=g) * 0.3
    x = torch.randn(Nb, Db, generator=g)
    t = torch.randint(0, 50, (Nb,), generator=g)
    x.requires_grad_()
    F.cross_entropy(x @ w.T, t, reduction="sum").backward()
    full = x.grad.clone()
    sampler = fs.LogUniformSampler(Vb)
    errors = []
    for s in (4, 32, 256, 900):
        acc = torch.zeros_like(full)
        for _ in range(8):
            x.grad = None
            FF.sampled_softmax_loss(x, w, t, num_sampled=s, sampler=sampler, generator=g,
                                    reduction="sum").backward()
            acc += x.grad / 8
        errors.append(float((acc - full).norm() / full.norm()))
    assert errors[0] > errors[1] > errors[2] > errors[3]
    assert errors[-1] < 0.05


def test_nce_bias_starts_self_normalised():
    """NCE's scores start normalised: exp(logits) of a fresh layer sums to about 1 per row."""
    m = fs.NCELoss(16, 5000, 8, sampler="uniform", bias=True)
    x = torch.randn(32, 16) * 0.1
    log_z = torch.logsumexp(F.linear(x, m.linear_weight, m.linear_bias), dim=-1)
    assert log_z.abs().max() < 0.5
