"""The posterior search ([search] method = "posterior") through the real engine on simulated
histories: the indifference zone over a whole bisection, seeded."""

from __future__ import annotations

import pytest

from attrib.simulation import NoiseModel, linear_history, run_simulated

MIN = 1.0  # percent; sample noise sigma 1 %: the step at the minimum is one sample sigma


def test_a_step_of_exactly_the_minimum_is_named():
    # the target is >= 97 % over whole bisections (benchmarks/RESULTS.md measures it);
    # here 8 seeded ones, of which one may miss (seed 5 ends not_reproduced: its preflight missed)
    found = 0
    for seed in range(8):
        n, k = 40, 3 + 4 * seed
        hist = linear_history(n, {k: MIN})
        out = run_simulated(hist, NoiseModel("gaussian", sigma=0.01), seed, min_change_pct=MIN, method="posterior")
        assert out.culprits in ((), (hist.main[k],)), "never a wrong commit"
        if out.status == "culprit_found":
            culprit = out.outcome.culprits[0]
            assert culprit.confirmed and culprit.posterior >= 0.9
            found += 1
    assert found >= 7


@pytest.mark.parametrize("seed", range(4))
def test_a_step_at_the_ignored_size_is_never_named(seed):
    # ignore_below_pct defaults to half the minimum: a step of exactly that is never a culprit
    hist = linear_history(40, {13 + seed: MIN / 2})
    out = run_simulated(hist, NoiseModel("gaussian", sigma=0.01), 100 + seed, min_change_pct=MIN, method="posterior")
    assert out.status != "culprit_found"
    assert out.culprits == () or not any(c.confirmed for c in out.outcome.culprits)


def test_two_culprits_are_both_found_in_order():
    hist = linear_history(60, {12: 2.0, 41: 3.0})
    out = run_simulated(hist, NoiseModel("gaussian", sigma=0.01), 3, min_change_pct=MIN, method="posterior")
    assert out.status == "culprit_found"
    assert out.culprits == (hist.main[12], hist.main[41])


def test_unbuildable_commits_before_the_culprit_are_its_ambiguous_range():
    hist = linear_history(40, {20: 2.0}, broken={18, 19})
    out = run_simulated(hist, NoiseModel("gaussian", sigma=0.01), 4, min_change_pct=MIN, method="posterior")
    assert out.culprits == (hist.main[20],)
    assert set(out.ambiguous[0]) == {hist.main[18], hist.main[19]}
    assert out.status == "culprit_found"  # as the sequential search: named with its range


def test_a_culprit_that_explains_the_whole_change_ends_the_search_without_remaining_checks():
    # one clear step: the preflight minus its confirmation leaves less than the minimum, so no
    # range before or after it is searched again (and the second culprit case still finds both)
    from attrib.core.model import NoteKind, Purpose
    from attrib.core.remainder import remaining_upper

    out = run_simulated(linear_history(60, {30: 8.0}), NoiseModel("gaussian", sigma=0.01), 7, min_change_pct=MIN)
    assert list(out.culprits) == ["c030"]
    assert any(n.kind is NoteKind.NOTHING_LEFT for n in out.outcome.notes)
    assert not any(c.purpose is Purpose.REMAINING for c in out.outcome.comparisons)
    two = run_simulated(linear_history(60, {20: 6.0, 45: 6.0}), NoiseModel("gaussian", sigma=0.01), 7, min_change_pct=MIN)
    assert list(two.culprits) == ["c020", "c045"]
    # the bound itself: nothing found leaves the whole change; too few shifts decide nothing
    assert remaining_upper([0.05, 0.06, 0.04], [], 0.01) > 0.05
    assert remaining_upper([0.05, 0.06, 0.04], [[0.05, 0.05, 0.05]], 0.01) < 0.05
    assert remaining_upper([0.05], [[0.05, 0.05]], 0.01) == float("inf")


def test_the_stretch_beside_a_culprit_is_decided_by_paired_rounds():
    # whether a stretch beside a culprit is still worth a search is a paired REMAINING test of its
    # two ends, never a gap read off blocks measured at other times (that shortcut missed the
    # second of two culprits under load: segment/remaining.py); with two culprits, both found
    from attrib.core.model import NoteKind, Purpose

    for seed in range(4):
        hist = linear_history(60, {15 + seed: 3.0, 40 + seed: 3.0})
        out = run_simulated(hist, NoiseModel("gaussian", sigma=0.01), seed, min_change_pct=MIN)
        assert out.culprits == tuple(hist.culprits), seed
        assert not any(n.kind is NoteKind.NOTHING_BETWEEN for n in out.outcome.notes)
        assert any(c.purpose is Purpose.REMAINING for c in out.outcome.comparisons)


@pytest.mark.parametrize(
    ("n", "small", "step", "seed"), [(70, 50, 65, 1467736405), (53, 5, 1, 1755929344), (101, 84, 101, 1750975677)]
)
def test_a_step_the_confirmation_puts_at_ignore_below_is_a_smaller_step_not_an_open_range(n, small, step, seed):
    # A step of exactly ignore_below (half the minimum) beside one of the minimum: the search
    # can locate the small one first, at its block cap. The paired confirmation calls it GOOD (<=
    # ignore_below); that is a smaller step, and the real culprit is still found and named. These
    # seeds (the scenario benchmark's) ended inconclusive when such a confirmation was recorded
    # as an unconfirmed culprit.
    hist = linear_history(n, {small: 1.0, step: 2.0}, small={small})
    out = run_simulated(hist, NoiseModel("gaussian", sigma=0.01), seed, min_change_pct=2.0)
    assert out.status == "culprit_found"
    assert out.culprits == (hist.main[step],)
    assert all(s.commit == hist.main[small] for s in out.outcome.smaller_steps)


