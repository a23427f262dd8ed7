"""The result tables of the model pages, docs/models/*.md.

Three of their benchmarks (bench_dmn.py, bench_memn2n_babi.py, bench_memnn.py) write rows of
their own columns, not bench/common.py's. `sourced` gives such rows the command, device and
time that the line under a table names, taken from what the rows themselves record; they
carry no time stamp, so those runs read "undated" rather than a date guessed afterwards.
"""

import re
import statistics

from .common import Sources, count, markdown, mean_sd, one, pick, rows_of, table

# The tasks as the pages name them (fastsoftmax.models.babi's names are the files' spellings).
BABI = ["single supporting fact", "two supporting facts", "three supporting facts",
        "two-arg relations", "three-arg relations", "yes/no questions", "counting",
        "lists/sets", "simple negation", "indefinite knowledge", "basic coreference",
        "conjunction", "compound coreference", "time reasoning", "basic deduction",
        "basic induction", "positional reasoning", "size reasoning", "path finding",
        "agent's motivations"]


def task_name(task) -> str:
    return f"{task} {BABI[int(task) - 1]}"


def sourced(rows, command, device):
    """Rows of a benchmark's own columns with the common ones Sources reads; `command` and
    `device` are functions of a row."""
    return [dict(r, command=command(r), device=device(r), time="") for r in rows]


# ---- docs/models/dmn.md ---------------------------------------------------------------------
DMN_TASKS = [(1, "10k"), (2, "10k"), (3, "1k")]  # qa3 has only the 1k file here


def dmn_cell(row) -> str:
    return (f"{float(row['accuracy']):.1f} % ({row['epochs']} epochs, "
            f"{count(float(row['seconds']))} s)")


def dmn_table_rows(rows, task, size):
    """The DMN runs (one per seed, by seed) and the MemN2N run of the table's configuration:
    gates trained on the supporting facts, softmax gates with the temporal encoding,
    embeddings from scratch. The first version's rows (no `temporal=` in their settings) and
    the ablations are left out. Every seed must have run with the same settings."""
    at = pick(rows, task=str(task), train_size=size, supervision="strong")
    dmn = sorted(pick(at, model="dmn", settings=lambda s: "gate=softmax temporal=True" in s
                      and "init_embeddings" not in s), key=lambda r: int(r["seed"]))
    if not dmn or len({r["settings"] for r in dmn}) != 1 or len({r["seed"] for r in dmn}) != len(
            dmn):
        raise LookupError(f"task {task} ({size}): expected one DMN run per seed, one setting")
    return dmn, one(at, model="memn2n")


def spread(values, digits: int, unit: str = "") -> str:
    """mean ± sample standard deviation, or the one value and "1 seed"."""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}{unit} (1 seed)"
    return mean_sd(values, digits) + unit


@table("dmn-babi")
def dmn_babi():
    src = Sources()
    rows = rows_of("dmn-babi-cpu")
    body = []
    for task, size in DMN_TASKS:
        dmn, memn2n = dmn_table_rows(rows, task, size)
        # bench_dmn.py records the settings of a run but not its command line.
        src.add(sourced(dmn + [memn2n], lambda r: "python bench/bench_dmn.py",
                        lambda r: r["machine"]))
        accuracy = [float(r["accuracy"]) for r in dmn]
        body.append([task_name(task), f"{count(float(dmn[0]['train_questions']))} ({size})",
                     " / ".join(r["seed"] for r in dmn),
                     " / ".join(f"{a:.1f}" for a in accuracy) + " %",
                     spread(accuracy, 1, " %"),
                     f"{dmn[0]['epochs']} epochs, "
                     + " / ".join(count(float(r["seconds"])) for r in dmn) + " s",
                     dmn_cell(memn2n)])
    return markdown(["task", "training questions", "DMN seeds", "DMN test accuracy, per seed",
                     "DMN mean ± sd", "DMN training, per seed", "MemN2N (seed 0)"], body) + [
        "", src.line("The flags of each run are in the commands below; its settings are in "
                     "the rows' `settings` column. sd: the sample standard deviation over the "
                     "seeds (n − 1).")]


# ---- docs/models/memn2n.md ------------------------------------------------------------------
def babi_command(row) -> str:
    """The sweep's command as recorded, less its paths on the machine that ran it."""
    return re.sub(r" --(babi-dir|out|checkpoints) \S+", "", row["command"])


