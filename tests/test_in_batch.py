"""In-batch / mixed-negative softmax with logQ correction, and the streaming frequency
estimator: against the plain definitions of tests/reference.py, gradcheck, bad input."""

import numpy as np
import pytest
import torch

import fastsoftmax as fs
from fastsoftmax import functional as F
from conftest import requires_cuda

import reference as R


def batch(n=6, m=0, d=4, dup=True, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n, d, generator=g, dtype=dtype)
    it = torch.randn(n, d, generator=g, dtype=dtype)
    ids = torch.tensor([3, 7, 3, 1, 7, 3, 9, 2][:n]) if dup else torch.arange(n)
    out = dict(query=q, item=it, item_ids=ids,
               log_q=torch.log(torch.rand(n, generator=g, dtype=dtype) + 0.1))
    if m:
        out.update(extra_items=torch.randn(m, d, generator=g, dtype=dtype),
                   extra_ids=torch.tensor([7, 5, 3, 11, 0][:m]),
                   extra_log_q=torch.log(torch.rand(m, generator=g, dtype=dtype) + 0.1))
    return out


CASES = {
    "plain": dict(dup=False, keys=("query", "item")),
    "ids": dict(keys=("query", "item", "item_ids")),
    "log_q": dict(keys=("query", "item", "item_ids", "log_q")),
    "temperature": dict(keys=("query", "item", "item_ids", "log_q"), temperature=0.3),
    "mixed": dict(m=4, keys=("query", "item", "item_ids", "log_q", "extra_items", "extra_ids",
                             "extra_log_q"), temperature=0.5),
    "mixed_no_ids": dict(m=3, keys=("query", "item", "extra_items")),
    "keep_hits": dict(m=2, keys=("query", "item", "item_ids", "extra_items", "extra_ids"),
                      remove=False),
}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_reference_values_and_gradients(case, reduction):
    spec = CASES[case]
    data = batch(m=spec.get("m", 0), dup=spec.get("dup", True))
    kw = dict(temperature=spec.get("temperature", 1.0),
              remove_accidental_hits=spec.get("remove", True), reduction=reduction)
    leaves = {k: data[k].clone().requires_grad_(data[k].is_floating_point()) for k in spec["keys"]}
    ours = F.in_batch_softmax_loss(**leaves, **kw)
    ref_leaves = {k: data[k].clone().requires_grad_(data[k].is_floating_point())
                  for k in spec["keys"]}
    ref = R.in_batch_softmax_loss(**ref_leaves, **kw)
    torch.testing.assert_close(ours, ref)
    ours.sum().backward()
    ref.sum().backward()
    for k, v in leaves.items():
        if v.requires_grad:
            torch.testing.assert_close(v.grad, ref_leaves[k].grad, msg=f"gradient of {k}")


def test_gradcheck_float64():
    data = batch(n=5, m=3, d=3)
    leaves = [data[k].requires_grad_() for k in ("query", "item", "log_q", "extra_items",
                                                  "extra_log_q")]

    def loss(q, it, lq, ex, exq):
        return fs.in_batch_softmax_loss(q, it, item_ids=data["item_ids"], log_q=lq,
                                        temperature=0.7, extra_items=ex,
                                        extra_ids=data["extra_ids"], extra_log_q=exq,
                                        reduction="none")

    assert torch.autograd.gradcheck(loss, leaves)

    def learned_temperature(q, it, tau):  # a 0-d tensor temperature gets its gradient too
        return fs.in_batch_softmax_loss(q, it, item_ids=data["item_ids"], log_q=data["log_q"],
                                        temperature=tau, reduction="sum")

    tau = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(learned_temperature, (leaves[0], leaves[1], tau))
    torch.testing.assert_close(
        learned_temperature(data["query"], data["item"], tau),
        R.in_batch_softmax_loss(data["query"], data["item"], data["item_ids"], data["log_q"],
                                tau, reduction="sum"))


def test_duplicates_are_masked():
    """Row 0's positive id 3 also sits in columns 2 and 5 and in extra column 2: the loss of
    row 0 equals the softmax over the other columns only, and differs without masking."""
    d = batch(n=6, m=3)
    kw = dict(item_ids=d["item_ids"], extra_items=d["extra_items"], extra_ids=d["extra_ids"])
    loss = fs.in_batch_softmax_loss(d["query"], d["item"], reduction="none", **kw)
    cands = torch.cat([d["item"], d["extra_items"]])
    logits = d["query"][0] @ cands.t()
    keep = [0, 1, 3, 4, 6, 7]  # not 2, 5 (id 3) nor extra 2 (column 8, id 3)
    torch.testing.assert_close(loss[0], torch.logsumexp(logits[keep], 0) - logits[0])
    unmasked = fs.in_batch_softmax_loss(d["query"], d["item"], reduction="none",
                                        remove_accidental_hits=False, **kw)
    assert unmasked[0] > loss[0] + 1e-6
    assert unmasked[3] == loss[3]  # id 1 appears once: nothing to mask


