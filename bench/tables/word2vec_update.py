"""The tables of word2vec's speed against gensim on the same input, timed side by side by
bench/bench_word2vec_update.py: every run at the newest commit that ran it (the machine's
speed moves between runs minutes apart, and gensim's with it more than ours, so one run's
ratio is not the ratio: the tables give the median run and the range)."""

import statistics

from .common import count, markdown, pick, rows_of, table, Sources

MODELS = [("sg", "skip-gram"), ("cbow", "CBOW")]
INPUTS = [("iterable", "iterable"), ("corpus_file", "`corpus_file`")]
DEFAULT_ORDER = {"sg": "batched", "cbow": "pairs"}  # update="auto" on the CPU


def newest_runs(src: Sources):
    """The runs (lists of rows, by time stamp) of the newest commit's rows."""
    rows = pick(rows_of("word2vec-update-cpu"), metric="words_per_s")
    commit = max(rows, key=lambda r: r["time"])["commit"]
    mine = src.add(pick(rows, commit=commit))
    return [pick(mine, time=stamp) for stamp in sorted({r["time"] for r in mine})]


def _median(run, case, provider) -> float:
    return statistics.median(float(r["value"]) for r in pick(run, case=case, provider=provider))


def speeds(runs, model: str, inp: str, order: str):
    """Per run: (our words/s in `order`, gensim's) for `model` on input `inp`."""
    out = []
    for run in runs:
        corpus = run[0]["case"].split("/")[1]
        case = f"word2vec/{corpus}/{model}/{inp}"
        if pick(run, case=case, provider=order) and pick(run, case=case, provider="gensim"):
            out.append((_median(run, case, order), _median(run, case, "gensim")))
    return out


def ratio_range(pairs) -> str:
    """The median run's ratio with the range over runs: 3.56× (3.33–5.63×)."""
    ratios = sorted(ours / gensim for ours, gensim in pairs)
    mid = statistics.median(ratios)
    if len(ratios) == 1:
        return f"{mid:.2f}×"
    return f"{mid:.2f}× ({ratios[0]:.2f}–{ratios[-1]:.2f}×)"


def count_range(values) -> str:
    values = sorted(values)
    return count(values[0]) if len(values) == 1 else f"{count(values[0])}–{count(values[-1])}"


@table("word2vec-update")
def word2vec_update():
    src = Sources()
    runs = newest_runs(src)
    body = []
    for model, model_name in MODELS:
        for inp, input_name in INPUTS:
            pairs, batched = (speeds(runs, model, inp, o) for o in ("pairs", "batched"))
            if not pairs or not batched:
                continue
            body.append([model_name, input_name, count_range(g for _, g in pairs),
                         ratio_range(pairs), ratio_range(batched)])
    rounds = len({r["shape"] for r in runs[-1] if r["case"] == runs[-1][0]["case"]})
    return markdown(["model", "input", "gensim 4.4.0 words/s", "`update=\"pairs\"` ÷ gensim",
                     "`update=\"batched\"` ÷ gensim"], body) + [
        "", src.line(f"{len(runs)} runs at commit {runs[-1][0]['commit']}, each the medians of "
                     f"{rounds} rounds; a ratio is the median run's, with the range over runs.")]


def default_variant(model: str) -> str:
    """bench/word2vec_groups.py's name of the model's default: one centre a set of shared
    negatives ("g1") or word2vec.c's order ("pairs")."""
    return "g1" if DEFAULT_ORDER[model] == "batched" else "pairs"


def variant_label(variant: str) -> str:
    if variant == "pairs":
        return "word2vec.c's order"
    return f"{variant[1:]} centre{'' if variant == 'g1' else 's'} a set"


@table("word2vec-groups")
def word2vec_groups():
    """bench/word2vec_groups.py's newest run: each variant against the model's default,
    paired by seed (mean ± 95% half-width), and its words/s ÷ the default's (median seed)."""
    from .word2vec import interval_cell

    src = Sources()
    rows = rows_of("word2vec-groups-cpu")
    command = max(rows, key=lambda r: r["time"])["command"]
    run = src.add(pick(rows, command=command))
    body = []
    for model, model_name in MODELS:
        by = {}  # (variant, metric) -> {seed: value}
        for r in pick(run, case=lambda c: c.endswith("/" + model)):
            seed = r["shape"].split("seed=")[1]
            by.setdefault((r["provider"], r["metric"]), {})[seed] = float(r["value"])
        base = default_variant(model)
        if (base, "ws353") not in by:
            continue
        variants = sorted({v for v, _ in by if v != base}, key=lambda v: (v != "pairs", v))
        for variant in variants:
            def paired(metric):
                a, b = by[(variant, metric)], by[(base, metric)]
                return [(a[s], b[s]) for s in sorted(set(a) & set(b))]
            cells = [interval_cell([x - y for x, y in paired(m)])
                     for m in ("ws353", "simlex999", "analogy")]
            speed = statistics.median(x / y for x, y in paired("words_per_s"))
            body.append([model_name, f"{variant_label(variant)} − default",
                         len(paired("ws353")), *cells, f"{speed:.2f}×"])
    return markdown(["model", "variant", "seeds", "ΔWS-353", "ΔSimLex-999", "Δanalogy",
                     "words/s ÷ default"], body) + [
        "", src.line("The default: shared negatives of one centre for skip-gram, word2vec.c's "
                     "order for CBOW; * marks an interval that excludes 0.")]
