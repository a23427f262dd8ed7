"""The CPU kernels bench/roofline.py judges, each with its bound (bench/bound_model.py), the
call that runs it, and its peers.

A Case holds providers: ("ours", fn, items) first, then peers. `items` is the work one call
does (draws, rows, words), so providers of different sizes compare by rate. Peers that are
slow are timed once without warm-up (`once`).
"""

import collections
import logging
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Callable, List

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import fastsoftmax as fs  # noqa: E402
import bound_model as bm  # noqa: E402
from common import DATA  # noqa: E402
from fastsoftmax import functional as FF  # noqa: E402
from fastsoftmax.models import Word2Vec  # noqa: E402
from fastsoftmax.models.word2vec.training import BATCH_GROUP  # noqa: E402
from peers import HAS_LCE, hs_ours, hs_plain, lce_loss, make_hs  # noqa: E402

W2V_PARAMS = dict(vector_size=100, window=5, negative=5, sample=1e-3, min_count=5, alpha=0.025,
                  min_alpha=1e-4)
CORPUS = os.path.join(DATA, "wikitext-2", "wiki.train.tokens")


@dataclass
class Provider:
    name: str
    fn: Callable[[], object]
    items: float  # work units of one call
    once: bool = False  # slow peer: one timed run, no warm-up
    max_repeats: int = 0  # long calls (a word2vec epoch): at most this many runs, no warm-up


@dataclass
class Case:
    name: str  # stable key (CSV `case`, bench-check subset)
    shape: str
    unit: str  # what `items` counts
    bound: bm.Bound
    providers: List[Provider] = field(default_factory=list)


def zipf_weights(v: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    counts = 1e9 / torch.arange(1, v + 1, dtype=torch.float64) ** 1.1
    return (counts[torch.randperm(v, generator=g)] ** 0.75).float()


def distinct(*ids) -> int:
    """Distinct rows among the id tensors (first touches of a table)."""
    return int(torch.unique(torch.cat([i.flatten() for i in ids])).numel())


def fwd_bwd(loss_fn, params):
    def reset():
        for p in params:
            p.grad = None

    def run():
        reset()
        loss_fn().backward()
    run.reset = reset  # the memory measurement frees the last gradients before its baseline
    return run


def alias_case(quick: bool) -> Case:
    v, n = 10**6, (2 if quick else 10) * 10**6
    p = zipf_weights(v)
    sampler = fs.AliasSampler(p)
    m = n // 10  # torch.multinomial is ~15x slower: a tenth of the draws
    return Case("alias_draws", f"V={v:.0e} n={n:.0e}", "draws", bm.sample_draws(v, n), [
        Provider("ours", lambda: sampler.sample(n), n),
        Provider("torch.multinomial", lambda: torch.multinomial(p, m, replacement=True), m),
    ])


def neg_case(quick: bool) -> Case:
    n, k, d, v = 2**18, 5, 100, 10**5
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(v, d, generator=g) * 0.1).requires_grad_()
    h = (torch.randn(n, d, generator=g) * 0.1).requires_grad_()
    sampler = fs.UnigramSampler(torch.arange(v, 0, -1).double() ** -1.0 * 1e6)
    t, neg = sampler.sample(n, generator=g), sampler.sample(n, k, generator=g)

    def plain():
        pos = (w[t] * h).sum(1)
        negs = torch.bmm(w[neg], h.unsqueeze(2)).squeeze(2)
        return -(F.logsigmoid(pos).sum() + F.logsigmoid(-negs).sum())

    ours = lambda: FF.negative_sampling_loss(h, w, t, negatives=neg, reduction="sum")  # noqa: E731
    return Case("negative_sampling", f"N={n} K={k} D={d} V={v:.0e}", "rows",
                bm.negative_sampling(n, k, d, v, distinct=distinct(t, neg)), [
                    Provider("ours", fwd_bwd(ours, [h, w]), n),
                    Provider("plain", fwd_bwd(plain, [h, w]), n)])


