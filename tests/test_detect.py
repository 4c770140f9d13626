"""The pure change point detector (attrib.core.detect): seeded cases and bounded property tests.

No fakes: the detector is a function of numbers. Error rates against peers are measured in
benchmarks/detect_scenarios.py, not here; these tests pin the contract (positions, spikes,
minimum segment and magnitude, decided points, recoveries, intervals)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from attrib.core.detect import (
    ChangeDirection,
    ChangePoint,
    DetectSettings,
    _dependence_factor,
    detect,
    scan_p_value,
    scan_threshold,
)
from attrib.core.model import Direction

SIGMA = 0.02


def series(n: int, steps: dict[int, float], seed: int, sigma: float = SIGMA) -> np.ndarray:
    """exp(level + noise): a step of s at k multiplies every value from k on by exp(s)."""
    rng = np.random.default_rng(seed)
    level = np.zeros(n)
    for k, s in steps.items():
        level[k:] += s
    return np.exp(level + rng.normal(0, sigma, n))


def test_a_step_is_found_where_it_is_with_its_size_and_interval():
    values = series(200, {120: math.log(1.08)}, seed=3)
    [cp] = detect(values, Direction.LOWER)
    assert isinstance(cp, ChangePoint)
    assert abs(cp.index - 120) <= 1
    assert cp.last_before == cp.index - 1
    assert cp.direction is ChangeDirection.REGRESSION
    assert cp.ci_pct[0] <= 8.0 <= cp.ci_pct[1], cp
    assert cp.ci_pct[0] <= cp.change_pct <= cp.ci_pct[1]
    assert cp.p_value < 1e-6
    assert cp.after_mean > cp.before_mean
    assert cp.recovered_at is None


def test_direction_follows_what_better_means():
    values = series(150, {75: math.log(0.9)}, seed=4)  # the value drops by 10 %
    [as_time] = detect(values, Direction.LOWER)
    [as_throughput] = detect(values, Direction.HIGHER)
    assert as_time.direction is ChangeDirection.IMPROVEMENT
    assert as_throughput.direction is ChangeDirection.REGRESSION
    # change_pct is the change of the value itself, whichever way is better
    assert as_time.change_pct == pytest.approx(as_throughput.change_pct)
    assert as_time.change_pct == pytest.approx(-10.0, abs=1.5)


@pytest.mark.parametrize("seed", range(5))
def test_the_interval_contains_the_planted_step(seed):
    planted = 6.0
    values = series(160, {80: math.log1p(planted / 100)}, seed=100 + seed)
    [cp] = detect(values, Direction.LOWER)
    assert cp.ci_pct[0] <= planted <= cp.ci_pct[1], cp


def test_single_spikes_never_alert():
    rng = np.random.default_rng(7)
    for _ in range(20):
        values = series(300, {}, seed=int(rng.integers(1 << 30)))
        spots = rng.choice(np.arange(0, 300, 6), size=15, replace=False)  # never two within min_segment
        values[spots] *= np.exp(rng.uniform(5, 50, spots.size) * SIGMA)
        assert detect(values, Direction.LOWER) == []


@given(
    n=st.integers(min_value=12, max_value=250),
    spikes=st.lists(st.tuples(st.floats(0, 1), st.floats(3, 200)), max_size=8),
    seed=st.integers(0, 2**31),
    last=st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_isolated_spikes_anywhere_never_alert(n, spikes, seed, last):
    values = series(n, {}, seed=seed)
    # Only on noise that is quiet with room to spare (no alert even at alpha 0.1): a clipped
    # spike still weighs what a 3-sigma night weighs, and hypothesis found a series (n=52,
    # seed 0) whose last 14 nights sit about 1 sigma above the rest by chance: quiet at alpha
    # 0.001, an alert at 0.1, and any night raised there (3 sigma or 200) tips it over.
    assume(detect(values, Direction.LOWER, DetectSettings(alpha=0.1)) == [])
    taken: list[int] = []
    for where, size in spikes:
        k = min(int(where * n), n - 1)
        if all(abs(k - t) >= DetectSettings().min_segment for t in taken):
            taken.append(k)
            values[k] *= math.exp(size * SIGMA)
    if last:
        values[-1] *= math.exp(100 * SIGMA)  # last night's wild result: one night is not a level
    assert detect(values, Direction.LOWER) == []


@st.composite
def stepped(draw):
    n = draw(st.integers(min_value=20, max_value=300))
    k = draw(st.integers(min_value=0, max_value=4))
    cuts = sorted(set(draw(st.lists(st.integers(1, n - 1), min_size=k, max_size=k))))
    steps = {c: draw(st.sampled_from((-1, 1))) * draw(st.floats(0.5, 8)) * SIGMA for c in cuts}
    return n, steps, draw(st.integers(0, 2**31))


@given(stepped(), st.integers(min_value=2, max_value=12), st.floats(0, 10))
@settings(max_examples=60, deadline=None)
def test_min_segment_and_min_change_are_honoured(case, min_segment, min_change_pct):
    n, steps, seed = case
    cfg = DetectSettings(min_segment=min_segment, min_change_pct=min_change_pct, window=max(50, min_segment))
    points = detect(series(n, steps, seed), Direction.LOWER, cfg)
    edges = [0, *(p.index for p in points), n]
    assert all(b - a >= min_segment for a, b in zip(edges, edges[1:], strict=False)), edges
    assert all(abs(p.change_pct) >= min_change_pct for p in points)
    assert all(p.p_value <= cfg.alpha for p in points)


def test_a_significant_step_below_the_minimum_change_is_not_reported():
    values = series(2000, {1000: math.log(1.004)}, seed=5, sigma=0.002)  # 0.4 %, 2 sigma, 1000 points a side
    assert detect(values, Direction.LOWER, DetectSettings(min_change_pct=0.0))  # it is there...
    assert detect(values, Direction.LOWER, DetectSettings(min_change_pct=1.0)) == []  # ...and too small to matter


@given(stepped())
@settings(max_examples=25, deadline=None)
def test_night_by_night_decided_points_are_never_moved_or_dropped(case):
    n, steps, seed = case
    values = series(n, steps, seed)
    decided: list[int] = []
    for t in range(2, n + 1, 3):
        points = detect(values[:t], Direction.LOWER, DetectSettings(), decided)
        got = [p.index for p in points]
        assert set(decided) <= set(got), (decided, got)
        assert got == sorted(got)
        decided = got


def test_a_decided_point_stays_even_where_the_data_no_longer_show_it():
    values = series(120, {}, seed=9)
    [cp] = detect(values, Direction.LOWER, DetectSettings(), decided=[60])
    assert cp.index == 60
    assert cp.p_value > 0.001  # its evidence is reported as it is now, not as it was


def test_a_regression_that_comes_back_is_reported_as_recovered():
    values = series(300, {100: math.log(1.1), 170: -math.log(1.1)}, seed=11)
    regression, recovery = detect(values, Direction.LOWER)
    assert regression.direction is ChangeDirection.REGRESSION
    assert recovery.direction is ChangeDirection.IMPROVEMENT
    assert regression.recovered_at == recovery.index
    assert abs(recovery.index - 170) <= 1


def test_a_partial_recovery_is_not_a_recovery():
    values = series(300, {100: math.log(1.1), 170: -math.log(1.05)}, seed=12)
    regression, partial = detect(values, Direction.LOWER)
    assert regression.recovered_at is None
    assert partial.direction is ChangeDirection.IMPROVEMENT


def test_recovery_is_reported_night_by_night_without_losing_the_regression():
    values = series(240, {100: math.log(1.1), 170: -math.log(1.1)}, seed=13)
    decided: list[int] = []
    for t in range(20, 241):
        decided = [p.index for p in detect(values[:t], Direction.LOWER, DetectSettings(), decided)]
        if t == 140:
            assert len(decided) == 1  # the regression, not yet recovered
    points = detect(values, Direction.LOWER, DetectSettings(), decided)
    assert [p.index for p in points] == decided
    assert points[0].recovered_at == points[1].index


def test_gaps_keep_the_caller_s_indices():
    values = series(200, {100: math.log(1.08)}, seed=14)
    values[[97, 98, 99, 100]] = np.nan  # no result on those nights; the step is at 100
    [cp] = detect(values, Direction.LOWER)
    assert cp.index == 101 and cp.last_before == 96
    with pytest.raises(ValueError, match="decided change point 98"):
        detect(values, Direction.LOWER, DetectSettings(), decided=[98])


def test_a_deterministic_metric_steps_exactly():
    registers = [32.0] * 40 + [40.0] * 10
    [cp] = detect(registers, Direction.LOWER)
    assert (cp.index, cp.last_before) == (40, 39)
    assert cp.change_pct == pytest.approx(25.0)
    assert detect([32.0] * 50, Direction.LOWER) == []


def test_values_at_or_below_zero_are_compared_linearly():
    rng = np.random.default_rng(15)
    values = np.concatenate((rng.normal(0.0, 0.1, 60), rng.normal(1.0, 0.1, 60)))
    [cp] = detect(values, Direction.HIGHER)  # e.g. a score around 0 that rose by 1
    assert cp.direction is ChangeDirection.IMPROVEMENT and abs(cp.index - 60) <= 1


def test_too_short_or_empty_series_have_no_change():
    assert detect([], Direction.LOWER) == []
    assert detect([1.0, 2.0, 3.0], Direction.LOWER) == []
    assert detect([math.nan] * 20, Direction.LOWER) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_segment": 1}, "min_segment"),
        ({"alpha": 0.0}, "alpha"),
        ({"min_change_pct": -1.0}, "min_change_pct"),
        ({"window": 3}, "window"),
        ({"level": 1.0}, "level"),
    ],
)
def test_settings_reject_nonsense(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DetectSettings(**kwargs)


def test_decided_points_must_be_measured_points_after_the_first():
    values = series(50, {}, seed=16)
    for bad in (0, 50, -1):
        with pytest.raises(ValueError, match=f"decided change point {bad}"):
            detect(values, Direction.LOWER, DetectSettings(), decided=[bad])


def test_the_scan_threshold_inverts_the_scan_p_value():
    for n in (20, 100, 2000):
        b = scan_threshold(0.001, n, 5)
        assert scan_p_value(b, n, 5) == pytest.approx(0.001, rel=1e-3)
        assert scan_p_value(b + 0.5, n, 5) < 0.001 < scan_p_value(b - 0.5, n, 5)
    assert scan_threshold(0.001, 2000, 5) > scan_threshold(0.001, 100, 5)  # more places looked at


def test_false_alarms_under_no_change_stay_near_alpha():
    """The penalty's calibration, seeded: with alpha = 0.05 and no minimum change, at most a
    little over 5 % of gaussian series without a change get any change point."""
    cfg = DetectSettings(alpha=0.05, min_change_pct=0.0)
    rng = np.random.default_rng(17)
    alarms = sum(bool(detect(np.exp(rng.normal(0, SIGMA, 120)), Direction.LOWER, cfg)) for _ in range(300))
    assert alarms / 300 <= 0.08, alarms


# --- nights that are not independent (docs/detection.md, rule 7) --------------------------------


def _ar1(n: int, phi: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    e = rng.normal(0, SIGMA, n)
    y = np.zeros(n)
    for t in range(1, n):
        y[t] = phi * y[t - 1] + e[t]
    return y


def test_independent_nights_keep_the_scale_of_their_differences():
    # white noise with steps: kappa stays near 1 whatever the steps, so the factor is 1 in all
    # but the rare series that crosses the 99.9 % bound
    raised = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        y = rng.normal(0, SIGMA, 300)
        for k in (60, 150, 220):
            y[k:] += rng.choice([-3 * SIGMA, 3 * SIGMA])
        raised += _dependence_factor(y) > 1.0
    assert raised <= 2


def test_a_periodic_balance_is_not_a_run_of_steps():
    # a balance topped up every 30 nights and drawn down on half the others, often not at all
    # (TCPD's bank): its differences are mostly tiny or zero while its level swings, and a noise
    # scale from differences made each swing a step
    rng = np.random.default_rng(4)
    values = []
    for _ in range(18):
        v = 8.0 + rng.uniform(0, 0.5)
        for _ in range(30):
            v -= rng.uniform(0.005, 0.05) if rng.random() < 0.5 else 0.0
            values.append(round(v, 3))
    assert _dependence_factor(np.log(values)) > 10
    assert detect(values, Direction.HIGHER) == []


def test_a_step_in_dependent_noise_is_still_found():
    y = _ar1(400, 0.5, seed=8)
    y[200:] += 10 * SIGMA
    found = [c.index for c in detect(np.exp(y), Direction.LOWER)]
    assert 200 in found
