"""The tables of docs/huggingface.md and docs/tutorials/hf-less-memory.md: one training step of
a one-layer Llama on the CPU, unpatched against fastsoftmax's patch (exact and sampled) and
Cut Cross-Entropy's torch_compile implementation (bench/bench_hf_patch_memory.py), and the
issue's goals read off the same rows."""

from .common import Sources, count, markdown, pick, power, rows_of, table, value

CSV = "hf-patch-cpu"
CASE = "hf_llama_train_step"
LABELS = {
    "unpatched": "transformers (unpatched)",
    "exact": '`patch(loss="exact")`',
    "cce": 'Cut Cross-Entropy `impl="torch_compile"`',
}


def _label(provider):
    if provider.startswith("exact/chunk_bytes="):
        mib = provider.split("=")[1].replace("MiB", "")
        return f'`patch(loss="exact", chunk_bytes={mib} * 2**20)`'
    if provider.startswith("sampled/"):
        return f'`patch(loss="sampled", num_sampled={provider.split("/")[1]})`'
    return LABELS.get(provider, provider)


def _size(shape, key):
    return int(shape.split(f"{key}=")[1].split()[0])


def _runs():
    """[((V, T), first time stamp, {provider: rows})] in order of V, T and time: one entry per
    invocation of the benchmark (its command line and commit; a variant's rows carry the time
    its subprocess ended, so one invocation has several stamps)."""
    out = {}
    for r in pick(rows_of(CSV), case=CASE):
        key = (_size(r["shape"], "V"), _size(r["shape"], "T"), r["command"], r["commit"])
        out.setdefault(key, {}).setdefault(r["provider"], []).append(r)
    runs = []
    for (V, T, _, _), providers in out.items():
        first = min(r["time"] for rows in providers.values() for r in rows)
        runs.append(((V, T), first, providers))
    return sorted(runs, key=lambda run: (run[0], run[1]))


def _baseline(runs, size, providers):
    """The run's own no-head peak, else the latest no-head run's of the same size."""
    if "no_head" in providers:
        return providers["no_head"]
    same = [p["no_head"] for s, _, p in runs if s == size and "no_head" in p]
    return same[-1] if same else None


def _runs_with_baseline(src):
    """(V, T, first time stamp, {provider: rows}, the no-head peak in MiB) of each run that has
    a baseline, its rows cited in src."""
    runs = _runs()
    for (V, T), first, providers in runs:
        base_rows = _baseline(runs, (V, T), providers)
        if base_rows is not None:
            base = value(src.add(base_rows), metric="peak_beyond_model_mib")
            yield V, T, first, providers, base


def _when(first, providers):
    """The run's start (UTC) and commit: the exact patch's code changed between runs."""
    commit = next(iter(providers.values()))[0]["commit"]
    return f"{first[11:16]}, `{commit}`"


def _seconds(x):
    return f"{x:.3g} s"


def _sampled(providers):
    return sorted(p for p in providers if p.startswith("sampled/"))


ORDER = ("unpatched", "exact", "sampled", "cce")


def _ordered(providers):
    out = []
    for name in ORDER:
        out += _sampled(providers) if name == "sampled" else [name] * (name in providers)
        if name == "exact":
            out += sorted(p for p in providers if p.startswith("exact/"))
    return out


@table("hf-patch-memory")
def hf_patch_memory():
    src = Sources()
    body = []
    for V, T, first, providers, base in _runs_with_baseline(src):
        ref = providers.get("unpatched")
        for p in _ordered(providers):
            rows = src.add(providers[p])
            get = lambda m: value(rows, metric=m)  # noqa: E731
            extra = get("peak_beyond_model_mib") - base
            extra_cell, time_cell = count(extra), _seconds(get("median_step_s"))
            if ref is not None:
                ref_extra = value(ref, metric="peak_beyond_model_mib") - base
                extra_cell += f" ({100 * extra / ref_extra:.0f} %)"
                time_cell += f" ({get('median_step_s') / value(ref, metric='median_step_s'):.2f}×)"
            body.append([
                power(V), count(T), _when(first, providers), _label(p), count(get("peak_beyond_model_mib")),
                extra_cell, time_cell,
                f"{get('loadavg_1m_start'):.1f}–{get('loadavg_1m_end'):.1f}"])
    return markdown(["V", "tokens", "run (UTC, commit)", "loss", "peak beyond the model, MiB",
                     "head's extra, MiB (of unpatched)", "step, median (of unpatched)",
                     "load average"], body) + [
        "", src.line("Float32, hidden size 512, one layer, rows of 1,024 tokens, SGD; each "
                     "loss in a fresh process, the median of 3 steps. Head's extra: the peak "
                     "minus the decoder-alone step's peak (no lm_head; the run's own, or the "
                     "latest of its size). Ratios: against the same run's unpatched loss "
                     "(none where the run has none). Load average: the machine's 1-minute "
                     "load at the first step and after the last; a 2-core machine shared with "
                     "other work, so the times are rough.")]


@table("hf-patch-goals")
def hf_patch_goals():
    src = Sources()
    body = []
    for V, T, first, providers, base in _runs_with_baseline(src):
        if not {"unpatched", "exact"} <= set(providers):
            continue
        extra = {p: value(src.add(providers[p]), metric="peak_beyond_model_mib") - base
                 for p in ("unpatched", "exact")}
        time = {p: value(providers[p], metric="median_step_s") for p in providers}
        memory = extra["exact"] / extra["unpatched"]
        # lm_head's gradient, [V, D] float32: in both heads' extra, whatever the loss.
        grad = V * _size(providers["exact"][0]["shape"], "D") * 4 / 2 ** 20
        without = (extra["exact"] - grad) / (extra["unpatched"] - grad)
        slower = time["exact"] / time["unpatched"]
        cells = [power(V), count(T), _when(first, providers),
                 f"{100 * without:.1f} %: {'met' if without <= 0.10 else 'not met'}",
                 f"{100 * memory:.1f} %",
                 f"{slower:.3f}×: {'met' if slower <= 1.25 else 'not met'}"]
        sampled = _sampled(providers)
        if sampled:
            src.add(providers[sampled[0]])
            half = time[sampled[0]] / time["exact"]
            cells.append(f"{half:.2f}×" + (f": {'met' if half <= 0.5 else 'not met'}"
                                            if V < 200000 else " (goal set at V = 128k)"))
        else:
            cells.append("not measured")
        body.append(cells)
    return markdown(["V", "tokens", "run (UTC, commit)",
                     "exact loss's extra memory / unpatched (≤ 10 %)",
                     "the same with lm_head's gradient left in (head's extra)",
                     "exact step time / unpatched (≤ 1.25×)",
                     "sampled step time / exact (≤ 0.5× at V = 128k)"], body) + [
        "", src.line("Ratios of the medians and peaks of the table above, within each run.")]
