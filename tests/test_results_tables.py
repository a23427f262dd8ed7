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
