"""core/posterior.py on seeded simulated segments: the posterior concentrates on the true
position, reads nothing into noise, shares mass across unbuildable commits, discounts an
outlying block, survives drift, and asks for what is informative."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from attrib.core.choose import choose
from attrib.core.group import MemberView
from attrib.core.posterior import Posterior, mixture_bits, posterior, round_corrected
from attrib.core.requests import LOCATE_SIGMA_QUANTILE, Action, Request, build_price, builds_needed
from attrib.core.stats import CONFIRM_MIN_ROUNDS
from attrib.segment.scope import MAX_CONFIRM_RETRIES

SIGMA = 1.0


def next_requests(n, blocks, *, tau, prior_sigma=None, anchored=False, **kw) -> tuple[tuple[Request, ...], Posterior]:
    """`choose` for one benchmark given its blocks per position (its posterior from them, with
    per-commit scatter `tau`), and that posterior: a group of one, as the search asks it."""
    post = posterior(n, blocks, tau=tau, prior_sigma=prior_sigma, anchored=anchored)

    def robust() -> Posterior:
        return posterior(n, blocks, tau=tau, prior_sigma=prior_sigma, sigma_quantile=LOCATE_SIGMA_QUANTILE, anchored=anchored)

    return choose(n, {None: MemberView(post, blocks, robust)}, **kw), post


def next_request(n, blocks, **kw) -> tuple[Request, Posterior]:
    """The single best request (`next_requests` with width 1)."""
    reqs, post = next_requests(n, blocks, **kw)
    return reqs[0], post


def _segment(n, k, step, seed, drift=0.0):
    """A seeded segment with its change at k: `measure(*ps)` adds one block of each of ps in one
    round (one clock tick per block, for the drift); the ends start with three rounds of both."""
    rng = np.random.default_rng(seed)
    clock = [0]
    blocks: dict[int, list[float]] = {0: [], n: []}
    rounds: dict[int, list[int]] = {0: [], n: []}

    def measure(*ps):
        r = clock[0]
        for p in ps:
            clock[0] += 1
            blocks.setdefault(p, []).append((step if p >= k else 0.0) + drift * clock[0] + rng.normal(0, SIGMA))
            rounds.setdefault(p, []).append(r)

    for _ in range(3):
        measure(0, n)
    return measure, blocks, rounds


def _search(n, k, step, seed, *, tau=0.125, unbuildable=frozenset(), drift=0.0, cap=600, width=1):
    """Drive next_requests to its end on a simulated segment, one batch per round; returns
    (request, posterior, builds, rounds). With a drift the reference runs in every round and
    the blocks are read against it, as the driver does (`round_corrected`)."""
    measure, blocks, rounds_of = _segment(n, k, step, seed, drift)
    paired = bool(drift)
    builds, spent, retries = 0, 0, 0
    for rounds in range(cap + 1):
        reqs, post = next_requests(
            n,
            round_corrected(blocks, rounds_of) if paired else blocks,
            unbuildable=unbuildable,
            tau=tau,
            blocks_left=cap - spent,
            width=width,
            anchored=paired,
        )
        if reqs[0].provisional and retries < MAX_CONFIRM_RETRIES:
            # located before the noise is known: the driver confirms it, and the confirmation's
            # paired rounds are blocks of both sides that the posterior then sees
            retries += 1
            for _ in range(CONFIRM_MIN_ROUNDS):
                measure(reqs[0].last_good, reqs[0].position, *([0] if paired else []))
                spent += 2
            continue
        if reqs[0].action in (Action.CONFIRM, Action.EXHAUSTED):
            return reqs[0], post, builds, rounds
        assert len({r.position for r in reqs}) == len(reqs), "a batch asks for each commit once"
        for req in reqs:
            assert req.position not in unbuildable or req.position in (0, n), (
                "an unbuildable commit carries no data: never asked for"
            )
            builds += req.action is Action.BUILD
        asked = [req.position for req in reqs]
        measure(*asked, *([0] if paired and 0 not in asked else []))
        spent += len(reqs)
    raise AssertionError("the search did not end within its own block cap")


@pytest.mark.parametrize("seed", range(12))
def test_concentrates_on_the_true_position(seed):
    n = 60
    k = 1 + (seed * 17) % n
    req, post, builds, _ = _search(n, k, 2.0, seed)
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
    req, post, _, _ = _search(n, k, 2.0, 5, unbuildable=broken)
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


def test_a_drifting_machine_does_not_read_as_a_step(monkeypatch):
    # the level drifts by 0.05 sigma per block: the search's hundreds of blocks move it by many
    # sigmas. Read against the reference's blocks of their rounds (the reference runs in every
    # round), the change is located at 31 in every seed; read as they ran, in none
    for seed in range(5):
        req, *_ = _search(50, 31, 2.0, seed, drift=0.05)
        assert req.action is Action.CONFIRM and req.position == 31, seed
    monkeypatch.setattr(sys.modules[__name__], "round_corrected", lambda blocks, rounds: blocks)
    for seed in range(5):
        req, *_ = _search(50, 31, 2.0, seed, drift=0.05)
        assert not (req.action is Action.CONFIRM and req.position == 31), seed


def test_with_no_step_the_fitted_step_stays_within_noise():
    # The posterior is conditional on a change existing (the preflight and the paired
    # confirmation decide whether one does); with none, the step it fits must stay small.
    for seed in range(6):
        _, post, *_ = _search(30, 10, 0.0, 100 + seed, cap=200)
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


def test_a_batch_spreads_out_and_each_further_probe_is_worth_less():
    # only the ends measured: four probes split the range like quantiles, not four at the middle
    rng = np.random.default_rng(5)
    blocks = {0: list(rng.normal(0, 1, 4)), 64: list(rng.normal(3, 1, 4))}
    reqs, _ = next_requests(64, blocks, tau=0.125, width=4)
    assert [r.action for r in reqs] == [Action.BUILD] * 4
    positions = sorted(r.position for r in reqs)
    assert len(set(positions)) == 4 and positions[0] < 32 < positions[-1]
    values = [r.value for r in reqs]
    assert values == sorted(values, reverse=True) and values[-1] < values[0]


def test_parallel_probes_find_the_same_position_in_fewer_rounds():
    rounds = {1: 0, 4: 0}
    for seed in range(4):
        k = 1 + (seed * 29) % 100
        for width in rounds:
            req, _, _, r = _search(100, k, 2.0, seed, width=width)
            assert req.position == k, (seed, width)
            rounds[width] += r
    assert rounds[4] < rounds[1], rounds


def test_a_commit_at_its_cap_that_still_decides_is_extended_once():
    # position 5 holds the boundary's doubt and already has `cap` blocks: it is extended, once
    rng = np.random.default_rng(6)
    blocks = {
        0: list(rng.normal(0, 1, 6)),
        10: list(rng.normal(2, 1, 6)),
        4: list(rng.normal(0, 1, 3)),
        5: [1.0, 1.1, 0.9],
    }
    reqs, _ = next_requests(10, blocks, tau=0.125, cap=3)
    assert any(r.action is Action.EXTEND for r in reqs) or all(r.position != 5 for r in reqs)
    ext = [r for r in reqs if r.action is Action.EXTEND]
    if ext:
        assert ext[0].position == 5
    again, _ = next_requests(10, blocks, tau=0.125, cap=3, extended=frozenset({5}))
    assert all(r.position != 5 for r in again), "an extended commit at its cap is asked for nothing more"


def test_a_build_break_is_stepped_away_from_not_walked_through():
    # the middle commit did not build: its neighbours are likely broken too, so the next build
    # is further out than the one just beside it
    rng = np.random.default_rng(8)
    blocks = {0: list(rng.normal(0, 1, 4)), 64: list(rng.normal(3, 1, 4))}
    first, _ = next_request(64, blocks, tau=0.125)
    assert first.action is Action.BUILD
    nxt, _ = next_request(64, blocks, tau=0.125, unbuildable=frozenset({first.position}))
    assert nxt.action is Action.BUILD and abs(nxt.position - first.position) > 1


def test_a_step_many_times_the_noise_is_located_before_sigma_has_many_degrees_of_freedom():
    # the floor of 16 within-commit degrees of freedom is waived when the boundary holds at
    # sigma's 99 % upper bound as well: a 20-sigma step from the first few blocks
    for seed in range(6):
        req, _post, _builds, rounds = _search(40, 11 + seed, 20.0, seed)
        assert req.action is Action.CONFIRM and req.position == 11 + seed
        # about log2(40) probes of one block each; pinning sigma first took 17-18 rounds here
        assert rounds <= 8


def test_a_step_near_the_noise_still_pins_sigma_down_before_confirming():
    # at 3 sigma, a sigma from 4 degrees of freedom at its 99 % bound does not hold the boundary:
    # more blocks are measured first, and the located position is right
    for seed in range(6):
        req, _post, _builds, rounds = _search(40, 11 + seed, 3.0, seed)
        assert req.action is Action.CONFIRM and req.position == 11 + seed
        assert rounds >= 12  # blocks beyond the probes' first ones: sigma pinned down first


def _levels(rng, spec):
    return {p: list(level + rng.normal(0, 0.3, count)) for p, (level, count) in spec.items()}


def test_with_no_builds_left_only_the_located_gap_is_built():
    # the change lies between the measured commits 10 and 20: with the budget spent the search
    # may still build inside that gap (that names one commit), and nowhere else
    rng = np.random.default_rng(11)
    blocks = _levels(rng, {0: (0.0, 6), 10: (0.0, 6), 20: (3.0, 6), 40: (3.0, 6)})
    free, _ = next_requests(40, blocks, tau=0.125)
    spent, _ = next_requests(40, blocks, tau=0.125, builds_left=0)
    assert free[0].action is Action.BUILD and 10 < free[0].position < 20
    assert all(r.action is Action.MEASURE or 10 < r.position < 20 for r in spent)
    assert any(r.action is Action.BUILD for r in spent)
    # a batch never asks for more builds than are left
    wide, _ = next_requests(40, blocks, tau=0.125, builds_left=1, width=4)
    unlimited, _ = next_requests(40, blocks, tau=0.125, width=4)
    assert sum(r.action is Action.BUILD for r in wide) <= 1 < sum(r.action is Action.BUILD for r in unlimited)


def test_with_no_builds_left_a_split_posterior_measures_what_is_built():
    # commit 20 sits at neither level (a second, smaller step): the posterior stays split, and
    # with no builds left the search measures built commits only; an unlimited batch builds
    rng = np.random.default_rng(12)
    blocks = _levels(rng, {0: (0.0, 6), 20: (1.5, 4), 40: (3.0, 6)})
    free, _ = next_requests(40, blocks, tau=0.125, width=3)
    spent, post = next_requests(40, blocks, tau=0.125, builds_left=0, width=3)
    assert 0.01 < post.below(20) < 0.99  # neither gap holds the change
    assert any(r.action is Action.BUILD for r in free)
    assert spent[0].action in (Action.MEASURE, Action.EXHAUSTED)
    assert all(r.action is not Action.BUILD for r in spent)


def test_a_commit_at_neither_level_is_not_measured_again():
    # commit 30 sits halfway between the ends (a step on each side of it): its 8 blocks pin its
    # level, so a ninth cannot tell its side; the search builds elsewhere instead of spending
    # the block cap on it (a three-culprit benchmark trial measured such a commit ~60 times)
    rng = np.random.default_rng(13)
    blocks = _levels(rng, {0: (0.0, 8), 30: (2.0, 8), 60: (4.0, 8)})
    reqs, post = next_requests(60, blocks, tau=0.125)
    assert 0.01 < post.below(30) < 0.99  # the one-step model cannot place it
    assert all(r.position != 30 for r in reqs)
    assert reqs[0].action is Action.BUILD


def test_a_build_is_dearer_as_the_budget_runs_short_of_what_locating_needs():
    # a 64-commit segment with nothing inside measured needs log2 64 = 6 builds
    blocks = {0: [0.0, 0.1, -0.1], 64: [2.0, 2.1, 1.9]}
    post = posterior(64, blocks, tau=0.125)
    assert builds_needed(post, [0, 64]) == pytest.approx(6.0)
    counts = {0: 3, 64: 3}
    assert build_price(post, counts, None) == 1.0  # no budget: the plain build cost
    assert build_price(post, counts, 8) == 1.0  # two to spare
    assert build_price(post, counts, 7) > 1.0  # one to spare: a doubtful probe is measured first
    assert build_price(post, counts, 6) > build_price(post, counts, 7)
    # a located gap of one commit needs no build: two left are two to spare
    blocks = {0: [0.0] * 4, 31: [0.0, 0.1, -0.1], 32: [2.0, 2.1, 1.9], 64: [2.0] * 4}
    post = posterior(64, blocks, tau=0.125)
    assert builds_needed(post, [0, 31, 32, 64]) < 0.01
    assert build_price(post, {0: 4, 31: 3, 32: 3, 64: 4}, 2) == pytest.approx(1.0, abs=1e-3)


def test_one_block_alone_does_not_settle_a_side():
    # ends pinned at 0 and 4 sigma; a probe's single block at 3.5 sigma could be an outlier of the
    # good side (a load burst): it leans bad but leaves room for the block that tells; two such
    # blocks settle it
    rng = np.random.default_rng(3)
    ends = {0: list(rng.normal(0, 1, 12)), 40: list(rng.normal(4, 1, 12))}
    one = posterior(40, {**ends, 20: [3.5]}, tau=0.125, prior_sigma=1.0)
    two = posterior(40, {**ends, 20: [3.5, 3.9]}, tau=0.125, prior_sigma=1.0)
    assert 0.5 < one.below(20) < 0.995
    assert two.below(20) > one.below(20)
    assert two.below(20) > 0.99


def test_a_boundary_between_two_measured_neighbours_is_confirmed_early():
    # 19 and 20 measured twice each, the change between them at about 0.9-0.99 and the rest of the
    # mass in the gaps beside them: what is left is the two commits' sides, which the
    # confirmation's paired rounds measure, so it is asked for now, provisionally
    rng = np.random.default_rng(5)
    blocks = {p: list(rng.normal(0.0, 1.0, 6)) for p in (0, 10, 15)}
    blocks.update({p: list(rng.normal(3.0, 1.0, 6)) for p in (25, 30, 40)})
    blocks[19], blocks[20] = [0.2, 0.2], [2.8, 2.8]
    req, post = next_request(40, blocks, tau=0.125)
    assert 0.9 <= post.probs[20] < 0.99
    assert req.action is Action.CONFIRM and req.provisional
    assert (req.position, req.last_good) == (20, 19)
    # with the rest of the mass in a gap away from them (commit 5's one block reads bad-ish), blocks
    # of 19 and 20 would not settle it: no early confirmation
    rng = np.random.default_rng(5)
    blocks = {0: list(rng.normal(0.0, 1.0, 8)), 40: list(rng.normal(3.0, 1.0, 8))}
    blocks.update({19: [0.0] * 3, 20: [3.0] * 3, 5: [2.6]})
    req, post = next_request(40, blocks, tau=0.125)
    assert 0.9 <= post.probs[20] < 0.99 and sum(post.probs[1:6]) > 0.01
    assert req.action is not Action.CONFIRM


def test_commits_between_two_unbuildable_ones_with_nothing_built_between_are_inside_the_break():
    from attrib.core.requests import inside_breaks

    assert inside_breaks({31, 33}, [0, 29, 36, 64]) == {32}
    assert inside_breaks({30, 34}, [0, 29, 36, 64]) == {31, 32, 33}
    assert inside_breaks({30, 34}, [0, 32, 64]) == set()  # 32 built: two breaks, not one
    assert inside_breaks({30, 31}, [0, 64]) == set()  # adjacent: nothing between
    assert inside_breaks({30}, [0, 64]) == set()


def test_round_corrected_takes_out_what_the_machine_did_around_each_round():
    # the reference ran in rounds 0..19; in rounds 4..12 the machine ran 7 % faster. A commit at
    # +10 % measured inside that spell reads +3 %; read against the reference's blocks around
    # the same rounds it is at +10 % again. A block in a round without the reference (a round
    # of its own) is read against the nearest ones.
    from attrib.core.posterior import round_corrected

    fast = set(range(4, 13))
    ref = [(-0.07 if r in fast else 0.0) for r in range(20)]
    blocks = {0: ref, 5: [0.03, 0.03, 0.10], 9: [0.10 - 0.07]}
    rounds = {0: list(range(20)), 5: [8, 9, 18], 9: [25]}
    out = round_corrected(blocks, rounds)
    assert out[0] == ref  # the reference's own blocks are its level
    assert out[5] == pytest.approx([0.10, 0.10, 0.10])
    assert out[9] == pytest.approx([0.03])  # nearest reference blocks (rounds 17..19) are steady
    # no reference blocks: nothing to read the machine's state from
    assert round_corrected({0: [], 3: [1.0]}, {0: [], 3: [2]}) == {0: [], 3: [1.0]}


def test_a_fast_spell_during_the_probes_does_not_move_the_boundary():
    # a change at 5 of 8 (+4 sigma); the ends and the first probes ran on a steady machine, then
    # for a spell it ran 4 sigma faster, in which 6 (bad) was measured: unpaired, 6 reads at the
    # good level and the posterior moves the boundary past it; with the reference in the same
    # rounds (anchored) it stays between 4 and 5
    from attrib.core.posterior import round_corrected

    rng = np.random.default_rng(7)
    step, spell = 4.0 * SIGMA, -4.0 * SIGMA
    blocks: dict[int, list[float]] = {0: [], 8: [], 4: [], 5: [], 6: []}
    rounds: dict[int, list[int]] = {p: [] for p in blocks}
    r = 0

    def round_of(*ps, offset=0.0):
        nonlocal r
        for p in (0, *ps):
            blocks[p].append((step if p >= 5 else 0.0) + offset + rng.normal(0, 0.3 * SIGMA))
            rounds[p].append(r)
        r += 1

    for _ in range(4):
        round_of(8)
    for p in (4, 5, 4, 5):
        round_of(p)
    for _ in range(4):
        round_of(6, offset=spell)
    unpaired = posterior(8, blocks, tau=0.1)
    paired = posterior(8, round_corrected(blocks, rounds), tau=0.1, anchored=True)
    assert paired.map == 5 and paired.probs[5] > 0.95 and paired.below(6) > 0.99
    assert unpaired.below(6) < 0.5  # 6 read as good: the spell, not the commit


def test_a_commit_with_a_prebuilt_binary_is_cheaper_to_probe():
    # issue 31: CI published binaries for every other commit; the next build goes to one of
    # them, next to where it would have gone, worth more bits per unit of cost
    rng = np.random.default_rng(9)
    blocks = {0: list(rng.normal(0, 1, 4)), 64: list(rng.normal(3, 1, 4))}
    plain, _ = next_request(64, blocks, tau=0.125)
    odd = frozenset(range(1, 64, 2)) - {plain.position}
    cheap, _ = next_request(64, blocks, tau=0.125, prebuilt=odd)
    assert cheap.action is Action.BUILD and cheap.position in odd
    assert abs(cheap.position - plain.position) <= 2 and cheap.value > plain.value
