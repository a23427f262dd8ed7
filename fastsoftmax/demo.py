"""The fastsoftmax demonstration, offline: `python -m fastsoftmax.demo`.

Uses the Penn Treebank from ../shared/data (or $FASTSOFTMAX_DATA) when present, otherwise a
generated Zipfian vocabulary.
"""

import collections
import os
import time

import torch

import fastsoftmax as fs

HERE = os.path.dirname(os.path.abspath(__file__))


def data_dir() -> str:
    return os.environ.get("FASTSOFTMAX_DATA", os.path.join(HERE, "..", "..", "shared", "data"))


def vocabulary():
    """(words, counts) sorted by decreasing count, and where they came from."""
    path = os.path.join(data_dir(), "ptb", "ptb.train.txt")
    if os.path.exists(path):
        counter = collections.Counter()
        with open(path, encoding="utf-8") as f:
            for line in f:
                counter.update(line.split() + ["<eos>"])
        words, counts = zip(*counter.most_common())
        return list(words), torch.tensor(counts, dtype=torch.float64), "Penn Treebank train"
    v = 10_000
    counts = (1e7 / torch.arange(1, v + 1, dtype=torch.float64) ** 1.07).round()
    return [f"w{i}" for i in range(v)], counts, "generated Zipfian counts (PTB not found)"


def section(title: str):
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


def demo_samplers():
    words, counts, source = vocabulary()
    section(f"Unigram^0.75 alias sampler over {len(words):,} words ({source})")
    t0 = time.perf_counter()
    sampler = fs.UnigramSampler(counts, power=0.75)
    build_ms = 1e3 * (time.perf_counter() - t0)
    torch.manual_seed(0)
    n = 10_000_000
    draws = sampler.sample(n)
    freq = torch.bincount(draws, minlength=len(words)).double() / n
    p = sampler.probs.double()
    print(f"table built in {build_ms:.1f} ms; {n:,} draws")
    print(f"{'word':>12s} {'count':>9s} {'target p':>10s} {'drawn':>10s}")
    for i in list(range(6)) + [100, 1000, len(words) - 1]:
        print(f"{words[i]:>12s} {int(counts[i]):9d} {float(p[i]):10.6f} {float(freq[i]):10.6f}")
    tv = 0.5 * float((freq - p).abs().sum())
    print(f"total variation distance between draws and target: {tv:.5f} "
          f"(sampling noise alone gives about {0.5 * float((2 * p * (1 - p) / 3.14159 / n).sqrt().sum()):.5f})")

    section("Speed: 10 million draws, against torch.multinomial")
    probs = sampler.probs
    t0 = time.perf_counter()
    sampler.sample(n)
    ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    torch.multinomial(probs, n, replacement=True)
    theirs = time.perf_counter() - t0
    print(f"fastsoftmax.UnigramSampler.sample: {ours:.3f} s ({n / ours:.3g} draws/s)")
    print(f"torch.multinomial(replacement=True): {theirs:.3f} s ({n / theirs:.3g} draws/s)")
    print(f"speed-up: {theirs / ours:.1f}x on {torch.get_num_threads()} CPU threads")

    targets = [w for w in ("the", "stock") if w in words] or words[:2]
    section(f"TensorFlow-style candidates: 8 unique negatives for targets {targets}")
    true = torch.tensor([[words.index(w)] for w in targets])
    out = sampler.candidates(true, 8, unique=True, generator=torch.Generator().manual_seed(1))
    print("sampled:", [words[i] for i in out.sampled_candidates.tolist()])
    print("expected count of the sampled:", [round(x, 4) for x in out.sampled_expected_count.tolist()])
    print("expected count of the targets:", [round(x, 4) for x in out.true_expected_count.flatten().tolist()])


def demo_losses():
    section("Sampled softmax vs full softmax: V = 100,000, N = 2048 rows, D = 256")
    import torch.nn.functional as F

    torch.manual_seed(0)
    v, n, d = 100_000, 2048, 256
    counts = (1e7 / torch.arange(1, v + 1, dtype=torch.float64) ** 1.07).round() + 1
    layer = fs.SampledSoftmaxLoss(d, v, num_sampled=1024, counts=counts, bias=True)
    h = torch.randn(n, d, requires_grad=True)
    target = fs.UnigramSampler(counts, power=1.0).sample(n)

    def step(fn):
        t0 = time.perf_counter()
        fn().backward()
        return time.perf_counter() - t0

    layer.train()
    step(lambda: layer(h, target))  # warm-up
    sampled_s = min(step(lambda: layer(h, target)) for _ in range(3))
    full_s = min(step(lambda: F.cross_entropy(F.linear(h, layer.linear_weight, layer.linear_bias), target))
                 for _ in range(2))
    print(f"forward+backward: sampled softmax (1024 samples) {1e3 * sampled_s:.0f} ms, "
          f"full softmax {1e3 * full_s:.0f} ms: {full_s / sampled_s:.1f}x faster")
    layer.eval()
    with torch.no_grad():
        exact = F.cross_entropy(F.linear(h, layer.linear_weight, layer.linear_bias), target)
        print(f"eval mode returns the exact cross entropy: {float(layer(h, target)):.6f} "
              f"(F.cross_entropy: {float(exact):.6f})")


def demo_word2vec():
    train = os.path.join(data_dir(), "wikitext-2", "wiki.train.tokens")
    pairs = os.path.join(data_dir(), "word-similarity", "wordsim353.tsv")
    if not os.path.exists(train):
        print("\n(word2vec section skipped: WikiText-2 not found)")
        return
    from fastsoftmax.models import Word2Vec

    section("word2vec skip-gram on WikiText-2 train (5 epochs, 100 dims, 5 negatives)")
    t0 = time.perf_counter()
    model = Word2Vec(corpus_file=train, sg=1, vector_size=100, window=5, negative=5,
                     min_count=5, epochs=5, seed=1)
    seconds = time.perf_counter() - t0
    words = sum(1 for line in open(train, encoding="utf8") for _ in line.split())
    print(f"{len(model.wv.index_to_key):,} words in the vocabulary; {5 * words / seconds:,.0f} "
          f"corpus words/s including vocabulary building")
    for word in ("king", "river", "music"):
        if word in model.wv:
            near = ", ".join(w for w, _ in model.wv.most_similar(word, topn=6))
            print(f"nearest to {word!r}: {near}")
    if os.path.exists(pairs):
        (pearson, _), (spearman, _), oov = model.wv.evaluate_word_pairs(pairs)
        print(f"WordSim-353: Spearman {spearman:.3f}, Pearson {pearson:.3f}, {oov:.1f}% pairs OOV")


def main():
    print(f"fastsoftmax {fs.__version__}; build: {fs.build_info()}")
    demo_samplers()
    demo_losses()
    demo_word2vec()


if __name__ == "__main__":
    main()
