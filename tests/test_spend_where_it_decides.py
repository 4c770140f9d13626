"""Issue 12 on simulated histories and real files: same artifact same verdict, smaller steps
are never culprits, a time budget ends the search with its smallest proved range, and the
artifact traps (timestamps, build paths) are recognised."""

from __future__ import annotations

import itertools
import random
import tracemalloc

import pytest

from attrib.bisection import bisection
from attrib.core.blocks import BlockReason
from attrib.core.model import DecisionRule, Purpose, SearchMethod, Status, UnresolvedCause, Verdict
from attrib.core.stats import TestConfig
from attrib.evaluate.artifacts import (
    MAX_DIFF_BYTES,
    Artifacts,
    ArtifactTrap,
    diagnose,
    explain_difference,
    hash_artifacts,
)
from attrib.evaluate.evaluation import Evaluation
from attrib.recipe import BenchmarkSpec
from attrib.report.sentences import unresolved_text
from attrib.simulation import NoiseModel, SimBuilder, SimRunner, linear_history, run_simulated

NOISE = NoiseModel("gaussian", sigma=0.01)


def test_identical_binaries_are_decided_without_samples():
    changes = {9, 33, 61}  # the culprit (40) also changes the binary; every other commit is docs
    hist = linear_history(80, {40: 4.0}, binary_changes=changes)
    with_art = run_simulated(hist, NOISE, 2, min_change_pct=2.0)
    out = with_art.outcome
    assert list(with_art.culprits) == hist.culprits and with_art.status == "culprit_found"
    art = hist.artifacts
    for comp in out.comparisons:
        if art[comp.candidate] == art[comp.reference]:
            assert comp.samples == 0 and comp.rule is DecisionRule.SAME_ARTIFACT, comp
    assert any(c.same_artifact_as for c in out.comparisons) and out.samples_saved > 0
    # Only the five distinct binaries (and the references) ever draw samples.
    measured = {sha for sha, rec in out.commits.items() if rec.samples}
    assert len({art[s] for s in measured}) == len(measured)
    plain = run_simulated(linear_history(80, {40: 4.0}), NOISE, 2, min_change_pct=2.0)
    assert list(plain.culprits) == hist.culprits and with_art.samples < plain.samples


@pytest.mark.parametrize("method", ["posterior", "sequential"])
@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.75])
def test_a_step_below_the_minimum_is_never_a_culprit(fraction, method):
    # Issue 19's rule 1 (the posterior search, the default): a step at or below ignore_below_pct
    # (half the minimum here) is never named; one inside the zone (3/4 of the minimum) may be,
    # and is then marked below the minimum when its estimate is. The sequential search, kept
    # for a release, names neither.
    in_zone = method == "posterior" and 2.0 * fraction > 1.0
    named_small, exact = 0, 0
    for seed in range(8):
        hist = linear_history(60, {12: 2.0 * fraction, 40: 4.0}, small={12})
        out = run_simulated(hist, NOISE, seed, min_change_pct=2.0, method=method)
        named_small += "c012" in out.culprits
        exact += out.status == "culprit_found" and list(out.culprits) == ["c040"]
        for step in out.outcome.smaller_steps:
            assert step.size_p < 0.5 and step.commit == "c012"
        if in_zone:
            assert "c040" in out.culprits, seed  # naming the small step never costs the real one
    assert named_small == 0 or in_zone
    assert exact >= 7


# The deadline is in clock readings, not work: the posterior search reads the clock less per
# block (no round-by-round test), so its deadline that falls inside the first segment is smaller.
@pytest.mark.parametrize(("method", "deadline"), [(SearchMethod.SEQUENTIAL, 120.0), (SearchMethod.POSTERIOR, 40.0)])
def test_a_budget_ends_the_search_with_the_open_range_and_what_more_time_buys(method, deadline):
    hist = linear_history(120, {77: 4.0})
    bench = BenchmarkSpec(name="sim", runner="command", command=("sim",), min_change_pct=2.0)
    ticks = itertools.count()
    clock = lambda: float(next(ticks))  # noqa: E731  # one "second" per reading: deterministic
    engine = bisection(
        hist,
        SimBuilder(hist),
        SimRunner(hist, NOISE, 1),
        bench,
        TestConfig(),
        1,
        deadline=deadline,
        clock=clock,
        method=method,
    )
    out = engine.run(hist.good, hist.bad)
    assert out.out_of_time and out.status is Status.INCONCLUSIVE and not out.culprits
    (open_range,) = out.unresolved
    assert "c077" in open_range.commits and len(open_range.commits) < 120  # narrowed, not just given up
    (cause,) = open_range.causes
    assert cause.kind is UnresolvedCause.OUT_OF_TIME and cause.rounds >= 1 and cause.seconds
    why, resolve = unresolved_text(open_range.causes, 2.0, 60)
    assert "budget ran out" in why and "more comparisons" in resolve and "--budget" in resolve
    assert out.times.measure_s > 0 and out.times.comparisons > 0