def test_log_q_from_given_probabilities():
    d = batch(n=6, dup=False)
    p = torch.tensor([0.4, 0.2, 0.1, 0.1, 0.1, 0.1], dtype=torch.float64)
    loss = fs.in_batch_softmax_loss(d["query"], d["item"], log_q=p.log(), temperature=0.5,
                                    reduction="none")
    logits = d["query"] @ d["item"].t() / 0.5 - p.log()[None, :]
    torch.testing.assert_close(loss, torch.logsumexp(logits, 1) - logits.diagonal())
    # probabilities or expected counts (p * N): a constant offset cancels in the softmax
    shifted = fs.in_batch_softmax_loss(d["query"], d["item"], log_q=(p * 6).log(),
                                       temperature=0.5, reduction="none")
    torch.testing.assert_close(loss, shifted)
    # the correction favours frequent items less: their columns lose log p
    plain = fs.in_batch_softmax_loss(d["query"], d["item"], temperature=0.5, reduction="none")
    assert not torch.allclose(plain, loss)


def test_low_precision_and_empty_batch():
    d = batch(n=6, m=2, dtype=torch.float32)
    kw = {k: v for k, v in d.items() if k not in ("query", "item")}
    ref = fs.in_batch_softmax_loss(d["query"], d["item"], **kw)
    for dtype in (torch.bfloat16, torch.float16):
        kw16 = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in kw.items()}
        out = fs.in_batch_softmax_loss(d["query"].to(dtype), d["item"].to(dtype), **kw16)
        assert out.dtype == dtype
        torch.testing.assert_close(out.float(), ref, atol=0.05, rtol=0.05)
    empty = torch.zeros(0, 4)
    assert torch.isnan(fs.in_batch_softmax_loss(empty, empty))
    assert fs.in_batch_softmax_loss(empty, empty, reduction="sum") == 0


