"""The tables of docs/word2vec.md: input modes, a 1 GB corpus, the paired statistics against
gensim, and the side-by-side runs that set the trainer's speed and quality."""

import statistics

from .common import Sources, count, latest_run, markdown, pick, rows_of, sci, signed, table, value

MODES = ["ours-memory", "ours-corpus_file", "ours-python-reader", "gensim-iterable",
         "gensim-corpus_file"]


@table("word2vec-modes")
def input_modes():
    src = Sources()
    rows = rows_of("word2vec-modes-cpu")
    run = src.add(pick(rows, command=lambda c: "--models cbow,sg --workers 1,2" in c))
    body = []
    for model, name in (("cbow", "CBOW"), ("sg", "skip-gram")):
        for workers in ("1", "2"):
            med = {}
            for mode in MODES:
                mine = pick(run, case=f"word2vec-modes/wikitext2/{model}", metric="words_per_s",
                            provider=lambda p, mode=mode: p.split(" ")[0] == mode,
                            shape=lambda s, w=workers: s.startswith(f"workers={w} "))
                med[mode] = statistics.median(float(r["value"]) for r in mine)
            body.append([name, workers] + [count(med[m]) for m in MODES] + [
                f"**{med['ours-corpus_file'] / med['gensim-corpus_file']:.2f}×**",
                f"{med['ours-corpus_file'] / med['ours-memory']:.2f}"])
    return markdown(["model", "workers", "ours, memory", "ours, `corpus_file`",
                     "ours, Python reader", "gensim iterable", "gensim `corpus_file`",
                     "ours `corpus_file` ÷ gensim `corpus_file`",
                     "ours `corpus_file` ÷ ours memory"], body) + [
        "", src.line("Medians over the rounds of raw words × epochs ÷ seconds in `train()`.")]


@table("word2vec-large")
def large_corpus():
    src = Sources()
    rows = rows_of("word2vec-large-cpu")
    now = src.add(latest_run(rows, provider="ours corpus_file"))
    before = src.add(latest_run(rows, provider=lambda p: "Python vocabulary scan" in p))
    get = lambda rs, m: value(rs, metric=m)  # noqa: E731
    vocab_rate = lambda rs: get(rs, "raw_words") / get(rs, "build_vocab_s")  # noqa: E731
    body = [["`build_vocab(corpus_file=)`, native scan", f"{get(now, 'build_vocab_s'):.0f}",
             sci(vocab_rate(now)), ""],
            ["the same, the Python scan before it (same corpus)",
             f"{get(before, 'build_vocab_s'):.0f}", sci(vocab_rate(before)), ""],
            [f"`train()`, {now[0]['shape'].split('epochs=')[1].split()[0]} epochs",
             f"{get(now, 'train_s'):.0f}", count(get(now, "words_per_s")),
             f"**{count(get(now, 'peak_rss_bytes') / 2 ** 20)} MiB**"]]
    return markdown(["", "seconds", "words/s", "peak RSS"], body) + ["", src.line()]


def parity_scores():
    """{(setting, impl, epochs, workers, seed): {metric: value}} of bench/word2vec_parity.py
    (a later row of a seed replaces an earlier one, as its --summarize does), and the rows
    used."""
    runs, used = {}, {}
    for r in rows_of("word2vec-parity-cpu"):
        shape = dict(kv.split("=") for kv in r["shape"].split())
        key = (r["case"].rsplit("/", 1)[1], r["provider"].split(" ")[0], int(shape["epochs"]),
               int(shape["workers"]), int(shape["seed"]))
        runs.setdefault(key, {})[r["metric"]] = float(r["value"])
        used[key + (r["metric"],)] = r
    return runs, list(used.values())


PAIRS = [("ours", "gensim-iterable"), ("ours", "gensim-corpus_file"),
         ("ours-cf-decay", "gensim-corpus_file"), ("ours-cf-decay", "ours"),
         ("ours-batched", "gensim-iterable"), ("ours-batched", "ours")]
IMPLS = ["ours", "ours-batched", "ours-cf-decay", "gensim-iterable", "gensim-corpus_file"]
SETTINGS = ["cbow-neg", "sg-neg", "cbow-hs", "sg-hs"]
METRICS = ["ws353", "simlex999", "analogy"]


