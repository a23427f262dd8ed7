"""The README's headline tables."""

import statistics

from .common import (Sources, count, latest_run, markdown, ms, pick, ratio, rows_of, sci,
                     shape, signed, table, value)
from .word2vec import t_interval

KERNELS = [  # roofline case, what it is, its rate metric (None: a time), its main peer
    ("alias_draws", "draws from unigram^0.75", "draws_per_s", "torch.multinomial"),
    ("negative_sampling", "negative sampling fwd+bwd", None, "plain"),
    ("sampled_softmax", "sampled softmax fwd+bwd", None, "plain"),
    ("hierarchical_softmax", "hierarchical softmax fwd+bwd", None, "plain"),
    ("full_softmax", "exact softmax fwd+bwd", None, "plain"),
]
PEERS = {"plain": "plain PyTorch", "gensim": "gensim 4.4.0",
         "torch.multinomial": "`torch.multinomial`"}


def _figure(rows, case, provider, rate):
    if rate:
        return f"{sci(value(rows, case=case, provider=provider, metric=rate))}/s"
    return ms(value(rows, case=case, provider=provider, metric="median_ms"))


def roofline_rows(src):
    """Each kernel from the newest one-thread roofline run that timed it."""
    from .roofline import latest_per_kernel

    latest = latest_per_kernel()
    body = []
    for case, what, rate, peer in KERNELS:
        run = src.add(latest[case])
        mine = pick(run, case=case, provider="ours")
        dims = shape(mine[0]["shape"]).replace("n = ", "draws = ")
        unit = rate.replace("_per_s", "") if rate else ""
        body.append([f"{what} ({dims})", _figure(run, case, "ours", rate).replace("/s", f" {unit}/s"),
                     f"{PEERS[peer]}: " + _figure(run, case, peer, rate).replace("/s", f" {unit}/s"),
                     f"**{ratio(value(run, case=case, provider='ours', metric='speedup_vs_' + peer))}**"])
    return body


def word2vec_speed_rows(src):
    """word2vec's default order per model against gensim, both timed side by side in each run
    of bench/bench_word2vec_update.py at its newest commit (the median run, and the range)."""
    from .word2vec_update import DEFAULT_ORDER, newest_runs, ratio_range, speeds

    runs = newest_runs(src)
    body = []
    orders = {"batched": "shared negatives", "pairs": "word2vec.c's order"}
    for model, name in (("sg", "skip-gram"), ("cbow", "CBOW")):
        order = orders[DEFAULT_ORDER[model]]
        for inp, label in (("iterable", "a list of sentences"), ("corpus_file", "`corpus_file`")):
            pairs = speeds(runs, model, inp, DEFAULT_ORDER[model])
            ours = statistics.median(o for o, _ in pairs)
            gensim = statistics.median(g for _, g in pairs)
            body.append([f"word2vec {name} (default: {order}), WikiText-2 from {label}, 1 epoch, "
                         f"2 workers, {len(pairs)} runs", f"{sci(ours)} words/s",
                         f"gensim 4.4.0: {sci(gensim)} words/s", f"**{ratio_range(pairs)}**"])
    return body


# The update orders the README quotes (bench/word2vec_parity.py's names), a row each where
# 5-epoch rows exist beside gensim's.
README_W2V_IMPLS = {"ours": ", word2vec.c's order", "ours-batched": ", shared negatives"}


def word2vec_quality_rows(src):
    """Each update order against gensim iterable at 5 epochs, paired seeds, from the newest
    workers setting that holds both (bench/word2vec_parity.py; a later row of a seed replaces
    an earlier one, as its --summarize does)."""
    from .word2vec import paired_differences, parity_scores

    runs, used = parity_scores()
    body = []
    for impl, label in README_W2V_IMPLS.items():
        for setting, name in (("sg-neg", "skip-gram"), ("cbow-neg", "CBOW")):
            groups = {w for (st, i, e, w, _) in runs if (st, i, e) == (setting, impl, 5)
                      and paired_differences(runs, setting, impl, "gensim-iterable", 5, w)}
            if groups:
                body.append(quality_row(src, runs, used, impl, setting, f"{name}{label}",
                                        groups))
    return body


def quality_row(src, runs, used, impl, setting, name, groups):
    """One README row: `impl` against gensim iterable in the newest of `groups` (workers)."""
    from .word2vec import paired_differences

    def newest(workers):
        return max(r["time"] for r in used if r["case"].endswith("/" + setting)
                   and r["provider"].split(" ")[0] == impl
                   and f"epochs=5 workers={workers} " in r["shape"])
    workers = max(groups, key=newest)
    src.add(r for r in used if r["case"].endswith("/" + setting) and r["metric"] == "ws353"
            and f"epochs=5 workers={workers} " in r["shape"]
            and r["provider"].split(" ")[0] in (impl, "gensim-iterable"))
    diff = paired_differences(runs, setting, impl, "gensim-iterable", 5, workers)["ws353"]
    mean, half = t_interval(diff)
    score = lambda who: statistics.mean(  # noqa: E731
        v["ws353"] for (st, i, e, w, _), v in runs.items()
        if (st, i, e, w) == (setting, who, 5, workers))
    return [f"word2vec {name} quality, WikiText-2, 5 epochs, {len(diff)} seeds",
            f"WS-353 {score(impl):.3f}", f"gensim 4.4.0: {score('gensim-iterable'):.3f}",
            f"{signed(mean)} ± {half:.3f} (95% CI)"]


