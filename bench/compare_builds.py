"""Before/after speed of two builds of fastsoftmax, side by side in one run.

Each tree (a checkout with its extension built in place) is timed in its own subprocess,
the two alternating round after round, so that a change of machine load hits both alike.
Prints each row's median per tree and the ratio new / old (above 1: the new build is
faster), e.g. a checkout of the previous release against this one:

    python bench/compare_builds.py /path/to/old-checkout . --rounds 5

Rows (CPU, float32, the shapes of docs/benchmarks.md): alias draws at V = 10^6 (and
torch.multinomial for the same draws), negative sampling forward+backward (N = 2^18, K = 5,
D = 100, V = 10^5), sampled softmax forward+backward (N = 2048, D = 256, V = 10^5,
S = 1024) as a functional accumulating into .grad, with a fresh .grad (None before each
step, as after optimizer.zero_grad()), with sparse=True, and plain PyTorch autograd on the
same candidates; as the SampledSoftmaxLoss module (and its exact eval loss); and one epoch of
word2vec skip-gram and CBOW with 2 workers on a Zipf corpus of 500,000 words (words/s).

Each timed row is the best of 5 runs in one process, both as wall time and as the process's
CPU time. On a shared machine the CPU time is the steadier measure of the code (a descheduled
thread stops both clocks' ratio from meaning anything for wall time, not for CPU time); with
--threads 1 there is also no spinning of an idle worker thread in it. --csv appends every
median to a CSV of bench/common.py's schema (provider: the tree's label and git commit).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [BENCH, os.path.dirname(BENCH)]  # common.py imports fastsoftmax._atomic

# Run inside the child, with the tree under test first on sys.path: prints one JSON line of
# {row: [wall seconds, CPU seconds] or words/s}.
CHILD = r"""
import json, sys, time
import torch
import fastsoftmax as fs
from fastsoftmax.models import Word2Vec

torch.manual_seed(0)
torch.set_num_threads(int(sys.argv[1]))


def best_of(fn, repeats=5):
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return [min(wall), min(cpu)]


out = {}
sampler = fs.UnigramSampler(torch.rand(10**6, dtype=torch.float64) + 0.01)
out["alias draws 2^22, V=1e6 (s)"] = best_of(lambda: sampler.sample(2**22))
probs = sampler.probs.float()
out["torch.multinomial 2^22, V=1e6 (s)"] = best_of(
    lambda: torch.multinomial(probs, 2**22, replacement=True), 3)

h = torch.randn(2**18, 100, requires_grad=True)
w = (0.01 * torch.randn(10**5, 100)).requires_grad_()
t = torch.randint(0, 10**5, (2**18,))
neg = torch.randint(0, 10**5, (2**18, 5))
out["negative sampling fwd+bwd (s)"] = best_of(
    lambda: fs.functional.negative_sampling_loss(h, w, t, negatives=neg, reduction="sum")
    .backward())

h2 = torch.randn(2048, 256, requires_grad=True)
w2 = (0.01 * torch.randn(10**5, 256)).requires_grad_()
t2 = torch.randint(0, 10**5, (2048,))
out["sampled softmax fwd+bwd (s)"] = best_of(
    lambda: fs.functional.sampled_softmax_loss(h2, w2, t2, num_sampled=1024).backward())
log_uniform = fs.LogUniformSampler(10**5)
fixed = log_uniform.candidates(t2.unsqueeze(1), 1024)


def fresh(sparse=False):
    h2.grad = w2.grad = None
    fs.functional.sampled_softmax_loss(h2, w2, t2, sampled=fixed, sparse=sparse).backward()


def plain():
    # The same loss in plain autograd: gather, matmul, logQ, accidental-hit mask, CE.
    h2.grad = w2.grad = None
    ids = torch.cat([t2, fixed.sampled_candidates])
    rows = w2[ids]
    true = (h2 * rows[:2048]).sum(1) - fixed.true_expected_count.squeeze(1).log()
    sampled = h2 @ rows[2048:].T - fixed.sampled_expected_count.log()
    sampled = sampled.masked_fill(fixed.sampled_candidates[None] == t2[:, None], -1e30)
    logits = torch.cat([true[:, None], sampled], 1)
    torch.nn.functional.cross_entropy(logits, torch.zeros(2048, dtype=torch.long)).backward()