def paired_differences(runs, setting, ours, theirs, epochs, workers):
    """{metric: [ours - theirs per seed]} over the seeds both have, or None below 2 seeds."""
    seeds = sorted(s for (st, i, e, w, s) in runs if (st, i, e, w) == (setting, ours, epochs,
                   workers) and (setting, theirs, epochs, workers, s) in runs)
    if len(seeds) < 2:
        return None
    return {m: [runs[(setting, ours, epochs, workers, s)][m]
                - runs[(setting, theirs, epochs, workers, s)][m] for s in seeds]
            for m in METRICS}


def t_interval(d):
    """(mean, the 95% half-width of Student's t) of paired differences."""
    from scipy.stats import t

    return statistics.mean(d), t.ppf(0.975, len(d) - 1) * statistics.stdev(d) / len(d) ** 0.5


def interval_cell(d) -> str:
    """Paired differences as a table cell: +0.0015 ± 0.0342, with * where the interval
    excludes 0."""
    mean, half = t_interval(d)
    return f"{signed(mean, 4)} ± {half:.4f}" + (" *" if abs(mean) > half else "")


def runs_by_group(runs):
    """The (epochs, workers) groups the rows hold, each in SETTINGS order."""
    return sorted({(e, w) for (_, _, e, w, _) in runs}, key=lambda g: (g[1], g[0]))


@table("word2vec-parity-differences")
def parity_differences():
    src = Sources()
    runs, used = parity_scores()
    src.add(used)
    body = []
    for epochs, workers in runs_by_group(runs):
        for setting in SETTINGS:
            for ours, theirs in PAIRS:
                d = paired_differences(runs, setting, ours, theirs, epochs, workers)
                if d is None:
                    continue
                body.append([setting, str(epochs), str(workers), f"{ours} − {theirs}",
                             str(len(d[METRICS[0]]))] + [interval_cell(d[m]) for m in METRICS])
    return markdown(["setting", "epochs", "workers", "comparison", "seeds", "ΔWS-353",
                     "ΔSimLex-999", "Δanalogy"], body) + [
        "", src.line("Mean ± the 95% half-width of Student's t; * marks an interval that "
                     "excludes 0.")]


@table("word2vec-parity-verdict")
def parity_verdict():
    """Shared negatives against gensim iterable with negative sampling: does each 95%
    interval of (ours-batched - gensim) contain 0 or lie above it?"""
    src = Sources()
    runs, used = parity_scores()
    src.add(r for r in used if r["provider"].split(" ")[0] in ("ours-batched", "gensim-iterable")
            and r["case"].endswith("-neg"))
    body = []
    for epochs, workers in runs_by_group(runs):
        for setting in ("sg-neg", "cbow-neg"):
            d = paired_differences(runs, setting, "ours-batched", "gensim-iterable", epochs,
                                   workers)
            if d is None:
                continue
            cells = []
            for m in METRICS:
                mean, half = t_interval(d[m])
                cells.append(("holds" if mean + half >= 0 else "**below**")
                             + f" ({signed(mean - half, 4)} … {signed(mean + half, 4)})")
            body.append([setting, str(epochs), str(workers), str(len(d[METRICS[0]]))] + cells)
    return markdown(["setting", "epochs", "workers", "seeds", "WS-353", "SimLex-999", "analogy"],
                    body) + ["", src.line("ours-batched − gensim-iterable, the 95% interval in "
                                          "brackets; holds: it contains 0 or lies above it.")]


@table("word2vec-parity-means")
def parity_means():
    src = Sources()
    runs, used = parity_scores()
    src.add(used)
    body = []
    for epochs, workers in runs_by_group(runs):
        for setting in SETTINGS:
            for impl in IMPLS:
                seeds = sorted(s for (st, i, e, w, s) in runs
                               if (st, i, e, w) == (setting, impl, epochs, workers))
                if seeds:
                    cells = [statistics.mean(runs[(setting, impl, epochs, workers, s)][m]
                                             for s in seeds) for m in METRICS + ["seconds"]]
                    body.append([setting, str(epochs), str(workers), impl, str(len(seeds))]
                                + [f"{c:.4f}" for c in cells[:3]] + [f"{cells[3]:.1f}"])
    return markdown(["setting", "epochs", "workers", "implementation", "seeds", "WS-353",
                     "SimLex-999", "analogy", "seconds"], body) + ["", src.line()]


