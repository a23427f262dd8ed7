"""Memory per rank and step time of the vocabulary-parallel output layers against the
replicated (single-process) layer, in 1, 2 and 4 gloo processes on this machine.

    python bench/bench_vocab_parallel.py [--worlds 1 2 4] [--vocab 131072 262144] [--dim 256]
        [--rows 256] [--heads full sampled]

One step is forward, backward and an Adam step of the output layer alone on N rows of
features. Per rank: parameter and Adam-state bytes (they must fall as 1/world), the peak
resident memory above the process's start (weights, gradients, Adam, logit blocks), and the
median step time (the slowest rank's). Each (head, provider, world) runs in fresh processes. Every rank of a world is a process started here, meeting the others through
a FileStore; the rows go to bench/results/vocab-parallel-cpu.csv. On a machine with fewer
cores than processes the ranks share the cores: read the times with the core count beside.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import _proc_status_kib, time_it, write_results  # noqa: E402


def _worker(args) -> None:
    import torch.distributed as dist

    import fastsoftmax as fs
    from fastsoftmax import vocab_parallel as vp

    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    dist.init_process_group("gloo", init_method="file://" + os.environ["BENCH_STORE"],
                            rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=600))
    torch.manual_seed(0)
    V, D, N, device = args.vocab[0], args.dim, args.rows, torch.device("cpu")
    out = []
    start_kib = _proc_status_kib("VmRSS")  # torch and the library loaded, nothing built
    for head in args.heads:
        for provider in [args.provider]:
            # Built by shards directly: shard_layer(layer) would first hold the whole layer.
            if head == "full":
                layer = (fs.FullSoftmaxLoss(D, V) if provider == "replicated"
                         else vp.VocabParallelFullSoftmaxLoss(D, V))
            else:
                sampler = fs.LogUniformSampler(V)
                layer = (fs.SampledSoftmaxLoss(D, V, 1024, sampler=sampler)
                         if provider == "replicated" else
                         vp.VocabParallelSampledSoftmaxLoss(D, V, 1024, sampler=sampler))
            opt = torch.optim.Adam([p for p in layer.parameters() if p.requires_grad], lr=1e-3)
            x = torch.randn(N, D)
            y = torch.randint(V, (N,))

            def step(layer=layer, opt=opt):
                opt.zero_grad(set_to_none=True)
                layer(x, y).backward()
                opt.step()

            step()  # Adam's state exists from here on
            param = sum(p.numel() * p.element_size() for p in layer.parameters())
            state = sum(t.numel() * t.element_size() for s in opt.state.values()
                        for t in s.values() if torch.is_tensor(t) and t.dim() > 0)
            median, low, high = time_it(step, device, repeats=args.repeats, warmup=0)
            # The process's resident high-water mark above its start: weights, gradients,
            # Adam's moments and the largest transient (logit blocks), this head only (one
            # head and provider per process, so nothing freed before is reused and hidden).
            peak = (_proc_status_kib("VmHWM") - start_kib) * 1024
            figures = torch.tensor([peak, median, high], dtype=torch.float64)
            top = figures.clone()
            dist.all_reduce(top, op=dist.ReduceOp.MAX)  # the slowest / hungriest rank
            out.append(dict(head=head, provider=provider, param=param, state=state,
                            peak=int(top[0]), median=float(top[1]), high=float(top[2]),
                            low=low))
            layer = opt = step = None  # freed before the next layer is measured
    if rank == 0:
        with open(os.environ["BENCH_OUT"], "w") as f:
            json.dump(out, f)
    dist.barrier()  # no rank tears gloo down while another still talks to it
    dist.destroy_process_group()


def _run_world(world: int, V: int, head: str, provider: str, args) -> list:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, WORLD_SIZE=str(world), BENCH_STORE=os.path.join(tmp, "store"),
                   BENCH_OUT=os.path.join(tmp, "out.json"), OMP_NUM_THREADS="1")
        argv = [sys.executable, os.path.abspath(__file__), "--worker", "--vocab", str(V),
                "--dim", str(args.dim), "--rows", str(args.rows), "--repeats",
                str(args.repeats), "--heads", head, "--provider", provider]
        procs = [subprocess.Popen(argv, env=dict(env, RANK=str(r))) for r in range(world)]
        for p in procs:
            if p.wait(timeout=1800):
                raise SystemExit(f"a rank of world {world} failed")
        with open(env["BENCH_OUT"]) as f:
            return json.load(f)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worlds", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--vocab", type=int, nargs="+", default=[2**17, 2**18])
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--rows", type=int, default=256)
    p.add_argument("--heads", nargs="+", default=["full", "sampled"])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--provider", default="vocab_parallel", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return _worker(args)
    rows = []
    for V in args.vocab:
        runs = [(1, h, "replicated") for h in args.heads] + [
            (w, h, "vocab_parallel") for w in args.worlds for h in args.heads]
        for world, head, provider in runs:
            for r in _run_world(world, V, head, provider, args):
                shape = f"N={args.rows} D={args.dim} V={V} world={world} threads/rank=1"
                case = f"{r['head']}/fwd+bwd+adam"
                for metric, value in (("param_bytes_per_rank", r["param"]),
                                      ("adam_state_bytes_per_rank", r["state"]),
                                      ("peak_rss_above_start_bytes_max_rank", r["peak"]),
                                      ("median_ms_slowest_rank", r["median"] * 1e3),
                                      ("max_ms_slowest_rank", r["high"] * 1e3)):
                    rows.append(dict(case=case, provider=r["provider"], shape=shape,
                                     metric=metric, value=value))
                print(f"V={V} world={world} {r['head']:8s} {r['provider']:15s} params "
                      f"{r['param'] / 2**20:7.1f} MiB  adam {r['state'] / 2**20:7.1f} MiB  "
                      f"peak RSS +{r['peak'] / 2**20:7.1f} MiB  {r['median'] * 1e3:8.1f} ms",
                      flush=True)
    print("wrote", write_results("vocab-parallel", "cpu", rows))


if __name__ == "__main__":
    main()
