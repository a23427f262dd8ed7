"""Files under faults: the atomic-write helper every writer uses (fastsoftmax/atomic.py), and
training SIGKILLed 20 times, mid-checkpoint-write included (tests/kill_training.py)."""

import json
import os
import signal
import stat
import subprocess
import sys

import pytest

from fastsoftmax import atomic
from fastsoftmax.atomic import atomic_open, atomic_path, atomic_write

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def listing(folder):
    return sorted(os.listdir(folder))


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "model.bin"
    path.write_bytes(b"the user's bytes")
    with pytest.raises(RuntimeError, match="disk full"):
        with atomic_open(path, "wb") as f:
            f.write(b"half of the new")
            raise RuntimeError("disk full")
    assert path.read_bytes() == b"the user's bytes"
    assert listing(tmp_path) == ["model.bin"]


def test_a_complete_write_replaces_the_file_with_its_permissions(tmp_path):
    path = tmp_path / "vectors.txt"
    path.write_text("old")
    os.chmod(path, 0o640)
    atomic_write(str(path), lambda tmp: open(tmp, "w").write("new"))
    assert path.read_text() == "new" and stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert listing(tmp_path) == ["vectors.txt"]


def test_a_new_file_gets_the_umask_permissions_not_the_temporarys(tmp_path):
    mask = os.umask(0o022)
    try:
        with atomic_path(str(tmp_path / "new.csv")) as tmp:
            open(tmp, "w").write("a,b\n")
    finally:
        os.umask(mask)
    assert stat.S_IMODE(os.stat(tmp_path / "new.csv").st_mode) == 0o644


def test_a_folder_is_refused_and_read_modes_are_refused(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory"):
        with atomic_open(tmp_path, "wb"):
            pass
    with pytest.raises(ValueError, match="mode must start with 'w'"):
        with atomic_open(tmp_path / "x", "ab"):
            pass
    assert listing(tmp_path) == []


def test_plots_are_written_in_the_format_of_their_name(tmp_path):
    from fastsoftmax.models.lm.plots import plot_runs

    history = [dict(epoch=1, val_ppl=50.0, seconds=1.0), dict(epoch=2, val_ppl=40.0, seconds=1.0)]
    png = plot_runs([("full", history)], str(tmp_path / "ppl.png"), "t")
    svg = plot_runs([("full", history)], str(tmp_path / "ppl.svg"), "t")
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in open(svg, "rb").read(400)
    assert listing(tmp_path) == ["ppl.png", "ppl.svg"]


def dead_pid():
    """The pid of a child that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.skipif(os.name != "posix", reason="pid liveness is checked with kill(pid, 0)")
def test_a_complete_write_removes_only_temporaries_of_dead_writers_on_this_host(tmp_path):
    host = atomic._host()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as live:
        try:
            kept = [f".model.pt.{live.pid}@{host}.abcd1234.tmp",  # a live writer's
                    f".model.pt.{os.getpid()}@{host}.efgh5678.tmp",  # this process's
                    f".model.pt.{dead_pid()}@{host}x.abcd1234.tmp",  # another host's
                    f".model.pt.{dead_pid()}@other-host.abcd1234.tmp",
                    ".model.pt.k2j4h5_s.tmp",  # the older form, writer unknown
                    f".other.pt.{dead_pid()}@{host}.abcd1234.tmp"]  # another file's
            stale = [f".model.pt.{dead_pid()}@{host}.abcd1234.tmp",
                     f".model.pt.{dead_pid()}@{host}.zz_9zz_9.tmp"]
            for name in kept + stale:
                (tmp_path / name).write_bytes(b"half a checkpoint")
            with pytest.raises(RuntimeError):  # a failed write cleans nothing
                with atomic_path(str(tmp_path / "model.pt")):
                    raise RuntimeError("disk full")
            assert listing(tmp_path) == sorted(kept + stale)
            atomic_write(str(tmp_path / "model.pt"), lambda tmp: open(tmp, "w").write("new"))
            assert listing(tmp_path) == sorted(kept + ["model.pt"])
        finally:
            live.kill()


@pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(signal, "SIGKILL"),
                    reason="forks children and kills them with SIGKILL (POSIX)")
def test_training_killed_20_times_always_leaves_a_checkpoint_that_loads_and_resumes(tmp_path):
    """SIGKILL at random moments and the instant a checkpoint write has begun: the last
    complete checkpoint loads every time, and resuming after every kill ends bit-identical
    to a run never interrupted (the assertions are in tests/kill_training.py)."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    run = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "kill_training.py"),
                          str(tmp_path), "20", "0"], capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    counts = json.loads(run.stdout.strip().splitlines()[-1])
    assert counts["kills"] == 20
    assert counts["loads"] + counts["before_first_checkpoint"] == 20
    # Most kills aimed at a write land inside it (the temporary was still there, not yet
    # renamed); some must, or this test would not test what it says.
    assert counts["mid_write"] >= 3, counts
    assert counts["resumed_from"] >= 10, counts
    # Kills mid-write left temporaries behind; the completed runs' writes removed them all.
    assert counts["stale_temporaries"] >= 3, counts
    assert counts["leftover_temporaries"] == 0, counts


@pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(signal, "SIGKILL"),
                    reason="forks children and kills them with SIGKILL (POSIX)")
@pytest.mark.parametrize("model", ["seq2seq", "memn2n", "memnn", "dmn", "treernn"])
def test_every_model_killed_and_resumed_ends_bit_identical(tmp_path, model):
    """The same for the models that checkpoint after every epoch, on a tiny task: 6 kills,
    and the resumed run ends bit-identical to one never interrupted (the training loop they
    share with the language model restores every random stream)."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    run = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "kill_training.py"),
                          str(tmp_path), "6", "0", model], capture_output=True, text=True,
                         env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    counts = json.loads(run.stdout.strip().splitlines()[-1])
    assert counts["kills"] == 6 and counts["loads"] + counts["before_first_checkpoint"] == 6
    assert counts["resumed_from"] >= 2, counts
    assert counts["leftover_temporaries"] == 0, counts