def gpu_order_rows(src):
    """word2vec in CUDA's update order, replayed on the CPU, against our 1-thread trainer
    (bench/word2vec_gpu_quality.py's latest run with rounds)."""
    rows = rows_of("word2vec-gpu-quality-cpu")
    stamp = max(r["time"] for r in rows if r["provider"].startswith("rounds"))
    run = src.add(pick(rows, time=stamp, metric="ws353"))
    body = []
    for model, name in (("sg", "skip-gram"), ("cbow", "CBOW")):
        mine = pick(run, case=lambda c: c.endswith("/" + model))
        by_seed = lambda p: {r["shape"].split("seed=")[1].split()[0]: float(r["value"])  # noqa: E731
                             for r in mine if p(r["provider"])}
        rounds = by_seed(lambda p: p.startswith("rounds"))
        seq = by_seed(lambda p: p == "sequential, 1 thread")
        seeds = sorted(set(rounds) & set(seq))
        mean, half = t_interval([rounds[s] - seq[s] for s in seeds])
        body.append([f"word2vec {name} in CUDA's update order (replayed on the CPU), "
                     f"WikiText-2, 5 epochs, {len(seeds)} seeds",
                     f"WS-353 {statistics.mean(rounds.values()):.3f}",
                     f"our CPU trainer, 1 thread: {statistics.mean(seq.values()):.3f}",
                     f"{signed(mean)} ± {half:.3f} (95% CI)"])
    return body


def lm_row(src):
    rows = src.add(latest_run(rows_of("lm-cpu"), case="quality/ptb",
                              command="python bench/bench_lm.py quality --heads full sampled "
                                      "nce --jobs 2"))
    def get(head, metric):
        return value(rows, provider=head, metric=metric)
    return [["PTB language model (Zaremba et al. small, 13 epochs), test perplexity",
             f"sampled softmax: {get('sampled', 'test_ppl'):.2f} in "
             f"{count(get('sampled', 'train_seconds'))} s",
             f"full softmax: {get('full', 'test_ppl'):.2f} in "
             f"{count(get('full', 'train_seconds'))} s",
             f"{get('sampled', 'test_ppl_relative_to_full'):.3f}"]]


@table("readme-cpu")
def readme_cpu():
    src = Sources()
    body = (roofline_rows(src) + word2vec_speed_rows(src) + word2vec_quality_rows(src)
            + gpu_order_rows(src) + lm_row(src))
    return markdown(["what", "fastsoftmax", "compared with", "ratio"], body) + ["", src.line()]


@table("readme-gpu")
def readme_gpu():
    src = Sources()
    body = []
    draws = src.add(latest_run(rows_of("sampler-cuda"), case="draw"))
    big = max({r["shape"] for r in draws}, key=lambda s: float(s.split()[0][2:]))
    rate = lambda p: value(draws, provider=p, shape=big, metric="draws_per_s")  # noqa: E731
    body.append([f"draws from unigram^0.75 ({shape(big)})",
                 f"{sci(rate('fastsoftmax.AliasSampler'))} draws/s",
                 f"`torch.multinomial`: {sci(rate('torch.multinomial'))} draws/s",
                 f"**{ratio(rate('fastsoftmax.AliasSampler') / rate('torch.multinomial'))}**"])
    neg = src.add(latest_run(rows_of("losses-cuda"), case="negative_sampling"))
    dims = "float32 N=1048576 D=300 V=100000 K=5"
    mine = value(neg, provider="ours", shape=dims, metric="median_ms")
    body.append([f"negative sampling fwd+bwd ({shape(dims)})",
                 f"{ms(mine)}, {mine / value(neg, provider='ours', shape=dims, metric='bound_ms'):.2f}× "
                 "its bytes bound",
                 f"plain PyTorch: {ms(value(neg, provider='plain', shape=dims, metric='median_ms'))}",
                 f"**{ratio(value(neg, provider='ours', shape=dims, metric='speedup_vs_plain'))}**"])
    lm = src.add(rows_of("losses-lm-cuda"))
    dims = "float32 N=8192 D=1024 V=800000 S=8192"
    t = lambda p: value(lm, case="sampled_softmax", provider=p, shape=dims, metric="median_ms")  # noqa: E731
    body.append([f"sampled softmax fwd+bwd ({shape(dims)})", ms(t("ours")),
                 f"full softmax: {ms(t('full_softmax'))}; Liger-Kernel: {ms(t('liger'))}",
                 f"**{ratio(t('full_softmax') / t('ours'))}** (Liger {ratio(t('liger') / t('ours'))})"])
    cce = src.add(latest_run(rows_of("cce-headline-cuda"), case="cce_headline"))
    t = lambda p: value(cce, provider=p, metric="median_ms")  # noqa: E731
    gb = lambda p: value(cce, provider=p, metric="peak_extra_gb")  # noqa: E731
    body.append([f"exact softmax, Cut Cross-Entropy's headline ({shape(cce[0]['shape'])})",
                 f"{ms(t('ours'))}, +{gb('ours'):.1f} GB",
                 f"Cut Cross-Entropy: {ms(t('cce'))}, +{gb('cce'):.1f} GB",
                 f"**{ratio(t('cce') / t('ours'))}**: slower"])
    return markdown(["what", "fastsoftmax", "compared with", "ratio"], body) + ["", src.line()]
