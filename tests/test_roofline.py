"""The pure logic of the CPU roofline (bench/bound_model.py, bench/bench_check.py): bound
arithmetic, the regression guard's comparison and its CSV reading. No timing here."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "bench"))
import bench_check  # noqa: E402
import bound_model as bm  # noqa: E402

CEIL = bm.CpuCeilings(
    stream_bw=10e9,
    level_bw={2**20: 100e9, 2**26: 40e9, 2**30: 10e9},
    gather={2**20: 400e6, 2**26: 100e6, 2**30: 20e6},
    philox_rate=50e6,
    gemm={(64, 64, 64): 1e-5},
)


def test_terms_split_streamed_and_table_bytes_by_level():
    b = bm.Bound("x", bytes=1e9, table=3e6, table_bytes=4e8)
    # 6e8 streamed at the DRAM rate, 4e8 at the rate of the smallest level >= 3 MB (2^26)
    assert CEIL.terms(b)["memory"] == pytest.approx(6e8 / 10e9 + 4e8 / 40e9)
    assert CEIL.seconds(b) == pytest.approx(6e8 / 10e9 + 4e8 / 40e9)


def test_revisits_are_costed_at_the_nearest_level():
    b = bm.Bound("x", bytes=4e8, table=3e6, table_bytes=4e8, gathers=1e6, reuse=0.75)
    terms = CEIL.terms(b)
    assert terms["memory"] == pytest.approx(1e8 / 40e9 + 3e8 / 100e9)
    assert terms["gather"] == pytest.approx(0.25e6 / 100e6 + 0.75e6 / 400e6)


def test_table_beyond_every_level_takes_the_largest():
    b = bm.Bound("x", bytes=8e9, table=4e9, table_bytes=8e9, gathers=2e7)
    assert CEIL.terms(b) == pytest.approx({"memory": 8e9 / 10e9, "gather": 2e7 / 20e6})


def test_bound_is_the_largest_term():
    b = bm.Bound("x", bytes=1e6, philox=5e7, gemms=((64, 64, 64), (128, 64, 64)))
    terms = CEIL.terms(b)
    # a measured shape uses its time; another shape the best measured FLOP rate
    peak = 2 * 64**3 / 1e-5
    assert terms["sgemm"] == pytest.approx(1e-5 + 2 * 128 * 64 * 64 / peak)
    assert terms["philox"] == pytest.approx(1.0)
    assert CEIL.seconds(b) == pytest.approx(1.0)
    assert bm.limiting_term(terms) == "philox"


def test_flops_without_shapes_use_the_peak_rate():
    b = bm.Bound("x", bytes=0.0, flops=2 * 64**3 * 10)
    assert CEIL.terms(b)["flops"] == pytest.approx(1e-4)


def test_gpu_ceilings_keep_the_bytes_and_flops_model():
    b = bm.negative_sampling(2**20, 5, 300, 10**5)
    gpu = bm.GpuCeilings(bandwidth=2e12, flops=1e14)
    assert gpu.seconds(b) == b.seconds(2e12, 1e14) == max(b.bytes / 2e12, b.flops / 1e14)
    assert set(gpu.terms(b)) == {"memory", "flops"}


def test_kernel_bounds_count_from_first_principles():
    v, n = 1000, 10**6
    s = bm.sample_draws(v, n)
    assert (s.bytes, s.gathers, s.philox, s.table) == (8 * n + 8 * v, n, n, 8 * v)
    # CBOW: each context row once, plus K + 1 output rows, read and written
    c = bm.word2vec(1000, 100, window=5, negative=5, sg=False)
    assert c.bytes == 1000 * (6 + 5 + 1) * 100 * 4 * 2
    g = bm.word2vec(1000, 100, window=5, negative=5, sg=True)
    assert g.bytes == 1000 * 6 * 7 * 100 * 4 * 2
    full = bm.full_softmax(8, 4, 100)
    assert full.flops == sum(2 * m * nn * k for m, nn, k in full.gemms)


def test_word2vec_rows_per_centre_in_either_update_order():
    # W + 1 = 6 contexts a centre on average; K = 5
    assert bm.word2vec_row_visits(5, 5, sg=True) == 6 * 7          # each pair: 1 + 1 + K
    assert bm.word2vec_row_visits(5, 5, sg=False) == 6 + 1 + 5
    assert bm.word2vec_row_visits(5, 5, sg=True, group=1) == 6 + 1 + 5
    assert bm.word2vec_row_visits(5, 5, sg=False, group=4) == 6 + 1 + 5 / 4
    shared = bm.word2vec(1000, 100, sg=True, group=1)
    assert shared.flops == bm.word2vec(1000, 100, sg=True).flops  # same predictions
    assert shared.bytes == 1000 * 12 * 100 * 4 * 2


def test_word2vec_gathers_count_cache_lines_of_cold_rows():
    # 400-byte rows start at offsets 0, 16, 32, 48 of a line: 7 lines each; 96-byte rows at
    # 0 and 32: 2 lines each; 64-byte rows: 1
    assert (bm.lines_per_row(100), bm.lines_per_row(24), bm.lines_per_row(16)) == (7, 2, 1)
    # ten equally frequent words, skip-gram pairs: a syn0 row is visited 6/10 per centre,
    # a syn1neg row 6/10 as a positive and 30/10 as a negative; a cache of ten rows holds
    # the ten syn1neg rows
    share = bm.word2vec_hot_share([1.0] * 10, [0.1] * 10, D=100, window=5, negative=5,
                                  sg=True, cache_bytes=10 * 400)
    assert share == pytest.approx(36 / (36 + 6))
    assert bm.word2vec_hot_share([1.0] * 10, [0.1] * 10, 100, 5, 5, True,
                                 cache_bytes=20 * 400) == pytest.approx(1.0)
    b = bm.word2vec(1000, 100, sg=False, hot=0.25)
    assert (b.gathers, b.reuse) == (1000 * 12 * 7, 0.25)


def test_reuse_from_distinct_rows():
    assert bm.reuse_of(100, 25) == pytest.approx(0.75)
    assert bm.reuse_of(100, None) == 0.0
    ns = bm.negative_sampling(100, 5, 8, 1000, distinct=150)
    assert ns.reuse == pytest.approx(1 - 150 / 600)


def test_fraction_of_bound():
    assert bm.fraction_of_bound(0.05, 0.1) == pytest.approx(0.5)


def test_compare_fails_only_beyond_the_allowed_drop():
    base = {("a", "s"): 0.8, ("b", "s"): 0.5, ("c", "s"): 0.4}
    now = {("a", "s"): 0.61, ("b", "s"): 0.6, ("c", "s"): 0.29, ("d", "s"): 0.1}
    rows, failed = bench_check.compare(base, now, max_drop=0.25)
    status = {r["case"]: r["status"] for r in rows}
    assert status == {"a": "ok", "b": "ok", "c": "DROP", "d": "no baseline"}
    assert failed
    _, failed = bench_check.compare(base, {("a", "s"): 0.6}, max_drop=0.25)
    assert not failed  # exactly 25 % down is allowed
    _, failed = bench_check.compare(base, {("a", "s"): 0.59}, max_drop=0.25)
    assert failed
    assert "DROP" in bench_check.format_table(rows)


CSV_TEXT = """time,device,command,case,provider,shape,metric,value
2026-11-25T10:00:00Z,cpu,x,neg,ours,N=1,fraction_of_bound,0.5
2026-11-25T12:00:00Z,cpu,x,neg,ours,N=1,fraction_of_bound,0.7
2026-11-25T11:00:00Z,cpu,x,neg,ours,N=1,fraction_of_bound,0.6
2026-11-25T12:00:00Z,cpu,x,neg,plain,N=1,fraction_of_bound,0.1
2026-11-25T12:00:00Z,cpu,x,neg,ours,N=1,median_ms,3.0
2026-11-25T09:00:00Z,cpu,x,neg,ours,N=2,fraction_of_bound,0.4
"""


def test_latest_fraction_per_case_and_shape():
    rows = bench_check.read_rows(CSV_TEXT)
    assert bench_check.latest_fractions(rows) == {("neg", "N=1"): 0.7, ("neg", "N=2"): 0.4}
    assert bench_check.latest_fractions(rows, provider="plain") == {("neg", "N=1"): 0.1}
    assert bench_check.latest_fractions(bench_check.read_rows("")) == {}


def test_report_takes_medians_over_the_runs_of_one_mode():
    import roofline_report

    def run(stamp, mode, frac):
        return [dict(time=stamp, case="run", provider="roofline", shape="", metric="mode",
                     value=mode),
                dict(time=stamp, case="neg", provider="ours", shape="N=1",
                     metric="fraction_of_bound", value=str(frac)),
                dict(time=stamp, case="neg", provider="ours", shape="N=1", metric="bound_term",
                     value="memory")]
    rows = run("t1", "full", 0.9) + run("t2", "quick", 0.1) + run("t3", "full", 0.5) \
        + run("t4", "full", 0.6) + run("t5", "full", 0.7)
    runs = roofline_report.runs_of(rows, "full")
    assert list(runs) == ["t1", "t3", "t4", "t5"]
    med = roofline_report.medians(list(runs.values())[-3:])
    assert med[("neg", "ours", "N=1", "fraction_of_bound")] == 0.6
    assert ("neg", "ours", "N=1", "bound_term") not in med  # text values are not averaged


def test_cuda_only_peers_are_skipped_with_a_reason_on_cpu():
    import torch

    import fused_peers

    found = {name: (factory, reason) for name, factory, reason
             in fused_peers.candidates("cpu", want_compile=False)}
    assert set(found) == {"torch.compile", "liger", "cce"}
    for name in ("liger", "cce"):
        assert found[name][0] is None and "CUDA" in found[name][1]
    assert found["torch.compile"][0] is None and "--compile" in found["torch.compile"][1]
    said = []
    assert fused_peers.providers("cpu", torch.float32, True, False, log=said.append) == []
    assert len(said) == 3 and all(s.startswith("skipped: ") for s in said)


def test_report_keeps_the_runs_of_one_thread_count():
    import roofline_report

    rows = [dict(time=t, device=f"cpu ({n} threads)", case="run", provider="roofline",
                 shape="", metric="mode", value="full") for t, n in (("a", 2), ("b", 1))]
    assert list(roofline_report.runs_of(rows, "full", threads=1)) == ["b"]
    assert list(roofline_report.runs_of(rows, "full")) == ["a", "b"]


def test_dense_gradient_floor_is_the_touched_rows_when_known():
    assert bm.dense_grad_bytes(1000, 10, 4) == 2 * 1000 * 10 * 4
    assert bm.dense_grad_bytes(1000, 10, 4, distinct=30) == 2 * 30 * 10 * 4
    full = bm.sampled_softmax(64, 16, 10, 1000)
    touched = bm.sampled_softmax(64, 16, 10, 1000, distinct=50)
    assert full.bytes - touched.bytes == 2 * (1000 - 50) * 10 * 4


def test_baseline_of_one_thread_count():
    rows = bench_check.read_rows(
        "time,device,case,provider,shape,metric,value\n"
        "t2,cpu (2 threads),neg,ours,N=1,fraction_of_bound,0.2\n"
        "t1,cpu (1 threads),neg,ours,N=1,fraction_of_bound,0.5\n")
    assert bench_check.latest_fractions(rows, threads=1) == {("neg", "N=1"): 0.5}
    assert bench_check.latest_fractions(rows) == {("neg", "N=1"): 0.2}


def test_median_over_reruns():
    runs = [{("a", "s"): 0.2, ("b", "s"): 1.0}, {("a", "s"): 0.6}, {("a", "s"): 0.4}]
    assert bench_check.median_fractions(runs) == {("a", "s"): 0.4, ("b", "s"): 1.0}
