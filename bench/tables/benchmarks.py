"""The result tables of docs/benchmarks.md: the GPU bound model, the CPU samplers (in gpu.py),
the losses against plain PyTorch and `F.linear_cross_entropy`, the language models, two-tower
retrieval, the margin losses, hard attention and the memory networks."""

import os
import re
import statistics
import sys

from .common import (Sources, count, markdown, mean_sd, mib, ms, one, pick, ratio, rows_of,
                     runs_in_file, shape, table, value)

LOSSES = {"negative_sampling": "negative sampling", "sampled_softmax": "sampled softmax",
          "nce": "NCE", "hierarchical_softmax": "hierarchical softmax"}


@table("gpu-bounds")
def gpu_bounds():
    """Computed, not measured: bench/bound_model.py's GPU rows at its default ceilings."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import bound_model as bm

    body = []
    for bound in bm.readme_rows():
        words = [t for t in bound.case.split() if "=" not in t]
        sizes = shape(" ".join(t for t in bound.case.split() if "=" in t))
        moved = f"{bound.bytes / 1e9:.3g} GB" + (
            f", {bound.flops / 1e12:.2g} TFLOP" if bound.flops > 1e12 else "")
        body.append([" ".join(words) + ", " + sizes, moved, ms(bound.seconds() * 1e3)])
    return markdown(["GPU row", "must move", "bound"], body) + [
        "", f"Computed by `python bench/bound_model.py` at {bm.DEFAULT_BANDWIDTH / 1e12:.1f} TB/s"
            f" and {bm.DEFAULT_FLOPS / 1e12:.0f} TFLOP/s, not measured."]


def loss_label(case, dims):
    return f"{LOSSES[case]}, {shape(dims.split(' ', 1)[1])}"


def time_and_memory(run, case, dims, provider):
    at = dict(case=case, shape=dims, provider=provider)
    return f"{ms(value(run, metric='median_ms', **at))}, " \
           f"{mib(value(run, metric='peak_extra_mb', **at))}"


def faster(run, case, dims, peers):
    """'5.1× plain, 29.6× full': each peer's median over ours."""
    ours = value(run, case=case, shape=dims, provider="ours", metric="median_ms")
    return ", ".join(f"{ratio(value(run, case=case, shape=dims, provider=p, metric='median_ms') / ours)}"
                     f" {name}" for p, name in peers)


def losses_run(command, which=-1):
    return runs_in_file(pick(rows_of("losses-cpu"), command=command))[which]


@table("cpu-losses")
def cpu_losses():
    src = Sources()
    quiet = src.add(losses_run("python bench/bench_losses.py --repeat 5 --warmup 1"))
    lm = src.add(losses_run("python bench/bench_losses.py --cases lm --repeat 7"))
    body = []
    for run in (quiet, lm):
        for case, dims in dict.fromkeys((r["case"], r["shape"]) for r in run):
            if case not in LOSSES:
                continue
            has_full = bool(pick(run, case=case, shape=dims, provider="full_softmax"))
            peers = [("plain", "plain")] + ([("full_softmax", "full")] if has_full else [])
            body.append([loss_label(case, dims), time_and_memory(run, case, dims, "ours"),
                         time_and_memory(run, case, dims, "plain"),
                         time_and_memory(run, case, dims, "full_softmax") if has_full else "",
                         faster(run, case, dims, peers)])
    return markdown(["case", "fastsoftmax", "plain PyTorch (gather + matmul + autograd)",
                     "full softmax", "speed-up"], body) + [
        "", src.line("Forward+backward, float32, medians; memory is the peak above the "
                     "inputs.")]


LCE_PEERS = [("plain", "plain"), ("lce", "`lce`"), ("lce_chunked", "chunked"),
             ("lce_chunked_auto", "auto")]


@table("cpu-losses-lce")
def cpu_losses_lce():
    src = Sources()
    picks = [("python bench/bench_losses.py --cases hs,lm --repeat 5 --warmup 1",
              ("hierarchical_softmax", "sampled_softmax")),
             ("python bench/bench_losses.py --cases lm --repeat 7", ("sampled_softmax",)),
             ("python bench/bench_losses.py --cases word2vec,lm --repeat 5 --warmup 1 "
              "--no-smoothing", ("negative_sampling", "sampled_softmax", "nce"))]
    body = []
    for command, cases in picks:
        run = src.add(losses_run(command))
        for case, dims in dict.fromkeys((r["case"], r["shape"]) for r in run):
            if case not in cases or not pick(run, case=case, shape=dims, provider="lce"):
                continue
            body.append([loss_label(case, dims), run[0]["time"][:10]]
                        + [time_and_memory(run, case, dims, p) for p in ["ours"] + [
                            p for p, _ in LCE_PEERS]] + [faster(run, case, dims, LCE_PEERS)])
    return markdown(["case", "run", "fastsoftmax", "plain PyTorch", "`lce`", "`lce` chunked",
                     "`lce` auto", "speed-up"], body) + [
        "", src.line("Forward+backward, float32, medians; `lce` = `F.linear_cross_entropy`.")]


