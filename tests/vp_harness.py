"""Runs tests/vp_worker.py in W gloo processes for the vocabulary-parallel tests: every
process is started by the test, meets the others through a FileStore in a temporary folder
(no port to collide with), has a timeout on every collective (init_process_group's) and is
killed when the whole run exceeds its own, so a test can fail but never hang CI."""

import json
import os
import subprocess
import sys

import torch.distributed as dist

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vp_worker.py")


def gloo_available() -> bool:
    return dist.is_available() and dist.is_gloo_available()


def run_workers(case: str, world: int, folder: str, *, backend: str = "gloo",
                timeout: float = 120.0, collective_timeout: float = 30.0) -> list:
    """Each rank's JSON result of `case`, in rank order; AssertionError with the ranks'
    output when a rank fails or the run times out."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1", VP_STORE=os.path.join(folder, "store"),
               VP_BACKEND=backend, VP_TIMEOUT=str(collective_timeout), WORLD_SIZE=str(world))
    procs = []
    for rank in range(world):
        out = open(os.path.join(folder, f"rank{rank}.log"), "w")
        procs.append((subprocess.Popen(
            [sys.executable, WORKER, case, os.path.join(folder, f"rank{rank}.json")],
            env=dict(env, RANK=str(rank)), stdout=out, stderr=subprocess.STDOUT, cwd=ROOT), out))
    failed = []
    for rank, (proc, out) in enumerate(procs):
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p, _ in procs:
                p.kill()
            failed.append(f"rank {rank}: timed out after {timeout} s")
        out.close()
        if proc.returncode:
            failed.append(f"rank {rank}: exit {proc.returncode}")
    logs = "\n".join(open(os.path.join(folder, f"rank{r}.log")).read()[-3000:]
                     for r in range(world))
    assert not failed, f"{failed}\n{logs}"
    return [json.load(open(os.path.join(folder, f"rank{r}.json"))) for r in range(world)]
