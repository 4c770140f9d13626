"""Drive one bisection: the pure search and statistics on one side, builds and runs on the other.

The engine owns no policy of its own beyond ordering the work:
  1. preflight: compare bad against good; no meaningful worsening -> not reproduced;
  2. bisect the first-parent chain for the first commit worse than the current reference;
  3. confirm the boundary with a direct, paired comparison culprit^ vs culprit; when that
     disagrees with the verdicts that led there, re-test both ends and search on;
  4. a merge culprit is descended into (its second-parent line, against the merge base);
  5. while the bad end is still worse than the latest culprit, search again after it:
     several culprits in one range are found one after another.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from .builds import Builder, BuildRecord
from .errors import ReferenceFailed
from .gitrepo import GitRepo
from .model import CommitInfo, Status, Verdict
from .recipe import BenchmarkSpec
from .runners import Runner, RunResult
from .search import boundary, next_probe
from .stats import (
    Estimate,
    TestConfig,
    block_shift,
    min_change_shift,
    oriented_logs,
    pooled_sigma,
    shift_estimate,
    sprt,
)

MAX_FAILED_RUNS = 3  # per commit and comparison: then the commit is untestable (skip)
MAX_CONFIRM_RETRIES = 2  # times a disagreeing confirmation may send the search back
CONFIRM_MIN_ROUNDS_FACTOR = 2  # the confirmation also sizes the culprit's CI: give it more rounds


class Events(Protocol):
    """Progress handler: the CLI shows these on a terminal or as log lines."""

    def phase(self, text: str) -> None: ...
    def build_started(self, commit: CommitInfo) -> None: ...
    def build_finished(self, commit: CommitInfo, record: BuildRecord) -> None: ...
    def round_done(self, candidate: CommitInfo, reference: CommitInfo, rounds: int, llr: float, samples: int) -> None: ...
    def verdict(self, candidate: CommitInfo, reference: CommitInfo, verdict: Verdict, detail: str) -> None: ...


class NullEvents:
    def phase(self, text: str) -> None: ...
    def build_started(self, commit: CommitInfo) -> None: ...
    def build_finished(self, commit: CommitInfo, record: BuildRecord) -> None: ...
    def round_done(self, candidate: CommitInfo, reference: CommitInfo, rounds: int, llr: float, samples: int) -> None: ...
    def verdict(self, candidate: CommitInfo, reference: CommitInfo, verdict: Verdict, detail: str) -> None: ...


@dataclass(frozen=True)
class Comparison:
    """One sequential test of a candidate against a reference."""

    candidate: str
    reference: str
    purpose: str  # preflight | probe | retest | confirm | remaining
    verdict: Verdict
    diffs: tuple[float, ...]  # per-round oriented log shifts, candidate - reference
    llr: float
    sigma: float
    estimate: Estimate
    reason: str = ""  # why it is a skip


@dataclass(frozen=True)
class Culprit:
    commit: str
    last_good: str  # the good-like commit it was confirmed against (its parent unless skips)
    ambiguous_with: tuple[str, ...]
    confirmation: Comparison
    via_merge: str | None = None  # set when found inside a merge's second-parent line

    @property
    def confirmed(self) -> bool:
        return self.confirmation.verdict is Verdict.BAD


@dataclass
class CommitRecord:
    info: CommitInfo
    build: BuildRecord | None = None
    samples: list[float] = field(default_factory=list)
    failed_runs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Outcome:
    status: Status
    good: str
    bad: str
    culprits: tuple[Culprit, ...]
    preflight: Comparison
    comparisons: tuple[Comparison, ...]
    verdicts: dict[str, tuple[str, Verdict]]  # sha -> (reference sha, latest verdict against it)
    commits: dict[str, CommitRecord]
    order: tuple[str, ...]  # every commit of the range in history order (merge lines inlined)
    notes: tuple[str, ...]


class Bisection:
    def __init__(
        self,
        repo: GitRepo,
        builder: Builder,
        runner: Runner,
        bench: BenchmarkSpec,
        config: TestConfig,
        seed: int,
        events: Events | None = None,
    ) -> None:
        self.repo = repo
        self.builder = builder
        self.runner = runner
        self.bench = bench
        self.config = config
        self.delta = min_change_shift(bench.min_change_pct)
        self.rng = random.Random(seed)
        self.events: Events = events or NullEvents()
        self.records: dict[str, CommitRecord] = {}
        self.comparisons: list[Comparison] = []
        self.verdicts: dict[str, tuple[str, Verdict]] = {}
        self.order: list[str] = []
        self.notes: list[str] = []

    # --- edges: build and measure one commit ----------------------------------------------

    def record(self, sha: str) -> CommitRecord:
        if sha not in self.records:
            self.records[sha] = CommitRecord(self.repo.info(sha))
        return self.records[sha]

    def build(self, sha: str) -> BuildRecord:
        rec = self.record(sha)
        if rec.build is None:
            self.events.build_started(rec.info)
            rec.build = self.builder.build(rec.info)
            self.events.build_finished(rec.info, rec.build)
        return rec.build

    def measure(self, sha: str) -> RunResult:
        rec = self.record(sha)
        assert rec.build is not None and rec.build.ok
        result = self.runner.run(Path(rec.build.checkout))
        if result.ok:
            rec.samples.extend(result.samples)
        else:
            rec.failed_runs.append(result.error)
        return result

    # --- one sequential comparison --------------------------------------------------------

    def compare(self, candidate: str, reference: str, purpose: str, min_rounds: int | None = None) -> Comparison:
        config = replace(self.config, min_rounds=max(min_rounds or 0, self.config.min_rounds))
        cand, ref = self.record(candidate), self.record(reference)
        for sha in (reference, candidate):
            build = self.build(sha)
            if not build.ok:
                return self._finish(candidate, reference, purpose, Verdict.SKIP, [], 0.0, 0.0, f"{self.record(sha).info.short} did not build: {build.reason}")
        diffs: list[float] = []
        failures = {candidate: 0, reference: 0}
        history = [c.diffs for c in self.comparisons if len(c.diffs) >= 2]
        while True:
            order = [reference, candidate]
            self.rng.shuffle(order)  # order-balanced on average: neither side always runs first
            runs = {sha: self.measure(sha) for sha in order}
            failed = [sha for sha, r in runs.items() if not r.ok]
            for sha in failed:
                failures[sha] += 1
                if failures[sha] >= MAX_FAILED_RUNS:
                    why = f"{self.record(sha).info.short}'s benchmark failed {failures[sha]} times: {runs[sha].error}"
                    return self._finish(candidate, reference, purpose, Verdict.SKIP, diffs, 0.0, 0.0, why)
            if failed:
                continue
            diffs.append(
                block_shift(
                    oriented_logs(runs[reference].samples, self.bench.direction),
                    oriented_logs(runs[candidate].samples, self.bench.direction),
                    self.bench.block_statistic,
                )
            )
            sigma = pooled_sigma([*history, diffs])
            decision = sprt(diffs, self.delta, sigma, config)
            self.events.round_done(cand.info, ref.info, len(diffs), decision.llr, len(cand.samples) + len(ref.samples))
            if decision.verdict is not None:
                return self._finish(candidate, reference, purpose, decision.verdict, diffs, decision.llr, sigma)

    def _finish(
        self,
        candidate: str,
        reference: str,
        purpose: str,
        verdict: Verdict,
        diffs: Sequence[float],
        llr: float,
        sigma: float,
        reason: str = "",
    ) -> Comparison:
        comp = Comparison(candidate, reference, purpose, verdict, tuple(diffs), llr, sigma, shift_estimate(diffs), reason)
        self.comparisons.append(comp)
        if purpose in ("probe", "retest"):
            self.verdicts[candidate] = (reference, verdict)
        detail = reason or f"{len(diffs)} rounds, LLR {llr:+.2f}"
        self.events.verdict(self.record(candidate).info, self.record(reference).info, verdict, detail)
        return comp

    # --- the search -----------------------------------------------------------------------

    def run(self, good: str, bad: str) -> Outcome:
        chain = self.repo.first_parent_chain(good, bad)
        self.order = [good, *chain]
        self.events.phase(f"preflight: is {bad[:10]} worse than {good[:10]}?")
        preflight = self.compare(bad, good, "preflight")
        for sha, role in ((good, "good"), (bad, "bad")):
            build = self.record(sha).build
            if build is not None and not build.ok:
                raise ReferenceFailed(f"the {role} revision {sha[:10]} did not build ({build.reason}); log: {build.log_path}")
        if preflight.verdict is Verdict.SKIP:
            raise ReferenceFailed(f"cannot measure the references: {preflight.reason}")
        if preflight.verdict is Verdict.GOOD:
            return self._outcome(Status.NOT_REPRODUCED, good, bad, [], preflight)
        if preflight.verdict is Verdict.INCONCLUSIVE:
            self.notes.append(
                f"bad is not clearly worse than good after {len(preflight.diffs)} rounds; "
                "raise --max-rounds or lower the noise to decide"
            )
            return self._outcome(Status.INCONCLUSIVE, good, bad, [], preflight)
        culprits = self.find_culprits(chain, good, preflight)
        undecided = any(
            self.verdicts.get(a, ("", Verdict.SKIP))[1] is Verdict.INCONCLUSIVE
            for c in culprits
            for a in c.ambiguous_with
        )
        unconfirmed = any(not c.confirmed for c in culprits)
        status = Status.INCONCLUSIVE if undecided or unconfirmed or not culprits else Status.CULPRIT_FOUND
        return self._outcome(status, good, bad, culprits, preflight)

    def find_culprits(self, chain: list[str], reference: str, known_bad: Comparison | None) -> list[Culprit]:
        """Culprits along `chain` (oldest first) relative to `reference`, one after another."""
        culprits: list[Culprit] = []
        while chain:
            end = chain[-1]
            test = known_bad or self.compare(end, reference, "remaining")
            known_bad = None
            if test.verdict is not Verdict.BAD:
                if test.verdict is Verdict.INCONCLUSIVE:
                    self.notes.append(
                        f"whether {end[:10]} is worse than {reference[:10]} stayed undecided; "
                        "a further small culprit after it cannot be ruled out"
                    )
                break
            found = self.bisect(chain, reference)
            culprits.extend(self.descend(found))
            cut = chain.index(found.commit)
            reference, chain = found.commit, chain[cut + 1 :]
        return culprits

    def bisect(self, chain: list[str], reference: str) -> Culprit:
        positions = [reference, *chain]
        verdicts: list[Verdict | None] = [Verdict.GOOD, *([None] * (len(chain) - 1)), Verdict.BAD]
        retries = 0
        self.events.phase(f"bisecting {len(chain)} commits after {reference[:10]}")
        while True:
            probe = next_probe(verdicts)
            if probe is not None:
                verdicts[probe] = self.compare(positions[probe], reference, "probe").verdict
                continue
            b = boundary(verdicts)
            culprit, last_good = positions[b.first_bad], positions[b.last_good]
            self.events.phase(f"confirming {culprit[:10]} against {last_good[:10]}")
            confirm = self.compare(culprit, last_good, "confirm", self.config.min_rounds * CONFIRM_MIN_ROUNDS_FACTOR)
            if confirm.verdict is Verdict.BAD or retries >= MAX_CONFIRM_RETRIES:
                if confirm.verdict is not Verdict.BAD:
                    self.notes.append(f"the step {last_good[:10]} -> {culprit[:10]} was not confirmed ({confirm.verdict.value})")
                return Culprit(culprit, last_good, tuple(positions[i] for i in b.ambiguous), confirm)
            # The verdicts that led here disagree with a direct comparison: one was wrong.
            # Re-test both ends against the reference with fresh rounds and search on.
            retries += 1
            self.notes.append(f"confirmation of {culprit[:10]} disagreed; re-tested it and {last_good[:10]}")
            # The segment's end is bad by the test that opened it and the reference is good by
            # definition: neither is re-tested, so the segment stays closed.
            for pos in (b.first_bad, b.last_good):
                if 0 < pos < len(chain):
                    verdicts[pos] = self.compare(positions[pos], reference, "retest").verdict

    def descend(self, found: Culprit) -> list[Culprit]:
        """A merge culprit stands for the commits it brought in: name the one inside."""
        info = self.record(found.commit).info
        if not info.is_merge or found.ambiguous_with:
            return [found]
        first, second = info.parents[0], info.parents[1]
        base = self.repo.merge_base(first, second)
        side = self.repo.first_parent_chain(base, second)
        if not side:
            return [found]
        at = self.order.index(found.commit)
        self.order[at:at] = [s for s in side if s not in self.order]
        self.events.phase(f"{info.short} is a merge: searching the {len(side)} commits it brought in")
        inner = self.find_culprits(side, base, None)
        if not inner:
            self.notes.append(f"the merge {info.short} itself causes the change: its second parent alone does not")
            return [found]
        return [replace(c, via_merge=found.commit) for c in inner]

    def _outcome(
        self, status: Status, good: str, bad: str, culprits: list[Culprit], preflight: Comparison
    ) -> Outcome:
        return Outcome(
            status=status,
            good=good,
            bad=bad,
            culprits=tuple(culprits),
            preflight=preflight,
            comparisons=tuple(self.comparisons),
            verdicts=dict(self.verdicts),
            commits=dict(self.records),
            order=tuple(self.order),
            notes=tuple(self.notes),
        )
