"""The tables of docs/word2vec-scaling.md: words/s at 1 and 2 threads here (and whether the runs
got their cores), Amdahl's model checked against the 1-16 thread rows of a 16-core machine,
its words/s at 16, 64 and 128 cores, and the memory roof of each update order."""

import statistics

import bound_model as bm

from .common import Sources, count, markdown, pick, rows_of, table

CORES = (16, 64, 128)
# Bytes the roof is drawn for: a socket's sustained DRAM bandwidth, per 100 GB/s.
ROOF_BANDWIDTH = 100e9
# Centres sharing one set of negatives (fastsoftmax.models.word2vec.training.BATCH_GROUP);
# 0: word2vec.c's pairs.
GROUP = {"ours": {"sg": 0, "cbow": 0}, "ours-batched": {"sg": 1, "cbow": 4}}


def amdahl(r1, s, n):
    """Words/s on n cores of a run whose serial share of the 1-core time is s."""
    return r1 * n / (1 + s * (n - 1))


def serial_from_two(r1, r2):
    """Amdahl's serial fraction from the rates on 1 and 2 cores (0 when 2 cores double it)."""
    return max(0.0, 2 * r1 / r2 - 1)


def serial_fitted(rates):
    """Least squares serial fraction over {threads: words/s}: n r1 / r(n) - 1 = s (n - 1)."""
    r1 = rates[1]
    xs = [n - 1 for n in rates if n > 1]
    ys = [n * r1 / rates[n] - 1 for n in rates if n > 1]
    return max(0.0, sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs))


def stops_at(s):
    """The core count past which doubling the cores adds under 10 % (Amdahl):
    r(2n) / r(n) < 1.1  <=>  n > 4.5 (1 / s - 1)."""
    return float("inf") if s <= 0 else 4.5 * (1 / s - 1)


def last_run(rows):
    """The rows of the last run in file order: a run writes each (case, provider, shape,
    metric) once (its rounds are in the shape), so a key seen again starts the next run."""
    start, seen = 0, set()
    for i, r in enumerate(rows):
        key = (r["case"], r["provider"], r["shape"], r["metric"])
        if key in seen:
            start, seen = i, set()
        seen.add(key)
    return rows[start:]


def measured_here():
    """{(model, impl, input): {threads: median words/s}}, {same: median CPU s/s}, and the rows
    of the latest bench/word2vec_scaling.py run."""
    rows = rows_of("word2vec-scaling-cpu")
    run = last_run(pick(rows, command=rows[-1]["command"]))
    rates, busy = {}, {}
    for r in run:
        shape = dict(kv.split("=") for kv in r["shape"].split())
        key = (r["case"].rsplit("/", 1)[1], r["provider"].split(" ")[0], shape["input"])
        into = rates if r["metric"] == "words_per_s" else busy if r["metric"] == "cpu_s_per_s" \
            else None
        if into is not None:
            into.setdefault(key, {}).setdefault(int(shape["threads"]), []).append(
                float(r["value"]))
    median = lambda d: {k: {n: statistics.median(v) for n, v in t.items()}  # noqa: E731
                        for k, t in d.items()}
    return median(rates), median(busy), run


# A run got its cores when its process spent at least this share of threads x wall time on
# the CPU; below it, other jobs took them and its speed-up measures the scheduler.
GOT_ITS_CORES = 0.8


def starved(busy, threads):
    return busy < GOT_ITS_CORES * threads


@table("word2vec-scaling-threads")
def threads_here():
    src = Sources()
    rates, busy, run = measured_here()
    src.add(run)
    body = []
    for (model, impl, source), r in sorted(rates.items()):
        cpu = busy[(model, impl, source)]
        cells = [count(r[n]) + (f" ({cpu[n]:.2f} CPU s/s)") if n in r else "not run" for n in (1, 2)]
        if 1 in r and 2 in r and not (starved(cpu[1], 1) or starved(cpu[2], 2)):
            s = serial_from_two(r[1], r[2])
            verdict = [f"{r[2] / r[1]:.2f}×", f"{s:.2f}"]
        else:
            verdict = ["starved", "not measured"]
        body.append([model, impl, f"`{source}`"] + cells + verdict)
    return markdown(["model", "implementation", "input", "words/s, 1 thread", "2 threads",
                     "speed-up", "serial fraction s"], body) + [
        "", src.line(f"Medians over the rounds; s = 2 r₁/r₂ − 1, given only where both runs "
                     f"spent at least {GOT_ITS_CORES:.0%} of threads × wall time on the CPU.")]


