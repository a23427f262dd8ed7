"""The CUDA kernels against the CPU ones, on a GPU when there is one and always through the
emulator (the `cuda_backend` fixture): bit-identical where the docs promise it, within
float tolerance elsewhere, the same errors before any launch, and the edge shapes."""

import numpy as np
import pytest
import torch

from fastsoftmax import ops
from fastsoftmax.ops._checks import on_device

import reference as R
from sparse_layout import check_gradient


def on(backend, fn, *tensors):
    """fn(*tensors moved to the backend's device) inside the backend, results on the CPU."""
    device, enter = backend
    with enter():
        out = fn(*(t.to(device) if isinstance(t, torch.Tensor) else t for t in tensors))
    return tuple(o.cpu() for o in out) if isinstance(out, tuple) else out.cpu()


def adversarial_weights():
    """The case that made CPU tables depend on the thread count: 2^20 zeros, one weight of 1
    and 40,000 weights within an ulp or two of each other, whose deficit and surplus prefix
    sums dip at scan-chunk boundaries."""
    g = torch.Generator().manual_seed(0)
    near = 1.0 / 1_048_577 * (1 + torch.randint(-2, 3, (40_000,), generator=g).double() * 2**-52)
    w = torch.cat([torch.zeros(2**20, dtype=torch.float64), torch.ones(1, dtype=torch.float64),
                   near])
    return w[torch.randperm(w.numel(), generator=g)]


WEIGHTS = {
    "zipf": lambda: 1.0 / torch.arange(1, 50_001, dtype=torch.float64),
    "equal": lambda: torch.ones(3000, dtype=torch.float64),
    "one_class": lambda: torch.ones(1, dtype=torch.float64),
    "spread": lambda: torch.logspace(-300, 300, 2001, dtype=torch.float64),
    "adversarial": adversarial_weights,
}


@pytest.mark.parametrize("name", WEIGHTS)
def test_alias_tables_identical_on_every_device_and_thread_count(name, cuda_backend):
    w = WEIGHTS[name]()
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = ops.alias_build(w)
        torch.set_num_threads(2)
        two = ops.alias_build(w)
    finally:
        torch.set_num_threads(threads)
    gpu = on(cuda_backend, ops.alias_build, w)
    for a, b, c in zip(one, two, gpu):
        assert torch.equal(a, b) and torch.equal(a, c)


@pytest.mark.parametrize("kind", [ops.KIND_ALIAS, ops.KIND_UNIFORM, ops.KIND_LOG_UNIFORM])
def test_draws_unique_candidates_and_num_tries_identical(kind, cuda_backend):
    prob, alias = ops.alias_build(1.0 / torch.arange(1, 5001, dtype=torch.float64) ** 1.1)
    seed = torch.tensor([123456789012345])
    cpu = ops.sample(prob, alias, seed, 5000, kind, [3, 1000])
    gpu = on(cuda_backend, lambda p, a, s: ops.sample(p, a, s, 5000, kind, [3, 1000]),
             prob, alias, seed)
    assert torch.equal(cpu, gpu)
    for num_sampled in (1, 100, 2500):
        cpu = ops.sample_unique(prob, alias, seed, 5000, kind, num_sampled)
        gpu = on(cuda_backend, lambda p, a, s: ops.sample_unique(p, a, s, 5000, kind, num_sampled),
                 prob, alias, seed)
        assert torch.equal(cpu[0], gpu[0]) and torch.equal(cpu[1], gpu[1])


def test_unique_sampling_gives_up_with_the_cpu_error(cuda_backend):
    # Two classes of non-zero probability, one of them 1e-30: the set of 2 is never found.
    # The emulated build gives up after 2^20 draws (FASTSOFTMAX_MAX_UNIQUE_TRIES), the real
    # one after 2^32, with the CPU's message either way.
    prob, alias = ops.alias_build(torch.tensor([1.0, 1e-30, 0.0], dtype=torch.float64))
    if cuda_backend[0].type == "cuda":
        pytest.skip("2^32 draws: too slow for a test on the real device")
    with pytest.raises(ValueError, match="could not find 2 distinct candidates"):
        on(cuda_backend, lambda p, a, s: ops.sample_unique(p, a, s, 3, 0, 2), prob, alias,
           torch.tensor([5]))


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64])
@pytest.mark.parametrize("sort", [True, False])
def test_huffman_tree_identical_on_the_cuda_backend(dtype, sort, cuda_backend):
    # Counts in 0..9: ties everywhere, zeros too, so the tie rules decide most merges.
    counts = torch.randint(0, 10, (2000,), generator=torch.Generator().manual_seed(0)).to(dtype)
    cpu = ops.huffman_tree(counts, sort)
    device, enter = cuda_backend
    with enter():
        links, lengths = ops.huffman_tree(counts.to(device), sort)
    assert links.device == lengths.device == counts.to(device).device
    assert torch.equal(cpu[0], links.cpu()) and torch.equal(cpu[1], lengths.cpu())
    bad = counts.clone()
    bad[3] = -1
    with pytest.raises(ValueError, match="class 3 has count -1"):
        on(cuda_backend, lambda c: ops.huffman_tree(c, sort), bad)