def babi_runs(src, csv_name, mode):
    """{task: [rows]} of bench_memn2n_babi.py's rows of one mode, in the order written."""
    runs = {}
    for r in src.add(sourced(pick(rows_of(csv_name), mode=mode), babi_command,
                             lambda r: r["machine"])):
        runs.setdefault(int(r["task"]), []).append(r)
    return runs


def best_by_validation(runs):
    """{task: test error %} of the run of lowest validation error per task, the first on a
    tie (as bench_memn2n_babi.py --summary keeps)."""
    return {task: float(min(rows, key=lambda r: float(r["valid_error"]))["error"])
            for task, rows in runs.items()}


def runs_by_seed(runs):
    """{seed: {task: row}}: each restart's own rows, in the order written."""
    seeds = {}
    for rows in runs.values():
        for r in rows:
            seeds.setdefault(r["seed"], {})[int(r["task"])] = r
    return seeds


def best_joint_run(runs):
    """{task: test error %} of the one joint run (seed) of lowest mean validation error over
    its tasks, the first on a tie: a joint model is chosen whole, not task by task."""
    best = min(runs_by_seed(runs).values(), key=lambda run: statistics.mean(
        float(r["valid_error"]) for r in run.values()))
    return {task: float(r["error"]) for task, r in best.items()}


def low_high(values, digits: int) -> str:
    low, high = min(values), max(values)
    return f"{low:.{digits}f}" if low == high else f"{low:.{digits}f}–{high:.{digits}f}"


def error_range(rows) -> str:
    return low_high([float(r["error"]) for r in rows], 1)


def published(src, provider):
    """{task: test error %} of a published column; the paper's figures are transcribed as
    accuracies (a fraction), so its error is 100 × (1 − accuracy)."""
    errors = {}
    for r in src.add(pick(rows_of("memn2n-babi-published"), provider=provider)):
        v = float(r["value"])
        task = int(r["case"].rsplit("qa", 1)[1])
        errors[task] = 100 * (1 - v) if r["metric"] == "test_accuracy" else v
    return errors


def by_seed(runs):
    """{seed: {task: test error %}}: each restart's own errors."""
    return {seed: {task: float(r["error"]) for task, r in run.items()}
            for seed, run in runs_by_seed(runs).items()}


def babi_summary(columns, spreads):
    """The mean error and the failed tasks (error > 5 %, the paper's criterion) of each
    column, over the tasks it has; a range column ({seed: errors}) gives the range of its
    runs' means and failed counts."""
    means, failed = [], []
    for c, runs in zip(columns, spreads):
        if runs:
            means.append(low_high([statistics.mean(e.values()) for e in runs.values()], 1))
            failed.append(low_high([sum(x > 5 for x in e.values()) for e in runs.values()], 0))
        else:
            means.append(f"{statistics.mean(c.values()):.1f} ({len(c)})")
            failed.append(str(sum(e > 5 for e in c.values())))
    return [["mean error (tasks)"] + means, ["failed tasks (error > 5%)"] + failed]


@table("memn2n-babi")
def memn2n_babi():
    src = Sources()
    per_task = babi_runs(src, "memn2n-babi-defaults-cpu", "task")
    joint = babi_runs(src, "memn2n-babi-defaults-cpu", "joint")
    matlab = published(src, "authors' Matlab code: MemN2N-babi-matlab, PE LS RN per task")
    paper = published(src, "paper: Sukhbaatar et al. 2015, PE LS RN joint")
    seeds = len(next(iter(per_task.values())))
    restarts = len(next(iter(joint.values())))
    columns = [best_by_validation(per_task), None, matlab, best_joint_run(joint), None, paper]
    spreads = [None, by_seed(per_task), None, None, by_seed(joint), None]
    body = []
    for t in range(1, 21):
        cells = [f"{c[t]:.1f}" if c and t in c else "" for c in columns]
        cells[1] = error_range(per_task[t]) if t in per_task else "not run"
        cells[4] = error_range(joint[t]) if t in joint else "not run"
        body.append([task_name(t)] + cells)
    joint_title = "ours, joint" + (f" (best of {restarts})" if restarts > 1 else ", 1 run")
    out = markdown(["task", f"ours, per task (best of {seeds})", f"range over the {seeds} "
                    "seeds", "authors' Matlab code, per task", joint_title,
                    f"joint, range over the {restarts} restarts", "paper, PE LS RN joint"],
                   body + babi_summary(columns, spreads))
    out[1] = "| --- |" + " ---: |" * 6  # figures right-aligned
    return out + ["", src.line("Restart r uses seed r. Per task, of the runs the one of "
                               "lowest validation error on that task; jointly, the run of "
                               "lowest mean validation error over the 20 tasks (one model, "
                               "chosen whole); the first on a tie. The `--babi-dir`, `--out` "
                               "and `--checkpoints` paths are left out of the commands.")]


