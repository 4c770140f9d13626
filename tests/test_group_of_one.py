"""A benchmark alone and the same benchmark as a group of one take the same decisions from the
same seed: one search, one wiring (bisection.wired), whichever way a driver is asked for. The
outcomes are compared whole (every comparison with its samples and rule, every verdict, note,
culprit, smaller step and open range), less the wall seconds of its phases."""

from __future__ import annotations

from dataclasses import replace

import pytest

from attrib.bisection import bisection
from attrib.core.model import SearchMethod, Status
from attrib.core.stats import TestConfig
from attrib.evaluate.evaluation import Settings
from attrib.evaluate.records import PhaseTimes
from attrib.group_bisection import GroupBisection, MemberRun
from attrib.outcome import Member, Outcome
from attrib.recipe import BenchmarkSpec
from attrib.simulation import NoiseModel, SimBuilder, SimHistory, SimRunner, linear_history

BENCH = BenchmarkSpec(name="sim", runner="command", command=("x",), min_change_pct=2.0)


def _alone(hist: SimHistory, noise: NoiseModel, seed: int, method: SearchMethod) -> Outcome:
    runner = SimRunner(hist, noise, seed)
    return bisection(hist, SimBuilder(hist), runner, BENCH, TestConfig(), seed, method=method).run(hist.good, hist.bad)


def _group_of_one(hist: SimHistory, noise: NoiseModel, seed: int, method: SearchMethod) -> Outcome:
    members = {Member(BENCH.name): MemberRun(BENCH, SimRunner(hist, noise, seed))}
    group = GroupBisection(hist, SimBuilder(hist), members, Settings(TestConfig(), seed, method)).run(hist.good, hist.bad)
    ((member, outcome),) = group.members
    assert member == Member(BENCH.name)
    return outcome


def _decisions(out: Outcome) -> Outcome:
    return replace(out, times=PhaseTimes())  # wall seconds: the machine's, not a decision


CASES = [
    ("one culprit", linear_history(60, {23: 6.0}), NoiseModel(sigma=0.02), 3),
    ("two culprits and a smaller step", linear_history(80, {12: 1.0, 30: 5.0, 61: 4.0}), NoiseModel(sigma=0.01), 7),
    ("a build break before the culprit", linear_history(50, {30: 5.0}, broken={27, 28, 29}), NoiseModel(sigma=0.01), 11),
    ("nothing reproduces", linear_history(40, {}), NoiseModel(sigma=0.01), 5),
]


@pytest.mark.parametrize("method", [SearchMethod.POSTERIOR, SearchMethod.SEQUENTIAL])
@pytest.mark.parametrize(("name", "hist", "noise", "seed"), CASES, ids=[c[0] for c in CASES])
def test_a_benchmark_alone_and_as_a_group_of_one_decide_alike(
    name: str, hist: SimHistory, noise: NoiseModel, seed: int, method: SearchMethod
) -> None:
    alone = _alone(hist, noise, seed, method)
    grouped = _group_of_one(hist, noise, seed, method)
    assert alone.comparisons, "the bisection measured nothing: the comparison below would be empty"
    assert _decisions(grouped) == _decisions(alone)


def test_the_cases_decide_something() -> None:
    # the equality above is worth something only where the searches had decisions to take
    out = _alone(CASES[1][1], CASES[1][2], CASES[1][3], SearchMethod.POSTERIOR)
    assert out.status is Status.CULPRIT_FOUND and len(out.culprits) >= 2
