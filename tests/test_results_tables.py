"""Every result table of the README and docs/ is what bench/results_render.py renders from
bench/results/*.csv: a table edited by hand, or rows changed without `make results`, fails
here. Also: the renderer rebuilds a marked table from nothing and names a missing builder."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, "README.md")),
                                reason="a copy of tests/ without the README and docs/")


def test_committed_tables_are_their_rows(capsys):
    import results_render

    status = results_render.main(["--check"])
    assert status == 0, capsys.readouterr().out


def test_render_fills_an_emptied_table_and_refuses_an_unknown_name():
    import results_render

    emptied = "intro\n<!-- results: readme-gpu -->\nstale | text\n<!-- end results -->\nend\n"
    used = set()
    out = results_render.render(emptied, used)
    assert used == {"readme-gpu"} and "stale" not in out and "| what |" in out
    assert out.startswith("intro\n") and out.endswith("<!-- end results -->\nend\n")
    with pytest.raises(KeyError, match="no table builder named 'nope'"):
        results_render.render("<!-- results: nope -->\n<!-- end results -->", set())


def test_every_cuda_path_has_a_row_in_its_table_and_unmatched_paths_say_never():
    from tables import gpu_paths

    lines = gpu_paths.gpu_paths()
    assert len(lines) == 2 + len(gpu_paths.PATHS) + 2
    for (path, *_), line in zip(gpu_paths.PATHS, lines[2:]):
        assert line.startswith(f"| {path} |")
    # Paths the brief of the table names as never run must stay findable by name.
    names = " ".join(p for p, *_ in gpu_paths.PATHS)
    for wanted in ("lockstep rounds", "deterministic", "fused Triton", "streamed on CUDA",
                   "multi-block", "one block", "log-uniform", "NCE", "margin", "row scores"):
        assert wanted in names
    assert gpu_paths.path_cells([]) == ["never", "", "", "none"]


def test_a_path_takes_its_newest_row_and_its_commit_where_one_was_recorded():
    from tables import gpu_paths

    def row(time, shape, commit=None):
        r = dict(time=time, device="NVIDIA H200", case="unique", shape=shape, file="s-cuda.csv")
        return dict(r, commit=commit) if commit is not None else r
    rows = {"s-cuda": [row("2026-11-26T01:00:00Z", "V=1000000 S=8192"),
                       row("2026-12-02T01:00:00Z", "V=1000000 S=8192", "abc1234"),
                       row("2026-12-03T01:00:00Z", "V=100000 S=1024", "")]}
    one_block = [("s-cuda", dict(case="unique", shape=gpu_paths._samples_below(4096)))]
    rounds = [("s-cuda", dict(case="unique",
                              shape=gpu_paths._samples_below(4096, below=False)))]
    got = gpu_paths.path_cells(gpu_paths.path_rows(rounds, load=rows.get))
    assert got == ["2026-12-02", "`abc1234`", "NVIDIA H200", "2 in `s-cuda.csv`"]
    got = gpu_paths.path_cells(gpu_paths.path_rows(one_block, load=rows.get))
    assert got[:2] == ["2026-12-03", "not recorded"]