@table("cpu-lm-speed")
def cpu_lm_speed():
    src = Sources()
    run = src.add(pick(rows_of("lm-cpu"), time=lambda t: t.startswith("2026-11-22T08:33:13"),
                       metric="train_tokens_per_s"))
    body = []
    for case in dict.fromkeys(r["case"] for r in run):
        get = lambda p: value(run, case=case, provider=p)  # noqa: E731
        V = one(run, case=case, provider="full")["shape"].split()[0][2:]
        body.append([case.split("/")[1], count(float(V)), count(get("full")),
                     f"{count(get('sampled'))} ({ratio(get('sampled') / get('full'))})",
                     count(get("nce")), count(get("neg"))])
    return markdown(["corpus", "V", "full", "sampled", "nce", "neg"], body) + [
        "", src.line("Training tokens/s of a 2×200 LSTM by output head.")]


PTB_HEADS = [("2026-11-22T10:35:40", "full", "full softmax"),
             ("2026-11-22T10:35:40", "sampled", "sampled softmax (1,024 of 10,000)"),
             ("2026-11-22T10:35:40", "nce", "NCE (1,024 noise words)"),
             ("2026-11-24T04:15:40", "hs", "hierarchical softmax, word2vec.c's Huffman tree"),
             ("2026-11-24T05:44:24", "hs", "hierarchical softmax, left-context tree"),
             ("2026-11-24T06:04:10", "hs", "hierarchical softmax, tree from a trained model's "
                                           "features")]


@table("cpu-lm-ptb")
def cpu_lm_ptb():
    src = Sources()
    rows = rows_of("lm-cpu")
    full = value(rows, time=lambda t: t.startswith(PTB_HEADS[0][0]), provider="full",
                 metric="test_ppl")
    body = []
    for stamp, provider, name in PTB_HEADS:
        run = src.add(pick(rows, time=lambda t, s=stamp: t.startswith(s), provider=provider))
        test = value(run, metric="test_ppl")
        valid = [float(v) for v in one(run, metric="valid_ppl_per_epoch")["value"].split()]
        body.append([name, f"**{test:.2f}**", f"{test / full:.3f}",
                     f"{min(valid):.2f} / {valid[-1]:.2f}",
                     f"{count(value(run, metric='train_seconds'))} s"])
    return markdown(["head", "test perplexity", "vs full", "best / last valid perplexity",
                     "training time"], body) + [
        "", src.line("Perplexity always with the exact softmax.")]


RETRIEVAL = [("popularity", "popularity: the 10 / 100 most frequent words, no model"),
             ("none", "in-batch negatives, no correction"),
             ("unigram", "in-batch, logQ = log(512 · true unigram)"),
             ("estimator", "in-batch, logQ from `FrequencyEstimator(2¹⁷, alpha=0.01)`"),
             ("mixed", "mixed: + 512 uniform extra negatives, logQ of the mixture")]


@table("cpu-retrieval")
def cpu_retrieval():
    src = Sources()
    rows = rows_of("retrieval-cpu")
    body = []
    for variant, name in RETRIEVAL:
        seeds = src.add(pick(rows, variant=variant))
        body.append([name] + [f"{statistics.mean(float(r[k]) for r in seeds):.3f}"
                              for k in ("recall_at_10", "recall_at_100")]
                    + [str(len(seeds))])
    return markdown(["variant", "recall@10", "recall@100", "seeds"], body) + [
        "", src.line("Mean over the seeds.")]


@table("cpu-margin")
def cpu_margin():
    src = Sources()
    run = src.add(rows_of("margin-cpu"))
    body = []
    for case, provider in dict.fromkeys((r["case"], r["provider"]) for r in run):
        get = lambda m: value(run, case=case, provider=provider, metric=m)  # noqa: E731
        body.append([case.replace("_", " "), provider,
                     f"{ms(get('fwd+bwd median s') * 1e3)} [{get('fwd+bwd min s') * 1e3:,.0f}, "
                     f"{get('fwd+bwd max s') * 1e3:,.0f}]", mib(get("peak extra MiB"))])
    return markdown(["loss", "implementation", "median [min, max]", "peak extra memory"],
                    body) + ["", src.line(f"{shape(run[0]['shape'])}; forward+backward.")]


def variance_ratio(run, estimator, epoch):
    return value(run, provider=f"hard baseline=value, estimate with baseline={estimator} "
                               f"(after epoch {epoch})", metric="score_grad_var_ratio")


def hard_attention_seed(row) -> int:
    """The run's --seed (the bench's default 1984 when the command gives none)."""
    found = re.search(r"--seed (\d+)", row["command"])
    return int(found.group(1)) if found else 1984