def test_a_misread_probe_does_not_spend_the_build_budget():
    # test_cli_bisect's build-break tree (64 commits, commits 30..34 do not build, a 10 % step at
    # 45, min 5 %) in bimodal noise: one block of a good-side commit read at the bad level sent
    # the search into the wrong half for two builds, 11-12 against ceil(log2 64) + 4 = 10, in 2 of
    # these 40 seeds; the build price measures a doubtful probe again before building beyond it
    hist = linear_history(64, {45: 10.0}, frozenset(range(30, 35)))
    for seed in range(40):
        out = run_simulated(hist, NoiseModel("bimodal", sigma=0.05), seed, min_change_pct=5.0)
        assert out.culprits == tuple(hist.culprits), seed
        assert out.builds <= 10, (seed, out.builds)


def test_a_provisional_confirmation_the_posterior_drops_is_said_and_the_search_goes_on():
    # a step of exactly the minimum in 168 commits (seeded; found among the scenario benchmark's
    # "at the minimum 1 sigma" trials, trial 15 of seed 1 since the search runs the reference in
    # every round): the boundary is confirmed before the noise is known, the confirmation's
    # rounds leave it below 0.99, and the search goes on until it holds
    from attrib.core.model import NoteKind
    from attrib.report.sentences import note_text

    hist = linear_history(168, {44: 1.0})
    out = run_simulated(hist, NoiseModel("gaussian", sigma=0.01), 1977265863, min_change_pct=1.0)
    assert out.status == "culprit_found" and out.culprits == tuple(hist.culprits)
    dropped = [n for n in out.outcome.notes if n.kind is NoteKind.POSITION_NOT_HELD]
    assert dropped, "this seed confirms provisionally a position the posterior then drops"
    assert all("confirmed before the noise was known" in note_text(n) for n in dropped)
    # named only once the posterior held it, after the dropped confirmation's rounds and more
    culprit = out.outcome.culprits[0]
    assert culprit.confirmed and culprit.range_posterior >= 0.99


def test_a_commit_inside_a_build_break_is_skipped_without_being_built():
    # commits 30..33 do not build and the culprit is 34: once 31 and 33 are known not to build,
    # 32 between them is taken to be inside the break; it is never built, the culprit is named
    # with the whole break as its ambiguous range, and the report says why 32 was not built
    from attrib.core.model import NoteKind
    from attrib.report.sentences import note_text

    hist = linear_history(63, {34: 3.0}, frozenset(range(30, 34)))
    out = run_simulated(hist, NoiseModel("gaussian", sigma=0.01), 5, min_change_pct=1.5)
    assert out.status == "culprit_found" and out.culprits == ("c034",)
    assert set(out.ambiguous[0]) == {"c030", "c031", "c032", "c033"}
    assert out.outcome.commits.get("c032") is None or out.outcome.commits["c032"].build is None
    (note,) = [n for n in out.outcome.notes if n.kind is NoteKind.INSIDE_BREAK]
    assert note.commits == ("c032",) and "not built" in note_text(note)
    assert not out.outcome.unresolved


def test_a_confirmed_culprit_and_its_parent_carry_the_verdicts_the_confirmation_leaves():
    # a boundary confirmed early (at CONFIRM_EARLY_AT) was placed before the confirmation, with
    # its two sides still below 0.99: the result listed the culprit itself as inconclusive
    from attrib.core.model import Verdict

    for seed in range(12):
        hist = linear_history(60, {17 + 2 * seed: 2.0})
        out = run_simulated(hist, NoiseModel("gaussian", sigma=0.01), seed, min_change_pct=MIN)
        assert out.culprits == tuple(hist.culprits), seed
        culprit = out.outcome.culprits[0]
        assert out.outcome.verdicts[culprit.commit][1] is Verdict.BAD, seed
        assert out.outcome.verdicts[culprit.last_good][1] is Verdict.GOOD, seed


def test_a_zone_step_whose_confirmation_runs_to_its_cap_is_a_smaller_step():
    # a real culprit (2 %) and a step of 3/4 of the minimum (1 %) 35 commits before it (seeded;
    # trial 28 of the scenario family "small 3/4 + culprit 2 sigma"): the remaining-change
    # test sends a search after the zone step, whose confirmation runs to its 60-round cap
    # undecided, as the zone's test may strictly inside the zone. Its rounds put the step below
    # the minimum at 1 - beta, so it is a smaller step: the bisection names the culprit it
    # found instead of ending inconclusive with the zone step as an open range (as trial 14
    # did, after two more confirmations of 60 rounds each)
    from attrib.core.model import DecisionRule, NoteKind, Verdict

    hist = linear_history(166, {83: 0.75, 118: 2.0}, small={83})
    out = run_simulated(hist, NoiseModel("gaussian", sigma=0.01), 2143375326, min_change_pct=1.0)
    assert out.status == "culprit_found" and out.culprits == ("c118",)
    (step,) = out.outcome.smaller_steps
    assert step.commit == "c083" and step.size_p < 0.01
    assert step.confirmation.verdict is Verdict.INCONCLUSIVE and step.confirmation.rule is DecisionRule.CAP
    assert not out.outcome.unresolved
    assert not any(n.kind is NoteKind.CONFIRMATION_DISAGREED for n in out.outcome.notes)
