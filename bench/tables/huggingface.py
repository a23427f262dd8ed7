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
        size = provider.split("=")[1].replace("MiB", " MiB")
        return f'`patch(loss="exact", chunk_bytes=...)`, {size}'
    if provider.startswith("sampled/"):
        return f'`patch(loss="sampled", num_sampled={provider.split("/")[1]})`'
    return LABELS.get(provider, provider)


def _size(shape, key):
    return int(shape.split(f"{key}=")[1].split()[0])


def _latest():
    """{(V, T): {provider: rows of its latest run}} and the shape strings."""
    out = {}
    for r in pick(rows_of(CSV), case=CASE):
        key = (_size(r["shape"], "V"), _size(r["shape"], "T"))
        out.setdefault(key, {}).setdefault(r["provider"], {}).setdefault(r["time"], []).append(r)
    return {k: {p: runs[max(runs)] for p, runs in v.items()} for k, v in sorted(out.items())}


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
    for (V, T), providers in _latest().items():
        if "no_head" not in providers or "unpatched" not in providers:
            continue
        base = value(src.add(providers["no_head"]), metric="peak_beyond_model_mib")
        ref = providers["unpatched"]
        ref_extra = value(ref, metric="peak_beyond_model_mib") - base
        ref_time = value(ref, metric="median_step_s")
        for p in _ordered(providers):
            rows = src.add(providers[p])
            get = lambda m: value(rows, metric=m)  # noqa: E731
            extra = get("peak_beyond_model_mib") - base
            body.append([
                power(V), count(T), _label(p), count(get("peak_beyond_model_mib")),
                f"{count(extra)} ({100 * extra / ref_extra:.0f} %)",
                f"{_seconds(get('median_step_s'))} ({get('median_step_s') / ref_time:.2f}×)",
                f"{get('loadavg_1m_start'):.1f}–{get('loadavg_1m_end'):.1f}"])
    return markdown(["V", "tokens", "loss", "peak beyond the model, MiB", "head's extra, MiB "
                     "(of unpatched)", "step, median (of unpatched)", "load average"],
                    body) + [
        "", src.line("Float32, hidden size 512, one layer, rows of 1,024 tokens, SGD; each "
                     "loss in a fresh process, the median of 3 steps. Head's extra: the peak "
                     "minus the decoder-alone step's peak (no lm_head). Load average: the "
                     "machine's 1-minute load at the first step and after the last; a 2-core "
                     "machine shared with other work, so the times are rough.")]


@table("hf-patch-goals")
def hf_patch_goals():
    src = Sources()
    body = []
    for (V, T), providers in _latest().items():
        if not {"no_head", "unpatched", "exact"} <= set(providers):
            continue
        base = value(src.add(providers["no_head"]), metric="peak_beyond_model_mib")
        extra = {p: value(src.add(providers[p]), metric="peak_beyond_model_mib") - base
                 for p in ("unpatched", "exact")}
        time = {p: value(providers[p], metric="median_step_s") for p in providers}
        memory = extra["exact"] / extra["unpatched"]
        # lm_head's gradient, [V, D] float32: in both heads' extra, whatever the loss.
        grad = V * _size(providers["exact"][0]["shape"], "D") * 4 / 2 ** 20
        without = (extra["exact"] - grad) / (extra["unpatched"] - grad)
        slower = time["exact"] / time["unpatched"]
        cells = [power(V), count(T),
                 f"{100 * memory:.1f} %: {'met' if memory <= 0.10 else 'not met'}",
                 f"{100 * without:.1f} %: {'met' if without <= 0.10 else 'not met'}",
                 f"{slower:.2f}×: {'met' if slower <= 1.25 else 'not met'}"]
        sampled = _sampled(providers)
        if sampled:
            src.add(providers[sampled[0]])
            half = time[sampled[0]] / time["exact"]
            cells.append(f"{half:.2f}×" + (f": {'met' if half <= 0.5 else 'not met'}"
                                            if V < 200000 else " (goal set at V = 128k)"))
        else:
            cells.append("not measured")
        body.append(cells)
    return markdown(["V", "tokens", "exact head's extra memory / unpatched (≤ 10 %)",
                     "the same, lm_head's gradient taken out of both",
                     "exact step time / unpatched (≤ 1.25×)",
                     "sampled step time / exact (≤ 0.5× at V = 128k)"], body) + [
        "", src.line("Ratios of the medians and peaks of the table above.")]
