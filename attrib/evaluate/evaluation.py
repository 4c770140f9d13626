"""The evaluation stage: candidates and a reference in, one `Comparison` per candidate out.

It builds what is asked for (concurrently up to `build_width`), measures the reference and
every undecided candidate in interleaved rounds, in a fresh random order each round, and feeds
each candidate's paired shifts to the sequential test of core/stats.py until it decides. It
keeps what was measured (`CommitRecord`s) so later comparisons pool their noise history and
the result can show every sample.

What it must never do: choose which commits to test (that is the search driver,
bisection.py), or hold statistical policy of its own (sigma, clipping, caps: core/stats.py).
A build or benchmark failure is that commit's SKIP, never an exception out of here.

Same artifact, same verdict: a candidate whose artifacts (`[build] artifacts`, or the runner's
own, e.g. the cupy runner's compiled module) are identical to its reference's is good-like, and
one identical to a commit already decided against the same reference takes that verdict; both
with zero samples (`Comparison.same_artifact_as`). When two artifacts differ only by an
embedded timestamp or build path, that is reported (`artifact_notes`), never hidden.

It also keeps the wall time of each phase (build, measure, everything else) and stops measuring
at a deadline (`--budget`): what is then still open is INCONCLUSIVE by DecisionRule.BUDGET.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from attrib.core.blocks import PLAN_AFTER_ROUNDS, BlockChoice, BlockReason, Run, choose_reps
from attrib.core.model import CommitInfo, DecisionRule, Purpose, Verdict
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
    size_log_odds,
    to_pct,
)
from attrib.evaluate.artifacts import Artifacts, ArtifactTrap, diagnose
from attrib.evaluate.builds import BuildRecord
from attrib.evaluate.runners import Runner, RunResult, resized
from attrib.events import Events, NullEvents
from attrib.recipe import BenchmarkSpec

MAX_FAILED_RUNS = 3  # per commit and comparison: then the commit is untestable (skip)
SAME_ARTIFACT_LLR = 50.0  # identical bytes: as good as certain, but finite for the posterior
# Purposes whose verdict against a reference a byte-identical commit may take over. A retest
# never takes another commit's verdict (that is what is in doubt), only "same as the reference".
_SHAREABLE = (Purpose.PREFLIGHT, Purpose.PROBE, Purpose.EXTEND, Purpose.REMAINING, Purpose.RETEST)


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
    rule: DecisionRule | None = None  # which rule decided (core/stats.py)
    size_p: float = math.nan  # confirmations: P(step >= the minimum change | its shifts)
    same_artifact_as: str | None = None  # decided with zero samples: identical artifacts to this commit
    samples: int = 0  # samples drawn for it (candidate and reference, in its rounds)
    smaller: bool = False  # worse, but below the minimum change (verdict GOOD)

    @property
    def evidence(self) -> float:
        """Log-odds that the candidate is worse by the minimum change: the size check's when
        it ran (composite alternative), else the SPRT's LLR."""
        lo = size_log_odds(self.size_p)
        return self.llr if lo != lo else lo


@dataclass(frozen=True)
class ArtifactNote:
    """Two builds whose artifacts differ only in bytes that are no code (a reproducibility trap)."""

    a: str
    b: str
    traps: tuple[ArtifactTrap, ...]


@dataclass
class PhaseTimes:
    """Wall seconds per phase: what the budget is spent on, and attrib's own share (decide)."""

    build_s: float = 0.0
    measure_s: float = 0.0  # inside the runner: the benchmark itself
    decide_s: float = 0.0  # everything else in comparisons: attrib's overhead
    comparisons: int = 0  # measured comparisons (zero-sample ones excluded)

    def overhead_per_comparison(self) -> float:
        return self.decide_s / self.comparisons if self.comparisons else 0.0


