"""Simulated commit histories and benchmark runs with known truth.

The search driver and the evaluation stage are fed through the same edges they use for real (history: `info`,
`first_parent_chain`, `merge_base`; builder: `build`; runner: `run`), so the scenario benchmark
(benchmarks/scenarios.py) and the tests exercise attrib's real search and statistics. Noise
models are the shapes GPU and CPU timings really show (docs/statistics.md).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attrib.core.model import CommitInfo
from attrib.core.stats import TestConfig
from attrib.evaluate.builds import BuildRecord
from attrib.evaluate.runners import RunResult

NOISE_MODELS = ("gaussian", "lognormal", "heavy", "bimodal", "drift", "spells")


@dataclass
class SimHistory:
    """A main line c000..cNNN (c000 = good), optionally with merged side lines."""

    levels: dict[str, float]  # log level of each commit: where its samples are centred
    parents: dict[str, tuple[str, ...]]
    main: list[str]
    broken: set[str] = field(default_factory=set)
    culprits: list[str] = field(default_factory=list)  # the truth, in history order
    artifacts: dict[str, str] = field(default_factory=dict)  # sha -> binary digest; {}: none declared
    small: list[str] = field(default_factory=list)  # planted steps below the minimum change: no culprits

    @property
    def good(self) -> str:
        return self.main[0]

    @property
    def bad(self) -> str:
        return self.main[-1]

    def info(self, sha: str) -> CommitInfo:
        return CommitInfo(sha, "t" + sha, f"change {sha}", "A U Thor", "a@example.com", "2026-01-01", self.parents[sha])

    def first_parent_chain(self, good: str, bad: str) -> list[str]:
        ancestors = self._ancestors(good)
        chain, cur = [], bad
        while cur not in ancestors:
            chain.append(cur)
            cur = self.parents[cur][0]
        return chain[::-1]

    def merge_base(self, a: str, b: str) -> str:
        ancestors = self._ancestors(a)
        cur = b
        while cur not in ancestors:
            cur = self.parents[cur][0]
        return cur

    def _ancestors(self, sha: str) -> set[str]:
        seen: set[str] = set()
        todo = [sha]
        while todo:
            s = todo.pop()
            if s not in seen:
                seen.add(s)
                todo.extend(self.parents[s])
        return seen


def linear_history(
    n: int,
    steps: dict[int, float],
    broken: set[int] | frozenset[int] = frozenset(),
    *,
    binary_changes: set[int] | frozenset[int] | None = None,
    small: set[int] | frozenset[int] = frozenset(),
) -> SimHistory:
    """n commits after the good one; steps maps a position to its change in percent.

    `binary_changes`: the positions whose build output differs from their parent's (steps are
    always among them); the others build byte-identical artifacts, like docs-only commits.
    None: artifacts are not declared. `small`: step positions below the minimum change, which
    are not culprits."""
    levels: dict[str, float] = {}
    parents: dict[str, tuple[str, ...]] = {}
    main: list[str] = []
    level = 0.0
    for i in range(n + 1):
        sha = f"c{i:03d}"
        level += math.log1p(steps.get(i, 0.0) / 100)
        levels[sha] = level
        parents[sha] = (main[-1],) if main else ()
        main.append(sha)
    culprits = [main[i] for i in sorted(steps) if steps[i] != 0 and i not in small]
    artifacts: dict[str, str] = {}
    if binary_changes is not None:
        changes = set(binary_changes) | set(steps)
        for i, sha in enumerate(main):
            artifacts[sha] = f"bin-{sha}" if i == 0 or i in changes else artifacts[main[i - 1]]
    return SimHistory(levels, parents, main, {main[i] for i in broken}, culprits, artifacts, [main[i] for i in sorted(small)])


class SimBuilder:
    """Builds succeed except for the history's broken commits; counts what it was asked."""

    def __init__(self, history: SimHistory) -> None:
        self.history = history
        self.built: list[str] = []  # the commits asked, in order

    @property
    def fresh_builds(self) -> int:
        return len(self.built)

    def build(self, info: CommitInfo) -> BuildRecord:
        self.built.append(info.sha)
        ok = info.sha not in self.history.broken
        reason = "" if ok else "exit 2 from `make` (simulated)"
        artifact = self.history.artifacts.get(info.sha, "") if ok else ""
        return BuildRecord(
            "k" + info.sha, info.sha, info.tree, ok, reason, "/dev/null", f"/sim/{info.sha}", 0.0, False, artifact
        )


