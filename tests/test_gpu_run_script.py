"""bench/gpu_run.sh without a GPU: it parses, `--list` names every part with its expected
seconds and runs nothing (no Python, no nvidia-smi), each part meant for a short loan fits 4
minutes at its step limits, and an unknown part or argument is refused with a message. Also
the commit every GPU row carries: bench/common.py writes $FASTSOFTMAX_COMMIT as a column, and
a file from before the column gains it without its older rows changing."""

import csv
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "bench", "gpu_run.sh")

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or not os.path.exists(SCRIPT),
                                reason="needs bash and bench/gpu_run.sh")
PART_LINE = re.compile(r"^part (\d+) +~ *(\d+) s expected, +(\d+) s at every limit, "
                       r"(fits|over) 4 min \((\d+) of (\d+) steps untimed\): (.+)$")


OLD_MODES = ("OWED", "SKIP_BENCH", "ALL_TESTS", "W2V_ONLY", "W2V_THREADS", "LM_MEDIUM")


def run(*args, **env):
    # PYTHON=false: if --list ran Python (or anything past the listing), it would fail. The
    # caller's own switches are dropped, so that only `env` chooses the parts.
    full_env = {k: v for k, v in os.environ.items() if k not in OLD_MODES + ("LIMIT_SCALE",)}
    full_env.update(PYTHON="false", **env)
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, timeout=60,
                          env=full_env)


def parts_listed(out):
    return {int(m.group(1)): m for m in map(PART_LINE.match, out.splitlines()) if m}


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", SCRIPT]).returncode == 0


def test_list_names_every_part_and_the_short_ones_fit_four_minutes():
    done = run("--list")
    assert done.returncode == 0, done.stderr
    assert "estimates" in done.stdout
    parts = parts_listed(done.stdout)
    assert sorted(parts) == list(range(1, 12))
    for n in range(1, 9):  # what `--part all` runs, one call each on a short loan
        expected, limit = int(parts[n].group(2)), int(parts[n].group(3))
        assert parts[n].group(4) == "fits" and expected <= limit <= 240, parts[n].group(0)
    for n in (9, 10, 11):
        assert "only when named" in parts[n].group(7)
    with open(SCRIPT) as f:
        assert "tests/test_sync_free.py" in f.read() and "sync-free" in parts[1].group(7)
    assert "Cut Cross-Entropy" in parts[2].group(7) and "word2vec" in parts[3].group(7)
    assert "--compile" in parts[4].group(7)


def test_list_of_chosen_parts_and_of_an_old_mode():
    assert sorted(parts_listed(run("--list", "--part", "2,4").stdout)) == [2, 4]
    assert sorted(parts_listed(run("--list", "--part=all").stdout)) == list(range(1, 9))
    done = run("--list", OWED="1")
    assert "OWED=1 means --part 1,2,4,6,7" in done.stdout
    assert sorted(parts_listed(done.stdout)) == [1, 2, 4, 6, 7]


def test_limit_scale_can_push_a_part_past_four_minutes():
    parts = parts_listed(run("--list", "--part", "1", LIMIT_SCALE="2").stdout)
    assert parts[1].group(4) == "over"


@pytest.mark.parametrize("args, message", [
    (["--part", "12"], "unknown part '12': the parts are 1-11 and all"),
    (["--part", "1,x"], "unknown part 'x'"),
    (["--part"], "--part needs a number"),
    (["--bogus"], "unknown argument '--bogus'"),
])
def test_unknown_parts_and_arguments_are_refused(args, message):
    for extra in ([], ["--list"]):  # refused before anything runs, listing or not
        done = run(*extra, *args)
        assert done.returncode == 2 and message in done.stderr, done.stderr
        assert "part 1 " not in done.stdout


def test_rows_carry_the_commit_and_an_older_file_gains_the_column(tmp_path, monkeypatch):
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import common

    path = tmp_path / "x-cpu.csv"
    row = dict(case="c", provider="p", shape="s", metric="m", value=1.0)
    monkeypatch.delenv("FASTSOFTMAX_COMMIT", raising=False)
    common.write_results("x", "cpu", [row], str(path))
    before = path.read_bytes()
    assert before.splitlines()[0] == b"time,device,command,case,provider,shape,metric,value"
    monkeypatch.setenv("FASTSOFTMAX_COMMIT", "abc1234")
    common.write_results("x", "cpu", [dict(row, value=2.0)], str(path))
    monkeypatch.delenv("FASTSOFTMAX_COMMIT")
    common.write_results("x", "cpu", [dict(row, value=3.0)], str(path))
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["value"], r["commit"]) for r in rows] == [("1", ""), ("2", "abc1234"), ("3", "")]
    # The older row is the same bytes with one blank field after it.
    old_row = before.splitlines()[1]
    assert path.read_bytes().splitlines()[1] == old_row + b","
