"""Drive one bisection: the pure search and statistics on one side, builds and runs on the other.

The engine owns no policy of its own beyond ordering the work:
  1. preflight: compare bad against good; no meaningful worsening -> not reproduced;
  2. bisect the first-parent chain for the first commit worse than the current reference;
  3. confirm the boundary with a direct, paired comparison culprit^ vs culprit; when that
     disagrees with the verdicts that led there, re-test both ends and search on;
  4. a merge culprit is descended into (its second-parent line, against the merge base);
  5. while the bad end is still worse than the latest culprit, search again after it:
     several culprits in one range are found one after another;
  6. optionally, revert each culprit on top of bad and show the regression goes away.

With jobs > 1 the search proposes several commits at once (posterior quantiles), builds them
concurrently and measures them in shared rounds against one reference block.
"""


from __future__ import annotations

import math
import random
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import numpy as np

from attrib.core.model import CommitInfo, Status, Verdict
from attrib.core.search import boundary, change_posterior, next_probe, posterior_quantiles
from attrib.core.stats import (
    Estimate,
    TestConfig,
    block_shift,
    faster_half,
    min_change_shift,
    oriented_logs,
    pooled_sigma,
    robust_sd,
    shift_estimate,
    sprt,
    to_pct,
)
from attrib.errors import ReferenceFailed
from attrib.evaluate.builds import Builder, BuildRecord
from attrib.evaluate.runners import Runner, RunResult
from attrib.gitrepo import GitRepo
from attrib.recipe import BenchmarkSpec

MAX_FAILED_RUNS = 3  # per commit and comparison: then the commit is untestable (skip)
MAX_CONFIRM_RETRIES = 2  # times a disagreeing confirmation may send the search back
CONFIRM_MIN_ROUNDS_FACTOR = 2  # the confirmation also sizes the culprit's CI: give it more rounds
MAX_INCONCLUSIVE_PROBES = 4  # per segment: then the search stops and reports the open range
EXTEND_FACTOR = 2  # an inconclusive test at the boundary may go on to this many times the cap
DRIFT_MIN_BLOCKS = 10  # a reference needs this many blocks before its drift is reported
DRIFT_WINDOW = 5  # blocks at the start and at the end whose levels are compared


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


# Makes a commit that reverts `culprit` on top of `onto`; None when the revert conflicts.
Reverter = Callable[[str, str], "CommitInfo | None"]


@dataclass(frozen=True)
class Comparison:
    """One sequential test of a candidate against a reference."""

    candidate: str
    reference: str
    purpose: str  # preflight | probe | retest | confirm | remaining | revert | compare
    verdict: Verdict
    diffs: tuple[float, ...]  # per-round oriented log shifts, candidate - reference
    llr: float
    sigma: float
    estimate: Estimate
    reason: str = ""  # why it is a skip


@dataclass(frozen=True)
class RevertCheck:
    """bad with the culprit reverted on top, compared with bad itself."""

    status: str  # recovered | not_recovered | inconclusive | conflict | build_failed | unavailable
    reverted: str | None  # sha of the revert commit (made in the work dir's mirror)
    comparison: Comparison | None  # candidate = bad, reference = the reverted build
    detail: str = ""


@dataclass(frozen=True)
class Culprit:
    commit: str
    last_good: str  # the good-like commit it was confirmed against (its parent unless skips)
    ambiguous_with: tuple[str, ...]
    confirmation: Comparison
    posterior: float = math.nan  # P(the change is exactly this commit | all measurements)
    range_posterior: float = math.nan  # P(it is this commit or one it is ambiguous with)
    via_merge: str | None = None  # set when found inside a merge's second-parent line
    revert: RevertCheck | None = None

    @property
    def confirmed(self) -> bool:
        return self.confirmation.verdict is Verdict.BAD


@dataclass(frozen=True)
class Unresolved:
    """An inconclusive outcome's smallest range that holds the change, and what would settle it."""

    last_good: str
    first_bad: str
    commits: tuple[str, ...]  # the candidates inside, ending with first_bad
    why: str
    resolve: str


@dataclass
class CommitRecord:
    info: CommitInfo
    build: BuildRecord | None = None
    samples: list[float] = field(default_factory=list)
    blocks: list[float] = field(default_factory=list)  # per run: oriented log level, in time order
    failed_runs: list[str] = field(default_factory=list)
    excluded: Counter[str] = field(default_factory=Counter)  # samples the runner flagged, by reason
    nodes: list[str] = field(default_factory=list)  # issue 13: per usable run, the node it ran on ("" here)


