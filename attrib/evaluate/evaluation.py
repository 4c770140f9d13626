"""The evaluation stage: candidates and a reference in, one `Comparison` per candidate out.

`Evaluation` is what the search asks (segment/scope.Evidence) and job/run.py builds; its parts are
each a module of this package:

  twins.py     builds (concurrently up to `build_width`) and what byte-identical artifacts
               settle without a sample;
  sizing.py    the samples per run, chosen once from the preflight's first rounds;
  rounds.py    measurement rounds: single blocks, and comparisons' paired sequential tests;
  accounts.py  what was measured and decided, and the time each phase took;
  records.py   the frozen records all of them hand out.

What it must never do: choose which commits to test (that is the search, bisection.py and
segment/), hold statistical policy of its own (core/stats.py), or word what it did (progress
events carry data; report/sentences.py words them). It stops measuring at a deadline
(`--budget`): what is then still open is INCONCLUSIVE by DecisionRule.BUDGET.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace

from attrib.core.blocks import BlockChoice
from attrib.core.model import BuildRecord, CommitInfo, DecisionRule, Purpose, SearchMethod, Verdict
from attrib.core.stats import TestConfig, min_change_shift, shift_estimate
from attrib.evaluate.accounts import CommitSource, Ledger
from attrib.evaluate.records import Account, CommitRecord, Comparison, PhaseTimes
from attrib.evaluate.rounds import Rounds
from attrib.evaluate.runners import Runner
from attrib.evaluate.sizing import BlockSizing
from attrib.evaluate.twins import Builder, Builds
from attrib.events import Events, NullEvents
from attrib.recipe import BenchmarkSpec


def shaped(config: TestConfig, method: SearchMethod, bench: BenchmarkSpec) -> TestConfig:
    """The test configuration a search of `method` compares under: the one place it is shaped."""
    if method is SearchMethod.POSTERIOR:
        # The indifference zone decides every comparison: <= ignore is GOOD, >= the minimum BAD.
        return replace(config, size_check=False, ignore=min_change_shift(bench.ignore_pct))
    # Every "bad" the search reads is sized: below the minimum change it is a smaller step.
    return replace(config, size_check=True)


@dataclass(frozen=True)
class Settings:
    """How one bisection runs, the same for each of its members and for a descent into a roll:
    the one settings record, built once by the caller (job/run.py, simulation.py, bisection()) and
    read by every part that needs one of them (Stage, Bisection, its segment searches)."""

    config: TestConfig  # the tests' settings, before a search method shapes them (`shaped`)
    seed: int  # member i of a group draws from seed + i (a benchmark alone: seed)
    method: SearchMethod = SearchMethod.POSTERIOR
    probes: int = 1  # commits proposed per search step (--probes), built concurrently
    deadline: float | None = None  # in `clock`'s seconds (--budget); None: none
    clock: Callable[[], float] = time.monotonic
    paths: tuple[str, ...] = ()  # [search] paths: only commits touching them are candidates
    prebuilt: frozenset[str] = frozenset()  # [build] prebuilt: commits whose binary CI published


@dataclass(frozen=True)
class Stage:
    """What every evaluation of one member of a bisection shares (its runner, its benchmark,
    the settings); `over(graph, builder)` is the evaluation of one commit graph: the range, or a
    rolled dependency's (bisection.py descends into it with the same stage). `member`: its
    index in its group, which offsets its seed."""

    runner: Runner
    bench: BenchmarkSpec
    settings: Settings
    events: Events | None = None
    round_context: Callable[[], AbstractContextManager[object]] | None = None
    member: int = 0

    def over(self, commits: CommitSource, builder: Builder) -> Evaluation:
        """The evaluation a search of `method` reads: its configuration `shaped`, builds as
        wide as its probes, and, for the posterior search, adaptive blocks."""
        s = self.settings
        return Evaluation(
            commits, builder, self.runner, self.bench, shaped(s.config, s.method, self.bench),
            random.Random(s.seed + self.member), self.events, build_width=max(1, s.probes),
            round_context=self.round_context, deadline=s.deadline, clock=s.clock,
            adapt_blocks=s.method is SearchMethod.POSTERIOR,
        )  # fmt: skip


class Evaluation:
    """Builds, blocks and comparisons of the commits a search asks about, and their account."""

    def __init__(
        self,
        commits: CommitSource,
        builder: Builder,
        runner: Runner,
        bench: BenchmarkSpec,
        config: TestConfig,
        rng: random.Random,
        events: Events | None = None,
        *,
        build_width: int = 1,
        round_context: Callable[[], AbstractContextManager[object]] | None = None,
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        adapt_blocks: bool = False,
    ) -> None:
        self.bench = bench
        self.config = config  # the default of every comparison: `shaped` for the search's method
        self.events: Events = events or NullEvents()
        self.ledger = Ledger(commits, self.events)
        self.sizing = BlockSizing(runner, bench, adapt_blocks)
        self.builds = Builds(builder, self.ledger, self.events, clock, lambda: self.sizing.runner, build_width)
        self.rounds = Rounds(
            self.ledger, self.builds, self.sizing, bench, rng, self.events, round_context or nullcontext, clock, deadline
        )

    # --- what the search asks (segment/scope.Evidence) ------------------------------------

    @property
    def out_of_time(self) -> bool:
        return self.rounds.out_of_time

    @property
    def times(self) -> PhaseTimes:
        return self.ledger.times

    def build(self, sha: str, info: CommitInfo | None = None) -> BuildRecord:
        return self.builds.build(sha, info)

    def stand_in(self, sha: str) -> str:
        return self.builds.stand_in(sha)

    def note_traps(self, a: str, b: str) -> None:
        """Two commits the search found at one level: if their artifacts differ only by a known
        trap (a timestamp, a build path), say so, as a comparison of the two would."""
        self.builds.note_traps(a, b)

    def blocks(self, shas: Sequence[str]) -> list[bool]:
        """One more block of each of `shas` in one shared round (rounds.Rounds.blocks): what
        parallel probing of the posterior search shortens."""
        return self.rounds.blocks(shas)

    def levels(self, sha: str) -> tuple[list[float], list[int]]:
        """`sha`'s block levels of the current size and, per block, the round it ran in: blocks
        of two commits with the same round ran back to back, on one machine in one state (a
        comparison's pair, a search's shared round)."""
        return self.ledger.levels(sha, self.sizing.reps)

    def adapt_blocks(self) -> BlockChoice:
        """Once per bisection, from the preflight's runs: the samples per run (sizing.py)."""
        self.rounds.adapt_blocks()
        assert self.sizing.choice is not None
        return self.sizing.choice

    def compare(
        self,
        candidates: Sequence[str],
        reference: str,
        purpose: Purpose,
        config: TestConfig | None = None,
        *,
        resume: Mapping[str, Sequence[float]] | None = None,
        alongside: Sequence[str] = (),
    ) -> list[Comparison]:
        """Sequential tests of each candidate against one reference, in shared rounds.

        Each round runs the reference and every undecided candidate once, in a fresh random
        order; each candidate's test sees its own paired shifts and stops on its own.
        `alongside` run in every round too, outside the test: the posterior search's reference,
        whose block of the round is what the machine did in it (core/posterior.round_corrected).
        `resume` continues earlier tests from their shifts (give a config with a higher cap)."""
        return self.rounds.compare(candidates, reference, purpose, config or self.config, resume, alongside)

    def same_artifact(self, candidate: str, reference: str, purpose: Purpose, verdict: Verdict, twin: str) -> Comparison:
        """A verdict the search settled with no samples of `candidate`: byte-identical to `twin`,
        whose blocks are its data (the posterior search's form of the same-artifact verdict)."""
        return self.ledger.keep(
            Comparison(
                candidate, reference, purpose, verdict, (), 0.0, 0.0, shift_estimate([0.0]),
                rule=DecisionRule.SAME_ARTIFACT, same_artifact_as=twin,
            )  # fmt: skip
        )

    def account(self, drift_of: Sequence[str]) -> Account:
        """Everything measured so far, for the outcome; drift is reported for `drift_of`."""
        drift = self.ledger.drift(drift_of, self.sizing.reps, self.bench.direction)
        return self.ledger.account(drift, self.out_of_time, self.sizing.recorded())

    # --- for the edges that read what was measured (job/, tests) -------------------------

    def record(self, sha: str, info: CommitInfo | None = None) -> CommitRecord:
        """What was measured of `sha` so far (registering it, with `info` if given)."""
        return self.ledger.record(sha, info)

    @property
    def records(self) -> dict[str, CommitRecord]:
        return self.ledger.records
