"""Kill-safety of checkpoints, run by tests/test_atomic_files.py as its own process:

    python tests/kill_training.py WORKDIR [KILLS] [SEED] [MODEL]

`fastsoftmax-MODEL train` (MODEL lm, seq2seq, memn2n, memnn, dmn or treernn; the command
line's code) checkpoints (the language model after every step, --save-every 1; the others after
every epoch of a tiny task) in a child process, which is SIGKILLed KILLS times: half at a random moment,
half the instant a checkpoint's temporary file appears, i.e. in the middle of torch.save. After
every kill the checkpoint at the path, if any, must load, and must be at least as far as the
one before; the next child resumes from it (--resume). A last child runs to the end, and its
model must be bit-identical to a run never interrupted; the temporaries the killed writes
left behind must be gone (each complete write removes those of dead writers). Prints one
JSON line of counts.

Children are forked from this process (torch imported once, one intra-op thread so no
OpenMP pool crosses the fork) instead of started as new interpreters: 20 interpreter starts
would take most of a minute on a busy two-core machine, for nothing the kill tests.
"""

import json
import os
import random
import signal
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(1)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch._dynamo  # noqa: E402,F401  (torch.optim imports it on first use: seconds, once)
from babi_files import write_task  # noqa: E402

from fastsoftmax.cli import dmn as dmn_cli  # noqa: E402
from fastsoftmax.cli import lm as lm_cli, memn2n as memn2n_cli, seq2seq as seq2seq_cli  # noqa: E402
from fastsoftmax.cli import memnn as memnn_cli  # noqa: E402
from fastsoftmax.cli import treernn as treernn_cli  # noqa: E402
from fastsoftmax.models import dmn, lm, memn2n, memnn, seq2seq, treernn  # noqa: E402

# Big enough that torch.save takes a few milliseconds (a target to hit), small enough to train
# fast: embedding + output layer of a 2,000-word vocabulary, with Adam's two moments.
TRAIN_OPTIONS = ["--embed-dim", "48", "--hidden-size", "48", "--batch-size", "4", "--bptt", "6",
                 "--optimizer", "adam", "--save-every", "1", "--no-progress"]
# The killed runs aim at more epochs than they can reach, so none ends before its kill however
# fast the machine; --epochs may change on resume, so the last run stops after the epoch under
# way, and the uninterrupted run trains that many epochs.
ENDLESS = ["--epochs", "1000"]