def _loss_case(N, V, D, T, K, S, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(N, D, dtype=dtype, generator=g)
    w = torch.randn(V, D, dtype=dtype, generator=g) * 0.3
    b = torch.randn(V, dtype=dtype, generator=g) * 0.1
    target = torch.randint(0, V, (N, T), generator=g)
    if N > 1:
        target[1] = -100  # an ignored row
    negatives = torch.randint(0, V, (N, K), generator=g)
    sampled = torch.randint(0, V, (S,), generator=g)
    tq = torch.rand(N, T, dtype=torch.float32, generator=g) + 0.1
    sq = torch.rand(S, dtype=torch.float32, generator=g) + 0.1
    return h, w, b, target, negatives, sampled, tq, sq


def _ramp(loss):
    """Per-row weights 0.5 .. 1.5 for the backward, on the loss's device."""
    return torch.linspace(0.5, 1.5, loss.numel(), dtype=loss.dtype, device=loss.device)


def _losses_with_grads(h, w, b, target, negatives, sampled, tq, sq, sparse):
    out = []
    for mode in (0, 1):
        hh, ww, bb = (t.clone().requires_grad_() for t in (h, w, b))
        log_z = torch.tensor(0.1, device=h.device)
        loss, _, _ = ops.sampled_logits_forward(hh, ww, bb, target, sampled, tq, sq, log_z,
                                                mode, True, -100, sparse)
        (loss * _ramp(loss)).sum().backward()
        if sparse:
            check_gradient(ww.grad, sampled.numel() + target.numel(), on_device(w))
        out += [loss, hh.grad, ww.grad.to_dense(), bb.grad]
    hh, ww = h.clone().requires_grad_(), w.clone().requires_grad_()
    loss, _ = ops.negative_sampling_forward(hh, ww, target, negatives, -100, sparse)
    loss.sum().backward()
    if sparse:
        check_gradient(ww.grad, target.numel() + negatives.numel(), on_device(w))
    return tuple(out + [loss, hh.grad, ww.grad.to_dense()])


# N = 0, V = 1, K = 1, D not a multiple of 32 (and below a warp), a partial last warp of rows,
# num_true > 1 with hits, and num_true above the old CUDA-only limit of 8192.
SHAPES = [
    dict(N=0, V=7, D=5, T=1, K=2, S=3),
    dict(N=3, V=1, D=4, T=1, K=1, S=1),
    dict(N=9, V=40, D=33, T=1, K=1, S=8),
    dict(N=37, V=50, D=70, T=3, K=5, S=20),
    dict(N=2, V=9000, D=3, T=8200, K=2, S=4),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "-".join(f"{k}{v}" for k, v in s.items()))
@pytest.mark.parametrize("sparse", [False, True])
def test_losses_match_the_cpu_on_edge_shapes(shape, sparse, cuda_backend):
    case = _loss_case(**shape)
    cpu = _losses_with_grads(*case, sparse)
    gpu = on(cuda_backend, lambda *c: _losses_with_grads(*c, sparse), *case)
    for a, b in zip(cpu, gpu):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
def test_frequent_classes_and_shared_negatives(deterministic, sparse, cuda_backend):
    # Class 0 has ~300 pairs: its sorted run crosses several scatter chunks (64 positions).
    g = torch.Generator().manual_seed(4)
    N, V, D, T = 400, 12, 37, 2
    h = torch.randn(N, D, dtype=torch.float64, generator=g)
    w = torch.randn(V, D, dtype=torch.float64, generator=g) * 0.3
    target = torch.where(torch.rand(N, T, generator=g) < 0.4, 0,
                         torch.randint(0, V, (N, T), generator=g))
    target[7] = -100
    shared = torch.tensor([0, 3, 0, 11])  # a duplicate among the shared negatives

    def run(h, w, target, negatives):
        hh, ww = h.clone().requires_grad_(), w.clone().requires_grad_()
        loss, _ = ops.negative_sampling_forward(hh, ww, target, negatives, -100, sparse)
        (loss * _ramp(loss)).sum().backward()
        if not sparse:
            return loss, hh.grad, ww.grad.to_dense()
        # On the device, a row per pair (nothing read back to size it); once coalesced,
        # the CPU's rows.
        check_gradient(ww.grad, target.numel() + negatives.numel(), on_device(w))
        grad = ww.grad.coalesce()
        return loss, hh.grad, grad.to_dense(), grad.indices()

    torch.use_deterministic_algorithms(deterministic)
    try:
        for negatives in (shared, shared.expand(N, 4).contiguous()):
            cpu = run(h, w, target, negatives)
            gpu = on(cuda_backend, run, h, w, target, negatives)
            for a, b in zip(cpu, gpu):
                torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-12)
    finally:
        torch.use_deterministic_algorithms(False)


