"""core/posterior.py on seeded simulated segments: the posterior concentrates on the true
position, reads nothing into noise, shares mass across unbuildable commits, discounts an
outlying block, survives drift, and asks for what is informative."""

from __future__ import annotations

import numpy as np
import pytest

from attrib.core.posterior import Action, mixture_bits, next_request, posterior

SIGMA = 1.0


def _search(n, k, step, seed, *, tau=0.125, unbuildable=frozenset(), drift=0.0, cap=600):
    """Drive next_request to its end on a simulated segment; returns (request, blocks, builds)."""
    rng = np.random.default_rng(seed)
    clock = [0]

    def draw(p):
        clock[0] += 1
        return (step if p >= k else 0.0) + drift * clock[0] + rng.normal(0, SIGMA)

    blocks = {0: [], n: []}
    times = {0: [], n: []}
    for _ in range(3):
        for p in (0, n):
            blocks[p].append(draw(p))
            times[p].append(float(clock[0]))
    builds = 0
    for spent in range(cap + 1):
        req, post = next_request(
            n, blocks, unbuildable=unbuildable, tau=tau, blocks_left=cap - spent, times=times if drift else None
        )
        if req.action in (Action.CONFIRM, Action.EXHAUSTED):
            return req, post, builds
        assert req.position not in unbuildable or req.position in (0, n), "an unbuildable commit carries no data: never asked for"
        builds += req.action is Action.BUILD
        blocks.setdefault(req.position, []).append(draw(req.position))
        times.setdefault(req.position, []).append(float(clock[0]))
    raise AssertionError("the search did not end within its own block cap")


@pytest.mark.parametrize("seed", range(12))
def test_concentrates_on_the_true_position(seed):
    n = 60
    k = 1 + (seed * 17) % n
    req, post, builds = _search(n, k, 2.0, seed)
    assert req.action is Action.CONFIRM
    assert req.position == k
    assert post.probs[k] >= 0.99
    # bisection-like, not a walk (the benchmark measures the ceil(log2 N) + 4 target)
    assert builds <= 2 * int(np.ceil(np.log2(n)))


def test_every_hypothesis_before_any_data_inside_is_equally_likely():
    # only the ends measured: the data cannot tell positions apart, so the prior (uniform) stands
    rng = np.random.default_rng(3)
    post = posterior(9, {0: list(rng.normal(0, 1, 5)), 9: list(rng.normal(3, 1, 5))}, tau=0.1)
    assert post.probs[0] == 0.0
    assert np.allclose(post.probs[1:], 1 / 9)


def test_unbuildable_commits_give_the_ambiguous_range():
    n, k = 40, 21
    broken = frozenset({19, 20})
    req, post, _ = _search(n, k, 2.0, 5, unbuildable=broken)
    assert req.action is Action.CONFIRM
    assert req.position == k
    assert set(req.ambiguous) == broken  # no data can tell 19, 20 and 21 apart
    assert req.last_good == 18
    assert post.probs[19] == pytest.approx(post.probs[21])


def test_one_outlying_block_does_not_decide():
    # a clean step at 10; commit 5 has four clean blocks and one 8-sigma outlier
    rng = np.random.default_rng(11)
    blocks = {p: list(rng.normal(2.0 if p >= 10 else 0.0, SIGMA, 6)) for p in (0, 3, 5, 8, 9, 10, 12, 20)}
    blocks[5][0] = 10.0
    post = posterior(20, blocks, tau=0.125)
    assert post.map == 10
    assert sum(post.probs[6:10]) < 0.05  # the outlier does not drag the change before 10


def test_a_drifting_machine_does_not_read_as_a_step():
    # the level drifts by 0.01 sigma per run: hundreds of runs move it by several sigmas
    req, _, _ = _search(50, 31, 2.0, 2, drift=0.01)
    assert req.action is Action.CONFIRM and req.position == 31


def test_with_no_step_the_fitted_step_stays_within_noise():
    # The posterior is conditional on a change existing (the preflight and the paired
    # confirmation decide whether one does); with none, the step it fits must stay small.
    for seed in range(6):
        _, post, _ = _search(30, 10, 0.0, 100 + seed, cap=200)
        assert abs(post.step) < 4 * post.step_se + 0.5 * SIGMA


def test_information_is_zero_when_the_side_is_known_and_greatest_at_even_odds():
    a, b, s = np.zeros(5), np.full(5, 2.0), np.ones(5)
    bits = mixture_bits(np.array([0.0, 0.1, 0.5, 0.9, 1.0]), a, b, s)
    assert bits[0] == pytest.approx(0.0, abs=1e-6) and bits[-1] == pytest.approx(0.0, abs=1e-6)
    assert bits[2] == max(bits)
    assert bits[1] == pytest.approx(bits[3], rel=1e-3)
    # a wider separation carries more of the side's one bit
    wide = mixture_bits(np.array([0.5]), np.zeros(1), np.full(1, 6.0), np.ones(1))
    assert bits[2] < wide[0] <= 1.0 + 1e-9


def test_a_build_must_be_worth_its_cost():
    # with a build costing a lot, the search prefers more blocks of what it has built
    rng = np.random.default_rng(4)
    blocks = {0: list(rng.normal(0, 1, 4)), 10: list(rng.normal(2, 1, 4)), 5: [1.0]}
    cheap, _ = next_request(10, blocks, tau=0.125, build_cost=1.0)
    dear, _ = next_request(10, blocks, tau=0.125, build_cost=1000.0)
    assert dear.action is Action.MEASURE and dear.position == 5
    assert cheap.value >= dear.value
