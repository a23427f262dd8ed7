"""One rank of a vocabulary-parallel test (started by tests/vp_harness.py):

    python tests/vp_worker.py CASE OUT.json      (RANK, WORLD_SIZE, VP_STORE, VP_BACKEND set)

Each case runs the single-process layer of fastsoftmax.nn on this rank as the reference and
its shard_layer twin across the group, and writes what it measured to OUT.json for the test
to judge (this file asserts nothing the test could not see)."""

import datetime
import json
import os
import sys

import torch
import torch.distributed as dist

torch.set_num_threads(1)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fastsoftmax as fs  # noqa: E402
from fastsoftmax.vocab_parallel import shard_layer  # noqa: E402

DEVICE = torch.device("cuda", 0) if os.environ["VP_BACKEND"] == "nccl" else torch.device("cpu")
N, D = 12, 8


def make(kind: str, V: int, dtype, **extra):
    torch.manual_seed(7)  # the same single-process layer on every rank
    common = dict(device=DEVICE, dtype=dtype)
    if kind == "full":
        return fs.FullSoftmaxLoss(D, V, **common, **extra)
    counts = torch.arange(V, 0, -1).double()
    if kind == "sampled":
        return fs.SampledSoftmaxLoss(D, V, 5, counts=counts, **common, **extra)
    if kind == "nce":
        return fs.NCELoss(D, V, 5, counts=counts, **common, **extra)
    return fs.NegativeSamplingLoss(D, V, 3, counts=counts, **common, **extra)


def compare(kind: str, V: int, dtype, train: bool, blocks: bool = True, **extra) -> dict:
    """Loss and gradients (input, this rank's weight rows, bias, log_z) of the sharded layer
    against the single-process one; the generators of both start from one seed, so they draw
    the same candidates."""
    single = make(kind, V, dtype, **extra)
    shard = shard_layer(single, process_group=None)
    if blocks:  # blocks of 3 classes: the streamed, recomputed path, not the one kept block
        shard.chunk_bytes = 4 * N * 3
    single.train(train)
    shard.train(train)
    torch.manual_seed(11)
    x = torch.randn(N, D, dtype=dtype, device=DEVICE)
    y = torch.randint(V, (N,), device=DEVICE)
    y[3] = -100 if extra.get("ignore_index") is None else extra["ignore_index"]
    out = {}
    losses, grads = [], []
    for layer in (single, shard):
        xi = x.clone().requires_grad_(True)
        loss = layer(xi, y, generator=torch.Generator(DEVICE).manual_seed(3))
        (loss.sum() * 1.0).backward()
        losses.append(loss.detach())
        g = dict(input=xi.grad, weight=layer.linear_weight.grad)
        if layer.linear_bias is not None:
            g["bias"] = layer.linear_bias.grad
        if isinstance(getattr(layer, "log_z", None), torch.nn.Parameter):
            g["log_z"] = layer.log_z.grad
        grads.append(g)
    rows = slice(shard.start, shard.start + shard.rows)
    out["loss"] = (losses[0] - losses[1]).abs().max().item()
    out["loss_value"] = losses[1].double().sum().item()
    for name, mine in grads[1].items():
        ref = grads[0][name]
        if ref is None and mine is None:  # log_z in eval: the exact softmax does not use it
            continue
        if name in ("weight", "bias"):
            ref = ref[rows]
        out[name] = (ref - mine).abs().max().item()
        out[name + "_bits"] = bool(torch.equal(ref, mine))
    out["loss_bits"] = bool(torch.equal(losses[0], losses[1]))
    return out


def case_exact() -> dict:
    world = dist.get_world_size()
    V = 5 * world + 2  # uneven whenever world > 2
    results = {}
    for dtype in (torch.float64, torch.float32):
        name = str(dtype).split(".")[-1]
        torch.manual_seed(0)  # each process starts from its own random seed: agree first
        for kind, extra in (("full", {}), ("full", dict(bias=True, reduction="sum")),
                            ("full", dict(weight=torch.rand(V, dtype=dtype), label_smoothing=0.1,
                                          z_loss=1e-3, ignore_index=1, reduction="none")),
                            ("full", dict(softcap=5.0, bias=True)),
                            ("sampled", dict(bias=True)), ("sampled", dict(reduction="none")),
                            ("nce", dict(bias=True, learn_log_z=True)), ("neg", {}),
                            ("neg", dict(shared=True, reduction="sum"))):
            if "weight" in extra:
                extra = dict(extra, weight=extra["weight"].to(DEVICE))
            for train in (True, False):
                key = f"{name}/{kind}/{sorted(extra)}/{'train' if train else 'eval'}"
                results[key] = compare(kind, V, dtype, train, **extra)
                if kind == "full" and not extra:
                    results[key + "/one-block"] = compare(kind, V, dtype, train, False)
    return results


def case_candidates() -> dict:
    """Candidates drawn by every rank's layer over many steps, gathered: identical on every
    rank, and their frequencies (for the test to set against the sampler's)."""
    V, world = 50, dist.get_world_size()
    layer = shard_layer(make("sampled", V, torch.float32))
    torch.manual_seed(5)  # every rank's default generator in one state, as in training
    target = torch.randint(V, (N,), device=DEVICE)
    drawn = torch.stack([layer._candidates(torch.zeros(N, D), target, None)[0]
                         for _ in range(400)])
    parts = [torch.empty_like(drawn) for _ in range(world)]
    dist.all_gather(parts, drawn)
    counts = torch.bincount(drawn.flatten(), minlength=V).double()
    return dict(identical=all(torch.equal(p, parts[0]) for p in parts),
                counts=counts.tolist(), probs=layer.sampler.probs.double().tolist())


def _error(fn) -> str:
    try:
        fn()
    except ValueError as exc:
        return f"ValueError: {exc}"
    return "no error"


def case_bad() -> dict:
    rank, world = dist.get_rank(), dist.get_world_size()
    V = 4 * world + 1
    last = world - 1
    out = {}
    out["V"] = _error(lambda: shard_layer(make("full", V + (rank == last), torch.float32)))
    out["D"] = _error(lambda: fs.vocab_parallel.VocabParallelLayer(D + (rank == last), V))
    layer = shard_layer(make("full", V, torch.float32))
    sampled = shard_layer(make("sampled", V, torch.float32))
    x, y = torch.randn(N, D, device=DEVICE), torch.randint(V, (N,), device=DEVICE)
    bad = y.clone()
    if rank == last:
        bad[0] = V + 3
    out["target_full"] = _error(lambda: layer(x, bad))
    out["target_sampled"] = _error(lambda: sampled(x, bad))
    out["target_eval"] = _error(lambda: layer.eval()(x, torch.where(
        torch.arange(N) == 2, torch.tensor(-5), y) if rank == 0 else y))
    out["after"] = float(layer(x, y))  # the group still works after every refusal
    return out


def case_all() -> dict:
    """Everything in one set of processes (each start costs seconds on a 2-core machine)."""
    return dict(exact=case_exact(), bad=case_bad(), candidates=case_candidates())


def main():
    case, path = sys.argv[1], sys.argv[2]
    dist.init_process_group(
        os.environ["VP_BACKEND"], init_method="file://" + os.environ["VP_STORE"],
        rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]),
        timeout=datetime.timedelta(seconds=float(os.environ["VP_TIMEOUT"])))
    try:
        result = globals()["case_" + case]()
    finally:
        dist.destroy_process_group()
    with open(path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