def test_a_comparison_running_at_the_deadline_ends_inconclusive_by_the_budget():
    hist = linear_history(10, {5: 0.2})  # far below the minimum change: many rounds
    bench = BenchmarkSpec(name="sim", runner="command", command=("sim",), min_change_pct=0.25)
    ticks = itertools.count()
    ev = Evaluation(
        hist, SimBuilder(hist), SimRunner(hist, NOISE, 1), bench, TestConfig(), random.Random(1),
        deadline=40.0, clock=lambda: float(next(ticks)),
    )  # fmt: skip
    (comp,) = ev.compare(["c010"], "c000", Purpose.PROBE)
    assert (comp.verdict, comp.rule) == (Verdict.INCONCLUSIVE, DecisionRule.BUDGET)
    assert 0 < len(comp.diffs) < 20 and comp.samples == 20 * len(comp.diffs)


def test_timestamps_and_build_paths_explain_a_difference_and_code_does_not():
    a = b"\x7fELF code built Dec  1 2026 12:01:07 in /w/checkouts/aaaa/bench.c tail"
    b = b"\x7fELF code built Dec  1 2026 12:03:55 in /w/checkouts/bbbb/bench.c tail"
    assert explain_difference(a, b, "/w/checkouts/aaaa", "/w/checkouts/bbbb") == (
        ArtifactTrap.BUILD_PATH,
        ArtifactTrap.TIMESTAMP,
    )
    assert explain_difference(a, a.replace(b"12:01:07", b"12:09:09")) == (ArtifactTrap.TIMESTAMP,)
    assert explain_difference(a, a.replace(b"code", b"CODE")) == ()  # a real difference
    assert explain_difference(a, a) == ()


