"""Which process measures each member of a job: its runner, made for its kind, on the machines
its configuration names, and shared with the members one process can measure together.

Members that one process measures at once (the `name value` lines of one command, benchmarks
of one Google Benchmark or NVBench binary with the same settings: runners/multi.py) share its
run, one per round for all of them (evaluate/shared.py); cupy members that time kernels share
one GPU worker; any other member runs its own. A group of one shares nothing."""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass, replace
from typing import assert_never

from attrib.evaluate.executors import Executor, PlacingExecutor
from attrib.evaluate.executors.slurm_plan import machine_class
from attrib.evaluate.runners import Runner
from attrib.evaluate.runners.command import CommandRunner
from attrib.evaluate.runners.cupy import CupyRunner, sharing_one_worker
from attrib.evaluate.runners.multi import one_process, process_key
from attrib.evaluate.shared import SharedRuns
from attrib.group_bisection import MemberRun, NextPhase
from attrib.outcome import Member
from attrib.recipe import BenchmarkSpec, Recipe, RunnerKind


def placed(executor: Executor, recipe: Recipe, bench: BenchmarkSpec) -> Executor:
    """The executor a benchmark's rounds and runs go through: with machines of several classes
    (Slurm), on those its configuration names ([slurm.classes]); elsewhere the executor itself
    (one machine: a configuration says nothing about where to run)."""
    if not isinstance(executor, PlacingExecutor) or recipe.slurm is None:
        return executor
    return executor.placed(machine_class(recipe.slurm, bench.config))


def make_runner(bench: BenchmarkSpec, executor: Executor) -> Runner:
    # One case per RunnerKind member; mypy's assert_never fails the build when a member has none.
    match bench.runner:
        case RunnerKind.CUPY:
            return CupyRunner(bench)
        case RunnerKind.GBENCH:
            from attrib.evaluate.runners.gbench import GbenchRunner

            return GbenchRunner(executor, bench)
        case RunnerKind.NVBENCH:
            from attrib.evaluate.runners.nvbench import NvbenchRunner

            return NvbenchRunner(executor, bench)
        case RunnerKind.COMMAND:
            return CommandRunner(executor, bench)
        case _:
            assert_never(bench.runner)


@dataclass(frozen=True)
class MemberRuns:
    """Each member's runner and round context, and the step signal their shared processes take."""

    runs: dict[Member, MemberRun]
    next_phase: NextPhase


def member_runs(
    benches: tuple[BenchmarkSpec, ...],
    recipe: Recipe,
    executor: Executor,
    own: tuple[BenchmarkSpec, Runner],
    wrap: Callable[[Runner], Runner],
) -> MemberRuns:
    """The runs of `benches` through `executor`. `own`: a benchmark whose runner is open
    already (job/run.opened: a benchmark alone's), used rather than made again. `wrap`: around
    every member's runner (the daemon records and replays every call: daemon/recording.py)."""
    together: dict[Hashable, list[BenchmarkSpec]] = {}
    for b in benches:
        key = ("names", b.process, b.config) if b.process else process_key(b)
        together.setdefault(("alone", b.name, b.config) if key is None else key, []).append(b)
    shared: dict[Member, SharedRuns] = {}
    for group in together.values() if len(benches) > 1 else ():  # a group of one shares nothing
        first = group[0]
        if first.process:  # the one command's table, all its members' names
            parent = replace(first, name=first.process, names=tuple(b.name for b in group))
            at = placed(executor, recipe, parent)
            runs = SharedRuns(CommandRunner(at, parent), at.round)
        elif len(group) > 1:
            at = placed(executor, recipe, first)
            runs = SharedRuns(one_process(at, group), at.round)
        else:
            continue
        shared.update((Member(b.name, b.config), runs) for b in group)
    # the cupy members that time kernels: one GPU worker process serves all their kernels
    timed = [b for b in benches if b.cupy is not None and b.cupy.metric == "time"]
    kernels = (
        {Member(b.name, b.config): r for b, r in zip(timed, sharing_one_worker(timed), strict=True)}
        if len(timed) > 1
        else {}
    )
    members: dict[Member, MemberRun] = {}
    for b in benches:
        m = Member(b.name, b.config)  # the same benchmark under two configurations is two members
        if m in shared:
            runs = shared[m]
            members[m] = MemberRun(b, wrap(runs.view(b.name)), runs.round_context(b.name))
        elif m in kernels:
            members[m] = MemberRun(b, wrap(kernels[m]), executor.round)
        else:
            at = placed(executor, recipe, b)
            members[m] = MemberRun(b, wrap(own[1] if b is own[0] else make_runner(b, at)), at.round)

    def next_phase(measuring: Collection[Member] | None) -> None:
        for runs in dict.fromkeys(shared.values()):
            runs.next_phase(None if measuring is None else {m.benchmark for m in measuring if shared.get(m) is runs})

    return MemberRuns(members, next_phase)
