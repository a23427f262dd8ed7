"""The scaling model of docs/word2vec-scaling.md (bench/tables/word2vec_scaling.py): Amdahl's
serial fraction recovered from rates it generated, and the core count where doubling stops
paying, checked against the law itself."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from tables import word2vec_scaling as ws  # noqa: E402


def amdahl_reference(r1, s, n):
    # time on n cores: the serial share, plus the rest split n ways
    return r1 / (s + (1 - s) / n)


@pytest.mark.parametrize("s", [0.0, 0.05, 0.18, 0.5])
def test_serial_fraction_is_recovered_from_amdahl_rates(s):
    rates = {n: amdahl_reference(1e6, s, n) for n in (1, 2, 4, 8, 16)}
    assert ws.serial_from_two(rates[1], rates[2]) == pytest.approx(s, abs=1e-12)
    assert ws.serial_fitted(rates) == pytest.approx(s, abs=1e-12)
    for n in rates:
        assert ws.amdahl(1e6, s, n) == pytest.approx(rates[n], rel=1e-12)


def test_serial_fraction_never_negative():
    # a superlinear pair (cache effects, noise) reads as no serial part, not a negative one
    assert ws.serial_from_two(1.0, 2.5) == 0.0
    assert ws.stops_at(0.0) == float("inf")


@pytest.mark.parametrize("s", [0.02, 0.18, 0.4])
def test_scaling_stops_where_doubling_adds_ten_percent(s):
    n = ws.stops_at(s)
    assert amdahl_reference(1.0, s, 2 * n) / amdahl_reference(1.0, s, n) == pytest.approx(1.1)
    assert amdahl_reference(1.0, s, 2 * n + 2) / amdahl_reference(1.0, s, n + 1) < 1.1