@dataclass
class NoiseModel:
    """Per-sample noise around a commit's level; `sigma` is the log-space scale."""

    kind: str = "gaussian"
    sigma: float = 0.01
    interfere: float = 0.25  # bimodal: fraction of samples slowed
    interfere_size: float = 0.30  # bimodal: by this much
    drift_per_run: float = 0.0  # drift: log-level change of the machine per run
    between: float = 0.0  # sd of one run's own offset (log): spread more samples per run cannot remove
    fail_rate: float = 0.0  # fraction of runs that crash
    # spells: the machine runs `spell` (log) off its level for stretches of `spell_runs` runs, one
    # stretch in three (which ones: a fixed pseudo-random schedule of the run clock). What a
    # frequency state or a neighbour's load does to a real machine for a while: seen on this
    # project's 2-CPU machines as ~7 % faster for a dozen runs, beside a 10 % step.
    spell: float = 0.0
    spell_runs: int = 12

    def samples(self, rng: np.random.Generator, level: float, reps: int, clock: int) -> np.ndarray:
        if self.kind in ("gaussian", "drift", "spells"):
            noise = rng.normal(0.0, self.sigma, reps)
        elif self.kind == "lognormal":
            # right-skewed even in log space: most samples near the floor, a long slow tail
            noise = self.sigma * (rng.lognormal(0.0, 0.75, reps) - 1.0)
        elif self.kind == "heavy":
            noise = self.sigma * rng.standard_t(2.5, reps) / math.sqrt(2.5 / 0.5)
            noise += np.where(rng.random(reps) < 0.03, math.log(3.0), 0.0)  # rare 3x outliers
        elif self.kind == "bimodal":
            noise = rng.normal(0.0, self.sigma, reps)
            noise += np.where(rng.random(reps) < self.interfere, math.log1p(self.interfere_size), 0.0)
        else:
            raise ValueError(f"unknown noise model {self.kind!r}; expected one of {NOISE_MODELS}")
        offset = rng.normal(0.0, self.between) if self.between else 0.0
        if self.spell and _in_spell(clock // self.spell_runs):
            offset += self.spell
        return np.exp(level + clock * self.drift_per_run + offset + noise) * 1e-3


def _in_spell(stretch: int) -> bool:
    """Whether the machine is in a spell during this stretch of runs: one in three, by a fixed
    hash of its index (the same schedule for every runner: the search's timing varies)."""
    return (stretch * 2654435761 + 12345) % 2**32 % 3 == 0


class SimRunner:
    """Blocks of `reps` samples around the commit's level, drawn from a seeded noise model.

    With `run_overhead_s` and `sample_s` a run also reports a simulated wall time (start-up
    plus its samples), which `wall_s` adds up: what adaptive blocks trade."""

    def __init__(
        self,
        history: SimHistory,
        noise: NoiseModel,
        seed: int,
        reps: int = 10,
        run_overhead_s: float = 0.0,
        sample_s: float = 0.0,
    ) -> None:
        self.history = history
        self.noise = noise
        self.reps = reps
        self.rng = np.random.default_rng(seed)
        self.clock = 0  # runs so far: drift is a function of time, and time is runs here
        self.samples = 0
        self.run_overhead_s = run_overhead_s
        self.sample_s = sample_s
        self.wall_s = 0.0

    def with_reps(self, reps: int) -> SimRunner | None:
        """Another number of samples per run; this runner itself, so its counts stay whole.
        Only a runner that simulates what a run costs is resizable (else there is nothing to trade)."""
        if not self.sample_s:
            return None
        self.reps = reps
        return self

    def run(self, checkout: Path) -> RunResult:
        self.clock += 1
        if self.noise.fail_rate and self.rng.random() < self.noise.fail_rate:
            return RunResult((), "exit 139: segmentation fault (simulated)", 0.0)
        level = self.history.levels[checkout.name]
        values = self.noise.samples(self.rng, level, self.reps, self.clock)
        self.samples += values.size
        duration = self.run_overhead_s + self.reps * self.sample_s
        self.wall_s += duration
        return RunResult(tuple(float(v) for v in values), "", duration, sample_s=self.reps * self.sample_s or None)


@dataclass(frozen=True)
class SimOutcome:
    """What the scenario benchmark scores: the named culprits and what it cost."""

    status: str
    culprits: tuple[str, ...]
    ambiguous: tuple[tuple[str, ...], ...]  # per culprit, the commits it is ambiguous with
    builds: int
    samples: int
    runs: int
    outcome: object  # the search driver's Outcome, for deeper checks
    posteriors: tuple[float, ...] = ()  # per culprit


def run_simulated(
    history: SimHistory,
    noise: NoiseModel,
    seed: int,
    config: TestConfig | None = None,
    min_change_pct: float = 2.0,
    reps: int = 10,
    probes: int = 1,
    method: str = "posterior",
) -> SimOutcome:
    """attrib's real search and evaluation on a simulated history: the function benchmarks and tests call."""
    from attrib.bisection import bisection
    from attrib.recipe import BenchmarkSpec, RunnerKind

    bench = BenchmarkSpec(name="sim", runner=RunnerKind.COMMAND, command=("sim",), reps=reps, min_change_pct=min_change_pct)
    builder = SimBuilder(history)
    runner = SimRunner(history, noise, seed, reps=reps)
    from attrib.core.model import SearchMethod

    driver = bisection(
        history, builder, runner, bench, config or TestConfig(), seed, probes=probes, method=SearchMethod(method)
    )
    out = driver.run(history.good, history.bad)
    return SimOutcome(
        status=out.status.value,
        culprits=tuple(c.commit for c in out.culprits),
        ambiguous=tuple(c.ambiguous_with for c in out.culprits),
        builds=builder.fresh_builds,
        samples=runner.samples,
        runs=runner.clock,
        outcome=out,
        posteriors=tuple(c.posterior for c in out.culprits),
    )


@dataclass
class SimGroup:
    """A group of benchmarks over one simulated history: one main line, each member's own
    levels (its own steps), and one process that measures them all."""

    members: dict[str, SimHistory]  # benchmark name -> its history (the same commits)

    @property
    def first(self) -> SimHistory:
        return next(iter(self.members.values()))


def group_history(n: int, steps: dict[str, dict[int, float]], broken: set[int] | frozenset[int] = frozenset()) -> SimGroup:
    """n commits after the good one; `steps` maps each member to its steps (position -> percent),
    {} for a member the range leaves flat."""
    return SimGroup({name: linear_history(n, s, broken) for name, s in steps.items()})


class SimGroupRunner:
    """One simulated process measures every member of a group: each run gives each member a
    block of `reps` samples around its own level, drawn with the machine's state of that run
    (drift, spells) shared by all of them. Counts the samples it printed per member and runs."""

    def __init__(self, group: SimGroup, noise: NoiseModel, seed: int, reps: int = 10) -> None:
        self.group = group
        self.noise = noise
        self.reps = reps
        self.rng = np.random.default_rng(seed)
        self.clock = 0
        self.samples: dict[str, int] = dict.fromkeys(group.members, 0)

    def run_all(self, checkout: Path, names: Collection[str] | None = None) -> dict[str, RunResult]:
        """Every member, whoever is still measuring (`names`), as a `name value` command does."""
        self.clock += 1
        if self.noise.fail_rate and self.rng.random() < self.noise.fail_rate:
            return {name: RunResult((), "exit 139: segmentation fault (simulated)", 0.0) for name in self.group.members}
        out: dict[str, RunResult] = {}
        for name, history in self.group.members.items():
            values = self.noise.samples(self.rng, history.levels[checkout.name], self.reps, self.clock)
            self.samples[name] += values.size
            out[name] = RunResult(tuple(float(v) for v in values), "", 0.0)
        return out


@dataclass(frozen=True)
class SimGroupOutcome:
    """What the scenario benchmark scores of a group bisection: per member its named culprits
    and samples, and what the group cost."""

    members: dict[str, SimOutcome]
    builds: int
    runs: int  # processes run (each measures every member)
    outcome: object  # the GroupOutcome
    compiled: int = 0  # builds of commits without a prebuilt binary (`prebuilt`): all of them without


def run_simulated_group(
    group: SimGroup,
    noise: NoiseModel,
    seed: int,
    config: TestConfig | None = None,
    min_change_pct: float = 2.0,
    reps: int = 10,
    deadline: float | None = None,
    clock: Callable[[], float] | None = None,
    prebuilt: frozenset[str] = frozenset(),
) -> SimGroupOutcome:
    """attrib's real group bisection (shared builds and runs, the group search) on a simulated
    group; `deadline` (seconds of `clock`) as `--budget` gives it; `prebuilt`: the commits
    whose binary CI published (`[build] prebuilt`), which the search prefers."""
    from attrib.evaluate.evaluation import Settings
    from attrib.evaluate.shared import SharedRuns
    from attrib.group_bisection import GroupBisection, shared_members
    from attrib.outcome import Member
    from attrib.recipe import BenchmarkSpec, RunnerKind

    benches = {
        Member(name): BenchmarkSpec(name=name, runner=RunnerKind.COMMAND, command=("sim",), reps=reps, min_change_pct=min_change_pct)
        for name in group.members
    }
    builder = SimBuilder(group.first)
    runner = SimGroupRunner(group, noise, seed, reps=reps)
    runs = SharedRuns(runner)
    settings = Settings(config or TestConfig(), seed, deadline=deadline, clock=clock or time.monotonic, prebuilt=prebuilt)
    driver = GroupBisection(
        group.first, builder, shared_members(runs, benches), settings,
        next_phase=lambda members: runs.next_phase(None if members is None else {m.benchmark for m in members}),
    )  # fmt: skip
    out = driver.run(group.first.good, group.first.bad)
    members = {
        m.benchmark: SimOutcome(
            status=o.status.value,
            culprits=tuple(c.commit for c in o.culprits),
            ambiguous=tuple(c.ambiguous_with for c in o.culprits),
            builds=builder.fresh_builds,
            samples=sum(len(r.samples) for r in o.commits.values()),  # what this member's tests drew
            runs=runner.clock,
            outcome=o,
            posteriors=tuple(c.posterior for c in o.culprits),
        )
        for m, o in out.members
    }
    compiled = sum(sha not in prebuilt for sha in builder.built)
    return SimGroupOutcome(members, builder.fresh_builds, runner.clock, out, compiled)
