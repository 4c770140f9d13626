"""The futility rule (core/futility.py, core/sequential.futile): a test that can no longer reach
either boundary by its cap ends undecided at once, and never decides anything it would not
have decided run to the cap."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attrib.core.futility import FUTILITY_AT, crossing_probability, forecast, rounds_needed, sigma_bounds
from attrib.core.model import DecisionRule, Verdict
from attrib.core.sequential import decide, futile
from attrib.core.stats import TRUNCATION_FACTOR, TestConfig, critical_z, min_change_shift

DELTA = min_change_shift(2.0)
IGNORE = min_change_shift(1.0)
ZONE = TestConfig(ignore=IGNORE)


def _run(mu: float, sigma: float, config: TestConfig, seed: int, history_rounds: int = 40) -> tuple[Verdict, int, DecisionRule]:
    """One test, its rounds drawn N(mu, sigma), after an earlier paired set of no change."""
    rng = np.random.default_rng(seed)
    history = [list(rng.normal(0.0, sigma, history_rounds))]
    diffs: list[float] = []
    while True:
        diffs.append(float(rng.normal(mu, sigma)))
        d = decide(diffs, history, DELTA, config)
        if d.verdict is not None:
            assert d.rule is not None
            return d.verdict, len(diffs), d.rule


@pytest.mark.parametrize(("gap", "drift", "rounds"), [(1.0, 0.0, 20), (2.0, 0.1, 40), (3.0, -0.05, 60), (0.5, 0.3, 5)])
def test_the_crossing_probability_bounds_a_gaussian_random_walk(gap, drift, rounds):
    # continuous time sees every crossing a walk of whole rounds makes, and some it does not
    rng = np.random.default_rng(7)
    walks = np.cumsum(rng.normal(drift, 1.0, (20000, rounds)), axis=1)
    seen = float(np.mean(walks.max(axis=1) >= gap))
    p = float(crossing_probability(np.array([gap]), np.array([drift]), 1.0, rounds)[0])
    assert seen <= p + 0.01
    assert p - seen < 0.2  # and not by much: the rule it serves still stops
    assert float(crossing_probability(np.array([-0.1]), np.array([0.0]), 1.0, 3)[0]) == 1.0


@settings(max_examples=60, deadline=None)
@given(
    st.floats(-3.0, 6.0),
    st.floats(0.5, 10.0),
    st.integers(0, 2**31 - 1),
    st.booleans(),
)
def test_a_futility_stop_only_ever_ends_a_test_undecided(mu_x, sigma_x, seed, zone):
    # Run side by side, round by round, on the same shifts: until the curtailed test stops, the
    # two say the same; where it stops for futility the other was still measuring, and it says
    # INCONCLUSIVE. So every BAD or GOOD it says, the test run to the cap says too (alpha, beta).
    config = ZONE if zone else TestConfig()
    old = TestConfig(ignore=config.ignore, futility=False)
    rng = np.random.default_rng(seed)
    sigma = sigma_x * DELTA
    history = [list(rng.normal(0.0, sigma, 30))]
    diffs: list[float] = []
    for _ in range(config.max_rounds):
        diffs.append(float(rng.normal(mu_x * DELTA, sigma)))
        new, before = decide(diffs, history, DELTA, config), decide(diffs, history, DELTA, old)
        if new.rule is DecisionRule.FUTILITY:
            assert new.verdict is Verdict.INCONCLUSIVE and before.verdict is None
            return
        assert new.verdict == before.verdict and new.rule == before.rule
        if new.verdict is not None:
            return


def test_curtailed_tests_would_rarely_have_decided_by_the_cap():
    # The rule's calibration: of the tests it would stop, run on to the cap instead, how many
    # decide? The rule stops at a predictive chance below FUTILITY_AT (an upper bound), so
    # about that many or fewer.
    stopped = decided = 0
    old = TestConfig(ignore=IGNORE, futility=False)
    for seed in range(150):
        for mu_x in (0.0, 0.5, 1.0, 3.0):
            rng = np.random.default_rng([seed, int(mu_x * 10)])
            sigma = 6 * DELTA
            history = [list(rng.normal(0.0, sigma, 40))]
            diffs: list[float] = []
            flagged = False
            while True:
                diffs.append(float(rng.normal(mu_x * DELTA, sigma)))
                d = decide(diffs, history, DELTA, old)
                if not flagged and d.verdict is None and futile(diffs, history, DELTA, ZONE):
                    flagged, stopped = True, stopped + 1
                if d.verdict is not None:
                    decided += flagged and d.verdict is not Verdict.INCONCLUSIVE
                    break
    assert stopped > 300
    assert decided / stopped <= FUTILITY_AT, (decided, stopped)


def test_where_the_noise_is_low_enough_the_rule_never_fires():
    # the truncation point within the cap: the test decides there, and futility has no say
    for seed in range(40):
        for mu_x in (0.0, 0.5, 1.0):
            verdict, _, rule = _run(mu_x * DELTA, 0.5 * DELTA, ZONE, seed)
            assert rule is not DecisionRule.FUTILITY


def test_at_high_noise_it_ends_undecidable_tests_early_and_keeps_the_verdicts():
    # per-round noise 6x the minimum (the real tree): a step of 0, ignore_below or the
    # minimum cannot be decided in 60 rounds; the curtailed test says so in well under 60.
    # A step of 8x the minimum decides as before; power at 4x (about half) is kept.
    sigma = 6 * DELTA
    old = TestConfig(ignore=IGNORE, futility=False)
    for mu_x in (0.0, 0.5, 1.0):
        runs = [_run(mu_x * DELTA, sigma, ZONE, s) for s in range(60)]
        assert all(v is Verdict.INCONCLUSIVE for v, _, _ in runs)
        assert np.mean([n for _, n, _ in runs]) < 35
    bad_new = sum(_run(4 * DELTA, sigma, ZONE, s)[0] is Verdict.BAD for s in range(80))
    bad_old = sum(_run(4 * DELTA, sigma, old, s)[0] is Verdict.BAD for s in range(80))
    assert bad_new >= bad_old - 4 and bad_new <= bad_old
    assert all(_run(8 * DELTA, sigma, ZONE, s)[0] is Verdict.BAD for s in range(20))


def test_not_before_the_noise_is_known_and_never_when_turned_off():
    sigma = 6 * DELTA
    diffs = [sigma, -sigma] * 5 + [0.0] * 20  # 30 rounds at no change, 12 % a round
    assert not futile(diffs[:10], [], DELTA, ZONE)  # 9 degrees of freedom: not yet
    history = [[sigma, -sigma] * 20]
    assert futile(diffs, history, DELTA, ZONE)
    assert not futile(diffs, history, DELTA, TestConfig(ignore=IGNORE, futility=False))
    # a horizon past the cap (an undecided preflight is extended) is looked ahead to
    far = TestConfig(ignore=IGNORE, horizon=100_000)
    assert not futile(diffs, history, DELTA, far)


def test_the_forecast_is_the_truncation_point_and_its_inverse():
    z = critical_z(TestConfig())
    f = forecast(0.12, 60, DELTA, IGNORE, 60, z, TRUNCATION_FACTOR)
    assert f.rounds == pytest.approx(rounds_needed(0.12, DELTA - IGNORE, z, TRUNCATION_FACTOR))
    assert 60 * 40 < f.rounds_low < f.rounds  # thousands of rounds against a cap of 60
    # the smallest minimum change that 60 rounds decide, the zone at the same ratio
    m = f.smallest_change
    width = m * (1 - IGNORE / DELTA)
    assert rounds_needed(0.12, width, z, TRUNCATION_FACTOR) == pytest.approx(60)
    calm = forecast(0.002, 60, DELTA, IGNORE, 60, z, TRUNCATION_FACTOR)
    assert calm.rounds < 60
    low, high = sigma_bounds(1.0, 12)
    assert 0.6 < low < 1.0 < high < 1.7 and sigma_bounds(1.0, 0) == (0.0, math.inf)
