"""The tables of docs/gpu.md (one NVIDIA H200), and the sampler table both the GPU and the
Benchmarks pages show."""

import statistics

from .common import (Sources, count, latest_run, markdown, ms, pick, power, ratio, rows_of,
                     sci, shape, table, value)

SAMPLERS = [("fastsoftmax.AliasSampler", "fastsoftmax draws/s"),
            ("torch.multinomial", "`torch.multinomial`"),
            ("torch.searchsorted(cumsum)", "searchsorted(cumsum)"),
            ("numpy.Generator.choice", "numpy choice")]


def sampler_table(csv_name):
    src = Sources()
    rows = rows_of(csv_name)
    run = src.add(pick(rows, time=max(r["time"] for r in rows), case="draw"))
    providers = [(p, h) for p, h in SAMPLERS if pick(run, provider=p)]
    body = []
    for V in sorted({int(r["shape"].split()[0][2:]) for r in run}):
        at = pick(run, shape=lambda s, V=V: s.startswith(f"V={V} "))
        rate = lambda p: value(at, provider=p, metric="draws_per_s")  # noqa: E731
        body.append([power(V)] + [sci(rate(p)) for p, _ in providers] + [
            ratio(rate("fastsoftmax.AliasSampler") / rate("torch.multinomial")),
            ms(value(at, provider="fastsoftmax.AliasSampler", metric="build_ms"))])
    return markdown(["V"] + [h for _, h in providers] + ["vs multinomial", "table build"],
                    body) + ["", src.line()]


@table("gpu-samplers")
def gpu_samplers():
    return sampler_table("sampler-cuda")


@table("cpu-samplers")
def cpu_samplers():
    return sampler_table("sampler-cpu")


@table("gpu-negative-sampling")
def gpu_negative_sampling():
    src = Sources()
    run = src.add(latest_run(rows_of("losses-cuda"), case="negative_sampling"))
    body = []
    for dims in dict.fromkeys(r["shape"] for r in run):
        get = lambda p, m: value(run, provider=p, shape=dims, metric=m)  # noqa: E731
        dtype, D = dims.split()[0], dims.split("D=")[1].split()[0]
        body.append([f"{dtype}, {D}", ms(get("ours", "median_ms")), ms(get("plain", "median_ms")),
                     ratio(get("ours", "speedup_vs_plain")),
                     f"{get('ours', 'median_ms') / get('ours', 'bound_ms'):.2f}",
                     f"{count(get('ours', 'peak_extra_mb'))} / "
                     f"{count(get('plain', 'peak_extra_mb'))} MiB"])
    return markdown(["dtype, D", "ours", "plain", "speed-up", "ours ÷ bytes bound",
                     "peak extra memory, ours / plain"], body) + [
        "", src.line(f"{shape(run[0]['shape'].split(' ', 1)[1])}, forward+backward.")]


@table("gpu-sampled-losses")
def gpu_sampled_losses():
    src = Sources()
    rows = src.add(rows_of("losses-lm-cuda"))
    body = []
    for case, name in (("sampled_softmax", "sampled"), ("nce", "NCE")):
        for dims in dict.fromkeys(r["shape"] for r in pick(rows, case=case)):
            get = lambda p, m: value(rows, case=case, provider=p, shape=dims, metric=m)  # noqa: E731
            V = power(float(dims.split("V=")[1].split()[0]))
            full = get("full_softmax", "median_ms")
            body.append([f"{name}, {dims.split()[0]}, {V}", ms(get("ours", "median_ms")),
                         ratio(get("plain", "median_ms") / get("ours", "median_ms")),
                         f"{ratio(full / get('ours', 'median_ms'))} ({ms(full)}, "
                         f"+{get('full_softmax', 'peak_extra_mb') / 1000:.1f} GB)",
                         ratio(get("liger", "median_ms") / get("ours", "median_ms"))])
    return markdown(["loss, dtype, V", "ours", "÷ plain sampled", "÷ full softmax",
                     "÷ Liger's fused full softmax"], body) + ["", src.line()]


