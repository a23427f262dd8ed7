"""The tables of docs/pretraining.md and of the num_sampled section of
docs/tutorials/own-model-head.md: a 2-layer Llama trained from scratch on WikiText-2 through
fastsoftmax's patch, exact against sampled for equal wall time over seeds, and the sampled
head's num_sampled against validation perplexity and step time at a fixed number of steps
(bench/bench_hf_pretrain.py)."""

import statistics

from .common import Sources, count, markdown, pick, rows_of, table

CASE = "wikitext-2/llama-pretrain"


def _last_invocation(csv_name):
    """The rows of the latest run of the benchmark in the file: a run ends where the command
    changes or a (provider, shape, metric) repeats (its jobs end, and stamp their rows, at
    different times)."""
    runs, seen = [], set()
    for r in pick(rows_of(csv_name), case=CASE):
        key = (r["provider"], r["shape"], r["metric"])
        if not runs or r["command"] != runs[-1][0]["command"] or key in seen:
            runs.append([])
            seen = set()
        runs[-1].append(r)
        seen.add(key)
    if not runs:
        raise LookupError(f"no {CASE} rows in bench/results/{csv_name}.csv")
    return runs[-1]


def _jobs(rows):
    """{(provider, seed): {metric: value}} of one run of the benchmark."""
    out = {}
    for r in rows:
        seed = int(r["shape"].split("seed=")[1].split()[0])
        out.setdefault((r["provider"], seed), {})[r["metric"]] = float(r["value"])
    return out


def _head_order(provider):
    # Sampled heads by rising num_sampled, the exact head last.
    return (1, 0) if provider == "exact" else (0, int(provider.split("/")[1]))


def _label(provider):
    if provider == "exact":
        return '`patch(loss="exact")`'
    return f'`patch(loss="sampled", num_sampled={provider.split("/")[1]})`'


def _load(job):
    return f"{job['loadavg_1m_start']:.1f}–{job['loadavg_1m_end']:.1f}"


def _at_once(rows):
    """How many runs went at a time: the command's --jobs (default 2)."""
    words = rows[0]["command"].split()
    jobs = int(words[words.index("--jobs") + 1]) if "--jobs" in words else 2
    return f"{jobs} at a time" if jobs > 1 else "one at a time"


def _evaluated(jobs):
    scored = {int(j["valid_tokens"]) for j in jobs.values()}
    if len(scored) != 1:
        raise ValueError(f"the runs scored different validation prefixes: {sorted(scored)}")
    return f"validation perplexity on the first {count(scored.pop())} predictions"


def _setting(rows):
    shape = rows[0]["shape"].split()
    return " ".join(part for part in shape if not part.startswith("seed="))


@table("hf-pretrain-runs")
def hf_pretrain_runs():
    src = Sources()
    rows = src.add(_last_invocation("hf-pretrain-cpu"))
    jobs = _jobs(rows)
    body = []
    for provider, seed in sorted(jobs, key=lambda k: (_head_order(k[0]), k[1])):
        job = jobs[provider, seed]
        body.append([seed, _label(provider), count(job["steps"]),
                     count(job["tokens_per_cpu_s"]), f"{job['median_step_cpu_s']:.3g} s",
                     f"{job['train_loss_last50']:.2f}", f"{job['valid_ppl']:.1f}",
                     f"{job['train_wall_s']:,.0f} s", _load(job)])
    return markdown(["seed", "loss", "steps", "tokens per CPU second",
                     "step, median CPU time", "training loss, last 50 steps",
                     "validation perplexity (exact)", "training's wall time",
                     "load average"], body) + [
        "", src.line(f"{_setting(rows)}, {_evaluated(jobs)}. Each run in a process of its "
                     "own with one thread, "
                     f"{_at_once(rows)}. "
                     "Training loss: the loss each head trains on (the sampled one is not a "
                     "perplexity). Wall time and load average (the machine's 1-minute load at "
                     "the start of training and after the evaluation): the budget is CPU time "
                     "because this 2-core machine was shared with other work.")]


@table("hf-pretrain-summary")
def hf_pretrain_summary():
    src = Sources()
    jobs = _jobs(src.add(_last_invocation("hf-pretrain-cpu")))
    heads = sorted({p for p, _ in jobs}, key=_head_order)
    body, ppl = [], {}
    for provider in heads:
        runs = [jobs[k] for k in sorted(jobs) if k[0] == provider]
        ppl[provider] = [j["valid_ppl"] for j in runs]
        spread = statistics.stdev(ppl[provider]) if len(runs) > 1 else 0.0
        body.append([_label(provider), len(runs),
                     count(statistics.mean(j["steps"] for j in runs)),
                     count(statistics.mean(j["tokens_per_cpu_s"] for j in runs)),
                     f"{statistics.mean(ppl[provider]):.1f} ± {spread:.1f}",
                     f"{min(ppl[provider]):.1f}–{max(ppl[provider]):.1f}"])
    lines = markdown(["loss", "seeds", "steps, mean", "tokens per CPU second, mean",
                      "validation perplexity, mean ± sd", "lowest–highest"], body)
    return lines + ["", src.line("Mean and sample standard deviation over the seeds of the "
                                 "table below.") + _reading(ppl)]


def _reading(ppl):
    """One sentence comparing each sampled head with the exact one, from the rows."""
    if "exact" not in ppl:
        return ""
    exact = ppl["exact"]
    out = []
    for provider in sorted(ppl, key=_head_order):
        if provider == "exact":
            continue
        mine = ppl[provider]
        wins = sum(s < e for s, e in zip(mine, exact))
        apart = max(mine) < min(exact) or min(mine) > max(exact)
        out.append(f" {_label(provider)}'s mean perplexity is "
                   f"{statistics.mean(mine) / statistics.mean(exact):.3f}× the exact loss's; "
                   f"it is lower in {wins} of {len(mine)} seeds, and the two heads' ranges "
                   f"{'do not overlap' if apart else 'overlap'}.")
    return "".join(out)


@table("num-sampled-curve")
def num_sampled_curve():
    src = Sources()
    rows = src.add(_last_invocation("num-sampled-cpu"))
    jobs = _jobs(rows)
    exact = next((j for (p, _), j in jobs.items() if p == "exact"), None)
    body = []
    for provider, seed in sorted(jobs, key=lambda k: (_head_order(k[0]), k[1])):
        job = jobs[provider, seed]
        step, ppl = f"{job['median_step_cpu_s']:.3g} s", f"{job['valid_ppl']:.1f}"
        if exact is not None:
            step += f" ({job['median_step_cpu_s'] / exact['median_step_cpu_s']:.2f}×)"
            ppl += f" ({job['valid_ppl'] / exact['valid_ppl']:.2f}×)"
        body.append([provider.split("/")[-1], count(job["steps"]), step,
                     count(job["tokens_per_cpu_s"]), ppl, _load(job)])
    seeds = sorted({s for _, s in jobs})
    return markdown(["num_sampled", "steps", "step, median CPU time (of exact)",
                     "tokens per CPU second", "validation perplexity, exact loss (of exact)",
                     "load average"],
                    body) + [
        "", src.line(f"{_setting(rows)}, {_evaluated(jobs)}; seed "
                     f"{', '.join(map(str, seeds))} only (one run per value: no spread is "
                     f"measured). Each run in a process of its own with one thread, "
                     f"{_at_once(rows)}, on a 2-core machine shared with other work: CPU "
                     "times, which a loaded machine still stretches somewhat (load average "
                     "shown).")]
