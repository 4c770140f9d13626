"""benchmarks/tcpd_metrics.py gives TCPDBench's own figures: the doctests of
analysis/scripts/metrics.py (alan-turing-institute/TCPDBench), values copied from there."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from tcpd_metrics import _cover_single, covering, f_measure, partition, true_positives  # noqa: E402


def test_true_positives_does_not_double_count():
    assert true_positives({1, 10, 20, 23}, {3, 8, 20}) == {1, 10, 20}
    assert true_positives({1, 10, 20, 23}, {1, 3, 5, 8, 20}) == {1, 10, 20}
    assert true_positives(set(), {1, 2, 3}) == set()
    assert true_positives({1, 2, 3}, set()) == set()


def test_f_measure_matches_tcpdbench():
    assert f_measure({"1": [10, 20], "2": [11, 20], "3": [10], "4": [0, 5]}, [10, 20])[0] == pytest.approx(1.0)
    assert f_measure({"1": [], "2": [10], "3": [50]}, [10])[0] == pytest.approx(0.9090909090909091)
    assert f_measure({"1": [], "2": [10], "3": [50]}, [])[0] == pytest.approx(0.8)


def test_partition_and_cover_match_tcpdbench():
    assert partition([3, 5], 8) == [{0, 1, 2}, {3, 4}, {5, 6, 7}]
    assert partition([0, 4], 6) == [{0, 1, 2, 3}, {4, 5}]
    assert _cover_single([{1, 2, 3}, {4, 5}, {6}], [{1, 2, 3}, {4, 5, 6}]) == pytest.approx(0.8333333333333334)
    assert _cover_single([{1, 2, 3, 4, 5, 6}], [{1}, {2}, {3}, {4, 5, 6}]) == pytest.approx(0.3333333333333333)
    assert covering({"1": [10, 20], "2": [10], "3": [0, 5]}, [10, 20], 45) == pytest.approx(0.7962962962962963)
    assert covering({"1": [], "2": [10], "3": [40]}, [10], 45) == pytest.approx(0.7954144620811286)
    assert covering({"1": [], "2": [10], "3": [40]}, [], 45) == pytest.approx(0.8189300411522634)