@dataclass(frozen=True)
class Drift:
    commit: str
    blocks: int
    change_pct: float  # level of its last blocks against its first ones


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
    unresolved: tuple[Unresolved, ...] = ()
    drift: tuple[Drift, ...] = ()
    rounds: int = 0  # measurement rounds, in sequence: what parallel probing shortens


@dataclass
class _Segment:
    """Bookkeeping of one bisection segment: positions and the evidence about them."""

    positions: list[str]
    verdicts: list[Verdict | None]
    tests: list[tuple[int, float]] = field(default_factory=list)
    steps: list[tuple[int, int, float]] = field(default_factory=list)
    extended: set[str] = field(default_factory=set)  # commits whose inconclusive test was extended

    def posterior(self) -> list[float]:
        return change_posterior(len(self.positions) - 1, self.tests, self.steps)


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
        *,
        jobs: int = 1,
        reverter: Reverter | None = None,
        round_context: Callable[[], AbstractContextManager[object]] | None = None,
    ) -> None:
        self.repo = repo
        self.round_context = round_context or nullcontext  # issue 13: Executor.round
        self.builder = builder
        self.runner = runner
        self.bench = bench
        self.config = config
        self.jobs = max(1, jobs)
        self.reverter = reverter
        self.delta = min_change_shift(bench.min_change_pct)
        self.rng = random.Random(seed)
        self.events: Events = events or NullEvents()
        self.records: dict[str, CommitRecord] = {}
        self.comparisons: list[Comparison] = []
        self.verdicts: dict[str, tuple[str, Verdict]] = {}
        self.order: list[str] = []
        self.notes: list[str] = []
        self.unresolved: list[Unresolved] = []
        self.rounds = 0

    # --- edges: build and measure one commit ----------------------------------------------

    def record(self, sha: str, info: CommitInfo | None = None) -> CommitRecord:
        if sha not in self.records:
            self.records[sha] = CommitRecord(info or self.repo.info(sha))
        return self.records[sha]

    def build(self, sha: str) -> BuildRecord:
        rec = self.record(sha)
        if rec.build is None:
            self.events.build_started(rec.info)
            rec.build = self.builder.build(rec.info)
            self.events.build_finished(rec.info, rec.build)
        return rec.build

    def build_all(self, shas: Sequence[str]) -> None:
        """Build several commits, concurrently when jobs > 1 (builds are independent)."""
        todo = [s for s in dict.fromkeys(shas) if self.record(s).build is None]
        if self.jobs > 1 and len(todo) > 1:
            with ThreadPoolExecutor(max_workers=self.jobs) as pool:
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
            rec.nodes.append(result.node)  # issue 13
            rec.samples.extend(result.samples)
            logs = oriented_logs(result.samples, self.bench.direction)
            rec.blocks.append(float(np.median(faster_half(logs) if self.bench.block_statistic == "faster_half" else logs)))
        else:
            rec.failed_runs.append(result.error)
        return result

    # --- sequential comparisons -----------------------------------------------------------

    def compare(self, candidate: str, reference: str, purpose: str, min_rounds: int | None = None) -> Comparison:
        return self.compare_many([candidate], reference, purpose, min_rounds)[0]

    def compare_many(
        self,
        candidates: Sequence[str],
        reference: str,
        purpose: str,
        min_rounds: int | None = None,
        *,
        resume: Mapping[str, Sequence[float]] | None = None,
        max_rounds: int | None = None,
    ) -> list[Comparison]:
        """Sequential tests of each candidate against one reference, in shared rounds.

        Each round runs the reference and every undecided candidate once, in a fresh random
        order; each candidate's SPRT sees its own paired shifts and stops on its own.
        `resume` continues earlier tests from their shifts (with a higher `max_rounds`)."""
        config = replace(
            self.config,
            min_rounds=max(min_rounds or 0, self.config.min_rounds),
            max_rounds=max_rounds or self.config.max_rounds,
        )
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
            # issue 13 (slurm): a round runs inside one allocation on one node (Executor.round)
            with self.round_context():
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
                sigma = pooled_sigma([*history, d])
                if len(d) >= config.min_rounds:
                    # Real noise is not stationary: when this comparison is noisier than the
                    # history, its own spread wins, so a quiet past cannot make it overconfident.
                    # Robust (MAD) spread: one disturbed round must not stall the test.
                    sigma = max(sigma, robust_sd(d))
                decision = sprt(d, self.delta, sigma, config)
                cand_rec = self.record(cand)
                self.events.round_done(cand_rec.info, ref.info, len(d), decision.llr, len(cand_rec.samples) + len(ref.samples))
                if decision.verdict is not None:
                    results[cand] = self._finish(cand, reference, purpose, decision.verdict, d, decision.llr, sigma)
                    active.remove(cand)
        return [results[c] for c in candidates]

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
        if purpose in ("probe", "retest", "extend"):
            self.verdicts[candidate] = (reference, verdict)
        detail = reason or f"{len(diffs)} rounds, LLR {llr:+.2f}"
        self.events.verdict(self.record(candidate).info, self.record(reference).info, verdict, detail)
        return comp

    # --- the search -----------------------------------------------------------------------

    def run(self, good: str, bad: str, verify_revert: bool = False) -> Outcome:
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
            self.unresolved.append(
                Unresolved(
                    good,
                    bad,
                    tuple(chain),
                    f"bad is not clearly worse than good by {self.bench.min_change_pct:g} % after {len(preflight.diffs)} rounds "
                    f"(measured {to_pct(preflight.estimate.shift, self.bench.direction):+.2f} %)",
                    f"more rounds (--max-rounds {self.config.max_rounds * 2}); or, if a change this small does not "
                    "matter, nothing: it is below the recipe's min_change_pct",
                )
            )
            return self._outcome(Status.INCONCLUSIVE, good, bad, [], preflight)
        culprits = self.find_culprits(chain, good, preflight)
        if verify_revert:
            culprits = [replace(c, revert=self.revert_check(c.commit, bad)) for c in culprits]
        for c in culprits:
            self._note_unresolved(c)
        status = Status.INCONCLUSIVE if self.unresolved or not culprits else Status.CULPRIT_FOUND
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

    def _next_probes(self, seg: _Segment) -> list[int]:
        if self.jobs == 1:
            probe = next_probe(seg.verdicts)
            return [] if probe is None else [probe]
        b = boundary(seg.verdicts)
        open_positions = [i for i in range(b.last_good + 1, b.first_bad) if seg.verdicts[i] is None]
        return posterior_quantiles(seg.posterior(), self.jobs, open_positions)

    def bisect(self, chain: list[str], reference: str) -> Culprit:
        seg = _Segment([reference, *chain], [Verdict.GOOD, *([None] * (len(chain) - 1)), Verdict.BAD])
        retries = 0
        self.events.phase(f"bisecting {len(chain)} commits after {reference[:10]}")
        stopped = False
        while True:
            probes = self._next_probes(seg)
            if probes and seg.verdicts.count(Verdict.INCONCLUSIVE) >= MAX_INCONCLUSIVE_PROBES:
                # The noise is too high for this minimum change: more probes would only walk
                # through neighbours at the cap. Stop and report the open range instead.
                self.notes.append(
                    f"stopped probing after {MAX_INCONCLUSIVE_PROBES} inconclusive tests after {reference[:10]}"
                )
                probes, stopped = [], True
            if probes:
                comps = self.compare_many([seg.positions[p] for p in probes], reference, "probe")
                for pos, comp in zip(probes, comps, strict=True):
                    seg.verdicts[pos] = comp.verdict
                    seg.tests.append((pos, comp.llr))
                continue
            b = boundary(seg.verdicts)
            if stopped:
                b = replace(b, ambiguous=tuple(range(b.last_good + 1, b.first_bad)))
            elif self._extend_undecided(seg, b.ambiguous, reference):
                continue
            culprit, last_good = seg.positions[b.first_bad], seg.positions[b.last_good]
            self.events.phase(f"confirming {culprit[:10]} against {last_good[:10]}")
            confirm = self.compare(culprit, last_good, "confirm", self.config.min_rounds * CONFIRM_MIN_ROUNDS_FACTOR)
            seg.steps.append((b.last_good, b.first_bad, confirm.llr))
            if confirm.verdict is Verdict.BAD or retries >= MAX_CONFIRM_RETRIES:
                if confirm.verdict is not Verdict.BAD:
                    self.notes.append(f"the step {last_good[:10]} -> {culprit[:10]} was not confirmed ({confirm.verdict.value})")
                post = seg.posterior()
                return Culprit(
                    culprit,
                    last_good,
                    tuple(seg.positions[i] for i in b.ambiguous),
                    confirm,
                    posterior=post[b.first_bad],
                    range_posterior=sum(post[i] for i in (*b.ambiguous, b.first_bad)),
                )
            # The verdicts that led here disagree with a direct comparison: one was wrong.
            # Re-test both ends against the reference with fresh rounds and search on.
            retries += 1
            self.notes.append(f"confirmation of {culprit[:10]} disagreed; re-tested it and {last_good[:10]}")
            # The segment's end is bad by the test that opened it and the reference is good by
            # definition: neither is re-tested, so the segment stays closed.
            for pos in (b.first_bad, b.last_good):
                if 0 < pos < len(chain):
                    comp = self.compare(seg.positions[pos], reference, "retest")
                    seg.verdicts[pos] = comp.verdict
                    seg.tests.append((pos, comp.llr))

    def _extend_undecided(self, seg: _Segment, ambiguous: Sequence[int], reference: str) -> bool:
        """Inconclusive commits that decide the boundary get more samples, once each: their
        tests go on from where they stopped, up to EXTEND_FACTOR times the cap."""
        todo = [
            i
            for i in ambiguous
            if seg.verdicts[i] is Verdict.INCONCLUSIVE and seg.positions[i] not in seg.extended
        ]
        if not todo:
            return False
        shas = [seg.positions[i] for i in todo]
        seg.extended.update(shas)
        last = {c.candidate: c.diffs for c in self.comparisons if c.reference == reference and c.candidate in shas}
        self.events.phase(f"more samples for {len(shas)} inconclusive commit(s) at the boundary")
        comps = self.compare_many(
            shas, reference, "extend", resume=last, max_rounds=self.config.max_rounds * EXTEND_FACTOR
        )
        for i, comp in zip(todo, comps, strict=True):
            seg.verdicts[i] = comp.verdict
            # the extension continues the same test: its LLR replaces the earlier one
            seg.tests = [(p, llr) for p, llr in seg.tests if p != i] + [(i, comp.llr)]
        return True

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
        return [
            replace(
                c,
                via_merge=found.commit,
                posterior=c.posterior * found.posterior,
                range_posterior=c.range_posterior * found.posterior,
            )
            for c in inner
        ]

    def revert_check(self, culprit: str, bad: str) -> RevertCheck:
        """Build bad with the culprit reverted and show that the regression goes away."""
        if self.reverter is None:
            return RevertCheck("unavailable", None, None, "no way to make revert commits here")
        self.events.phase(f"revert check: {bad[:10]} with {culprit[:10]} reverted")
        info = self.reverter(culprit, bad)
        if info is None:
            return RevertCheck("conflict", None, None, f"reverting {culprit[:10]} on {bad[:10]} conflicts")
        self.record(info.sha, info)
        if not self.build(info.sha).ok:
            return RevertCheck("build_failed", info.sha, None, self.record(info.sha).build.reason)  # type: ignore[union-attr]
        comp = self.compare(bad, info.sha, "revert")
        status = {Verdict.BAD: "recovered", Verdict.GOOD: "not_recovered"}.get(comp.verdict, "inconclusive")
        return RevertCheck(status, info.sha, comp)

    def _note_unresolved(self, c: Culprit) -> None:
        undecided = [a for a in c.ambiguous_with if self.verdicts.get(a, ("", None))[1] is Verdict.INCONCLUSIVE]
        untested = [a for a in c.ambiguous_with if a not in self.verdicts]
        skipped = [a for a in c.ambiguous_with if a not in undecided and a not in untested]
        if not undecided and not untested and c.confirmed:
            return
        why, resolve = [], []
        if undecided:
            why.append(f"{len(undecided)} commit(s) stayed inconclusive at the cap")
            resolve.append(f"more samples for {', '.join(a[:10] for a in undecided)} (--max-rounds {self.config.max_rounds * 2})")
        if untested:
            why.append(f"{len(untested)} commit(s) were not measured: the search stopped at too many inconclusive tests")
            resolve.append("less noise (quieter machine, more reps) or a larger min_change_pct, then bisect this range")
        if skipped:
            why.append(f"{len(skipped)} commit(s) cannot be built or run")
            resolve.append(f"a fixed build of {', '.join(a[:10] for a in skipped)}")
        if not c.confirmed:
            why.append(f"the step {c.last_good[:10]} -> {c.commit[:10]} was not confirmed ({c.confirmation.verdict.value})")
            resolve.append("more rounds for the confirmation, or a larger min_change_pct if the step is small")
        self.unresolved.append(Unresolved(c.last_good, c.commit, (*c.ambiguous_with, c.commit), "; ".join(why), "; ".join(resolve)))

    def _drift(self, shas: Sequence[str]) -> tuple[Drift, ...]:
        out = []
        for sha in dict.fromkeys(shas):
            blocks = self.records[sha].blocks if sha in self.records else []
            if len(blocks) >= DRIFT_MIN_BLOCKS:
                shift = statistics.median(blocks[-DRIFT_WINDOW:]) - statistics.median(blocks[:DRIFT_WINDOW])
                out.append(Drift(sha, len(blocks), to_pct(shift, self.bench.direction)))
        return tuple(out)

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
            unresolved=tuple(self.unresolved),
            drift=self._drift([good, bad, *(c.commit for c in culprits)]),
            rounds=self.rounds,
        )