# ---- docs/models/memnn.md -------------------------------------------------------------------
def memnn_row(runs) -> list:
    first = one(runs, seed="0")
    hits = " / ".join(f"{float(h):g}" for h in first["support_hits"].split())
    seconds = [float(r["seconds"]) for r in runs]
    return [task_name(first["task"]), first["hops"],
            " / ".join(f"{float(r['accuracy']):.1f}" for r in runs) + " %",
            mean_sd([float(r["accuracy"]) for r in runs], 1) + " %", hits + " %",
            f"{min(seconds):.1f}–{max(seconds):.1f} s"]


@table("memnn-babi")
def memnn_babi():
    src = Sources()
    rows = src.add(sourced(rows_of("memnn-cpu"), lambda r: r["command"],
                           lambda r: f"{r['machine']}, torch {r['torch']}"))
    body = []
    for task, hops in dict.fromkeys((r["task"], r["hops"]) for r in rows):
        runs = sorted(pick(rows, task=task, hops=hops), key=lambda r: int(r["seed"]))
        body.append(memnn_row(runs))
    seeds = " / ".join(sorted({r["seed"] for r in rows}, key=int))
    return markdown(["bAbI task", "κ", f"test accuracy, seeds {seeds}", "mean ± sd",
                     "supporting facts found per hop (seed 0)", "training time per run"],
                    body) + ["", src.line("sd: the sample standard deviation over the "
                                          f"{len(seeds.split(' / '))} seeds (n − 1).")]


# ---- docs/models/seq2seq.md -----------------------------------------------------------------
@table("seq2seq-local-attention")
def local_attention():
    src = Sources()
    rows = rows_of("local-attention-cpu")
    trained = src.add(pick(rows, case="date"))
    steps = src.add(pick(rows, case="date-step", metric="step_ms_median"))
    body = []
    for provider in dict.fromkeys(r["provider"] for r in trained):
        mine = pick(trained, provider=provider)
        metric = lambda m: [float(r["value"]) for r in pick(mine, metric=m)]  # noqa: E731
        step = float(one(steps, provider=provider)["value"])
        body.append([provider.replace(" D=", ", D = "), mean_sd(metric("exact_match"), 2),
                     mean_sd(metric("heldout_loss"), 4),
                     f"{step / float(one(steps, provider='global')['value']):.2f}"])
    return markdown(["alignment", "exact match %", "held-out loss", "step time vs global"],
                    body) + ["", src.line()]


# ---- docs/models/treernn.md -----------------------------------------------------------------
TREE_RUNS = [("tree, supervise nodes", "Tree-RNN", "every node"),
             ("tree, supervise root", "Tree-RNN", "root only"),
             ("lstm, supervise nodes", "LSTM over tokens", "every digit and `)`"),
             ("lstm, supervise root", "LSTM over tokens", "root only")]
TREE_EPOCHS = "8"  # the table's sweep; the one longer LSTM run is quoted in the prose


@table("treernn-arithmetic")
def treernn_arithmetic():
    src = Sources()
    rows = pick(rows_of("treernn-cpu"), shape=lambda s: f" epochs={TREE_EPOCHS} " in s)
    cells = []
    for provider, model, supervision in TREE_RUNS:
        run = src.add(pick(rows, provider=provider))
        get = lambda m: [float(r["value"]) for r in pick(run, metric=m)]  # noqa: E731
        cells.append([model, supervision, get("test_accuracy"),
                      f"{statistics.mean(get('majority')):.1f}", mean_sd(get("train_s"), 0)])
    best = max(statistics.mean(c[2]) for c in cells)
    for c in cells:  # the best model in bold
        c[2] = mean_sd(c[2], 2) if statistics.mean(c[2]) < best else f"**{mean_sd(c[2], 2)}**"
    return markdown(["model", "supervision", "test accuracy %", "majority %",
                     f"train s, {TREE_EPOCHS} epochs"], cells) + ["", src.line()]