def sixteen_core_series():
    """{threads: words/s} of the 1-epoch skip-gram runs on the 16-core machine (ours, word2vec.c's
    order, sentences in memory), and their rows."""
    rows = pick(rows_of("word2vec-runs-cpu"), case="word2vec/wikitext2/sg", metric="words_per_s",
                command=lambda c: c.startswith("python bench/bench_word2vec.py --no-gensim "
                                               "--threads ") and c.endswith(
                    " --models sg --epochs 1 --seeds 1"))
    return {int(r["shape"].split("threads=")[1].split()[0]): float(r["value"]) for r in rows}, rows


@table("word2vec-scaling-check")
def sixteen_core_check():
    src = Sources()
    rates, rows = sixteen_core_series()
    src.add(rows)
    two, fitted = serial_from_two(rates[1], rates[2]), serial_fitted(rates)
    body = [[str(n), count(r), count(amdahl(rates[1], two, n)), count(amdahl(rates[1], fitted, n))]
            for n, r in sorted(rates.items())]
    return markdown(["threads", "measured words/s", f"Amdahl, s = {two:.2f} (1 and 2 threads)",
                     f"Amdahl, s = {fitted:.2f} (fitted over all)"], body) + ["", src.line()]


def bytes_per_word(model, impl, keep):
    """Bytes one raw word moves through the tables (every visited row read and written)."""
    return keep * bm.word2vec_row_visits(5, 5, model == "sg", GROUP[impl][model]) * 100 * 4 * 2


def keep_share():
    """The share of in-vocabulary words subsampling keeps, from the latest roofline run."""
    rows = pick(rows_of("roofline-cpu"), case="word2vec_sg", metric="words_per_s")
    return float(max(rows, key=lambda r: r["time"])["shape"].split("keep=")[1].split()[0])


@table("word2vec-scaling-model")
def scaling_model():
    """Amdahl's prediction from the 16-core machine's rows: s from its 1 and 2 threads, and s
    fitted over 1-16 threads."""
    src = Sources()
    rates, rows = sixteen_core_series()
    src.add(rows)
    body = []
    for how, s in (("1 and 2 threads", serial_from_two(rates[1], rates[2])),
                   ("fitted over 1–16 threads", serial_fitted(rates))):
        body.append([how, f"{s:.2f}"] + [count(amdahl(rates[1], s, n)) for n in CORES]
                    + [f"{stops_at(s):.0f}", count(rates[1] / s)])
    return markdown(["s from", "s"] + [f"words/s, {n} cores" for n in CORES] + [
        "stops at (cores)", "ceiling r₁/s, words/s"], body) + [
        "", src.line("Ours, word2vec.c's order, skip-gram, one epoch from memory; stops: "
                     "doubling the cores adds under 10 %.")]


@table("word2vec-scaling-roof")
def memory_roof():
    """Bytes a raw word moves in each update order, and the words/s 100 GB/s carries."""
    src = Sources()
    rows = pick(rows_of("roofline-cpu"), case="word2vec_sg", metric="words_per_s")
    src.add([max(rows, key=lambda r: r["time"])])
    keep = keep_share()
    body = []
    for model, name in (("sg", "skip-gram"), ("cbow", "CBOW")):
        for impl, order in (("ours", "word2vec.c's pairs"), ("ours-batched", "shared negatives")):
            group = GROUP[impl][model]
            visits = bm.word2vec_row_visits(5, 5, model == "sg", group)
            b = bytes_per_word(model, impl, keep)
            body.append([name, order + (f" (G = {group})" if group else ""), f"{visits:g}",
                         f"{b / 1e3:.1f} kB", count(ROOF_BANDWIDTH / b)])
    return markdown(["model", "update order", "rows a kept centre moves", "bytes a raw word moves",
                     "words/s per 100 GB/s"], body) + [
        "", src.line(f"D = 100, window 5, K = 5; every row read and written; keep = {keep:.2f}, "
                     f"the share of words subsampling keeps in the roofline run's slice.")]