def _lce_peer(h, w, b, t, params):
    if not HAS_LCE:
        return []
    return [Provider("lce", fwd_bwd(lambda: lce_loss(None)(h, w, b, t), params), h.shape[0],
                     once=True)]


def sampled_case(quick: bool) -> Case:
    n, d, v, s = 2048, 256, 10**5, 1024
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(v, d, generator=g) * 0.05).requires_grad_()
    b = torch.zeros(v).requires_grad_()
    h = torch.randn(n, d, generator=g).requires_grad_()
    sampler = fs.LogUniformSampler(v)
    t = sampler.sample(n, generator=g)
    sampled = sampler.candidates(t, s, generator=g)

    def plain():
        cand, tq, sq = sampled
        true_logit = (h * w[t]).sum(1) + b[t] - tq.log()
        logits = torch.addmm(b[cand] - sq.log(), h, w[cand].T)
        logits = logits.masked_fill(cand[None, :] == t[:, None], float("-inf"))
        all_logits = torch.cat([true_logit[:, None], logits], 1)
        return (torch.logsumexp(all_logits, 1) - true_logit).sum()

    ours = lambda: FF.sampled_softmax_loss(h, w, t, linear_bias=b, sampled=sampled,  # noqa: E731
                                           reduction="sum")
    return Case("sampled_softmax", f"N={n} D={d} V={v:.0e} S={s}", "rows",
                bm.sampled_softmax(n, s, d, v, distinct=distinct(t, sampled[0])), [
                    Provider("ours", fwd_bwd(ours, [h, w, b]), n),
                    Provider("plain", fwd_bwd(plain, [h, w, b]), n),
                    *_lce_peer(h, w, b, t, [h, w, b])])


def hs_case(quick: bool) -> Case:
    n, d, v = 2048, 256, 10**5
    c = make_hs(torch.device("cpu"), torch.float32, (n, d, v))
    h, w, t, tree = c["h"], c["w"], c["t"], c["tree"]
    plain_args = (h, w, t, c["points"], c["signs"], c["valid"])
    return Case("hierarchical_softmax", f"N={n} D={d} V={v:.0e}", "rows",
                bm.hierarchical_softmax(n, d, v, c["mean_depth"],
                                        distinct=distinct(c["points"][t][c["valid"][t] > 0])), [
                    Provider("ours", fwd_bwd(lambda: hs_ours(h, w, t, tree), [h, w]), n),
                    Provider("plain", fwd_bwd(lambda: hs_plain(*plain_args), [h, w]), n),
                    *_lce_peer(h, c["w_full"], None, t, [h, c["w_full"]])])


def full_case(quick: bool) -> Case:
    n, d, v = (256 if quick else 1024), 256, 10**5
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(v, d, generator=g) * 0.05).requires_grad_()
    b = torch.zeros(v).requires_grad_()
    h = torch.randn(n, d, generator=g).requires_grad_()
    t = torch.randint(0, v, (n,), generator=g)
    ours = lambda: FF.full_softmax_loss(h, w, t, linear_bias=b, reduction="sum")  # noqa: E731
    plain = lambda: F.cross_entropy(F.linear(h, w, b), t, reduction="sum")  # noqa: E731
    return Case("full_softmax", f"N={n} D={d} V={v:.0e}", "rows", bm.full_softmax(n, d, v), [
        Provider("ours", fwd_bwd(ours, [h, w, b]), n),
        Provider("plain", fwd_bwd(plain, [h, w, b]), n, once=True),
        *_lce_peer(h, w, b, t, [h, w, b])])


def load_corpus(max_words: int):
    """The first sentences of WikiText-2 train up to max_words raw words."""
    out, words = [], 0
    with open(CORPUS, encoding="utf8") as f:
        for line in f:
            toks = line.split()
            if toks:
                out.append(toks)
                words += len(toks)
                if words >= max_words:
                    break
    return out, words