def test_hashing_is_by_content_and_a_glob_matching_nothing_says_so(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for root, stamp in ((one, "2026-12-01T10:00:00"), (two, "2026-12-01T11:30:00")):
        (root / "lib").mkdir(parents=True)
        (root / "bench").write_bytes(b"same code")
        (root / "lib" / "k.so").write_text(f"kernel, built {stamp}")
    a, b = hash_artifacts(one, ["bench", "lib/*.so"]), hash_artifacts(two, ["bench", "lib/*.so"])
    assert isinstance(a, Artifacts) and isinstance(b, Artifacts)
    assert a.digest != b.digest and dict(a.files)["bench"] == dict(b.files)["bench"]
    assert diagnose(one, two, a, b) == (ArtifactTrap.TIMESTAMP,)
    (two / "lib" / "k.so").touch()  # times are no content
    assert hash_artifacts(two, ["bench", "lib/*.so"]) == b
    missing = hash_artifacts(one, ["bench", "out/*.bin"])
    assert missing == "[build] artifacts 'out/*.bin' matched no file after the build"


def test_a_pair_of_large_artifacts_is_not_read_to_be_diagnosed(tmp_path):
    """Issue 40, point 7: diagnose read both files whole before its MAX_DIFF_BYTES check (a
    1 GiB pair: 1.1 GiB). Two sparse files of twice the bound, differing only by a timestamp:
    their sizes alone say "not diagnosed", and what is allocated stays far below one of them
    (tracemalloc's peak: Python's own allocations, not the machine's load)."""
    roots = tmp_path / "one", tmp_path / "two"
    for root, stamp in zip(roots, (b"2026-12-01T10:00:00", b"2026-12-01T11:30:00"), strict=True):
        root.mkdir()
        with (root / "bench").open("wb") as f:
            f.write(b"\x7fELF built " + stamp)
            f.truncate(2 * MAX_DIFF_BYTES)  # sparse: no disk, zeros when read
    a, b = (Artifacts(r.name, (("bench", r.name),)) for r in roots)
    tracemalloc.start()
    try:
        assert diagnose(*roots, a, b) == ()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak
    # within the bound the same pair is diagnosed, read once each
    for root in roots:
        with (root / "bench").open("r+b") as f:
            f.truncate(4096)
    assert diagnose(*roots, a, b) == (ArtifactTrap.TIMESTAMP,)


def test_a_pair_identical_to_the_decided_pair_takes_its_data():
    # issue 39: the binary changes only at the culprit, so every commit before it is good's
    # binary and every one from it on is bad's; the confirmation of culprit^ against culprit is
    # then the preflight's pair again, resumed from its paired shifts, and a search round whose
    # every commit turned out a twin measures no reference block beside nothing
    hist = linear_history(60, {37: 4.0}, binary_changes=set())
    with_art = run_simulated(hist, NOISE, 4, min_change_pct=2.0)
    out = with_art.outcome
    assert list(with_art.culprits) == ["c037"] and with_art.status == "culprit_found"
    pre = next(c for c in out.comparisons if c.purpose is Purpose.PREFLIGHT)
    (confirm,) = [c for c in out.comparisons if c.purpose is Purpose.CONFIRM]
    assert (confirm.candidate, confirm.reference) == (pre.candidate, pre.reference) == (hist.bad, hist.good)
    assert confirm.diffs[: len(pre.diffs)] == pre.diffs and confirm.samples < 2 * 10 * len(confirm.diffs)
    plain = run_simulated(linear_history(60, {37: 4.0}), NOISE, 4, min_change_pct=2.0)
    assert list(plain.culprits) == ["c037"]
    assert with_art.samples <= 0.4 * plain.samples, (with_art.samples, plain.samples)



ADAPTIVE = BenchmarkSpec(name="sim", runner="command", command=("sim", "{reps}"), reps=10, min_change_pct=2.0)
INSIDE_RUNS = NoiseModel("gaussian", sigma=0.03)  # with a costly start: longer runs (50) predicted faster


def _adaptive_runner(hist, seed):
    return SimRunner(hist, INSIDE_RUNS, seed, reps=10, run_overhead_s=1.0, sample_s=0.001)


@pytest.mark.parametrize("seed", [0, 4])
def test_a_search_of_twins_keeps_the_preflights_block_size_and_its_data(seed):
    # issue 39 on the real CLI: the preflight decides in 3-4 rounds of 10, before the size is
    # chosen. The binary changes only at the culprit, so every commit the search asks is a twin
    # of good or bad and needs no block: the size is never chosen (a new one would only measure
    # both ends again, 3 blocks of 50 each), and the confirmation of culprit^ against culprit,
    # the preflight's pair of binaries again, resumes its shifts at their size. The same history
    # with a binary per commit chooses 50 (the choice is unchanged where blocks are needed).
    outs = {}
    for identical in (True, False):
        hist = linear_history(40, {20: 10.0}, **({"binary_changes": set()} if identical else {}))
        runner = _adaptive_runner(hist, seed)
        out = bisection(hist, SimBuilder(hist), runner, ADAPTIVE, TestConfig(), seed, method=SearchMethod.POSTERIOR).run(hist.good, hist.bad)
        assert out.status is Status.CULPRIT_FOUND and [c.commit for c in out.culprits] == hist.culprits
        outs[identical] = (out, runner)
    out, runner = outs[True]
    assert out.blocks is not None and (out.blocks.reason, out.blocks.reps) == (BlockReason.UNNEEDED, 10)
    pre = next(c for c in out.comparisons if c.purpose is Purpose.PREFLIGHT)
    (confirm,) = [c for c in out.comparisons if c.purpose is Purpose.CONFIRM]
    assert (confirm.candidate, confirm.reference) == (pre.candidate, pre.reference)
    assert confirm.diffs[: len(pre.diffs)] == pre.diffs and len(confirm.diffs) > len(pre.diffs)
    assert confirm.samples == 2 * 10 * (len(confirm.diffs) - len(pre.diffs))  # both sides, blocks of 10
    plain, plain_runner = outs[False]
    assert plain.blocks is not None and (plain.blocks.reason, plain.blocks.reps) == (BlockReason.CHOSEN, 50)
    assert runner.samples <= 0.1 * plain_runner.samples, (runner.samples, plain_runner.samples)


def test_a_confirmation_of_a_pair_decided_before_a_new_block_size_resumes_at_its_size():
    # the pair was decided at 10; the size became 50 since (the search needed blocks): the
    # confirmation of the same pair joins the pair's shifts, so its rounds are at 10 too, and
    # the runner is back at 50 for what follows
    hist = linear_history(40, {20: 10.0})
    runner = _adaptive_runner(hist, 4)
    ev = Evaluation(hist, SimBuilder(hist), runner, ADAPTIVE, TestConfig(), random.Random(1), adapt_blocks=True)
    (pre,) = ev.compare([hist.bad], hist.good, Purpose.PREFLIGHT)
    assert pre.verdict is Verdict.BAD and len(pre.diffs) < 4  # decided before the size is due
    assert ev.adapt_blocks().reps == 50
    (confirm,) = ev.compare([hist.bad], hist.good, Purpose.CONFIRM)
    assert confirm.verdict is Verdict.BAD and confirm.diffs[: len(pre.diffs)] == pre.diffs
    assert confirm.samples == 2 * 10 * (len(confirm.diffs) - len(pre.diffs)) > 0
    assert runner.reps == 50 and ev.levels(hist.good)[0] == []  # no block of 50 was drawn
    (again,) = ev.compare(["c010"], hist.good, Purpose.PROBE)  # a new pair: at the chosen size
    assert again.samples == 2 * 50 * len(again.diffs) > 0
