"""The Roofline page's tables: the latest full run, every full run's fractions, and the
builds compared side by side."""

from collections import OrderedDict

from .common import (Sources, latest_run, markdown, mib, ms, pick, ratio, rows_of, sci, shape,
                     table, value)

KERNELS = OrderedDict([
    ("alias_draws", ("alias draws", "draws_per_s")),
    ("negative_sampling", ("negative sampling fwd+bwd", None)),
    ("sampled_softmax", ("sampled softmax fwd+bwd", None)),
    ("hierarchical_softmax", ("hierarchical softmax fwd+bwd", None)),
    ("full_softmax", ("exact softmax fwd+bwd", None)),
    ("word2vec_sg", ("word2vec skip-gram, 1 epoch", "words_per_s")),
    ("word2vec_cbow", ("word2vec CBOW, 1 epoch", "words_per_s")),
    ("word2vec_sg_batched", ("word2vec skip-gram, shared negatives, 1 epoch", "words_per_s")),
    ("word2vec_cbow_batched", ("word2vec CBOW, shared negatives, 1 epoch", "words_per_s")),
])
PEER_NAMES = {"lce": "`lce`", "torch.multinomial": "`torch.multinomial`"}


def runs(mode="full"):
    """{time: rows} of every roofline run of `mode`, oldest first."""
    rows = rows_of("roofline-cpu")
    out = OrderedDict()
    for stamp in sorted({r["time"] for r in rows}):
        run = pick(rows, time=stamp)
        if pick(run, metric="mode", value=mode) and pick(run, command=lambda c: c.startswith(
                "python bench/roofline.py")):
            out[stamp] = run
    return out


def kernel_row(run, case):
    name, rate = KERNELS[case]
    mine = pick(run, case=case, provider="ours")
    get = lambda p, m: value(run, case=case, provider=p, metric=m)  # noqa: E731
    took = ms(get("ours", "median_ms"))
    if rate:
        took += f", {sci(get('ours', rate))} {rate.replace('_per_s', '')}/s"
    peers = []
    for peer in sorted({r["provider"] for r in pick(run, case=case)} - {"ours"}):
        if pick(mine, metric="speedup_vs_" + peer):
            peak = pick(run, case=case, provider=peer, metric="peak_extra_mb")
            peers.append(f"{PEER_NAMES.get(peer, peer)} {ratio(get('ours', 'speedup_vs_' + peer))}"
                         + (f" ({mib(float(peak[0]['value']))})" if peak else ""))
    term = pick(mine, metric="bound_term")[0]["value"]
    return [name, shape(mine[0]["shape"]), f"{ms(get('ours', 'bound_ms'))} ({term})", took,
            f"**{get('ours', 'fraction_of_bound'):.2f}**", ", ".join(peers),
            mib(get("ours", "peak_extra_mb"))]


def one_thread_runs():
    """{time: rows} of the full one-thread runs (`python bench/roofline.py [--cases ...]
    --threads 1`), oldest first."""
    return OrderedDict((t, run) for t, run in runs().items()
                       if run[0]["command"].endswith(" --threads 1"))


def latest_per_kernel():
    """{case: rows of the newest one-thread run that timed it}: a run of some kernels only
    (--cases word2vec) updates those and leaves the others to the run before it."""
    out = {}
    for run in one_thread_runs().values():
        for case in KERNELS:
            if pick(run, case=case, provider="ours"):
                out[case] = run
    return out


@table("roofline-now")
def roofline_now():
    src = Sources()
    latest = latest_per_kernel()
    body, notes = [], OrderedDict()
    for case in KERNELS:
        if case in latest:
            run = latest[case]
            body.append(kernel_row(run, case))
            src.add(run[:1])
            commit = pick(run, metric="commit")[0]["value"]
            load = float(pick(run, metric="load_avg_1m")[0]["value"])
            notes[f"commit {commit}, load average {load:.1f}"] = True
    return (markdown(["kernel", "shape", "bound (limit)", "fastsoftmax", "achieved ÷ bound",
                      "peers: our speed-up (their peak)", "our peak"], body)
            + ["", src.line("Runs: " + "; ".join(notes) + ".")])


@table("roofline-runs")
def roofline_runs():
    src = Sources()
    body = []
    for stamp, run in runs().items():
        src.add(run[:1])
        cells = []
        for case in KERNELS:
            f = pick(run, case=case, provider="ours", metric="fraction_of_bound")
            cells.append(f"{float(f[0]['value']):.2f}" if f else "")
        threads = run[0]["device"].rsplit("(", 1)[1].split()[0]
        body.append([stamp[:16].replace("T", " "), pick(run, metric="commit")[0]["value"],
                     threads, f"{float(pick(run, metric='load_avg_1m')[0]['value']):.1f}"]
                    + cells)
    headers = ["run (UTC)", "commit", "threads", "load"] + [
        "alias", "neg. sampling", "sampled", "hier.", "exact", "w2v SG", "w2v CBOW",
        "w2v SG shared", "w2v CBOW shared"]
    return markdown(headers, body) + ["", src.line()]


@table("roofline-builds")
def roofline_builds():
    """bench/compare_builds.py: two builds alternating, wall and CPU time."""
    src = Sources()
    run = src.add(latest_run(rows_of("compare-builds-cpu"), metric="median_s"))
    run = pick(rows_of("compare-builds-cpu"), time=run[0]["time"])
    old, new = OrderedDict.fromkeys(r["provider"] for r in run)
    body = []
    for case in OrderedDict.fromkeys(r["case"] for r in run):
        t = lambda p, m: value(run, case=case, provider=p, metric=m)  # noqa: E731
        body.append([case.replace(" (s)", ""), ms(1e3 * t(old, "median_s")),
                     ms(1e3 * t(new, "median_s")),
                     ratio(t(old, "median_s") / t(new, "median_s")),
                     ratio(t(old, "median_cpu_s") / t(new, "median_cpu_s"))])
    return (markdown(["case", f"before ({old})", f"after ({new})", "speed-up, wall",
                      "speed-up, CPU time"], body)
            + ["", src.line(f"{run[0]['shape']}, the two builds alternating.")])