def test_deterministic_backward_is_bit_identical_run_to_run(cuda_backend):
    case = _loss_case(N=64, V=30, D=40, T=2, K=6, S=10, dtype=torch.float32)
    torch.use_deterministic_algorithms(True)
    try:
        first = on(cuda_backend, lambda *c: _losses_with_grads(*c, False), *case)
        second = on(cuda_backend, lambda *c: _losses_with_grads(*c, False), *case)
    finally:
        torch.use_deterministic_algorithms(False)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_bad_ids_raise_the_cpu_error_before_any_launch(cuda_backend):
    h, w, b, target, negatives, sampled, tq, sq = _loss_case(N=4, V=10, D=8, T=1, K=2, S=3)
    negatives[2, 1] = 10
    errors = []
    for backend in (None, cuda_backend):
        run = (lambda f, *a: f(*a)) if backend is None else (lambda f, *a: on(backend, f, *a))
        with pytest.raises(ValueError) as info:
            run(lambda *a: ops.negative_sampling_forward(*a, -100, False), h, w, target, negatives)
        errors.append(str(info.value).splitlines()[0])
    assert errors[0] == errors[1] and "negatives" in errors[0]


@pytest.mark.parametrize("sg", [1, 0])
def test_word2vec_one_worker_replays_the_cpu_trainer(sg, cuda_backend):
    rng = np.random.default_rng(2)
    V, D = 30, 40  # D not a multiple of 32
    sentences = [rng.integers(0, V, n) for n in (12, 1, 0, 25, 40)]
    tokens = torch.tensor(np.concatenate(sentences), dtype=torch.int32)
    ends = torch.tensor(np.cumsum([len(s) for s in sentences]), dtype=torch.int64)
    prob, alias = ops.alias_build(torch.tensor(rng.integers(1, 50, V), dtype=torch.float64))
    syn0 = torch.tensor(rng.random((V, D), dtype=np.float32) - 0.5)
    args = (tokens, ends, torch.arange(5, dtype=torch.int64) * 10, torch.full((V,), 0.8),
            prob, alias)

    def train(s0, s1, *rest):
        stats = ops.word2vec_train(s0, s1, *rest, 7, 100, bool(sg), True, 3, 4, True, 0.05,
                                   0.001, 80.0, 1)
        return s0, s1, stats

    cpu = train(syn0.clone(), torch.zeros(V, D), *args)
    gpu = on(cuda_backend, train, syn0.clone(), torch.zeros(V, D), *args)
    assert torch.equal(cpu[2][1:], gpu[2][1:])  # same predictions, same kept tokens
    torch.testing.assert_close(gpu[2][0], cpu[2][0], rtol=1e-5, atol=0)
    for a, b in zip(cpu[:2], gpu[:2]):  # expf may differ in the last ulp between libraries
        torch.testing.assert_close(b, a, rtol=0, atol=2e-5)