@dataclass(frozen=True)
class CommitRecord:
    """What was measured of one commit, as of when it was asked for: a frozen snapshot (the
    evaluation keeps accumulating in its own `_Tally`)."""

    info: CommitInfo
    build: BuildRecord | None = None
    samples: tuple[float, ...] = ()
    blocks: tuple[float, ...] = ()  # per run: oriented log level, in time order
    block_rounds: tuple[int, ...] = ()  # per block: the round it ran in (blocks of one round ran back to back)
    block_reps: tuple[int, ...] = ()  # per block: the samples per run it was asked for
    failed_runs: tuple[str, ...] = ()
    excluded: Mapping[str, int] = field(default_factory=dict)  # samples the runner flagged, by reason
    nodes: tuple[str, ...] = ()  # per usable run, the node it ran on (slurm; "" here)
    artifact: str | None = None  # content digest of what its benchmark runs; None: not known (yet)


@dataclass
class _Tally:
    """The evaluation's own accumulator for one commit; only snapshots of it leave."""

    info: CommitInfo
    build: BuildRecord | None = None
    samples: list[float] = field(default_factory=list)
    blocks: list[float] = field(default_factory=list)
    block_reps: list[int] = field(default_factory=list)
    block_rounds: list[int] = field(default_factory=list)
    failed_runs: list[str] = field(default_factory=list)
    excluded: Counter[str] = field(default_factory=Counter)
    nodes: list[str] = field(default_factory=list)
    artifact: str | None = None

    def snapshot(self) -> CommitRecord:
        return CommitRecord(
            self.info, self.build, tuple(self.samples), tuple(self.blocks), tuple(self.block_rounds),
            tuple(self.block_reps), tuple(self.failed_runs), dict(self.excluded), tuple(self.nodes), self.artifact,
        )  # fmt: skip


@dataclass(frozen=True)
class Drift:
    commit: str
    blocks: int
    change_pct: float  # level of its last blocks against its first ones


