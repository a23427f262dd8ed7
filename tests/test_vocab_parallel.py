"""Vocabulary-parallel output layers (fastsoftmax.vocab_parallel) in 2 and 3 processes
spawned by the test (tests/vp_harness.py, tests/vp_worker.py): every loss and gradient
against the single-process layer, the candidates every rank draws, and bad input refused on
every rank. Backends: gloo always; nccl only with a GPU per rank (skipped otherwise)."""

import pytest
import torch

from vp_harness import gloo_available, run_workers

# float64: the sharded sums differ from the single-process ones only in the order of the
# floating-point operations (per-shard log-sum-exp then combined; the sampled epilogue in
# torch instead of the native loop), a few ulps of numbers of order 1.
TOLERANCE = {"float64": 1e-12, "float32": 2e-5}


def _backend(name: str, world: int) -> str:
    if name == "gloo" and not gloo_available():
        pytest.skip("torch.distributed has no gloo backend here")
    if name == "nccl" and torch.cuda.device_count() < world:
        pytest.skip(f"nccl needs {world} CUDA devices (one per rank); this machine has "
                    f"{torch.cuda.device_count()}")
    return name


def _check_exact(results: list) -> int:
    """Every rank's every comparison within tolerance; returns how many were bit-exact."""
    exact = 0
    for rank, per_rank in enumerate(results):
        assert len(per_rank) == 40
        for key, diffs in per_rank.items():
            tol = TOLERANCE[key.split("/")[0]]
            for name, value in diffs.items():
                if name.endswith("_bits"):
                    exact += value
                elif name != "loss_value":
                    assert value <= tol, f"rank {rank} {key} {name}: {value}"
    # Every rank computed the same losses (they are reduced over the whole vocabulary).
    for key in results[0]:
        assert len({r[key]["loss_value"] for r in results}) == 1, key
    return exact


@pytest.mark.parametrize("backend", ["gloo", "nccl"])
def test_two_ranks_match_single_process(tmp_path, backend):
    results = run_workers("exact", 2, str(tmp_path), backend=_backend(backend, 2))
    assert _check_exact(results) > 0


@pytest.mark.parametrize("backend", ["gloo", "nccl"])
def test_three_ranks_uneven_bad_input_and_candidates(tmp_path, backend):
    results = run_workers("all", 3, str(tmp_path), backend=_backend(backend, 3))
    _check_exact([r["exact"] for r in results])
    for rank, r in enumerate(results):
        bad = r["bad"]
        # Mismatched shards: the same sentence on every rank, naming each rank's (V, D).
        assert "disagree on the layer's shape" in bad["V"] and "(14, 8)" in bad["V"]
        assert "disagree on the layer's shape" in bad["D"] and "(13, 9)" in bad["D"]
        # A target out of range on one rank only: that rank says what, the others who.
        for case, culprit, value in (("target_full", 2, "16"), ("target_sampled", 2, "16"),
                                     ("target_eval", 0, "-5")):
            if rank == culprit:
                assert f"found {value} (min offending)" in bad[case], bad[case]
            else:
                assert f"rank(s) [{culprit}]" in bad[case], bad[case]
        assert bad["after"] == results[0]["bad"]["after"]  # the group survived every refusal
    # Candidates: 400 draws per rank, gathered: the same on every rank, and distributed as
    # the sampler says (its 5 likeliest classes drawn more often than its 5 least likely).
    cand = results[0]["candidates"]
    assert all(r["candidates"]["identical"] for r in results)
    order = sorted(range(len(cand["probs"])), key=cand["probs"].__getitem__)
    assert sum(cand["counts"][c] for c in order[-5:]) > sum(cand["counts"][c] for c in order[:5])
    assert sum(cand["counts"]) == 400 * 5