@pytest.mark.parametrize("warm_start", [True, False])
@pytest.mark.parametrize("num_buckets", [64, 7])  # 7: ids share buckets
def test_estimator_matches_paper_loop(warm_start, num_buckets, device):
    g = torch.Generator().manual_seed(1)
    est = fs.FrequencyEstimator(num_buckets, alpha=0.1, warm_start=warm_start).to(device)
    ref = R.FrequencyEstimatorReference(num_buckets, 0.1, warm_start)
    for _ in range(40):
        ids = torch.randint(0, 30, (int(torch.randint(0, 25, (1,), generator=g)),), generator=g)
        ids[: len(ids) // 3] = 2  # many duplicates of one id in a batch
        est.update(ids.to(device))
        ref.update(ids.tolist())
    probe = torch.arange(-3, 40)  # unseen ids and negative ids too
    np.testing.assert_allclose(est.frequency(probe.to(device)).cpu().numpy(),
                               ref.frequency(probe.tolist()), rtol=1e-12)
    assert est.log_q(probe.to(device)).dtype == torch.float32


def zipf_stream_estimate(alpha, steps, average_last, v=1000, n=256, seed=0):
    """Items of a Zipf(1.1) distribution, n per batch, under arbitrary non-contiguous ids:
    the true hits per step (n * p) and the estimate averaged over the last steps."""
    p = 1.0 / torch.arange(1, v + 1, dtype=torch.float64) ** 1.1
    p /= p.sum()
    ids_of_rank = torch.randperm(v, generator=torch.Generator().manual_seed(seed)) * 13 + 5
    est = fs.FrequencyEstimator(1 << 16, alpha=alpha)
    g = torch.Generator().manual_seed(seed)
    acc = torch.zeros(v, dtype=torch.float64)
    for step in range(steps):
        est.update(ids_of_rank[torch.multinomial(p, n, replacement=True, generator=g)])
        if step >= steps - average_last:
            acc += est.frequency(ids_of_rank)
    return n * p, acc / average_last


def test_estimator_recovers_zipf_frequencies():
    """Every item hit 2,000 times or more (46 items, from 47 hits per step down to 0.7) is
    estimated within 10% (alpha = 0.001: an average over its last ~2,000 hits)."""
    steps = 3000
    truth, estimate = zipf_stream_estimate(0.001, steps, average_last=1)
    checked = truth * steps >= 2000
    assert checked.sum() >= 40
    rel = (estimate[checked] / truth[checked] - 1).abs()
    assert rel.max() < 0.10, f"worst relative error {rel.max():.3f}"


def test_estimator_unbiased_with_duplicates_at_default_alpha():
    """At alpha = 0.01 single estimates are noisy (about sqrt(alpha / 2) relative), but their
    mean over the items hit 300 times or more is unbiased: no drift from the many duplicates
    of frequent items in a batch nor from the start of the stream."""
    steps = 3000
    truth, estimate = zipf_stream_estimate(0.01, steps, average_last=500)
    checked = truth * steps >= 300
    rel = estimate[checked] / truth[checked] - 1
    assert rel.mean().abs() < 0.02, f"mean relative error {rel.mean():+.3f}"
    assert rel[:5].abs().max() < 0.05  # the five most frequent, 10 to 47 hits per step


def test_estimator_state_dict_round_trip():
    est = fs.FrequencyEstimator(32, alpha=0.05)
    for s in range(5):
        est.update(torch.tensor([1, 2, 2, s]))
    copy = fs.FrequencyEstimator(32, alpha=0.05)
    copy.load_state_dict(est.state_dict())
    for e in (est, copy):
        e.update(torch.tensor([2, 9]))
    torch.testing.assert_close(copy.frequency(torch.arange(12)), est.frequency(torch.arange(12)))
    assert int(copy.step) == 6
    with pytest.raises(ValueError, match="32 buckets"):
        fs.FrequencyEstimator(16, alpha=0.05).load_state_dict(est.state_dict())
    with pytest.raises(ValueError, match="alpha=0.05"):
        fs.FrequencyEstimator(32, alpha=0.01).load_state_dict(est.state_dict())
    # a loss module saves its estimator with its own state
    loss = fs.InBatchSoftmaxLoss(estimator=fs.FrequencyEstimator(32, alpha=0.05))
    loss.load_state_dict({"estimator." + k: v for k, v in est.state_dict().items()})
    torch.testing.assert_close(loss.estimator.gap, est.gap)


def test_estimator_bad_input():
    est = fs.FrequencyEstimator(8)
    with pytest.raises(TypeError, match="integer tensor of item ids"):
        est.update(torch.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="tensor of int ids"):
        est.log_q("abc")
    with pytest.raises(ValueError, match="alpha must be a number in"):
        fs.FrequencyEstimator(8, alpha=1.5)
    with pytest.raises(ValueError, match="num_buckets must be positive"):
        fs.FrequencyEstimator(0)
    with pytest.raises(TypeError, match="num_buckets must be an int"):
        fs.FrequencyEstimator(8.0)
    est.update([1, 2, 2])  # lists are fine
    assert int(est.step) == 1


@requires_cuda
def test_estimator_cuda_matches_cpu_and_checks_device():
    cpu, gpu = fs.FrequencyEstimator(50), fs.FrequencyEstimator(50).cuda()
    g = torch.Generator().manual_seed(3)
    for _ in range(20):
        ids = torch.randint(0, 200, (64,), generator=g)
        cpu.update(ids)
        gpu.update(ids.cuda())
    torch.testing.assert_close(gpu.gap.cpu(), cpu.gap)
    with pytest.raises(ValueError, match="estimator is on cuda"):
        gpu.update(torch.tensor([1]))


def test_functional_bad_input():
    d = batch(n=4, m=2)
    q, it = d["query"], d["item"]
    cases = [
        (dict(item=it[:3]), ValueError, "item has 3 rows but query has 4"),
        (dict(item=it[:, :2]), ValueError, "item has 2 features"),
        (dict(item=it.float()), TypeError, "item is torch.float32 but query is torch.float64"),
        (dict(item_ids=d["item_ids"].double()), TypeError, "item_ids must be an integer"),
        (dict(log_q=d["log_q"][:2]), ValueError, r"log_q must have shape \(4,\)"),
        (dict(temperature=0.0), ValueError, "temperature must be a positive"),
        (dict(reduction="avg"), ValueError, "reduction must be one of"),
        (dict(extra_ids=d["extra_ids"]), ValueError, "extra_ids is given without extra_items"),
        (dict(item_ids=d["item_ids"], extra_items=d["extra_items"]), ValueError,
         "remove_accidental_hits needs extra_ids"),
        (dict(extra_items=d["extra_items"], extra_ids=d["extra_ids"]), ValueError,
         "extra_ids is given without item_ids"),
        (dict(log_q=d["log_q"], extra_items=d["extra_items"]), ValueError,
         "give both log_q and extra_log_q"),
        (dict(query=q[0]), ValueError, r"query must be 2-D"),
    ]
    for override, error, message in cases:
        kw = dict(query=q, item=it)
        kw.update(override)
        with pytest.raises(error, match=message):
            fs.in_batch_softmax_loss(**kw)


def test_module_wires_estimator():
    d = batch(n=6, dtype=torch.float32)
    est = fs.FrequencyEstimator(16)
    module = fs.InBatchSoftmaxLoss(0.5, estimator=est)
    loss = module(d["query"], d["item"], d["item_ids"])
    assert int(est.step) == 1
    expected = fs.in_batch_softmax_loss(d["query"], d["item"], item_ids=d["item_ids"],
                                        log_q=est.log_q(d["item_ids"]), temperature=0.5)
    torch.testing.assert_close(loss, expected)
    module.eval()
    module(d["query"], d["item"], d["item_ids"])
    assert int(est.step) == 1  # eval reads the estimate, never updates it
    with pytest.raises(ValueError, match="needs item_ids"):
        module(d["query"], d["item"])


def test_module_mixed_negatives():
    d = batch(n=6, dtype=torch.float32)
    table = torch.nn.Embedding(12, 4)
    sampler = fs.UniformSampler(12)
    est = fs.FrequencyEstimator(16)
    module = fs.InBatchSoftmaxLoss(estimator=est, num_extra=5, sampler=sampler,
                                   item_encoder=table)
    loss = module(d["query"], d["item"], d["item_ids"], generator=torch.Generator().manual_seed(4))
    extra_ids = sampler.sample(5, generator=torch.Generator().manual_seed(4))
    count = lambda ids: (est.frequency(ids) + 5 / 12).log().float()  # noqa: E731
    expected = R.in_batch_softmax_loss(
        d["query"], d["item"], d["item_ids"], count(d["item_ids"]), 1.0, table(extra_ids),
        extra_ids, count(extra_ids))
    torch.testing.assert_close(loss, expected)
    loss.backward()
    assert table.weight.grad is not None
    assert list(module.parameters()) == []  # the item tower stays with the model
    with pytest.raises(TypeError, match="needs sampler="):
        fs.InBatchSoftmaxLoss(num_extra=3)
    with pytest.raises(ValueError, match="only with num_extra > 0"):
        fs.InBatchSoftmaxLoss(sampler=sampler)


def test_module_carries_its_sampler():
    """The mixed negatives' sampler is saved, loaded, copied and moved with the module."""
    import copy

    def module(counts):
        return fs.InBatchSoftmaxLoss(num_extra=5, sampler=fs.UnigramSampler(counts),
                                     item_encoder=torch.nn.Embedding(12, 4))

    def draws(m):
        return m.sampler.sample(40, generator=torch.Generator().manual_seed(2))

    saved, fresh = module(torch.arange(12, 0, -1).double()), module(torch.ones(12))
    assert not torch.equal(draws(saved), draws(fresh))
    fresh.load_state_dict(saved.state_dict())
    assert torch.equal(draws(fresh), draws(saved))
    assert torch.equal(draws(copy.deepcopy(saved)), draws(saved))
    assert saved.to("meta").sampler.device.type == "meta"


def test_no_n_by_n_by_d_tensor():
    """The forward's largest saved tensor is [N, N + M] (or an input), never [N, N, D]."""
    n, d = 64, 32
    q = torch.randn(n, d, requires_grad=True)
    it = torch.randn(n, d, requires_grad=True)
    sizes = []

    def pack(t):
        sizes.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fs.in_batch_softmax_loss(q, it, item_ids=torch.arange(n) % 10, log_q=torch.zeros(n))
    assert max(sizes) <= n * n


def test_retrieval_benchmark_runs_end_to_end(tmp_path):
    """bench/bench_retrieval.py on a generated miniature corpus: every variant trains and
    writes its row (the real figures come from WikiText-2, see docs/benchmarks.md)."""
    import csv
    import os
    import subprocess
    import sys

    g = torch.Generator().manual_seed(0)
    words = [f"w{int(i)}" for i in torch.multinomial(1.0 / torch.arange(1, 60.0), 3000, True,
                                                    generator=g)]
    for split, part in (("train", words[:2400]), ("valid", words[2400:])):
        lines = [" ".join(part[i:i + 12]) for i in range(0, len(part), 12)]
        (tmp_path / f"wiki.{split}.tokens").write_text("\n".join(lines) + "\n")
    train_words = set(words[:2400])
    (tmp_path / "wiki.valid.tokens").write_text(" ".join(w for w in words[2400:]
                                                         if w in train_words) + "\n")
    out = tmp_path / "rows.csv"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run = subprocess.run(
        [sys.executable, os.path.join(root, "bench", "bench_retrieval.py"), "--data",
         str(tmp_path), "--steps", "3", "--batch-size", "16", "--num-extra", "8",
         "--eval-queries", "100", "--threads", "1", "--out", str(out)],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    rows = list(csv.DictReader(out.open()))
    assert [r["variant"] for r in rows] == ["popularity", "none", "unigram", "estimator", "mixed"]
    assert all(0.0 <= float(r["recall_at_100"]) <= 1.0 for r in rows)