out["sampled softmax fwd+bwd, fresh grad (s)"] = best_of(fresh)
out["sampled softmax fwd+bwd, sparse=True (s)"] = best_of(lambda: fresh(True))
out["plain autograd sampled softmax, fresh grad (s)"] = best_of(plain)

layer = fs.SampledSoftmaxLoss(256, 10**5, 1024, bias=True)  # bias given: defaults differ
out["SampledSoftmaxLoss module fwd+bwd (s)"] = best_of(lambda: layer(h2, t2).backward())
layer.eval()
with torch.no_grad():
    out["SampledSoftmaxLoss eval, exact (s)"] = best_of(lambda: layer(h2, t2))

if sys.argv[2] == "1":
    g = torch.Generator().manual_seed(1)
    ranks = torch.arange(1, 5001, dtype=torch.float64)
    ids = torch.multinomial(1 / ranks, 500_000, replacement=True, generator=g).tolist()
    corpus = [[f"w{i}" for i in ids[k:k + 20]] for k in range(0, len(ids), 20)]
    for sg, name in ((1, "word2vec skip-gram (words/s)"), (0, "word2vec CBOW (words/s)")):
        model = Word2Vec(vector_size=100, window=5, min_count=1, workers=2, sg=sg, seed=1)
        model.build_vocab(corpus)
        start = time.perf_counter()
        model.train(corpus, total_examples=len(corpus), epochs=1)
        out[name] = 500_000 / (time.perf_counter() - start)
print(json.dumps(out))
"""


def measure(tree: str, threads: int, word2vec: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    run = subprocess.run([sys.executable, "-c", CHILD, str(threads), str(int(word2vec))],
                         env=env, capture_output=True, text=True, cwd=os.path.abspath(tree))
    if run.returncode != 0:
        sys.exit(f"compare_builds: the run in {tree} failed:\n{run.stderr[-2000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def commit_of(tree: str) -> str:
    run = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True)
    return run.stdout.strip() or "no git"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", help="checkout with the earlier build")
    parser.add_argument("new", help="checkout with the later build")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="torch threads in each child")
    parser.add_argument("--no-word2vec", action="store_true", help="leave out the word2vec rows")
    parser.add_argument("--labels", default=None,
                        help="OLD,NEW names for the CSV (default: each tree's git commit)")
    parser.add_argument("--csv", default=None,
                        help="append the medians here (bench/common.py's schema)")
    args = parser.parse_args()
    runs = {"old": [], "new": []}
    for r in range(args.rounds):
        for which in (("old", "new") if r % 2 == 0 else ("new", "old")):
            runs[which].append(measure(getattr(args, which), args.threads, not args.no_word2vec))
    labels = dict(zip(("old", "new"), args.labels.split(","))) if args.labels else {
        k: commit_of(getattr(args, k)) for k in ("old", "new")}
    print(f"{args.threads} threads, medians of {args.rounds} rounds; old = {labels['old']}, "
          f"new = {labels['new']}")
    print(f"{'row':48s} {'old wall':>9s} {'new wall':>9s} {'speed':>7s} "
          f"{'old cpu':>9s} {'new cpu':>9s} {'speed':>7s}")
    rows = []
    for row in runs["old"][0]:
        words = row.endswith("(words/s)")
        cols = range(1) if words else range(2)
        med = {k: [statistics.median(x[row] if words else x[row][i] for x in runs[k])
                   for i in cols] for k in runs}
        speed = [med["new"][i] / med["old"][i] if words else med["old"][i] / med["new"][i]
                 for i in cols]
        cells = "".join(f" {med['old'][i]:9.4g} {med['new'][i]:9.4g} {speed[i]:6.2f}x"
                        for i in cols)
        print(f"{row:48s}{cells}")
        for k in runs:
            for i, metric in zip(cols, ("median_s", "median_cpu_s")):
                rows.append(dict(case=row, provider=labels[k],
                                 shape=f"threads={args.threads} rounds={args.rounds}",
                                 metric="words_per_s" if words else metric, value=med[k][i]))
    if args.csv:
        from common import append_rows, command_line, device_name, SCHEMA
        import datetime
        import torch
        torch.set_num_threads(args.threads)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        extra = dict(time=stamp, device=device_name("cpu"), command=command_line())
        print("wrote", append_rows(args.csv, [dict(r, **extra) for r in rows], SCHEMA))
    return 0


if __name__ == "__main__":
    sys.exit(main())
