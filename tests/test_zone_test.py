"""core/stats.zone_test (the indifference zone's mixture test) and core/posterior.level_gap
(what is left of a change, from blocks already measured), on rounds drawn from stated
Gaussian distributions: their error rates and their cost are what they claim."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from attrib.core.model import Verdict
from attrib.core.posterior import level_gap
from attrib.core.stats import TestConfig, sprt, zone_test

DELTA = 0.02  # the minimum change (log shift)
IGNORE = 0.01  # ignore_below: half of it, the default
SIGMA = 0.02  # per-round sd: the minimum is one round's noise
CONFIG = replace(TestConfig(), ignore=IGNORE, max_rounds=400)


def _run(mean: float, seed: int, test) -> tuple[Verdict | None, int]:
    rng = np.random.default_rng(seed)
    diffs: list[float] = []
    for _ in range(CONFIG.max_rounds):
        diffs.append(float(rng.normal(mean, SIGMA)))
        d = test(diffs)
        if d.verdict is not None:
            return d.verdict, len(diffs)
    return None, len(diffs)


def _zone(diffs):
    return zone_test(diffs, DELTA, SIGMA, CONFIG)


def _wald(diffs):
    """Wald's test of ignore against delta: the zone's test before the mixtures."""
    return sprt([x - IGNORE for x in diffs], DELTA - IGNORE, SIGMA, replace(CONFIG, ignore=0.0))


def test_a_step_at_ignore_below_is_called_worse_at_most_alpha_of_the_time() -> None:
    # 2000 seeded tests at the zone's lower edge: alpha = 0.001 allows ~2; 8 would be 4 sd above
    bad = sum(_run(IGNORE, s, _zone)[0] is Verdict.BAD for s in range(2000))
    assert bad <= 8


def test_a_step_of_exactly_the_minimum_is_missed_at_most_beta_of_the_time() -> None:
    # beta = 0.01 allows ~10 of 1000; 22 would be 4 sd above
    good = sum(_run(DELTA, s, _zone)[0] is Verdict.GOOD for s in range(1000))
    assert good <= 22


@pytest.mark.parametrize("mean", [2 * DELTA, 4 * DELTA, 0.0])
def test_away_from_the_zone_it_decides_in_fewer_rounds_than_walds_test(mean: float) -> None:
    zone = [_run(mean, s, _zone) for s in range(300)]
    wald = [_run(mean, s, _wald) for s in range(300)]
    right = Verdict.GOOD if mean == 0 else Verdict.BAD
    assert all(v is right for v, _ in zone)
    assert np.mean([n for _, n in zone]) < 0.9 * np.mean([n for _, n in wald])


def test_the_gap_left_after_a_culprit_is_unbiased_under_a_linear_drift() -> None:
    """Two commits measured at different times on a drifting machine (plus a third that spans
    the run): the drift is taken out, and the 99 % bounds cover the true gap ~99 % of the time."""
    covered, shifts = 0, []
    for seed in range(400):
        rng = np.random.default_rng(seed)
        drift, true_gap, sd = 0.0004, 0.01, 0.01
        times = {"a": list(range(0, 20)), "b": list(range(40, 60)), "ref": list(range(0, 60, 3))}
        level = {"a": 0.0, "b": true_gap, "ref": 0.0}
        blocks = {k: [level[k] + drift * t + rng.normal(0, sd) for t in ts] for k, ts in times.items()}
        gap = level_gap(blocks, {k: [float(t) for t in ts] for k, ts in times.items()}, "a", "b")
        assert gap is not None
        shifts.append(gap.shift)
        covered += gap.lower(2.576) <= true_gap <= gap.upper(2.576)
    assert abs(np.mean(shifts) - 0.01) < 0.001  # without the drift taken out it would be 0.026
    assert covered >= 0.97 * 400


def test_a_gap_needs_two_blocks_of_each_commit() -> None:
    assert level_gap({"a": [0.0], "b": [0.0, 0.1]}, {"a": [0.0], "b": [1.0, 2.0]}, "a", "b") is None


def _first_test(mean: float, seed: int) -> Verdict | None:
    """The first test of a bisection: sigma from its own rounds only, as the preflight's."""
    from attrib.core.stats import decide

    rng = np.random.default_rng(seed)
    diffs: list[float] = []
    for _ in range(60):
        diffs.append(float(rng.normal(mean, 0.01)))
        d = decide(diffs, [], DELTA, replace(CONFIG, max_rounds=60))
        if d.verdict is not None:
            return d.verdict
    return None


def test_the_first_test_of_a_bisection_keeps_beta_at_the_minimum_with_its_sigma_estimated() -> None:
    # a "no change" from 2-3 rounds' sigma: 46 of 3000 at the minimum before FIRST_GOOD_ROUNDS
    # (beta = 0.01 allows 30 at 3 sd); 17 with it
    good = sum(_first_test(DELTA, s) is Verdict.GOOD for s in range(3000))
    assert good <= 30


def test_a_standalone_comparison_keeps_alpha_at_ignore_below_with_its_sigma_estimated() -> None:
    # `attrib compare`'s verdict is final: with sigma from its own 3 rounds a step at ignore_below
    # was called worse in 15 of 3000 seeded tests (alpha = 0.001 allows 3); its floor of 5 rounds
    from attrib.core.stats import decide

    config = replace(CONFIG, max_rounds=60).standalone()
    bad = 0
    for seed in range(3000):
        rng = np.random.default_rng(seed)
        diffs: list[float] = []
        for _ in range(60):
            diffs.append(float(rng.normal(IGNORE, 0.01)))
            d = decide(diffs, [], DELTA, config)
            if d.verdict is not None:
                bad += d.verdict is Verdict.BAD
                break
    assert bad <= 8
