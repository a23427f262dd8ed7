"""The language model vocabulary-parallel under torchrun (gloo): a 2 data x 2 vocabulary run
killed mid-run and resumed ends where one process ends (the same global batch, the whole
output layer); a checkpoint of another layout is refused on every rank with one sentence;
a shard checkpoint is refused outside its layout."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from fastsoftmax.cli import lm as cli
from fastsoftmax.models import lm
from kill_training import write_corpus
from vp_harness import gloo_available

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(not gloo_available(), reason="torch.distributed has no gloo")
COMMON = ["--embed-dim", "12", "--hidden-size", "12", "--batch-size", "4", "--bptt", "6",
          "--epochs", "1", "--lr", "1", "--output", "full",
          "--no-progress", "--device", "cpu"]


def _torchrun(nproc: int, argv: list, **popen):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1", FASTSOFTMAX_DIST_TIMEOUT="60")
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
         str(nproc), "-m", "fastsoftmax.cli.lm", "train", *argv], env=env, cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        **popen)


def _kill_tree(pid: int) -> None:
    """SIGKILL torchrun and its workers (they run in sessions of their own, so killing
    torchrun's process group alone would leave them training)."""
    def children(p):
        found = []
        for task in os.listdir(f"/proc/{p}/task") if os.path.isdir(f"/proc/{p}/task") else []:
            with open(f"/proc/{p}/task/{task}/children") as f:
                found += [int(c) for c in f.read().split()]
        return found + [g for c in found for g in children(c)]
    for p in children(pid) + [pid]:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _finish(proc, timeout=240) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_tree(proc.pid)
        out, _ = proc.communicate()
        pytest.fail(f"torchrun timed out:\n{out[-3000:]}")
    return out


def _whole(path: str, vocab: int = 2) -> dict:
    """The model of a vocabulary-parallel checkpoint with the shards put back together."""
    main = lm.load_checkpoint(path)
    stamp = main["vocab_parallel"]["stamp"]
    parts = [main["model"]] + [torch.load(f"{path}.vocab{r}of{vocab}.{stamp}",
                                          weights_only=True)["model"] for r in range(1, vocab)]
    out = {k: v for k, v in main["model"].items() if not k.startswith("head.")}
    for name in ("weight", "bias"):
        out[f"head.linear.{name}"] = torch.cat([p[f"head.linear_{name}"] for p in parts])
    return out


def test_killed_2x2_run_resumes_to_the_single_process_model(tmp_path, capsys):
    data = write_corpus(str(tmp_path / "data"), vocab=300)
    single, vp = str(tmp_path / "single.pt"), str(tmp_path / "vp.pt")
    # Killed (SIGKILL, torchrun and every worker) once it has saved twice: mid-epoch, with one
    # checkpoint per step, aiming at far more steps than it is given time for.
    proc = _torchrun(4, ["--data", data, *COMMON, "--vocab-parallel", "2", "--save-every", "1",
                         "--checkpoint", vp, "--max-steps", "1000"])
    deadline = time.monotonic() + 200
    while time.monotonic() < deadline and proc.poll() is None:
        # A listing, not a load: the first torch.load in this process takes seconds.
        if any(n.startswith("vp.pt.vocab1of2.") and int(n.rsplit(".", 1)[1]) >= 2
               for n in os.listdir(tmp_path)):
            break
        time.sleep(0.02)
    assert proc.poll() is None, _finish(proc)[-3000:]  # still running: the kill is mid-run
    _kill_tree(proc.pid)
    _finish(proc)
    done = lm.load_checkpoint(vp)["position"]["totals"]["steps"]
    target = str(done + 3)  # a few steps after the resume, well inside the first epoch
    out = _finish(_torchrun(4, ["--resume", vp, "--max-steps", target]))
    assert "epoch   1" in out and "test ppl" in out, out[-3000:]
    cli.main(["train", "--data", data, *COMMON, "--max-steps", target, "--checkpoint", single])
    a, b = lm.load_checkpoint(single), _whole(vp)
    assert set(a["model"]) == set(b)
    for k, v in a["model"].items():
        torch.testing.assert_close(b[k], v, rtol=1e-4, atol=2e-5, msg=lambda m, k=k: f"{k}: {m}")
    assert lm.load_checkpoint(vp)["history"][0]["steps"] == done + 3
    # Only the shard files the main checkpoint names are left (older stamps were removed).
    stamp = lm.load_checkpoint(vp)["vocab_parallel"]["stamp"]
    assert os.path.exists(f"{vp}.vocab1of2.{stamp}")
    assert not os.path.exists(f"{vp}.vocab1of2.{stamp - 1}")

    # Another layout: 2 processes (1 x 2) resuming the 4-process checkpoint refuse, every rank.
    refused = _finish(_torchrun(2, ["--resume", vp, "--epochs", "2"]))
    sentence = "it was written by a vocabulary-parallel run of 4 processes (2 data x 2"
    assert refused.count(sentence) >= 2, refused[-3000:]
    assert "resharding a checkpoint to another layout is not supported" in refused
    # And one process, or the evaluation command, refuse it too.
    capsys.readouterr()
    assert cli.main(["train", "--resume", vp, "--epochs", "2"]) != 0
    assert "--vocab-parallel 2 runs under torchrun" in capsys.readouterr().err
    with pytest.raises(ValueError, match="one shard of the output layer"):
        lm.model_from_checkpoint(lm.load_checkpoint(vp))