@table("cpu-hard-attention")
def cpu_hard_attention():
    src = Sources()
    rows = src.add([r for r in rows_of("hard-attention-cpu") if hard_attention_seed(r) == 1984])
    body = []
    for task in dict.fromkeys(r["case"] for r in rows):
        at = pick(rows, case=task)
        last = max(int(r["provider"].split("epoch ")[1][:-1]) for r in at if "epoch" in r[
            "provider"])
        soft_ms = value(at, provider="soft", metric="step_ms_median")
        for provider in ("soft", "hard baseline=none", "hard baseline=mean",
                         "hard baseline=value"):
            get = lambda m, p=provider: value(at, provider=p, metric=m)  # noqa: E731
            step = get("step_time_vs_soft")
            variance = ["—", "—"]
            if provider != "soft":
                est = provider.split("=")[1]
                variance = [f"×{variance_ratio(at, est, e):.2f}" for e in (1, last)]
            body.append([task, provider.replace("hard baseline=", "hard, "),
                         f"{get('exact_match'):.1f}%", f"{get('heldout_loss'):.4f}",
                         f"{get('train_s'):.1f}",
                         f"{step:.2f}" + (f" ({soft_ms:.0f} ms)" if provider == "soft" else "")]
                        + variance)
    return markdown(["task", "attention", "exact match", "held-out loss", "train s",
                     "step vs soft", "score-gradient variance vs none, epoch 1",
                     "last epoch"], body) + ["", src.line()]


@table("cpu-hard-attention-seeds")
def cpu_hard_attention_seeds():
    """Held-out exact match of every attention, per seed (each seed its own split and
    initialisation), with the mean ± sample sd."""
    src = Sources()
    rows = src.add([r for r in rows_of("hard-attention-cpu") if r["metric"] == "exact_match"])
    seeds = sorted({hard_attention_seed(r) for r in rows}, key=lambda s: (s != 1984, s))
    body = []
    for task in dict.fromkeys(r["case"] for r in rows):
        for provider in ("soft", "hard baseline=none", "hard baseline=mean",
                         "hard baseline=value"):
            runs = {hard_attention_seed(r): float(r["value"])
                    for r in pick(rows, case=task, provider=provider)}
            per_seed = [f"{runs[s]:.1f}" if s in runs else "—" for s in seeds]
            spread = mean_sd(list(runs.values()), 1) if len(runs) > 1 else "(1 seed)"
            body.append([task, provider.replace("hard baseline=", "hard, ")] + per_seed
                        + [spread])
    return markdown(["task", "attention"] + [f"seed {s}" for s in seeds]
                    + ["mean ± sd"], body) + ["", src.line(
                        "Exact match (%) on the held-out pairs; sd: the sample standard "
                        "deviation (n − 1).")]


MEMN2N_RUNS = [("single", "2026-11-24T03:20:00", "2026-11-24T03:30:25", "supporting-facts"),
               ("two", "2026-11-24T03:39:57", "2026-11-24T04:01:35", "supporting-facts per hop"),
               ("yes-no", "2026-11-24T03:20:07", "2026-11-24T03:30:35", "supporting-facts"),
               ("counting", "2026-11-24T03:40:23", "2026-11-24T03:48:07", "supporting-facts")]


def memn2n_cell(run):
    get = lambda m: value(run, metric=m)  # noqa: E731
    return f"{get('accuracy_median'):.1f}% ({get('accuracy_min'):.1f}–{get('accuracy_max'):.1f})"


@table("cpu-memn2n")
def cpu_memn2n():
    src = Sources()
    rows = rows_of("memn2n-cpu")
    body = []
    for task, plain, supervised, provider in MEMN2N_RUNS:
        a = src.add(pick(rows, time=lambda t, s=plain: t.startswith(s), case=task,
                         provider="memn2n answers only"))
        b = src.add(pick(rows, time=lambda t, s=supervised: t.startswith(s), case=task,
                         provider=f"memn2n {provider}"))
        body.append([task, memn2n_cell(a), memn2n_cell(b),
                     f"{value(a, metric='train_s_median'):.0f} s / "
                     f"{value(b, metric='train_s_median'):.0f} s"])
    return markdown(["task", "answers only", "with `--supporting-facts`",
                     "training (answers only / with)"], body) + [
        "", src.line("Test accuracy: median (min–max) over seeds 0, 1, 2; training: the "
                     "median run.")]




@table("fuzz-files")
def fuzz_files():
    """docs/reliability.md: every run of the file fuzzers (make fuzz-files), one row a target."""
    src = Sources()
    body = []
    for run in runs_in_file(rows_of("fuzz-files-cpu")):
        src.add(run)
        for target in dict.fromkeys(r["case"] for r in run):
            get = lambda m: value(run, case=target, metric=m)  # noqa: E731
            body.append([f"`{run[0]['command']}`", f"`{target}`", one(run, case=target,
                         metric="crashes")["provider"], count(get("executions")),
                         count(get("exec_per_s")), count(get("seconds")),
                         count(get("crashes"))])
    return markdown(["run", "target", "build", "executions", "exec/s",
                     "seconds (with start-up)", "crashes"], body) + ["", src.line()]
