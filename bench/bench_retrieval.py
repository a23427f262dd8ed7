"""Next-word retrieval on WikiText-2 with in-batch negatives: logQ correction or not.

    python bench/bench_retrieval.py [--steps 1000] [--seeds 0] [--variants none,unigram,...]

A two-tower model: the query tower reads the previous `--context` words (position-wise
embeddings, concatenated, one hidden ReLU layer), the item tower is an embedding of the next
word; both outputs are L2-normalised and scored by dot product / temperature, as in Yi et al.
(RecSys 2019). Next words follow the Zipfian word frequencies of the corpus, so in-batch
negatives are frequent words far more often than rare ones. Every variant trains from the same
initial model on the same batches:

  popularity no model: the k most frequent training words for every query (the bar to clear)
  none       in-batch softmax, no correction
  unigram    logQ from the true unigram of the training split: log(N * p(word))
  estimator  logQ from fastsoftmax.FrequencyEstimator (streaming, Yi et al.)
  mixed      mixed negatives: the batch plus --num-extra words drawn uniformly from the
             vocabulary, every column corrected by log(estimated batch count + M / V)

Reported: recall@10 and @100 of exact retrieval over the whole vocabulary (every word scored
by the item tower, no correction at serving time) for --eval-queries positions of the
validation split. Rows go to bench/results/retrieval-<device>.csv with the command line.
"""

import argparse
import os
import statistics
import sys
import time
from collections import Counter

import torch
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from common import DATA, RESULTS, append_rows, command_line, device_name  # noqa: E402

import fastsoftmax as fs  # noqa: E402

VARIANTS = ("popularity", "none", "unigram", "estimator", "mixed")


def read_tokens(path):
    with open(path, encoding="utf8") as f:
        return [w for line in f for w in line.split() + ["<eos>"]]


def load_corpus(folder):
    train = read_tokens(os.path.join(folder, "wiki.train.tokens"))
    valid = read_tokens(os.path.join(folder, "wiki.valid.tokens"))
    counts = Counter(train)
    vocab = [w for w, _ in counts.most_common()]
    index = {w: i for i, w in enumerate(vocab)}
    missing = sum(w not in index for w in valid)
    if missing:
        raise ValueError(f"{missing} validation tokens are not in the training vocabulary")
    unigram = torch.tensor([counts[w] for w in vocab], dtype=torch.float64)
    as_ids = lambda words: torch.tensor([index[w] for w in words])  # noqa: E731
    return as_ids(train), as_ids(valid), unigram / unigram.sum()


def windows(ids, context):
    """queries [T, context] of previous words and next words [T]."""
    q = ids.unfold(0, context, 1)[:-1]
    return q, ids[context:]


class QueryTower(nn.Module):
    def __init__(self, vocab, context, emb, hidden, dim):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb, sparse=True)
        self.mlp = nn.Sequential(nn.Linear(context * emb, hidden), nn.ReLU(),
                                 nn.Linear(hidden, dim))

    def forward(self, words):
        h = self.mlp(self.embedding(words).flatten(1))
        return nn.functional.normalize(h, dim=-1)


class ItemTower(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim, sparse=True)

    def forward(self, ids):
        return nn.functional.normalize(self.embedding(ids), dim=-1)


def make_loss(variant, args, vocab, item_tower):
    if variant in ("none", "unigram"):
        return fs.InBatchSoftmaxLoss(args.temperature)
    estimator = fs.FrequencyEstimator(args.num_buckets, alpha=args.alpha)
    if variant == "estimator":
        return fs.InBatchSoftmaxLoss(args.temperature, estimator=estimator)
    return fs.InBatchSoftmaxLoss(args.temperature, estimator=estimator, num_extra=args.num_extra,
                                 sampler=fs.UniformSampler(vocab), item_encoder=item_tower)


