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


GROUP_DEFAULT = {"sg": "g1", "cbow": "pairs"}  # the variant each model trains by default


@table("word2vec-groups")
def word2vec_groups():
    """bench/word2vec_groups.py's newest run: each variant against the model's default,
    paired by seed (mean ± 95% half-width), and its words/s ÷ the default's (median seed)."""
    from .readme import paired_interval

    src = Sources()
    rows = rows_of("word2vec-groups-cpu")
    command = max(rows, key=lambda r: r["time"])["command"]
    run = src.add(pick(rows, command=command))
    seed_of = lambda r: r["shape"].split("seed=")[1]  # noqa: E731
    body = []
    for model, model_name in MODELS:
        mine = pick(run, case=lambda c: c.endswith("/" + model))
        by = {}
        for r in mine:
            by.setdefault((r["provider"], r["metric"]), {})[seed_of(r)] = float(r["value"])
        base = GROUP_DEFAULT[model]
        for variant in sorted({r["provider"] for r in mine}, key=lambda v: (v != "pairs", v)):
            if variant == base or (base, "ws353") not in by:
                continue
            cells = []
            for metric in ("ws353", "simlex999", "analogy"):
                seeds = sorted(set(by[(variant, metric)]) & set(by[(base, metric)]))
                mean, half = paired_interval(
                    [by[(variant, metric)][s] - by[(base, metric)][s] for s in seeds])
                star = " *" if abs(mean) > half else ""
                cells.append(f"{mean:+.4f} ± {half:.4f}{star}".replace("-", "−"))
            speed = statistics.median(by[(variant, "words_per_s")][s] / by[(base, "words_per_s")][s]
                                      for s in by[(variant, "words_per_s")])
            label = "word2vec.c's order" if variant == "pairs" else f"{variant[1:]} centre{'s' if variant != 'g1' else ''} a set"
            body.append([model_name, f"{label} − default", len(seeds), *cells, f"{speed:.2f}×"])
    return markdown(["model", "variant", "seeds", "ΔWS-353", "ΔSimLex-999", "Δanalogy",
                     "words/s ÷ default"], body) + [
        "", src.line("The default: shared negatives of one centre for skip-gram, word2vec.c's "
                     "order for CBOW; * marks an interval that excludes 0.")]
