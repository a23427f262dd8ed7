"""The tables of docs/scaling.md: memory per rank of the vocabulary-parallel layers, and
word2vec over several GPUs on paper (the rows a round touches, the expected speed-up)."""

from .common import Sources, count, latest_run, markdown, pick, power, rows_of, table, value

MiB = 2 ** 20


@table("vocab-parallel-memory")
def vocab_parallel_memory():
    src = Sources()
    run = src.add(latest_run(rows_of("vocab-parallel-cpu"), metric="param_bytes_per_rank"))
    run = pick(rows_of("vocab-parallel-cpu"), time=run[0]["time"])
    body = []
    shapes = sorted({r["shape"] for r in run}, key=lambda s: (
        int(s.split("V=")[1].split()[0]), int(s.split("world=")[1].split()[0])))
    for V in sorted({int(s.split("V=")[1].split()[0]) for s in shapes}):
        for loss in ("full", "sampled"):
            for layout in ("replicated", "vocab_parallel"):
                for shape in shapes:
                    if f"V={V} " not in shape:
                        continue
                    mine = pick(run, case=f"{loss}/fwd+bwd+adam", provider=layout, shape=shape)
                    if not mine:
                        continue
                    get = lambda m: value(mine, metric=m)  # noqa: E731
                    body.append([power(V), loss, layout.replace("_", "-"),
                                 shape.split("world=")[1].split()[0],
                                 count(get("param_bytes_per_rank") / MiB),
                                 count(get("adam_state_bytes_per_rank") / MiB),
                                 count(get("peak_rss_above_start_bytes_max_rank") / MiB),
                                 count(get("median_ms_slowest_rank"))])
    return markdown(["V", "loss", "layout", "processes", "params MiB/rank", "Adam MiB/rank",
                     "peak RSS MiB/rank", "step ms"], body) + ["", src.line()]


def traffic():
    """{(R, model): rows} of the latest run of each round size."""
    rows = rows_of("word2vec-round-traffic-cpu")
    out = {}
    for r in rows:
        R = int(r["shape"].split("R=")[1].split()[0])
        model = r["case"].rsplit("/", 1)[1]
        out.setdefault((R, model), {})
        out[(R, model)].setdefault(r["time"], []).append(r)
    return {k: v[max(v)] for k, v in out.items()}


@table("word2vec-round-traffic")
def round_traffic():
    src = Sources()
    body = []
    for (R, model), rows in sorted(traffic().items(), key=lambda kv: (kv[0][0], kv[0][1] != "skip-gram")):
        src.add(rows)
        get = lambda m: value(rows, metric=m)  # noqa: E731
        body.append([str(R), model, count(get("syn0_rows")), count(get("syn1neg_rows")),
                     f"{get('touched_delta_bytes') / 1e6:.1f} MB",
                     f"{get('dense_delta_bytes') / 1e6:.1f} MB"])
    return markdown(["R", "model", "syn0 rows", "syn1neg rows", "touched rows' deltas",
                     "all rows' deltas"], body) + ["", src.line()]


# The estimate's assumptions (docs/scaling.md states them): the goal rates in raw
# words/s, and the all-reduce's bus bandwidth and latency of two interconnects.
GOAL_WORDS_PER_S = {"skip-gram": 2e7, "CBOW": 5e7}
LINKS = [("8 GPUs on NVLink", 8, 300e9, 20e-6), ("4 GPUs on PCIe", 4, 25e9, 20e-6)]


@table("word2vec-multi-gpu-estimate")
def multi_gpu_estimate():
    src = Sources()
    body = []
    for (R, model), rows in sorted(traffic().items(), key=lambda kv: (kv[0][1] != "skip-gram", kv[0][0])):
        src.add(rows)
        kept = value(rows, metric="kept_centres_per_epoch") / value(rows, metric="raw_words_per_epoch")
        t1 = R / (GOAL_WORDS_PER_S[model] * kept)
        cells = [f"{1e3 * t1:.2f} ms"]
        for _, k, bandwidth, latency in LINKS:
            tk = t1 / k + 2 * (k - 1) / k * value(rows, metric="touched_delta_bytes") / \
                bandwidth + latency
            cells.append(f"{1e3 * tk:.2f} ms: {t1 / tk:.1f}×")
        body.append([f"{model}, {R}"] + cells)
    return markdown(["model, R", "t₁"] + [name for name, *_ in LINKS], body) + [
        "", src.line("Rates, bandwidths and latencies as stated above; the bytes are the "
                     "touched rows' deltas.")]