@torch.no_grad()
def recall(query_tower, item_tower, queries, targets, vocab, ks=(10, 100), chunk=2048):
    items = item_tower(torch.arange(vocab))
    hits = {k: 0 for k in ks}
    for start in range(0, len(targets), chunk):
        scores = query_tower(queries[start:start + chunk]) @ items.t()
        top = scores.topk(min(max(ks), vocab), dim=1).indices
        found = top == targets[start:start + chunk, None]
        for k in ks:
            hits[k] += int(found[:, :k].any(1).sum())
    return {k: hits[k] / len(targets) for k in ks}


def popularity_recall(unigram, targets, ks=(10, 100)):
    """Recall of always answering the k most frequent training words: the bar a model of the
    context has to clear (ids are sorted by falling frequency)."""
    return {k: float((targets < k).double().mean()) for k in ks}


def train_variant(variant, seed, data, args):
    train_q, train_t, eval_q, eval_t, unigram = data
    vocab = len(unigram)
    torch.manual_seed(seed)  # the same initial model for every variant
    query_tower = QueryTower(vocab, args.context, args.emb, args.hidden, args.dim)
    item_tower = ItemTower(vocab, args.dim)
    loss_fn = make_loss(variant, args, vocab, item_tower)
    sparse = [query_tower.embedding.weight, item_tower.embedding.weight]
    optimizers = [torch.optim.SparseAdam(sparse, lr=args.lr),
                  torch.optim.Adam(query_tower.mlp.parameters(), lr=args.lr)]
    order = torch.Generator().manual_seed(seed)  # the same batches for every variant
    draws = torch.Generator().manual_seed(seed + 1)
    log_unigram = (args.batch_size * unigram).log().float()
    start = time.perf_counter()
    for step in range(args.steps):
        rows = torch.randint(0, len(train_t), (args.batch_size,), generator=order)
        words, next_words = train_q[rows], train_t[rows]
        kw = {"log_q": log_unigram[next_words]} if variant == "unigram" else {}
        if variant == "mixed":
            kw["generator"] = draws
        loss = loss_fn(query_tower(words), item_tower(next_words), next_words, **kw)
        for opt in optimizers:
            opt.zero_grad()
        loss.backward()
        for opt in optimizers:
            opt.step()
        if args.log_every and (step + 1) % args.log_every == 0:
            print(f"  {variant} seed {seed} step {step + 1}: loss {loss.item():.3f}", flush=True)
    seconds = time.perf_counter() - start
    r = recall(query_tower, item_tower, eval_q, eval_t, vocab)
    return {"recall@10": r[10], "recall@100": r[100], "train_s": seconds}