@table("gpu-cce-headline")
def gpu_cce_headline():
    src = Sources()
    run = src.add(latest_run(rows_of("cce-headline-cuda"), case="cce_headline"))
    names = {"ours": "ours (`full_softmax_loss`)", "plain": "plain (`F.linear` + "
             "`F.cross_entropy`)", "torch.compile": "`torch.compile` of plain",
             "liger": "Liger-Kernel", "cce": "Cut Cross-Entropy"}
    body = [[names.get(p, p), ms(value(run, provider=p, metric="median_ms")),
             f"{value(run, provider=p, metric='peak_extra_gb'):.1f} GB"]
            for p in dict.fromkeys(r["provider"] for r in run)]
    return markdown(["provider", "time", "peak extra memory"], body) + [
        "", src.line(f"{shape(run[0]['shape'])}, forward+backward, median of 5.")]


@table("gpu-machine-cpu-scaling")
def cpu_scaling():
    src = Sources()
    rows = rows_of("word2vec-runs-cpu")
    cells, headers = [], []
    for threads in (1, 2, 4, 8, 16):
        run = src.add(latest_run(rows, command=f"python bench/bench_word2vec.py --no-gensim "
                                               f"--threads {threads} --models sg --epochs 1 "
                                               f"--seeds 1", metric="words_per_s"))
        headers.append(str(threads))
        cells.append(count(float(run[0]["value"])))
    return markdown(["threads"] + headers, [["words/s"] + cells]) + ["", src.line()]


@table("gpu-lm-step")
def lm_step():
    src = Sources()
    run = src.add(latest_run(rows_of("lm-cuda"), metric="train_tokens_per_s"))
    names = {"full": "full softmax", "sampled": "sampled softmax", "nce": "NCE",
             "neg": "negative sampling"}
    body = [[names.get(r["provider"], r["provider"]), count(float(r["value"]))] for r in run]
    return markdown(["head", "tokens/s"], body) + [
        "", src.line(f"Shape: {run[0]['shape']}; median of the steps.")]


def _speed_and_score(rows):
    """Median words/s and WS-353 mean ± sample sd over the seeds of one model's rows."""
    speeds = [float(r["value"]) for r in pick(rows, metric="words_per_s")]
    scores = [float(r["value"]) for r in pick(rows, metric="ws353_spearman")]
    return (f"{sci(statistics.median(speeds), 3)} words/s, "
            f"WS-353 {statistics.mean(scores):.3f} ± {statistics.stdev(scores):.3f}"
            .replace(" -", " −"))


@table("gpu-word2vec-racing")
def word2vec_racing():
    """The retired racing kernel (2026-11-26) beside 16 CPU threads on the same machine."""
    src = Sources()
    runs = [("GPU, negative sampling, 5 epochs", "word2vec-runs-cuda", "2026-11-26T01:10:07Z"),
            ("16 CPU threads, the same", "word2vec-runs-cpu", "2026-11-26T01:10:24Z"),
            ("GPU, hs=1 alone, 1 epoch", "word2vec-runs-cuda", "2026-11-26T01:10:34Z"),
            ("16 CPU threads, the same", "word2vec-runs-cpu", "2026-11-26T01:11:00Z")]
    body = []
    for name, csv_name, stamp in runs:
        run = src.add(pick(rows_of(csv_name), time=stamp))
        body.append([name] + [_speed_and_score(pick(run, case=f"word2vec/wikitext2/{m}"))
                              for m in ("sg", "cbow")])
    return markdown(["run", "skip-gram", "CBOW"], body) + [
        "", src.line("WS-353: mean ± sample sd over the seeds; words/s: the median.")]


@table("gpu-word2vec-racing-warps")
def word2vec_racing_warps():
    src = Sources()
    rows = rows_of("word2vec-runs-cuda")
    headers, cells = [], []
    for warps in (4096, 1024, 256):
        run = src.add(pick(rows, command=lambda c, w=warps: c.endswith(f"--gpu-warps {w}")))
        scores = [float(r["value"]) for r in pick(run, metric="ws353_spearman")]
        headers.append(str(warps))
        cells.append(f"{statistics.mean(scores):.3f} ± {statistics.stdev(scores):.3f}"
                     .replace("-", "−"))
    return markdown(["warps"] + headers, [["WS-353"] + cells]) + ["", src.line()]
