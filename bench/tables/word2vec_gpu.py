"""The tables of docs/word2vec-gpu.md: how the rounds' rule was chosen, the GPU order's
quality on WikiText-2, and quality against the CPU thread count."""

import statistics

from .common import Sources, markdown, pick, rows_of, signed, table

CBOW, SG = "word2vec/wikitext-2/cbow", "word2vec/wikitext-2/sg"
# (model shown, case, rule): which configurations of the design runs the table shows
DESIGN = [
    ("CBOW", CBOW, "sequential, 1 thread"), ("CBOW", CBOW, "R = 16384, plain sum"),
    ("CBOW", CBOW, "R = 16384, sum ÷ updates"),
    ("CBOW", CBOW, "R = 16384, sum × min(1, 4 ÷ updates)"),
    ("CBOW", CBOW, "R = 16384, L from σ′(f) instead of ¼ (× 1)"),
    ("CBOW", CBOW, "R = 16384, κ = 0.25"), ("CBOW", CBOW, "R = 16384, κ = 0.0625"),
    ("CBOW", CBOW, "R = 16384, κ = 0.025"), ("CBOW", CBOW, "R = 16384, κ = 0.0075"),
    ("CBOW", CBOW, "R = 65536, κ = 0.025"), ("CBOW", CBOW, "R = 4096, plain sum"),
    ("CBOW", CBOW, "R = 4096, κ = 0.025"),
    ("CBOW, α = 0.05", CBOW + "/alpha=0.05", "sequential, 1 thread"),
    ("CBOW, α = 0.05", CBOW + "/alpha=0.05", "R = 4096, κ = 0.025"),
    ("CBOW, `hs=1`", CBOW + "/hs", "sequential, 1 thread"),
    ("CBOW, `hs=1`", CBOW + "/hs", "R = 4096, κ = 0.025"),
    ("skip-gram", SG, "sequential, 1 thread"), ("skip-gram", SG, "R = 4096, plain sum"),
    ("skip-gram", SG, "R = 1024, plain sum"), ("skip-gram", SG, "R = 4096, κ = 0.25"),
    ("skip-gram", SG, "R = 4096, κ = 0.025"), ("skip-gram", SG, "R = 16384, κ = 0.025"),
    ("skip-gram", SG, "R = 65536, κ = 0.25"),
]


def per_seed(rows, metric, fmt):
    """The metric of seeds 1, 2, ... of `rows`, comma-separated ('' when not recorded)."""
    got = sorted((r["shape"], float(r["value"])) for r in pick(rows, metric=metric))
    return ", ".join(fmt(v) for _, v in got)


@table("w2v-rounds-design")
def rounds_design():
    src = Sources()
    rows = rows_of("word2vec-rounds-design-cpu")
    body = []
    for shown, case, rule in DESIGN:
        mine = src.add(pick(rows, case=case, provider=rule))
        if not mine:
            raise LookupError(f"no design rows for {case} {rule}")
        loss = per_seed(mine, "loss", lambda v: f"{v:.3f}" if v < 2.6 else f"{v:.2f}")
        norms = [float(r["value"]) for r in sorted(pick(mine, metric="max_output_row_norm"),
                                                   key=lambda r: r["shape"])]
        if norms and max(norms) > 10:
            loss += " (rows of norm " + ", ".join(f"{n:.0f}" for n in norms) + ")"
        body.append([shown, rule.replace("sequential, 1 thread", "sequential"), loss,
                     per_seed(mine, "ws353", lambda v: f"{v:.3f}".replace("-", "−")),
                     per_seed(mine, "simlex", lambda v: f"{v:.3f}".replace("-", "−"))])
    return markdown(["model", "order", "loss", "WS-353", "SimLex-999"], body) + [
        "", src.line("Each cell: seed 1, seed 2.")]


def quality_run():
    """The latest bench/word2vec_gpu_quality.py run with rounds."""
    rows = rows_of("word2vec-gpu-quality-cpu")
    stamp = max(r["time"] for r in rows if r["provider"].startswith("rounds"))
    return pick(rows, time=stamp)


def interval(values):
    from scipy.stats import t

    n = len(values)
    return statistics.mean(values), t.ppf(0.975, n - 1) * statistics.stdev(values) / n ** 0.5


def by_seed(rows, metric):
    return {r["shape"].split("seed=")[1].split()[0]: float(r["value"])
            for r in pick(rows, metric=metric)}


@table("w2v-gpu-quality")
def gpu_quality():
    src = Sources()
    run = src.add(quality_run())
    body = []
    for model, name in (("sg", "skip-gram"), ("cbow", "CBOW")):
        mine = pick(run, case=lambda c: c.endswith("/" + model))
        for provider in dict.fromkeys(r["provider"] for r in mine):
            cells = []
            for metric in ("ws353", "simlex", "loss"):
                m, h = interval(list(by_seed(pick(mine, provider=provider), metric).values()))
                cells.append(f"{m:.4f} ± {h:.4f}")
            name_shown = provider.replace("rounds of", "rounds of").replace(
                " (the GPU's order)", " (the GPU's order)")
            body.append([name, name_shown] + cells)
    return markdown(["model", "configuration", "WS-353", "SimLex-999", "training loss"], body) + [
        "", src.line("Means with 95% intervals over the seeds.")]


@table("w2v-gpu-paired")
def gpu_paired():
    src = Sources()
    run = src.add(quality_run())
    body = []
    for model, name in (("sg", "skip-gram"), ("cbow", "CBOW")):
        mine = pick(run, case=lambda c: c.endswith("/" + model))
        base = pick(mine, provider="sequential, 1 thread")
        rounds = pick(mine, provider=lambda p: p.startswith("rounds"))
        cells = []
        for metric in ("ws353", "simlex"):
            a, b = by_seed(rounds, metric), by_seed(base, metric)
            m, h = interval([a[s] - b[s] for s in sorted(set(a) & set(b))])
            cells.append(f"{signed(m)} [{signed(m - h)}, {signed(m + h)}]")
        body.append([name] + cells)
    return markdown(["model", "WS-353", "SimLex-999"], body) + [
        "", src.line("The GPU's order minus the sequential order on 1 thread, same seed: mean "
                     "and 95% interval.")]


@table("w2v-threads")
def threads():
    src = Sources()
    rows = rows_of("word2vec-gpu-quality-cpu")
    thread_runs = sorted({r["time"] for r in rows if "16 threads" in r["provider"]})
    before, after = (src.add(pick(rows, time=t)) for t in thread_runs[-2:])
    body = []
    for model, name in (("cbow", "CBOW"), ("sg", "skip-gram")):
        for n in (1, 2, 4, 8, 16):
            label = f"sequential, {n} thread{'s' * (n > 1)}"
            def mean(rows, metric, label=label):
                mine = pick(rows, case=lambda c: c.endswith("/" + model),
                            provider=lambda p: p.startswith(label))
                return interval(list(by_seed(mine, metric).values()))
            cells = [f"{mean(before, 'loss')[0]:.3f}", f"{mean(after, 'loss')[0]:.3f}"]
            cells += ["{:.3f} ± {:.3f}".format(*mean(after, m)) for m in ("ws353", "simlex")]
            body.append([f"{name}, {n}"] + cells)
    return markdown(["model, threads", "loss before", "loss after", "WS-353 after",
                     "SimLex-999 after"], body) + [
        "", src.line("Before: workers merged every 16384 steps each; after: every 32768 ÷ "
                     "workers steps. Means with 95% intervals over the seeds.")]