def speed(args):
    """Forward+backward of the composed loss against its three matmuls alone (logits, and
    the two gradients): the time a fused native op could at best remove is the difference."""
    from common import time_it
    rows = []
    for n, m, d in ((1024, 0, 64), (4096, 0, 128), (4096, 4096, 128)):
        g = torch.Generator().manual_seed(0)
        q = torch.randn(n, d, generator=g, requires_grad=True)
        it = torch.randn(n, d, generator=g, requires_grad=True)
        ex = torch.randn(m, d, generator=g, requires_grad=True) if m else None
        ids = torch.randint(0, n // 2, (n,), generator=g)
        kw = dict(item_ids=ids, log_q=torch.randn(n), temperature=0.05)
        if m:
            kw.update(extra_items=ex, extra_ids=torch.randint(0, n, (m,), generator=g),
                      extra_log_q=torch.randn(m))

        def composed():
            fs.in_batch_softmax_loss(q, it, **kw).backward()

        cands = it.detach() if ex is None else torch.cat([it, ex]).detach()
        grad = torch.randn(n, n + m)

        def matmuls_only():
            q.detach() @ cands.t()
            grad @ cands
            grad.t() @ q.detach()

        t_loss, t_mm = (time_it(f, torch.device("cpu"), repeats=7)[0] for f in (composed,
                                                                            matmuls_only))
        print(f"N={n} M={m} D={d}: composed {t_loss * 1e3:.1f} ms, matmuls alone "
              f"{t_mm * 1e3:.1f} ms, element-wise share {(t_loss - t_mm) / t_loss:.0%}")
        rows.append(dict(n=n, m=m, d=d, composed_ms=round(t_loss * 1e3, 2),
                         matmuls_ms=round(t_mm * 1e3, 2),
                         device=device_name(torch.device("cpu")), command=command_line()))
    print("rows appended to", append_rows(os.path.join(RESULTS, "retrieval-speed-cpu.csv"), rows))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default=os.path.join(DATA, "wikitext-2"))
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--seeds", default="0", help="comma-separated")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--context", type=int, default=3)
    p.add_argument("--emb", type=int, default=32)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.05)
    p.add_argument("--lr", type=float, default=0.003)
    p.add_argument("--num-extra", type=int, default=512)
    p.add_argument("--num-buckets", type=int, default=1 << 17)
    p.add_argument("--alpha", type=float, default=0.01)
    p.add_argument("--eval-queries", type=int, default=10000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--log-every", type=int, default=0)
    p.add_argument("--out", default=os.path.join(RESULTS, "retrieval-cpu.csv"))
    p.add_argument("--speed", action="store_true",
                   help="instead: time the loss against its matmuls alone (no data needed)")
    args = p.parse_args()
    if args.speed:
        torch.set_num_threads(args.threads)
        return speed(args)
    variants = args.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            p.error(f"unknown variant {v!r}; choose from {','.join(VARIANTS)}")
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        p.error(f"--seeds must be comma-separated ints, got {args.seeds!r}")
    if not os.path.exists(os.path.join(args.data, "wiki.train.tokens")):
        p.error(f"WikiText-2 not found in {args.data} (give --data or set FASTSOFTMAX_DATA)")
    torch.set_num_threads(args.threads)

    train_ids, valid_ids, unigram = load_corpus(args.data)
    train_q, train_t = windows(train_ids, args.context)
    eval_q, eval_t = windows(valid_ids, args.context)
    pick = torch.randperm(len(eval_t), generator=torch.Generator().manual_seed(1234))
    pick = pick[: args.eval_queries]
    data = (train_q, train_t, eval_q[pick], eval_t[pick], unigram)
    print(f"WikiText-2: {len(train_t):,} training pairs, vocabulary {len(unigram):,}, "
          f"{len(pick):,} validation queries", flush=True)

    rows, results = [], {v: [] for v in variants if v != "popularity"}
    machine = device_name(torch.device("cpu"))
    if "popularity" in variants:
        variants.remove("popularity")
        base = popularity_recall(unigram, eval_t[pick])
        print(f"popularity (the most frequent words, no model): recall@10 {base[10]:.4f} "
              f"recall@100 {base[100]:.4f}", flush=True)
        rows.append(dict(variant="popularity", recall_at_10=round(base[10], 5),
                         recall_at_100=round(base[100], 5), device=machine,
                         command=command_line()))
    for seed in seeds:
        for variant in variants:
            r = train_variant(variant, seed, data, args)
            results[variant].append(r)
            print(f"{variant:>10} seed {seed}: recall@10 {r['recall@10']:.4f} recall@100 "
                  f"{r['recall@100']:.4f} ({r['train_s']:.0f} s)", flush=True)
            rows.append(dict(variant=variant, seed=seed, steps=args.steps,
                             batch_size=args.batch_size, num_extra=args.num_extra
                             if variant == "mixed" else 0, temperature=args.temperature,
                             recall_at_10=round(r["recall@10"], 5),
                             recall_at_100=round(r["recall@100"], 5),
                             train_s=round(r["train_s"], 1), device=machine,
                             command=command_line()))
    if variants:
        print(f"\n| variant | recall@10 | recall@100 | train s | (median of {len(seeds)} seeds)")
        print("| --- | --- | --- | --- |")
    for v in variants:
        med = lambda key: statistics.median(r[key] for r in results[v])  # noqa: E731
        print(f"| {v} | {med('recall@10'):.4f} | {med('recall@100'):.4f} | {med('train_s'):.0f} |")
    fields = ["variant", "seed", "steps", "batch_size", "num_extra", "temperature",
              "recall_at_10", "recall_at_100", "train_s", "device", "command"]
    print("rows appended to", append_rows(args.out, rows, fields))


if __name__ == "__main__":
    main()