@dataclass(frozen=True)
class Account:
    """What an evaluation measured and spent, as the outcome of a search reports it."""

    comparisons: tuple[Comparison, ...]
    commits: dict[str, CommitRecord]
    drift: tuple[Drift, ...]
    rounds: int  # measurement rounds, in sequence: what parallel probing shortens
    artifact_notes: tuple[ArtifactNote, ...]
    samples_saved: int  # estimate: samples the same-artifact verdicts did not draw
    times: PhaseTimes
    out_of_time: bool
    blocks: BlockChoice | None = None  # the adaptive block size, when the search asked for one


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
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        adapt_blocks: bool = False,
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
        self._tallies: dict[str, _Tally] = {}
        self.comparisons: list[Comparison] = []
        self.rounds = 0  # measurement rounds, in sequence: what parallel probing shortens
        self.deadline = deadline  # clock() value after which no further round starts
        self.clock = clock
        self.times = PhaseTimes()
        self.artifact_notes: list[ArtifactNote] = []
        # Adaptive blocks (core/blocks.py): the samples per run now, the runs that choice is
        # made from, and the choice once made. Blocks of another size are kept in the records
        # but no longer compared with these (their block statistic has another bias and spread).
        self.reps = bench.reps
        self.adapting = adapt_blocks  # choose the size after the preflight's first rounds
        self._first_runs: list[Run] = []
        self.block_choice: BlockChoice | None = None
        self._history_from = 0  # comparisons before a size change pool no noise into later ones
        self._diagnosed: set[frozenset[str]] = set()

    @property
    def out_of_time(self) -> bool:
        return self.deadline is not None and self.clock() >= self.deadline

    # --- builds and single runs -----------------------------------------------------------

    def _tally(self, sha: str, info: CommitInfo | None = None) -> _Tally:
        if sha not in self._tallies:
            self._tallies[sha] = _Tally(info or self.commits.info(sha))
        return self._tallies[sha]

    def record(self, sha: str, info: CommitInfo | None = None) -> CommitRecord:
        """What was measured of `sha` so far (registering it, with `info` if given)."""
        return self._tally(sha, info).snapshot()

    @property
    def records(self) -> dict[str, CommitRecord]:
        return {sha: t.snapshot() for sha, t in self._tallies.items()}

    def build(self, sha: str) -> BuildRecord:
        rec = self._tally(sha)
        if rec.build is None:
            self.events.build_started(rec.info)
            start = self.clock()
            rec.build = self.builder.build(rec.info)
            self.times.build_s += self.clock() - start
            self.events.build_finished(rec.info, rec.build)
        return rec.build

    def artifact(self, sha: str) -> str | None:
        """What the commit's benchmark runs, by content: the build's declared artifacts, else
        the runner's own (the cupy runner's compiled module), else None (not known)."""
        rec = self._tally(sha)
        if rec.artifact is None and rec.build is not None and rec.build.ok:
            own = getattr(self.runner, "artifact", None)
            rec.artifact = rec.build.artifact or (own(Path(rec.build.checkout)) if callable(own) else None) or ""
        return rec.artifact or None

    def stand_in(self, sha: str) -> str:
        """A measured commit with the same artifact as `sha` (itself if none): a confirmation
        against it measures the same bytes without measuring one more commit."""
        art = self.artifact(sha)
        if art is not None:
            for other, rec in self._tallies.items():
                if rec.samples and rec.artifact == art:
                    return other
        return sha

    def _twin(self, cand: str, reference: str, purpose: Purpose) -> Comparison | None:
        """An earlier verdict that a byte-identical commit settles `cand` with (see module doc)."""
        art = self.artifact(cand)
        if art is None:
            return None
        if self.artifact(reference) == art:
            return Comparison(
                cand, reference, purpose, Verdict.GOOD, (), -SAME_ARTIFACT_LLR, 0.0, shift_estimate([0.0]),
                rule=DecisionRule.SAME_ARTIFACT, same_artifact_as=reference,
            )
        ref_art = self.artifact(reference)
        for c in reversed(self.comparisons):
            if (
                (c.reference == reference or (ref_art is not None and self.artifact(c.reference) == ref_art))
                and c.candidate != cand
                and c.purpose in _SHAREABLE
                and c.verdict in (Verdict.GOOD, Verdict.BAD)
                # a verdict with no rounds behind it (the posterior search's placement of a twin)
                # settles nothing else: identity with the reference is the branch above
                and not (c.same_artifact_as and not c.diffs)
                and self.artifact(c.candidate) == art
            ):
                if purpose is Purpose.RETEST:
                    return None  # asked for fresh rounds: the twin's verdict is what is in doubt
                # The same bytes on both sides: the twin's shifts are this comparison's evidence
                # (and a culprit's estimate); they are not pooled into sigma twice (see compare).
                return Comparison(
                    cand, reference, purpose, c.verdict, c.diffs, c.llr, c.sigma, c.estimate,
                    rule=DecisionRule.SAME_ARTIFACT, size_p=c.size_p, smaller=c.smaller,
                    same_artifact_as=c.same_artifact_as or c.candidate,
                )
        return None

    def note_traps(self, a: str, b: str) -> None:
        """Two commits the search found at one level: if their artifacts differ only by a known
        trap (a timestamp, a build path), say so, as a comparison of the two would."""
        self._note_traps(a, b)

    def _note_traps(self, a: str, b: str) -> None:
        """Differing artifacts: say so once per pair when the difference is a known trap."""
        pair = frozenset((a, b))
        ra, rb = self._tally(a).build, self._tally(b).build
        if pair in self._diagnosed or ra is None or rb is None or not ra.artifact_files or not rb.artifact_files:
            return
        self._diagnosed.add(pair)
        if ra.artifact == rb.artifact:
            return
        traps = diagnose(
            Path(ra.checkout), Path(rb.checkout), Artifacts(ra.artifact, ra.artifact_files), Artifacts(rb.artifact, rb.artifact_files)
        )
        if traps:
            self.artifact_notes.append(ArtifactNote(a, b, traps))

    def build_all(self, shas: Sequence[str]) -> None:
        """Build several commits, concurrently up to build_width (builds are independent)."""
        todo = [s for s in dict.fromkeys(shas) if self._tally(s).build is None]
        if self.build_width > 1 and len(todo) > 1:
            with ThreadPoolExecutor(max_workers=self.build_width) as pool:
                list(pool.map(self.build, todo))
        else:
            for sha in todo:
                self.build(sha)

    def measure(self, sha: str) -> RunResult:
        rec = self._tally(sha)
        assert rec.build is not None and rec.build.ok
        start = self.clock()
        result = self.runner.run(Path(rec.build.checkout))
        self.times.measure_s += self.clock() - start
        rec.excluded.update(result.excluded)
        if result.ok:
            rec.nodes.append(result.node)
            rec.samples.extend(result.samples)
            logs = oriented_logs(result.samples, self.bench.direction)
            rec.blocks.append(block_level(logs, self.bench.block_statistic))
            rec.block_reps.append(self.reps)
            rec.block_rounds.append(self.rounds)  # counted when a round ends: the one running now
            if self.adapting and self.block_choice is None:  # kept only until the size is chosen
                self._first_runs.append(Run(sha, tuple(float(x) for x in logs), result.duration_s, result.sample_s))
        else:
            rec.failed_runs.append(result.error)
        return result

    def block(self, sha: str) -> bool:
        """One more block of `sha` (built first if need be), in a round of its own: what the
        posterior search asks for one at a time. False when it did not build or the run failed."""
        return self.blocks([sha])[0]

    def blocks(self, shas: Sequence[str]) -> list[bool]:
        """One more block of each of `shas` in one shared round: built concurrently first (up to
        build_width), then run once each in a fresh random order, as a comparison's round runs
        its commits; what parallel probing of the posterior search shortens. Per sha, False when
        it did not build or its run failed."""
        todo = list(dict.fromkeys(shas))
        self.build_all(todo)
        runnable = [s for s in todo if self._tally(s).build is not None and self._tally(s).build.ok]  # type: ignore[union-attr]
        self.rng.shuffle(runnable)
        ok: dict[str, bool] = {}
        if runnable:
            with self.round_context():  # slurm: a round runs inside one allocation
                ok = {s: self.measure(s).ok for s in runnable}
            self.rounds += 1
        return [ok.get(s, False) for s in shas]

    def same_artifact(self, candidate: str, reference: str, purpose: Purpose, verdict: Verdict, twin: str) -> Comparison:
        """A verdict the search settled with no samples of `candidate`: byte-identical to `twin`,
        whose blocks are its data (the posterior search's form of the same-artifact verdict)."""
        return self._keep(
            Comparison(
                candidate, reference, purpose, verdict, (), 0.0, 0.0, shift_estimate([0.0]),
                rule=DecisionRule.SAME_ARTIFACT, same_artifact_as=twin,
            )
        )

    def levels(self, sha: str) -> tuple[list[float], list[int]]:
        """`sha`'s block levels of the current size and, per block, the round it ran in: blocks
        of two commits with the same round ran back to back, on one machine in one state (a
        comparison's pair, a search's shared round)."""
        rec = self._tallies.get(sha)
        if rec is None:
            return [], []
        keep = [i for i, r in enumerate(rec.block_reps) if r == self.reps]
        return [rec.blocks[i] for i in keep], [rec.block_rounds[i] for i in keep]

    def _adapt_now(self, rounds: int) -> bool:
        """Whether the size was just changed, PLAN_AFTER_ROUNDS into the preflight."""
        if not self.adapting or self.block_choice is not None or rounds < PLAN_AFTER_ROUNDS:
            return False
        return self.adapt_blocks().reason is BlockReason.CHOSEN

    def adapt_blocks(self) -> BlockChoice:
        """Once, from the runs so far (the preflight's): the samples per run that reach a
        decision in the least wall time (core/blocks.py); the runner takes that size from now on."""
        if self.block_choice is not None:
            return self.block_choice
        if not self.bench.adapt_reps:
            self.block_choice = BlockChoice(self.reps, self.reps, BlockReason.PINNED)
            return self.block_choice
        sized = resized(self.runner, self.reps)
        if sized is not None:  # a preflight that decided sooner: its commits get the runs the choice needs
            counts = Counter(run.commit for run in self._first_runs)
            for sha, runs in counts.items():
                for _ in range(PLAN_AFTER_ROUNDS - runs):
                    self.block(sha)
        choice = choose_reps(self._first_runs, self.reps, self.bench.block_statistic, adjustable=sized is not None)
        if choice.reason is BlockReason.CHOSEN:
            runner = resized(self.runner, choice.reps)
            assert runner is not None
            self.runner, self.reps = runner, choice.reps
            self._history_from = len(self.comparisons)
        self.block_choice = choice
        self._first_runs = []
        return choice

    # --- comparisons ----------------------------------------------------------------------

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
        config = config or self.config
        alongside = [a for a in dict.fromkeys(alongside) if a != reference and a not in candidates]
        self.build_all([reference, *candidates, *alongside])
        started, measured_before = self.clock(), self.times.measure_s
        results: dict[str, Comparison] = {}
        for cand in candidates:
            for sha in (reference, cand):
                build = self._tally(sha).build
                if build is not None and not build.ok and cand not in results:
                    why = f"{self._tally(sha).info.short} did not build: {build.reason}"
                    results[cand] = self._finish(cand, reference, purpose, Verdict.SKIP, [], 0.0, 0.0, why)
            if cand not in results and not resume:
                twin = self._twin(cand, reference, purpose)
                if twin is not None:
                    results[cand] = self._keep(twin)
                else:
                    self._note_traps(cand, reference)
        active = [c for c in dict.fromkeys(candidates) if c not in results]
        measuring = bool(active)
        diffs: dict[str, list[float]] = {c: list((resume or {}).get(c, ())) for c in active}
        failures: Counter[str] = Counter()
        successes: Counter[str] = Counter()

        def hopeless(sha: str) -> bool:
            # A rare crash is noise; a commit whose runs fail as often as they succeed is broken.
            return failures[sha] >= MAX_FAILED_RUNS and failures[sha] > successes[sha]

        history = [c.diffs for c in self.comparisons[self._history_from :] if len(c.diffs) >= 2 and not c.same_artifact_as]
        ref = self._tally(reference)
        drawn: Counter[str] = Counter()
        while active:
            if purpose is Purpose.PREFLIGHT and self._adapt_now(min(len(diffs[c]) for c in active)):
                for cand in active:  # the test starts again at the new size: its rounds' spread differs
                    diffs[cand].clear()
            if self.out_of_time:
                for cand in active:
                    results[cand] = self._finish(
                        cand, reference, purpose, Verdict.INCONCLUSIVE, diffs[cand], 0.0, 0.0,
                        rule=DecisionRule.BUDGET, samples=drawn[cand],
                    )
                break
            order = [reference, *active, *alongside]
            self.rng.shuffle(order)  # order-balanced on average: no side always runs first
            with self.round_context():  # slurm: one allocation on one node, so the pairing holds
                runs = {sha: self.measure(sha) for sha in order}
            self.rounds += 1
            beside = sum(len(runs[a].samples) for a in alongside) / max(1, len(active))
            for sha in active:
                drawn[sha] += len(runs[sha].samples) + len(runs[reference].samples) + round(beside)
            if not runs[reference].ok:
                failures[reference] += 1
                if hopeless(reference):
                    why = f"the reference {ref.info.short}'s benchmark failed {failures[reference]} times: {runs[reference].error}"
                    for cand in active:
                        results[cand] = self._finish(
                            cand, reference, purpose, Verdict.SKIP, diffs[cand], 0.0, 0.0, why,
                            rule=DecisionRule.UNTESTABLE, samples=drawn[cand],
                        )
                    break
                continue
            successes[reference] += 1
            ref_logs = oriented_logs(runs[reference].samples, self.bench.direction)
            for cand in list(active):
                run = runs[cand]
                if not run.ok:
                    failures[cand] += 1
                    if hopeless(cand):
                        why = f"{self._tally(cand).info.short}'s benchmark failed {failures[cand]} times: {run.error}"
                        results[cand] = self._finish(
                            cand, reference, purpose, Verdict.SKIP, diffs[cand], 0.0, 0.0, why,
                            rule=DecisionRule.UNTESTABLE, samples=drawn[cand],
                        )
                        active.remove(cand)
                    continue
                successes[cand] += 1
                d = diffs[cand]
                d.append(block_shift(ref_logs, oriented_logs(run.samples, self.bench.direction), self.bench.block_statistic))
                decision = decide(d, history, self.delta, config)
                cand_rec = self._tally(cand)
                self.events.round_done(cand_rec.info, ref.info, len(d), decision.llr, len(cand_rec.samples) + len(ref.samples))
                if decision.verdict is not None:
                    results[cand] = self._finish(
                        cand, reference, purpose, decision.verdict, d, decision.llr, decision.sigma,
                        rule=decision.rule, size_p=decision.size_p, samples=drawn[cand], smaller=decision.smaller,
                    )
                    active.remove(cand)
        if measuring:
            self.times.comparisons += 1
            self.times.decide_s += (self.clock() - started) - (self.times.measure_s - measured_before)
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
        *,
        rule: DecisionRule | None = None,
        size_p: float = math.nan,
        samples: int = 0,
        smaller: bool = False,
    ) -> Comparison:
        if verdict is Verdict.SKIP and rule is None:
            rule = DecisionRule.UNTESTABLE
        comp = Comparison(
            candidate, reference, purpose, verdict, tuple(diffs), llr, sigma, shift_estimate(diffs, sigma=sigma or None), reason,
            rule, size_p, None, samples, smaller,
        )
        return self._keep(comp)

    def _keep(self, comp: Comparison) -> Comparison:
        self.comparisons.append(comp)
        if comp.same_artifact_as:
            detail = f"same binary as {self._tally(comp.same_artifact_as).info.short}, no samples"
        else:
            rule = f", {comp.rule.value}" if comp.rule else ""
            rule += f", smaller than the minimum (P(>= min) = {comp.size_p:.2f})" if comp.smaller else ""
            detail = comp.reason or f"{len(comp.diffs)} rounds, LLR {comp.llr:+.2f}{rule}"
        self.events.verdict(self._tally(comp.candidate).info, self._tally(comp.reference).info, comp.verdict, detail)
        return comp

    def samples_saved(self) -> int:
        """Samples the zero-sample (same artifact) verdicts did not draw, at the mean cost of a
        measured comparison of this bisection: an estimate, labelled as one in the report."""
        measured = [c.samples for c in self.comparisons if c.samples and c.rule is not DecisionRule.BUDGET]
        shortcuts = sum(1 for c in self.comparisons if c.same_artifact_as)
        return round(shortcuts * sum(measured) / len(measured)) if measured and shortcuts else 0

    def account(self, drift_of: Sequence[str]) -> Account:
        """Everything measured so far, for the outcome; drift is reported for `drift_of`."""
        return Account(
            comparisons=tuple(self.comparisons),
            commits=self.records,
            drift=self.drift(drift_of),
            rounds=self.rounds,
            artifact_notes=tuple(self.artifact_notes),
            samples_saved=self.samples_saved(),
            times=self.times,
            out_of_time=self.out_of_time,
            blocks=self.block_choice,
        )

    # --- what the measurements say beyond verdicts ---------------------------------------

    def drift(self, shas: Sequence[str]) -> tuple[Drift, ...]:
        out = []
        for sha in dict.fromkeys(shas):
            blocks = self.levels(sha)[0]  # of one size: another size's blocks sit at another bias
            shift = level_drift(blocks)
            if shift is not None:
                out.append(Drift(sha, len(blocks), to_pct(shift, self.bench.direction)))
        return tuple(out)
