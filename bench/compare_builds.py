"""Before/after speed of two builds of fastsoftmax, side by side in one run.

Each tree (a checkout with its extension built in place) is timed in its own subprocess,
the two alternating round after round, so that a change of machine load hits both alike.
Prints each row's median per tree and the ratio new / old (above 1: the new build is
faster), e.g. a checkout of the previous release against this one:

    python bench/compare_builds.py /path/to/old-checkout . --rounds 5

Rows (CPU, float32, the shapes of docs/benchmarks.md): alias draws at V = 10^6, negative
sampling forward+backward (N = 2^18, K = 5, D = 100, V = 10^5), sampled softmax
forward+backward (N = 2048, D = 256, V = 10^5, S = 1024) as a functional and as the
SampledSoftmaxLoss module (and its exact eval loss), and one epoch of word2vec skip-gram
and CBOW with 2 workers on a Zipf corpus of 500,000 words (words/s).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

# Run inside the child, with the tree under test first on sys.path: prints one JSON line of
# {row: seconds or words/s}.
CHILD = r"""
import json, sys, time
import torch
import fastsoftmax as fs
from fastsoftmax.models import Word2Vec

torch.manual_seed(0)
torch.set_num_threads(2)


def best_of(fn, repeats=5):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


out = {}
sampler = fs.UnigramSampler(torch.rand(10**6, dtype=torch.float64) + 0.01)
out["alias draws 2^22, V=1e6 (s)"] = best_of(lambda: sampler.sample(2**22))

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

layer = fs.SampledSoftmaxLoss(256, 10**5, 1024, bias=True)  # bias given: defaults differ
out["SampledSoftmaxLoss module fwd+bwd (s)"] = best_of(lambda: layer(h2, t2).backward())
layer.eval()
with torch.no_grad():
    out["SampledSoftmaxLoss eval, exact (s)"] = best_of(lambda: layer(h2, t2))

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


def measure(tree: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    run = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                         text=True, cwd=os.path.abspath(tree))
    if run.returncode != 0:
        sys.exit(f"compare_builds: the run in {tree} failed:\n{run.stderr[-2000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", help="checkout with the earlier build")
    parser.add_argument("new", help="checkout with the later build")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    runs = {"old": [], "new": []}
    for r in range(args.rounds):
        for which in (("old", "new") if r % 2 == 0 else ("new", "old")):
            runs[which].append(measure(getattr(args, which)))
    print(f"{'row':36s} {'old median':>14s} {'new median':>14s} {'new/old speed':>14s}")
    for row in runs["old"][0]:
        old = statistics.median(x[row] for x in runs["old"])
        new = statistics.median(x[row] for x in runs["new"])
        speed = new / old if row.endswith("(words/s)") else old / new
        print(f"{row:36s} {old:14.4g} {new:14.4g} {speed:13.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
