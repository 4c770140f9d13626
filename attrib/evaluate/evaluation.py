"""The evaluation stage: candidates and a reference in, one `Comparison` per candidate out.

It builds what is asked for (concurrently up to `build_width`), measures the reference and
every undecided candidate in interleaved rounds, in a fresh random order each round, and feeds
each candidate's paired shifts to the sequential test of core/stats.py until it decides. It
keeps what was measured (`CommitRecord`s) so later comparisons pool their noise history and
the result can show every sample.

What it must never do: choose which commits to test (that is the search driver,
bisection.py), or hold statistical policy of its own (sigma, clipping, caps: core/stats.py).
A build or benchmark failure is that commit's SKIP, never an exception out of here.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from attrib.core.model import CommitInfo, Purpose, Verdict
from attrib.core.stats import (
    Estimate,
    TestConfig,
    block_level,
    block_shift,
    decide,
    level_drift,
    min_change_shift,
    oriented_logs,
    shift_estimate,
    to_pct,
)
from attrib.evaluate.builds import BuildRecord
from attrib.evaluate.runners import Runner, RunResult
from attrib.events import Events, NullEvents
from attrib.recipe import BenchmarkSpec

MAX_FAILED_RUNS = 3  # per commit and comparison: then the commit is untestable (skip)


class CommitSource(Protocol):
    """Where commit metadata comes from (the git repository, or a simulated history)."""

    def info(self, sha: str) -> CommitInfo: ...


class Builder(Protocol):
    """Turns a commit into a build record (a checkout with its build commands run, or not)."""

    def build(self, commit: CommitInfo) -> BuildRecord: ...


@dataclass(frozen=True)
class Comparison:
    """One sequential test of a candidate against a reference."""

    candidate: str
    reference: str
    purpose: Purpose
    verdict: Verdict
    diffs: tuple[float, ...]  # per-round oriented log shifts, candidate - reference
    llr: float
    sigma: float
    estimate: Estimate
    reason: str = ""  # why it is a skip


@dataclass
class CommitRecord:
    info: CommitInfo
    build: BuildRecord | None = None
    samples: list[float] = field(default_factory=list)
    blocks: list[float] = field(default_factory=list)  # per run: oriented log level, in time order
    failed_runs: list[str] = field(default_factory=list)
    excluded: Counter[str] = field(default_factory=Counter)  # samples the runner flagged, by reason
    nodes: list[str] = field(default_factory=list)  # per usable run, the node it ran on (slurm; "" here)


@dataclass(frozen=True)
class Drift:
    commit: str
    blocks: int
    change_pct: float  # level of its last blocks against its first ones


class Evaluation:
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
    ) -> None:
        self.commits = commits
        self.round_context = round_context or nullcontext  # Executor.round: one round, one machine
        self.builder = builder
        self.runner = runner
        self.bench = bench
        self.config = config
        self.rng = rng
        self.events: Events = events or NullEvents()
        self.build_width = max(1, build_width)
        self.delta = min_change_shift(bench.min_change_pct)
        self.records: dict[str, CommitRecord] = {}
        self.comparisons: list[Comparison] = []
        self.rounds = 0  # measurement rounds, in sequence: what parallel probing shortens

    # --- builds and single runs -----------------------------------------------------------

    def record(self, sha: str, info: CommitInfo | None = None) -> CommitRecord:
        if sha not in self.records:
            self.records[sha] = CommitRecord(info or self.commits.info(sha))
        return self.records[sha]

    def build(self, sha: str) -> BuildRecord:
        rec = self.record(sha)
        if rec.build is None:
            self.events.build_started(rec.info)
            rec.build = self.builder.build(rec.info)
            self.events.build_finished(rec.info, rec.build)
        return rec.build

    def build_all(self, shas: Sequence[str]) -> None:
        """Build several commits, concurrently up to build_width (builds are independent)."""
        todo = [s for s in dict.fromkeys(shas) if self.record(s).build is None]
        if self.build_width > 1 and len(todo) > 1:
            with ThreadPoolExecutor(max_workers=self.build_width) as pool:
                list(pool.map(self.build, todo))
        else:
            for sha in todo:
                self.build(sha)

    def measure(self, sha: str) -> RunResult:
        rec = self.record(sha)
        assert rec.build is not None and rec.build.ok
        result = self.runner.run(Path(rec.build.checkout))
        rec.excluded.update(result.excluded)
        if result.ok:
            rec.nodes.append(result.node)
            rec.samples.extend(result.samples)
            rec.blocks.append(block_level(oriented_logs(result.samples, self.bench.direction), self.bench.block_statistic))
        else:
            rec.failed_runs.append(result.error)
        return result

    # --- comparisons ----------------------------------------------------------------------

    def compare(
        self,
        candidates: Sequence[str],
        reference: str,
        purpose: Purpose,
        config: TestConfig | None = None,
        *,
        resume: Mapping[str, Sequence[float]] | None = None,
    ) -> list[Comparison]:
        """Sequential tests of each candidate against one reference, in shared rounds.

        Each round runs the reference and every undecided candidate once, in a fresh random
        order; each candidate's test sees its own paired shifts and stops on its own.
        `resume` continues earlier tests from their shifts (give a config with a higher cap)."""
        config = config or self.config
        self.build_all([reference, *candidates])
        results: dict[str, Comparison] = {}
        for cand in candidates:
            for sha in (reference, cand):
                build = self.record(sha).build
                if build is not None and not build.ok and cand not in results:
                    why = f"{self.record(sha).info.short} did not build: {build.reason}"
                    results[cand] = self._finish(cand, reference, purpose, Verdict.SKIP, [], 0.0, 0.0, why)
        active = [c for c in dict.fromkeys(candidates) if c not in results]
        diffs: dict[str, list[float]] = {c: list((resume or {}).get(c, ())) for c in active}
        failures: Counter[str] = Counter()
        successes: Counter[str] = Counter()

        def hopeless(sha: str) -> bool:
            # A rare crash is noise; a commit whose runs fail as often as they succeed is broken.
            return failures[sha] >= MAX_FAILED_RUNS and failures[sha] > successes[sha]

        history = [c.diffs for c in self.comparisons if len(c.diffs) >= 2]
        ref = self.record(reference)
        while active:
            order = [reference, *active]
            self.rng.shuffle(order)  # order-balanced on average: no side always runs first
            with self.round_context():  # slurm: one allocation on one node, so the pairing holds
                runs = {sha: self.measure(sha) for sha in order}
            self.rounds += 1
            if not runs[reference].ok:
                failures[reference] += 1
                if hopeless(reference):
                    why = f"the reference {ref.info.short}'s benchmark failed {failures[reference]} times: {runs[reference].error}"
                    for cand in active:
                        results[cand] = self._finish(cand, reference, purpose, Verdict.SKIP, diffs[cand], 0.0, 0.0, why)
                    break
                continue
            successes[reference] += 1
            ref_logs = oriented_logs(runs[reference].samples, self.bench.direction)
            for cand in list(active):
                run = runs[cand]
                if not run.ok:
                    failures[cand] += 1
                    if hopeless(cand):
                        why = f"{self.record(cand).info.short}'s benchmark failed {failures[cand]} times: {run.error}"
                        results[cand] = self._finish(cand, reference, purpose, Verdict.SKIP, diffs[cand], 0.0, 0.0, why)
                        active.remove(cand)
                    continue
                successes[cand] += 1
                d = diffs[cand]
                d.append(block_shift(ref_logs, oriented_logs(run.samples, self.bench.direction), self.bench.block_statistic))
                decision = decide(d, history, self.delta, config)
                cand_rec = self.record(cand)
                self.events.round_done(cand_rec.info, ref.info, len(d), decision.llr, len(cand_rec.samples) + len(ref.samples))
                if decision.verdict is not None:
                    results[cand] = self._finish(cand, reference, purpose, decision.verdict, d, decision.llr, decision.sigma)
                    active.remove(cand)
        return [results[c] for c in candidates]

    def _finish(
        self,
        candidate: str,
        reference: str,
        purpose: Purpose,
        verdict: Verdict,
        diffs: Sequence[float],
        llr: float,
        sigma: float,
        reason: str = "",
    ) -> Comparison:
        comp = Comparison(candidate, reference, purpose, verdict, tuple(diffs), llr, sigma, shift_estimate(diffs), reason)
        self.comparisons.append(comp)
        detail = reason or f"{len(diffs)} rounds, LLR {llr:+.2f}"
        self.events.verdict(self.record(candidate).info, self.record(reference).info, verdict, detail)
        return comp

    # --- what the measurements say beyond verdicts ---------------------------------------

    def drift(self, shas: Sequence[str]) -> tuple[Drift, ...]:
        out = []
        for sha in dict.fromkeys(shas):
            blocks = self.records[sha].blocks if sha in self.records else []
            shift = level_drift(blocks)
            if shift is not None:
                out.append(Drift(sha, len(blocks), to_pct(shift, self.bench.direction)))
        return tuple(out)