def side_by_side(runs, models):
    """bench/bench_word2vec.py runs against gensim (each given by its time stamp and the label
    its rows get): per model and epochs, WS-353 mean ± sd, the difference ± its standard error,
    median words/s and their ratio."""
    src = Sources()
    body = []
    for stamp, label in runs:
        rows = src.add(pick(rows_of("word2vec-runs-cpu"), time=stamp))
        for model, name in models:
            mine = pick(rows, case=lambda c: c.endswith("/" + model))
            for epochs in sorted({int(r["shape"].split("epochs=")[1].split()[0]) for r in mine}):
                body.append(side_by_side_row(mine, epochs, f"{name}{label}"))
    return markdown(["model", "epochs", "seeds", "WS-353, fastsoftmax", "WS-353, gensim",
                     "difference", "fastsoftmax words/s", "gensim words/s", "ours / gensim"],
                    body) + ["", src.line("WS-353: mean ± sample sd over the seeds; the "
                                          "difference ± its standard error; words/s: medians.")]


def side_by_side_row(rows, epochs, name):
    at = pick(rows, shape=lambda s: f"epochs={epochs} " in s)
    gensim = next(r["provider"] for r in at if r["provider"].startswith("gensim"))

    def score(impl):
        return {r["shape"].split("seed=")[1].split()[0]: float(r["value"])
                for r in pick(at, provider=impl, metric="ws353_spearman")}

    def speed(impl):
        return statistics.median(float(r["value"]) for r in
                                 pick(at, provider=impl, metric="words_per_s"))

    a, b = score("fastsoftmax"), score(gensim)
    d = [a[s] - b[s] for s in sorted(set(a) & set(b))]
    return [name, str(epochs), str(len(d)),
            f"{statistics.mean(a.values()):.3f} ± {statistics.stdev(a.values()):.3f}",
            f"{statistics.mean(b.values()):.3f} ± {statistics.stdev(b.values()):.3f}",
            f"{signed(statistics.mean(d))} ± {statistics.stdev(d) / len(d) ** 0.5:.3f}",
            count(speed("fastsoftmax")), count(speed(gensim)),
            f"**{speed('fastsoftmax') / speed(gensim):.2f}×**"]


@table("word2vec-side-by-side")
def side_by_side_negative():
    return side_by_side([("2026-11-24T08:35:20Z", "")], [("sg", "skip-gram"), ("cbow", "CBOW")])


@table("word2vec-side-by-side-hs")
def side_by_side_hs():
    return side_by_side([("2026-11-24T08:37:38Z", ", hs=1"), ("2026-11-24T08:40:28Z", ", hs=1"),
                         ("2026-11-24T08:41:44Z", ", hs=1, 1 thread")],
                        [("sg", "skip-gram"), ("cbow", "CBOW")])


@table("word2vec-reader-idle")
def reader_idle():
    """bench/word2vec_reader_idle.py's rows of two checkouts, interleaved: the first label in
    the file is "before", the last "after"; medians over rounds, the range in brackets."""
    src = Sources()
    rows = src.add(rows_of("word2vec-reader-idle-cpu"))
    labels = list(dict.fromkeys(r["provider"] for r in rows))
    before, after = labels[0], labels[-1]

    def cell(case, label, metric, fmt):
        v = sorted(float(r["value"]) for r in pick(rows, case=case, provider=label,
                                                    metric=metric))
        return f"{fmt(statistics.median(v))} ({fmt(v[0])}–{fmt(v[-1])})"

    ms_ = lambda x: f"{x:.1f}"  # noqa: E731
    body = []
    for case in dict.fromkeys(r["case"] for r in rows):
        model, inp = case.split("/")[2:]
        body.append([{"sg": "skip-gram", "cbow": "CBOW"}[model], inp]
                    + [cell(case, label, metric, fmt)
                       for metric, fmt in (("first_ms", ms_), ("gaps_ms", ms_),
                                           ("wall_s", lambda x: f"{x:.3f}"))
                       for label in (before, after)])
    return markdown(["model", "input", f"first call, ms, {before}", after,
                     f"gaps, ms, {before}", after, f"`train()`, s, {before}", after], body) + [
        "", src.line(f"Medians over {len(pick(rows, provider=after)) // (3 * len(body))} "
                     "rounds of each, run in turn; the range in brackets.")]