def vocabulary_counts(sentences, min_count: int, sample: float):
    """(counts of the words in vocabulary, their expected counts after subsampling), by
    word2vec's keep probability min(1, (sqrt(c / (s T)) + 1) s T / c)."""
    counts = collections.Counter(w for s in sentences for w in s)
    counts = [c for c in counts.values() if c >= min_count]
    thr = sample * sum(counts)
    return counts, [min(c, (math.sqrt(c / thr) + 1) * thr) for c in counts]


def word2vec_bound(total: int, counts, kept, sg: bool, group: int) -> bm.Bound:
    """The bound of one epoch over `total` in-vocabulary words, its revisits from the share
    of row visits that stay in the nearest cache (the smallest measured level, 1 MiB)."""
    p = W2V_PARAMS
    noise = [c ** 0.75 for c in counts]
    noise = [q / sum(noise) for q in noise]
    hot = bm.word2vec_hot_share(kept, noise, p["vector_size"], p["window"], p["negative"], sg,
                                group, cache_bytes=2 ** 20)
    return bm.word2vec(total, p["vector_size"], p["window"], p["negative"], sg=sg,
                       sample_keep=sum(kept) / total, vocab=len(counts), group=group, hot=hot)


# The update orders the roofline times: word2vec.c's pairs, and shared negatives (the group
# of centres sharing them is the trainer's, per model).
W2V_ORDERS = {"": ("pairs", None), "_batched": ("batched", BATCH_GROUP)}


def word2vec_cases(quick: bool, gensim: bool = True) -> List[Case]:
    # Each timed train() restarts the learning-rate decay, which both libraries warn about.
    for name in ("gensim", "fastsoftmax"):
        logging.getLogger(name).setLevel(logging.ERROR)
    if not os.path.exists(CORPUS):
        print(f"word2vec skipped: no corpus at {CORPUS}")
        return []
    sentences, raw = load_corpus(300_000 if quick else 1_000_000)
    counts, kept = vocabulary_counts(sentences, W2V_PARAMS["min_count"], W2V_PARAMS["sample"])
    total, vocab = sum(counts), len(counts)
    cases = []
    for suffix, (update, groups) in W2V_ORDERS.items():
        for sg in (1, 0):
            models = [("ours", Word2Vec, dict(update=update))]
            if gensim and not suffix:  # gensim once, beside the pairs order
                try:
                    from gensim.models import Word2Vec as GWord2Vec
                    models.append(("gensim", GWord2Vec, {}))
                except ImportError:
                    print("gensim peer skipped: gensim is not installed")
            providers = []
            for name, cls, extra in models:
                m = cls(sg=sg, workers=torch.get_num_threads(), seed=1, epochs=1, **W2V_PARAMS,
                        **extra)
                m.build_vocab(sentences)
                providers.append(Provider(name, lambda m=m: m.train(
                    sentences, total_examples=m.corpus_count,
                    total_words=m.corpus_total_words, epochs=1), raw, max_repeats=3))
            group = groups[sg] if groups else 0
            bound = word2vec_bound(total, counts, kept, bool(sg), group)
            keep = sum(kept) / total
            cases.append(Case(f"word2vec_{'sg' if sg else 'cbow'}{suffix}",
                              f"words={raw} V={vocab} D=100 W=5 K=5 keep={keep:.2f}"
                              + (f" G={group}" if group else ""), "words", bound, providers))
    return cases


BUILDERS = {"alias": alias_case, "neg": neg_case, "sampled": sampled_case, "hs": hs_case,
            "full": full_case}


def build(names, quick: bool, gensim: bool = True) -> List[Case]:
    cases = []
    for name in names:
        if name == "word2vec":
            cases += word2vec_cases(quick, gensim)
        else:
            cases.append(BUILDERS[name](quick))
    return cases
