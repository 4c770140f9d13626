"""A fast slice of the detection benchmark (benchmarks/detect_scenarios.py): its scoring, its
series generator, the peers' re-implementations on obvious cases, and attrib on a few series.

Bounds sit below what the full benchmark measures (benchmarks/RESULTS-detect.md) with room,
so they fail when something gets clearly worse, not on the luck of one draw. Every series is
a pure function of (seed, family, index)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

_DIR = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    if name in sys.modules:
        return sys.modules[name]
    if str(_DIR) not in sys.path:
        sys.path.insert(0, str(_DIR))
    spec = importlib.util.spec_from_file_location(name, _DIR / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


S = _load("detect_scenarios")
FAMILIES = {f.name: f for f in S.FAMILIES}


def test_matching_is_one_to_one_within_the_tolerance():
    assert S.match([100], [100 + S.TOL]) == 1
    assert S.match([100], [100 + S.TOL + 1]) == 0
    assert S.match([99, 101], [100]) == 1  # a duplicate is a false alert, not a second hit
    assert S.match([100, 110], [102, 108]) == 2  # closest pairs first


def test_series_are_reproducible_and_every_change_has_points_after_it():
    fam = FAMILIES["steps 3 sigma, gaps"]
    a, truth = S.make_series(1, fam, 3, 2000)
    b, again = S.make_series(1, fam, 3, 2000)
    assert np.array_equal(a, b, equal_nan=True) and truth == again
    assert truth, "this draw plants changes"
    edges = [*truth, a.size]
    assert all(after - t >= S.MIN_AFTER for t, after in zip(edges, edges[1:], strict=False))
    assert all(np.isfinite(a[t]) for t in truth)  # with gaps, the truth is the first measured night


@pytest.mark.parametrize("name", ["attrib", "perfherder", "otava", "asv"])
def test_every_detector_finds_an_obvious_step_and_nothing_on_a_flat_series(name):
    rng = np.random.default_rng(5)
    flat = np.exp(rng.normal(0, S.SIGMA, 150))
    step = flat.copy()
    step[90:] *= np.exp(10 * S.SIGMA)
    detector = S.DETECTORS[name]
    assert S.match(detector(step), [90]) == 1
    assert detector(flat) == [] or name == "otava"  # Otava alerts on noise at its defaults (RESULTS-detect.md)


def test_attrib_on_a_slice_of_the_benchmark():
    names = ("attrib",)
    rows = []
    for fam in ("null gaussian", "null spikes", "steps 3 sigma", "steps 3 sigma, spikes"):
        for i in range(4):
            rows += S.batch_task((1, FAMILIES[fam], i, 400, names))
    null = [r for r in rows if r[0].startswith("null")]
    steps = [r for r in rows if r[0].startswith("steps")]
    assert sum(r[4] for r in null) == 0, null  # no alert on series without a change
    planted, hits = sum(r[3] for r in steps), sum(r[5] for r in steps)
    assert planted and hits / planted >= 0.9, steps
    assert sum(r[4] - r[5] for r in steps) <= 1, steps