def write_corpus(folder: str, seed: int = 0, vocab: int = 2000) -> str:
    rng = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    for split, n in (("train", 1200), ("valid", 60), ("test", 60)):
        words = [f"w{rng.randrange(vocab)}" for _ in range(n)]
        lines = [" ".join(words[i:i + 8]) for i in range(0, n, 8)]
        with open(os.path.join(folder, f"{split}.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    return folder


def write_pairs(folder: str, seed: int = 0) -> str:
    """A tiny reversal task for seq2seq: 'a b c<TAB>c b a'."""
    rng = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    lines = []
    for _ in range(60):
        words = [f"w{rng.randrange(12)}" for _ in range(rng.randint(1, 4))]
        lines.append(" ".join(words) + "\t" + " ".join(reversed(words)))
    path = os.path.join(folder, "pairs.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def write_babi(folder: str, seed: int = 0) -> str:
    """A tiny bAbI task 1 (the memory network's test data) under folder/en."""
    from test_memnn import write_task
    return write_task(Path(folder), seed, 20)


# Per model: its command line, the options of a fresh run after --data (the data written by the
# function given) and a loader whose checkpoint "model" entry holds the weights.
MODELS = dict(
    lm=(lm_cli, write_corpus, TRAIN_OPTIONS, lm.load_checkpoint),
    seq2seq=(seq2seq_cli, write_pairs,
             ["--hidden-size", "8", "--embed-dim", "8", "--batch-size", "8", "--no-progress"],
             seq2seq.load_checkpoint),
    memn2n=(memn2n_cli, None,
            ["--train-size", "60", "--test-size", "10", "--embed-dim", "8", "--batch-size", "8",
             "--device", "cpu", "--no-progress"], memn2n.load_checkpoint),
    memnn=(memnn_cli, write_babi, ["--embed-dim", "8", "--batch-size", "8", "--device", "cpu",
                                   "--no-progress"], memnn.load_checkpoint),
    dmn=(dmn_cli, lambda folder, seed: write_task(Path(folder), train=60, test=10, seed=seed),
         ["--babi-task", "1", "--size", "1k", "--hidden", "6", "--batch-size", "10", "--device",
          "cpu", "--no-progress"], dmn.load_checkpoint),
    treernn=(treernn_cli, None,
             ["--train-size", "60", "--test-size", "10", "--max-depth", "3", "--hidden-size",
              "8", "--batch-size", "8", "--device", "cpu", "--no-progress"],
             treernn.load_checkpoint),
)
cli, load = lm_cli, lm.load_checkpoint  # the model under test (main sets them)


def tensors_equal(a, b) -> bool:
    """Whether two checkpoint entries (tensors in nested dicts and lists) are bit-identical."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(tensors_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(tensors_equal(x, y) for x, y in zip(a, b))
    return torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b


def fork_training(argv) -> int:
    pid = os.fork()
    if pid == 0:  # the child: the command line's main, output silenced
        code = 1
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            code = cli.main(argv)
        finally:
            os._exit(code)
    return pid


def temporaries(folder: str, name: str) -> set:
    return {f for f in os.listdir(folder) if f.startswith(f".{name}.") and f.endswith(".tmp")}


def progress(path: str):
    """(steps taken, finished epochs) of the checkpoint at `path`; it must load."""
    state = load(path)
    # seq2seq, memn2n, treernn: one step per epoch
    done = sum(h.get("steps", 1) for h in state["history"])
    if state.get("position") is not None:
        done += state["position"]["totals"]["steps"]
    return done, state["epoch"]


def main(work: str, kills: int = 20, seed: int = 0, model: str = "lm") -> dict:
    global cli, load
    cli, write_data, options, load = MODELS[model]
    rng = random.Random(seed)
    flag = "--babi-dir" if model in ("memnn", "dmn") else "--data"  # the bAbI folder's flag
    data = [] if write_data is None else [flag, write_data(os.path.join(work, "data"), seed)]
    ckpt = os.path.join(work, "killed.pt")
    fresh = ["train", *data, "--checkpoint", ckpt, *options]
    resume = ["train", "--resume", ckpt, "--checkpoint", ckpt, "--no-progress"]
    counts = dict(kills=0, mid_write=0, before_first_checkpoint=0, loads=0, resumed_from=0)
    stale = set()  # temporaries of killed writers, which the next complete write removes
    last, clock = (0, 0), time.monotonic()
    for i in range(kills):
        started_from = os.path.exists(ckpt)
        before = temporaries(work, "killed.pt")
        pid = fork_training((resume if started_from else fresh) + ENDLESS)
        if i % 2 == 0:  # a random moment
            time.sleep(rng.uniform(0.02, 0.6))
            target = None
        else:  # the instant the k-th checkpoint write of this child has begun
            k, seen, target = rng.randint(1, 6), set(before), None
            deadline = time.monotonic() + 30
            while target is None and time.monotonic() < deadline:
                new = temporaries(work, "killed.pt") - seen
                if new:
                    k -= 1
                    seen |= new
                    if k == 0:
                        target = new.pop()
                time.sleep(0.0002)
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
            raise AssertionError(f"kill {i + 1}: the run ended by itself (status {status}) "
                                 "before it was killed; make it longer")
        counts["kills"] += 1
        stale |= temporaries(work, "killed.pt")
        counts["resumed_from"] += started_from
        if target is not None and os.path.exists(os.path.join(work, target)):
            counts["mid_write"] += 1  # killed before the temporary was renamed
        if not os.path.exists(ckpt):
            counts["before_first_checkpoint"] += 1
            continue
        now = progress(ckpt)  # raises if the last complete checkpoint does not load
        counts["loads"] += 1
        if now < last:
            raise AssertionError(f"kill {i + 1}: the checkpoint went back from {last} to {now}")
        last = now
    counts["kill_seconds"], clock = round(time.monotonic() - clock, 1), time.monotonic()
    counts["steps_at_last_kill"] = last[0]
    epochs = ["--epochs", str(last[1] + 1)]
    pid = fork_training((resume if os.path.exists(ckpt) else fresh) + epochs)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise AssertionError(f"the final resumed run failed with status {status}")

    counts["final_run_seconds"], clock = round(time.monotonic() - clock, 1), time.monotonic()
    straight = os.path.join(work, "straight.pt")
    pid = fork_training(["train", *data, "--checkpoint", straight, *options, *epochs])
    if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:
        raise AssertionError("the uninterrupted run failed")
    counts["straight_run_seconds"] = round(time.monotonic() - clock, 1)
    a, b = load(straight), load(ckpt)
    for key in a["model"]:
        if not tensors_equal(a["model"][key], b["model"][key]):
            raise AssertionError(f"after {kills} kills the resumed model differs at {key}")
    if progress(ckpt) != progress(straight):
        raise AssertionError(f"resumed run at {progress(ckpt)}, the uninterrupted one at "
                             f"{progress(straight)}")
    counts["stale_temporaries"] = len(stale)
    counts["leftover_temporaries"] = len(temporaries(work, "killed.pt"))
    counts["checkpoint_bytes"] = os.path.getsize(ckpt)
    return counts


if __name__ == "__main__":
    args = sys.argv[1:]
    result = main(args[0], *(int(a) for a in args[1:3]), *args[3:4])
    print(json.dumps(result))
