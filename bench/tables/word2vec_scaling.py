"""The tables of docs/word2vec-scaling.md: words/s at 1 and 2 threads here, the serial fraction
they give, the check of that model against the 1-16 thread rows of a 16-core machine, and the
model's words/s at 16, 64 and 128 cores beside the memory roof of each update order."""

import statistics

import bound_model as bm

from .common import Sources, count, markdown, pick, rows_of, table

CORES = (16, 64, 128)
# Bytes the roof is drawn for: a socket's sustained DRAM bandwidth, per 100 GB/s.
ROOF_BANDWIDTH = 100e9
GROUP = {"ours": {"sg": 0, "cbow": 0}, "ours-batched": {"sg": 1, "cbow": 4},
         "gensim": {"sg": 0, "cbow": 0}}


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


def measured_here():
    """{(model, impl, input): {threads: median words/s}}, {same: median CPU s/s}, and the rows
    of the latest bench/word2vec_scaling.py run."""
    rows = rows_of("word2vec-scaling-cpu")
    stamp = max(r["time"] for r in rows)
    command = next(r["command"] for r in rows if r["time"] == stamp)
    run = pick(rows, command=command)
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


@table("word2vec-scaling-threads")
def threads_here():
    src = Sources()
    rates, busy, run = measured_here()
    src.add(run)
    body = []
    for (model, impl, source), r in sorted(rates.items()):
        if 1 not in r or 2 not in r:
            continue
        s = serial_from_two(r[1], r[2])
        body.append([model, impl, f"`{source}`", count(r[1]), count(r[2]),
                     f"{r[2] / r[1]:.2f}×", f"{s:.2f}", f"{busy[(model, impl, source)][2]:.2f}",
                     count(r[1] / s) if s > 0 else "none"])
    return markdown(["model", "implementation", "input", "words/s, 1 thread", "2 threads",
                     "speed-up", "serial fraction s", "CPU s/s at 2 threads",
                     "Amdahl's ceiling r₁/s"], body) + [
        "", src.line("Medians over the rounds; s = 2 r₁/r₂ − 1.")]


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
    src = Sources()
    rates, _, run = measured_here()
    src.add(run)
    keep = keep_share()
    body = []
    for (model, impl, source), r in sorted(rates.items()):
        if 1 not in r or 2 not in r:
            continue
        s = serial_from_two(r[1], r[2])
        roof = ROOF_BANDWIDTH / bytes_per_word(model, impl, keep)
        cells = [count(amdahl(r[1], s, n)) for n in CORES]
        stop = stops_at(s)
        body.append([model, impl, f"`{source}`", f"{s:.2f}"] + cells + [
            "never" if stop == float("inf") else f"{stop:.0f}",
            f"{bytes_per_word(model, impl, keep) / 1e3:.1f} kB", count(roof)])
    return markdown(["model", "implementation", "input", "s"] + [
        f"words/s, {n} cores" for n in CORES] + [
        "stops at (cores)", "bytes per word", "memory roof per 100 GB/s, words/s"], body) + [
        "", src.line(f"Amdahl with s from the 1- and 2-thread medians; stops: doubling the "
                     f"cores adds under 10 %; bytes: every row a word visits read and written "
                     f"(keep = {keep:.2f}, the roofline run's share kept by subsampling).")]
