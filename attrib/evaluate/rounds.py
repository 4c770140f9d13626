"""Comparison rounds and their sequential tests.

A comparison measures the reference and every undecided candidate in interleaved rounds, in a
fresh random order each round, and feeds each candidate's paired shifts to the sequential test
of core/sequential.py until it decides. A build or benchmark failure is that commit's SKIP, never an
exception out of here; at the deadline what is still open is INCONCLUSIVE by
DecisionRule.BUDGET. No statistical policy of its own (sigma, clipping, caps: core/stats.py and
core/sequential.py).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attrib.core.blocks import BlockReason, hopeless
from attrib.core.model import DecisionRule, Purpose, Verdict
from attrib.core.sequential import decide
from attrib.core.stats import TestConfig, block_level, block_shift, min_change_shift, oriented_logs, shift_estimate
from attrib.evaluate.accounts import Ledger
from attrib.evaluate.records import Comparison
from attrib.evaluate.runners import RunResult
from attrib.evaluate.sizing import BlockSizing
from attrib.evaluate.twins import Builds
from attrib.events import Events
from attrib.recipe import BenchmarkSpec


@dataclass
class _Test:
    """One comparison's tests while they run: each candidate's shifts and what it drew."""

    reference: str
    purpose: Purpose
    config: TestConfig
    alongside: list[str]
    active: list[str]
    diffs: dict[str, list[float]]
    history: list[tuple[float, ...]]  # earlier comparisons' shifts: the pooled noise
    results: dict[str, Comparison]
    reps: int | None = None  # samples per run: None, the current size; else the size of the data resumed
    drawn: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    successes: Counter[str] = field(default_factory=Counter)

    def hopeless(self, sha: str) -> bool:
        return hopeless(self.failures[sha], self.successes[sha])  # per commit and comparison


class Rounds:
    """Measurement rounds: single blocks for the search, and comparisons' paired tests."""

    def __init__(
        self,
        ledger: Ledger,
        builds: Builds,
        sizing: BlockSizing,
        bench: BenchmarkSpec,
        rng: random.Random,
        events: Events,
        round_context: Callable[[], AbstractContextManager[object]],
        clock: Callable[[], float],
        deadline: float | None,
    ) -> None:
        self.ledger = ledger
        self.builds = builds
        self.sizing = sizing
        self.bench = bench
        self.rng = rng
        self.events = events
        self.round_context = round_context  # Executor.round: one round, one machine
        self.clock = clock
        self.deadline = deadline  # clock() value after which no further round starts
        self.delta = min_change_shift(bench.min_change_pct)

    @property
    def out_of_time(self) -> bool:
        return self.deadline is not None and self.clock() >= self.deadline

    def measure(self, sha: str, reps: int | None = None) -> RunResult:
        """One run of `sha`, at the current block size unless `reps` names another."""
        rec = self.ledger.tally(sha)
        assert rec.build is not None and rec.build.ok
        runner, reps = self.sizing.runner_at(reps)
        start = self.clock()
        result = runner.run(Path(rec.build.checkout))
        self.ledger.times.measure_s += self.clock() - start
        rec.excluded.update(result.excluded)
        if result.ok:
            rec.nodes.append(result.node)
            rec.samples.extend(result.samples)
            logs = oriented_logs(result.samples, self.bench.direction)
            rec.blocks.append(block_level(logs, self.bench.block_statistic))
            rec.block_reps.append(reps)
            rec.block_rounds.append(self.ledger.rounds)  # counted when a round ends: the one running now
            self.sizing.observe(sha, logs, result)
        else:
            rec.failed_runs.append(result.error)
        return result

    def blocks(self, shas: Sequence[str]) -> list[bool]:
        """One more block of each of `shas` in one shared round: built concurrently first, then
        run once each in a fresh random order. Per sha, False when it did not build or its run
        failed."""
        todo = list(dict.fromkeys(shas))
        self.builds.build_all(todo)
        runnable = [s for s in todo if (b := self.ledger.tally(s).build) is not None and b.ok]
        self.rng.shuffle(runnable)
        ok: dict[str, bool] = {}
        if runnable:
            with self.round_context():  # slurm: a round runs inside one allocation
                ok = {s: self.measure(s).ok for s in runnable}
            self.ledger.rounds += 1
        return [ok.get(s, False) for s in shas]

    def adapt_blocks(self) -> bool:
        """The block size chosen now (block sizing); whether it changed."""
        choice = self.sizing.choose(lambda sha: self.blocks([sha])[0], len(self.ledger.comparisons))
        return choice.reason is BlockReason.CHOSEN

    def compare(
        self,
        candidates: Sequence[str],
        reference: str,
        purpose: Purpose,
        config: TestConfig,
        resume: Mapping[str, Sequence[float]] | None,
        alongside: Sequence[str],
    ) -> list[Comparison]:
        """Sequential tests of each candidate against one reference, in shared rounds
        (evaluation.Evaluation.compare says what the arguments mean)."""
        beside = [a for a in dict.fromkeys(alongside) if a != reference and a not in candidates]
        self.builds.build_all([reference, *candidates, *beside])
        started, measured_before = self.clock(), self.ledger.times.measure_s
        results = self.builds.settled(candidates, reference, purpose, fresh=not resume)
        active = [c for c in dict.fromkeys(candidates) if c not in results]
        if active:
            earlier: Mapping[str, Sequence[float]]
            if resume is not None:
                earlier, span = resume, self.sizing.spans(len(self.ledger.comparisons))[0]
            else:
                earlier, span = self._decided_pair(active, reference, purpose)
            start, stop, reps = span
            history = [
                c.diffs for c in self.ledger.comparisons[start:stop]
                if len(c.diffs) >= 2 and not c.same_artifact_as
            ]  # fmt: skip
            diffs = {c: list(earlier.get(c, ())) for c in active}
            at = None if reps == self.sizing.reps else reps
            test = _Test(reference, purpose, config, beside, active, diffs, history, results, at)
            while test.active and self._round(test):
                pass
            self.sizing.runner_at(None)  # the current size again for what follows
            times = self.ledger.times
            times.comparisons += 1
            times.decide_s += (self.clock() - started) - (times.measure_s - measured_before)
        return [results[c] for c in candidates]

    def _decided_pair(
        self, active: Sequence[str], reference: str, purpose: Purpose
    ) -> tuple[dict[str, Sequence[float]], tuple[int, int, int]]:
        """Same binaries, same data: a confirmation of a pair of binaries already compared and
        decided (the posterior search confirms through stand-ins, so a culprit byte-identical
        to bad and a parent byte-identical to good confirm as the preflight's pair) is that
        test again, resumed from its paired shifts rather than measured from nothing; it still
        draws what its own settings ask beyond them. Its rounds are at the size of the shifts
        it resumes: a preflight that decided before the block size was chosen is resumed at the
        size before (sizing.spans), with that size's comparisons as its pooled noise. Returns
        the shifts per candidate and the span of comparisons at their size."""
        spans = self.sizing.spans(len(self.ledger.comparisons))
        if purpose is not Purpose.CONFIRM:
            return {}, spans[0]
        for start, stop, reps in spans:
            found: dict[str, Sequence[float]] = {}
            for c in reversed(self.ledger.comparisons[start:stop]):
                if (
                    c.reference == reference and c.candidate in active and c.candidate not in found
                    and c.purpose is not Purpose.CONFIRM  # a confirmation asked again wants fresh rounds
                    and c.verdict in (Verdict.GOOD, Verdict.BAD) and c.diffs and not c.same_artifact_as
                ):  # fmt: skip
                    found[c.candidate] = c.diffs
            if found:
                return found, (start, stop, reps)
        return {}, spans[0]

    def _round(self, t: _Test) -> bool:
        """One round of `t`: the reference, its undecided candidates and the commits beside;
        False when the comparison ends with it (the deadline, a hopeless reference)."""
        reference = t.reference
        if t.purpose is Purpose.PREFLIGHT and self.sizing.due(min(len(t.diffs[c]) for c in t.active)):
            if self.adapt_blocks():
                for cand in t.active:  # the test starts again at the new size: its rounds' spread differs
                    t.diffs[cand].clear()
        if self.out_of_time:
            for cand in t.active:
                t.results[cand] = self._finish(
                    cand, reference, t.purpose, Verdict.INCONCLUSIVE, t.diffs[cand], 0.0, 0.0,
                    rule=DecisionRule.BUDGET, samples=t.drawn[cand],
                )  # fmt: skip
            return False
        order = [reference, *t.active, *t.alongside]
        self.rng.shuffle(order)  # order-balanced on average: no side always runs first
        with self.round_context():  # slurm: one allocation on one node, so the pairing holds
            runs = {sha: self.measure(sha, t.reps) for sha in order}
        self.ledger.rounds += 1
        beside = sum(len(runs[a].samples) for a in t.alongside) / max(1, len(t.active))
        for sha in t.active:
            t.drawn[sha] += len(runs[sha].samples) + len(runs[reference].samples) + round(beside)
        if not runs[reference].ok:
            t.failures[reference] += 1
            if not t.hopeless(reference):
                return True
            ref_short = self.ledger.tally(reference).info.short
            why = f"the reference {ref_short}'s benchmark failed {t.failures[reference]} times: {runs[reference].error}"
            for cand in t.active:
                t.results[cand] = self._finish(
                    cand, reference, t.purpose, Verdict.SKIP, t.diffs[cand], 0.0, 0.0, why,
                    rule=DecisionRule.UNTESTABLE, samples=t.drawn[cand],
                )  # fmt: skip
            return False
        t.successes[reference] += 1
        ref_logs = oriented_logs(runs[reference].samples, self.bench.direction)
        for cand in list(t.active):
            self._step(t, cand, runs[cand], ref_logs)
        return True

    def _step(self, t: _Test, cand: str, run: RunResult, ref_logs: np.ndarray) -> None:
        """A candidate's run of this round into its test; decided, it leaves the active ones."""
        if not run.ok:
            t.failures[cand] += 1
            if t.hopeless(cand):
                why = f"{self.ledger.tally(cand).info.short}'s benchmark failed {t.failures[cand]} times: {run.error}"
                t.results[cand] = self._finish(
                    cand, t.reference, t.purpose, Verdict.SKIP, t.diffs[cand], 0.0, 0.0, why,
                    rule=DecisionRule.UNTESTABLE, samples=t.drawn[cand],
                )  # fmt: skip
                t.active.remove(cand)
            return
        t.successes[cand] += 1
        d = t.diffs[cand]
        d.append(block_shift(ref_logs, oriented_logs(run.samples, self.bench.direction), self.bench.block_statistic))
        decision = decide(d, t.history, self.delta, t.config)
        cand_rec, ref = self.ledger.tally(cand), self.ledger.tally(t.reference)
        self.events.round_done(cand_rec.info, ref.info, len(d), decision.llr, len(cand_rec.samples) + len(ref.samples))
        if decision.verdict is not None:
            t.results[cand] = self._finish(
                cand, t.reference, t.purpose, decision.verdict, d, decision.llr, decision.sigma,
                rule=decision.rule, size_p=decision.size_p, samples=t.drawn[cand], smaller=decision.smaller,
            )  # fmt: skip
            t.active.remove(cand)

    def _finish(
        self, candidate: str, reference: str, purpose: Purpose, verdict: Verdict, diffs: Sequence[float], llr: float,
        sigma: float, reason: str = "", *, rule: DecisionRule | None = None, size_p: float = math.nan,
        samples: int = 0, smaller: bool = False,
    ) -> Comparison:  # fmt: skip
        if verdict is Verdict.SKIP and rule is None:
            rule = DecisionRule.UNTESTABLE
        comp = Comparison(
            candidate, reference, purpose, verdict, tuple(diffs), llr, sigma, shift_estimate(diffs, sigma=sigma or None), reason,
            rule, size_p, None, samples, smaller,
        )  # fmt: skip
        return self.ledger.keep(comp)