@pytest.mark.parametrize("sentences", [[3000], [700, 0, 1, 900, 0, 450]], ids=["one_line", "many"])
def test_word2vec_rounds_on_many_warps_train_the_cpu_replay(sentences, cuda_backend):
    # Warps share out the centres of each round, also of one long line; the choices (kept
    # tokens, windows, negatives) are functions of positions and every round reads one
    # snapshot, so the model is the CPU replay's up to the order of float sums.
    rng = np.random.default_rng(3)
    V, D = 200, 24
    tokens = torch.tensor(rng.integers(0, V, sum(sentences)), dtype=torch.int32)
    ends = torch.tensor(np.cumsum(sentences), dtype=torch.int64)
    prob, alias = ops.alias_build(torch.tensor(rng.integers(1, 50, V), dtype=torch.float64))
    syn0 = torch.tensor(rng.random((V, D), dtype=np.float32) - 0.5) / D
    args = (tokens, ends, torch.zeros(len(sentences), dtype=torch.int64), torch.full((V,), 0.7),
            prob, alias)

    def train(s0, s1, *rest, workers):
        stats = ops.word2vec_train(s0, s1, *rest, 9, 0, True, True, 4, 3, True, 0.02, 0.001,
                                   1e4, workers, round_size=256)
        return s0, s1, stats

    cpu = train(syn0.clone(), torch.zeros(V, D), *args, workers=1)
    gpu = on(cuda_backend, lambda *a: train(*a, workers=64), syn0.clone(), torch.zeros(V, D),
             *args)
    assert torch.equal(cpu[2][1:], gpu[2][1:]) and gpu[2][1] > 1000
    torch.testing.assert_close(gpu[2][0], cpu[2][0], rtol=1e-6, atol=0)
    torch.testing.assert_close(gpu[0], cpu[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(gpu[1], cpu[1], rtol=0, atol=1e-5)


@pytest.mark.parametrize("round_size", [0, 3])
def test_word2vec_vectors_beyond_the_old_cuda_limit(cuda_backend, round_size):
    V, D = 6, 6200  # one warp's 2 x 6200 floats > 48 KiB: the global-memory scratch
    prob, alias = ops.alias_build(torch.ones(V, dtype=torch.float64))
    tokens = torch.tensor([0, 1, 2, 3, 4, 5, 0, 1], dtype=torch.int32)
    args = (tokens, torch.tensor([5, 8]), torch.tensor([0, 5]), torch.ones(V), prob, alias)
    syn0 = (torch.rand(V, D, generator=torch.Generator().manual_seed(0)) - 0.5) / D

    def train(s0, s1, *rest, workers=1):
        ops.word2vec_train(s0, s1, *rest, 3, 0, True, True, 2, 2, False, 0.1, 0.01, 8.0,
                           workers, round_size=round_size)
        return s0, s1

    cpu = train(syn0.clone(), torch.zeros(V, D), *args)
    gpu = on(cuda_backend, lambda *a: train(*a, workers=1 if round_size == 0 else 8),
             syn0.clone(), torch.zeros(V, D), *args)
    assert not torch.equal(cpu[0], syn0)
    for a, b in zip(cpu, gpu):  # dot products over 6200 terms summed in another order
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-7)


def test_word2vec_alerts_under_deterministic_mode(device):
    prob, alias = ops.alias_build(torch.ones(4, dtype=torch.float64))
    args = lambda workers: (torch.rand(4, 3, device=device), torch.zeros(4, 3, device=device),  # noqa: E731
                            torch.tensor([0, 1, 2, 3], dtype=torch.int32, device=device),
                            torch.tensor([4], device=device), torch.tensor([0], device=device),
                            torch.ones(4, device=device), prob.to(device), alias.to(device), 1, 0,
                            True, True, 2, 2, True, 0.1, 0.0, 4.0, workers)
    torch.use_deterministic_algorithms(True)
    try:
        ops.word2vec_train(*args(1))  # one worker is deterministic
        with pytest.raises(RuntimeError, match="num_workers > 1"):
            ops.word2vec_train(*args(2))
        ops.word2vec_train(*args(1), round_size=2)  # so are rounds (CUDA: in fixed point)
    finally:
        torch.use_deterministic_algorithms(False)


def test_num_true_beyond_the_old_cuda_limit_matches_the_reference(device):
    case = _loss_case(N=2, V=9000, D=3, T=8200, K=2, S=4)
    h, w, b, target, _, sampled, tq, sq = (t.to(device) for t in case)
    for mode, reference in ((0, R.sampled_softmax_reference), (1, R.nce_reference)):
        loss, _, _ = ops.sampled_logits_forward(h, w, b, target, sampled, tq, sq,
                                                torch.tensor(0.0, device=device), mode, True,
                                                -100, False)
        want = reference(h, w, b, target, sampled, tq, sq, True)
        torch.testing.assert_close(loss, want)
        assert loss[1] == 0  # the ignored row
