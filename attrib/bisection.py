"""The search driver: which comparisons to ask for, and what their verdicts mean.

It asks the evaluation stage (evaluate/evaluation.py) for comparisons and reads their
verdicts; it never builds, runs, pools noise or decides a test itself:
  1. preflight: compare bad against good; no meaningful worsening -> not reproduced;
  2. bisect the first-parent chain for the first commit worse than the current reference
     (core/search.py proposes the probes);
  3. confirm the boundary with a direct, paired comparison culprit^ vs culprit; when that
     disagrees with the verdicts that led there, re-test both ends and search on;
  4. a merge culprit is descended into (its second-parent line, against the merge base);
  5. while the bad end is still worse than the latest culprit, search again after it:
     several culprits in one range are found one after another;
  6. optionally, revert each culprit on top of bad and show the regression goes away.

With probes > 1 the search proposes several commits at once (posterior quantiles), which are
built concurrently and measured in shared rounds against one reference.

A boundary whose confirmation says "bad" but whose size check (core/stats.size_posterior)
puts the step below the minimum change is a *smaller step*: reported apart with its estimate,
never a culprit; the search goes on after it, with it as the reference, only when the bad end
is still worse than it by the minimum change. With `[search] paths` only commits touching them
are candidates (`Outcome.untouched` lists the others, never built). With a deadline the search
stops when it is spent and reports the smallest range it proved, and what more time would buy.

Why an outcome is unresolved is recorded as structured causes (core/model.Cause); turning
them into sentences (and naming CLI flags) is the report's job.
"""


from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Protocol

from attrib.core import posterior as locate
from attrib.core.model import (
    Cause,
    CommitInfo,
    DecisionRule,
    Direction,
    Purpose,
    RevertStatus,
    SearchMethod,
    Status,
    UnresolvedCause,
    Verdict,
)
from attrib.core.search import boundary, change_posterior, next_probe, posterior_quantiles
from attrib.core.stats import TestConfig, min_change_shift, resolvable_change, to_pct, truncation_rounds
from attrib.errors import ReferenceFailed
from attrib.evaluate.evaluation import ArtifactNote, Builder, CommitRecord, Comparison, Drift, Evaluation, PhaseTimes
from attrib.evaluate.runners import Runner
from attrib.events import Events
from attrib.recipe import BenchmarkSpec
from attrib.report.sentences import noise_warning

MAX_CONFIRM_RETRIES = 2  # times a disagreeing confirmation may send the search back
MAX_INCONCLUSIVE_PROBES = 4  # per segment: then the search stops and reports the open range
MAX_FAILED_RUNS = 3  # posterior search: runs of one commit that may fail before it is a skip
TAU_PER_IGNORE = 4.0  # per-commit scatter in the posterior = ignore_below / this


def touches(files: Sequence[str], paths: Sequence[str]) -> bool:
    """Whether a commit's changed files fall under any of `paths` (a directory or a file)."""
    return any(f == p.rstrip("/") or f.startswith(p.rstrip("/") + "/") for f in files for p in paths)


class History(Protocol):
    """The commit graph the search walks (git, or a simulated history)."""

    def info(self, sha: str) -> CommitInfo: ...
    def first_parent_chain(self, good: str, bad: str) -> list[str]: ...
    def merge_base(self, a: str, b: str) -> str: ...


# Makes a commit that reverts `culprit` on top of `onto`; None when the revert conflicts.
Reverter = Callable[[str, str], "CommitInfo | None"]


@dataclass(frozen=True)
class RevertCheck:
    """bad with the culprit reverted on top, compared with bad itself."""

    status: RevertStatus
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

    @property
    def size_p(self) -> float:
        """P(this step >= the minimum change | its confirmation): part of `posterior`."""
        return self.confirmation.size_p


@dataclass(frozen=True)
class SmallerStep:
    """A confirmed step the data put below the minimum change: reported, never a culprit."""

    commit: str
    last_good: str
    confirmation: Comparison  # its estimate is the step's size
    size_p: float  # P(step >= the minimum change): below 1/2


@dataclass(frozen=True)
class Unresolved:
    """An inconclusive outcome's smallest range that holds the change, and why it is open."""

    last_good: str
    first_bad: str
    commits: tuple[str, ...]  # the candidates inside, ending with first_bad
    causes: tuple[Cause, ...]


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
    smaller_steps: tuple[SmallerStep, ...] = ()
    untouched: tuple[str, ...] = ()  # [search] paths: commits touching none of them, never built
    artifact_notes: tuple[ArtifactNote, ...] = ()  # artifacts differing only by a timestamp/path
    samples_saved: int = 0  # estimate: samples the same-artifact verdicts did not draw
    times: PhaseTimes = field(default_factory=PhaseTimes)
    out_of_time: bool = False  # the budget ended the search


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
        repo: History,
        builder: Builder,
        runner: Runner,
        bench: BenchmarkSpec,
        config: TestConfig,
        seed: int,
        events: Events | None = None,
        *,
        probes: int = 1,
        reverter: Reverter | None = None,
        round_context: Callable[[], AbstractContextManager[object]] | None = None,
        paths: Sequence[str] = (),
        deadline: float | None = None,
        clock: Callable[[], float] | None = None,
        method: SearchMethod = SearchMethod.SEQUENTIAL,
    ) -> None:
        self.repo = repo
        self.bench = bench
        self.method = method
        self.ignore = min_change_shift(bench.ignore_pct)
        if method is SearchMethod.POSTERIOR:
            # The indifference zone decides every comparison: <= ignore is GOOD, >= the minimum BAD.
            config = replace(config, size_check=False, ignore=self.ignore)
        else:
            # Every "bad" the search reads is sized: below the minimum change it is a smaller step.
            config = replace(config, size_check=True)
        self.config = config
        self.probes = max(1, probes)
        self.reverter = reverter
        self.paths = tuple(paths)
        extra = {"clock": clock} if clock is not None else {}
        self.evaluation = Evaluation(
            repo, builder, runner, bench, config, random.Random(seed), events, build_width=self.probes,
            round_context=round_context,
            deadline=deadline, **extra,  # type: ignore[arg-type]
        )
        self.smaller: list[SmallerStep] = []
        self.untouched: list[str] = []
        self.events = self.evaluation.events
        self.verdicts: dict[str, tuple[str, Verdict]] = {}
        self.order: list[str] = []
        self.notes: list[str] = []
        self.unresolved: list[Unresolved] = []

    # --- asking the evaluation stage ------------------------------------------------------

    def compare_many(
        self,
        candidates: Sequence[str],
        reference: str,
        purpose: Purpose,
        config: TestConfig | None = None,
        placed_against: str | None = None,
        **kw: object,
    ) -> list[Comparison]:
        """`placed_against`: the segment's reference when `reference` is its byte-identical stand-in."""
        comps = self.evaluation.compare(candidates, reference, purpose, config, **kw)  # type: ignore[arg-type]
        if purpose.places_commit:
            for comp in comps:
                self.verdicts[comp.candidate] = (placed_against or reference, comp.verdict)
        return comps

    def compare(
        self,
        candidate: str,
        reference: str,
        purpose: Purpose,
        config: TestConfig | None = None,
        placed_against: str | None = None,
    ) -> Comparison:
        return self.compare_many([candidate], reference, purpose, config, placed_against)[0]

    # --- the search -----------------------------------------------------------------------

    def run(self, good: str, bad: str, verify_revert: bool = False) -> Outcome:
        chain = self.repo.first_parent_chain(good, bad)
        self.order = [good, *chain]
        self.events.phase(f"preflight: is {bad[:10]} worse than {good[:10]}?")
        preflight = self.compare(bad, good, Purpose.PREFLIGHT)
        for sha, role in ((good, "good"), (bad, "bad")):
            build = self.evaluation.record(sha).build
            if build is not None and not build.ok:
                raise ReferenceFailed(f"the {role} revision {sha[:10]} did not build ({build.reason}); log: {build.log_path}")
        if preflight.verdict is Verdict.SKIP:
            raise ReferenceFailed(f"cannot measure the references: {preflight.reason}")
        if preflight.verdict is Verdict.GOOD:
            return self._outcome(Status.NOT_REPRODUCED, good, bad, [], preflight)
        # Said for an undecided preflight too: there, what noise this is and what minimum would
        # fit is the advice the run most needs (benchmarks/REAL.md's wall-clock runs got none).
        self._warn_if_too_noisy(preflight)
        if preflight.verdict is Verdict.INCONCLUSIVE:
            cause = Cause(
                UnresolvedCause.NOT_CLEARLY_WORSE,
                rounds=len(preflight.diffs),
                change_pct=to_pct(preflight.estimate.shift, self.bench.direction),
            )
            self.unresolved.append(Unresolved(good, bad, tuple(chain), (cause,)))
            return self._outcome(Status.INCONCLUSIVE, good, bad, [], preflight)
        culprits = self.find_culprits(chain, good, preflight)
        if verify_revert:
            culprits = [replace(c, revert=self.revert_check(c.commit, bad)) for c in culprits]
        for c in culprits:
            self._note_unresolved(c)
        status = Status.INCONCLUSIVE if self.unresolved or not culprits else Status.CULPRIT_FOUND
        return self._outcome(status, good, bad, culprits, preflight)

    def _warn_if_too_noisy(self, preflight: Comparison) -> None:
        """One line before the search when this noise leaves tests that find no change only the
        cap: better known now than read off a row of inconclusive tests."""
        needed = truncation_rounds(preflight.sigma, self.evaluation.delta, self.config)
        if self.config.truncate and math.isfinite(preflight.sigma) and needed > self.config.max_rounds:
            sigma_pct = to_pct(preflight.sigma, Direction.LOWER)
            resolvable_pct = to_pct(resolvable_change(preflight.sigma, self.config), Direction.LOWER)
            text = noise_warning(sigma_pct, self.bench.min_change_pct, self.config.max_rounds, needed, resolvable_pct)
            self.events.phase(text)

    def _relevant(self, chain: list[str]) -> list[str]:
        """With [search] paths, the commits of `chain` touching them (like `git bisect -- paths`);
        the others are recorded as untouched and never built."""
        if not self.paths:
            return chain
        keep = [c for c in chain if touches(self.repo.info(c).files, self.paths)]
        self.untouched.extend(c for c in chain if c not in keep and c not in self.untouched)
        return keep

    def find_culprits(self, chain: list[str], reference: str, known_bad: Comparison | None) -> list[Culprit]:
        """Culprits along `chain` (oldest first) relative to `reference`, one after another.
        Smaller steps found on the way go to self.smaller and the search goes on after them."""
        culprits: list[Culprit] = []
        chain = self._relevant(chain)
        if not chain:
            self.notes.append(f"no commit after {reference[:10]} touches {', '.join(self.paths)}")
        while chain:
            if self.evaluation.out_of_time:
                self._budget_spent(chain, reference)
                break
            end = chain[-1]
            test = known_bad or self.compare(end, self.evaluation.stand_in(reference), Purpose.REMAINING)
            known_bad = None
            if test.verdict is not Verdict.BAD:
                if test.verdict is Verdict.INCONCLUSIVE:
                    self.notes.append(
                        f"whether {end[:10]} is worse than {reference[:10]} stayed undecided; "
                        "a further small culprit after it cannot be ruled out"
                    )
                break
            found = self.locate(chain, reference) if self.method is SearchMethod.POSTERIOR else self.bisect(chain, reference)
            if found is None:  # the budget ran out inside the segment: its range is recorded
                break
            if isinstance(found, SmallerStep):
                self.smaller.append(found)
                self.notes.append(
                    f"{found.commit[:10]} is a smaller step than the minimum change "
                    f"(P(>= minimum) = {found.size_p:.2f}): not a culprit"
                )
            mark = len(culprits)
            if not isinstance(found, SmallerStep):
                culprits.extend(self.descend(found))
            cut = chain.index(found.commit)
            if self.method is SearchMethod.POSTERIOR and found.last_good != reference:
                # the posterior finds the largest step, not the first: the stretch before it
                # is searched too, when its end is still worse than the reference
                culprits[mark:mark] = self.find_culprits(chain[: chain.index(found.last_good) + 1], reference, None)
            reference, chain = found.commit, chain[cut + 1 :]
        return culprits

    def _next_probes(self, seg: _Segment) -> list[int]:
        if self.probes == 1:
            probe = next_probe(seg.verdicts)
            return [] if probe is None else [probe]
        b = boundary(seg.verdicts)
        open_positions = [i for i in range(b.last_good + 1, b.first_bad) if seg.verdicts[i] is None]
        return posterior_quantiles(seg.posterior(), self.probes, open_positions)

    def _budget_spent(self, chain: Sequence[str], reference: str, b: tuple[int, int] | None = None) -> None:
        """The deadline passed: record the smallest range proved so far and what finishing costs."""
        lo, hi = b or (0, len(chain))
        positions = [reference, *chain]
        inside = tuple(positions[lo + 1 : hi + 1])
        probes_left = math.ceil(math.log2(max(2, len(inside)))) + 1  # bisection steps + the confirmation
        times = self.evaluation.times
        per = (times.measure_s + times.decide_s) / times.comparisons if times.comparisons else math.nan
        cause = Cause(
            UnresolvedCause.OUT_OF_TIME, inside, rounds=probes_left, seconds=per * probes_left if per == per else None
        )
        self.unresolved.append(Unresolved(positions[lo], positions[hi], inside, (cause,)))
        self.notes.append(
            f"the time budget ran out with {len(inside)} commit(s) open after {positions[lo][:10]}; "
            f"about {probes_left} more comparisons" + (f" (~{per * probes_left / 60:.0f} min)" if per == per else "")
            + " would settle it"
        )

    def bisect(self, chain: list[str], reference: str) -> Culprit | SmallerStep | None:
        seg = _Segment([reference, *chain], [Verdict.GOOD, *([None] * (len(chain) - 1)), Verdict.BAD])
        retries = 0
        measured_ref = self.evaluation.stand_in(reference)  # same bytes, possibly measured already
        self.events.phase(f"bisecting {len(chain)} commits after {reference[:10]}{self._eta(len(chain))}")
        stopped = False
        while True:
            if self.evaluation.out_of_time:
                b = boundary(seg.verdicts)
                self._budget_spent(chain, reference, (b.last_good, b.first_bad))
                return None
            probes = self._next_probes(seg)
            if probes and seg.verdicts.count(Verdict.INCONCLUSIVE) >= MAX_INCONCLUSIVE_PROBES:
                # The noise is too high for this minimum change: more probes would only walk
                # through neighbours at the cap. Stop and report the open range instead.
                self.notes.append(
                    f"stopped probing after {MAX_INCONCLUSIVE_PROBES} inconclusive tests after {reference[:10]}"
                )
                probes, stopped = [], True
            if probes:
                comps = self.compare_many(
                    [seg.positions[p] for p in probes], measured_ref, Purpose.PROBE, placed_against=reference
                )
                for pos, comp in zip(probes, comps, strict=True):
                    seg.verdicts[pos] = comp.verdict
                    seg.tests.append((pos, comp.evidence))
                continue
            b = boundary(seg.verdicts)
            if stopped:
                b = replace(b, ambiguous=tuple(range(b.last_good + 1, b.first_bad)))
            elif self._extend_undecided(seg, b.ambiguous, measured_ref):
                continue
            culprit, last_good = seg.positions[b.first_bad], seg.positions[b.last_good]
            self.events.phase(f"confirming {culprit[:10]} against {last_good[:10]}")
            confirm = self.compare(culprit, self.evaluation.stand_in(last_good), Purpose.CONFIRM, self.config.confirming())
            seg.steps.append((b.last_good, b.first_bad, confirm.evidence))
            if confirm.rule is DecisionRule.BUDGET:
                self._budget_spent(chain, reference, (b.last_good, b.first_bad))
                return None
            if confirm.smaller:
                return SmallerStep(culprit, last_good, confirm, confirm.size_p)
            if confirm.verdict is Verdict.BAD or retries >= MAX_CONFIRM_RETRIES:
                if confirm.verdict is not Verdict.BAD:
                    self.notes.append(f"the step {last_good[:10]} -> {culprit[:10]} was not confirmed ({confirm.verdict.value})")
                post = seg.posterior()
                # where the change is, times whether it is at least the minimum change
                size = confirm.size_p if confirm.size_p == confirm.size_p else 1.0
                return Culprit(
                    culprit,
                    last_good,
                    tuple(seg.positions[i] for i in b.ambiguous),
                    confirm,
                    posterior=post[b.first_bad] * size,
                    range_posterior=sum(post[i] for i in (*b.ambiguous, b.first_bad)) * size,
                )
            # The verdicts that led here disagree with a direct comparison: one was wrong.
            # Re-test both ends against the reference with fresh rounds and search on.
            retries += 1
            self.notes.append(f"confirmation of {culprit[:10]} disagreed; re-tested it and {last_good[:10]}")
            # The segment's end is bad by the test that opened it and the reference is good by
            # definition: neither is re-tested, so the segment stays closed.
            for pos in (b.first_bad, b.last_good):
                if 0 < pos < len(chain):
                    comp = self.compare(seg.positions[pos], measured_ref, Purpose.RETEST, placed_against=reference)
                    seg.verdicts[pos] = comp.verdict
                    seg.tests.append((pos, comp.evidence))

    def _blocks(self, sha: str) -> list[float]:
        rec = self.evaluation.records.get(self.evaluation.stand_in(sha))
        return list(rec.blocks) if rec is not None else []

    def _times(self, sha: str) -> list[float]:
        rec = self.evaluation.records.get(self.evaluation.stand_in(sha))
        return [float(t) for t in rec.block_times] if rec is not None else []

    def _measure_block(self, sha: str, failures: dict[str, list[bool]]) -> bool:
        """One more block of `sha` (its byte-identical stand-in's); False once it is hopeless."""
        build = self.evaluation.build(sha)
        if not build.ok:
            return False
        target = self.evaluation.stand_in(sha)
        with self.evaluation.round_context():  # slurm: a block runs inside an allocation, as a round does
            result = self.evaluation.measure(target)
        self.evaluation.rounds += 1
        runs = failures.setdefault(target, [])
        runs.append(result.ok)
        fails = runs.count(False)
        return not (fails >= MAX_FAILED_RUNS and fails > runs.count(True))

    def locate(self, chain: list[str], reference: str) -> Culprit | SmallerStep | None:
        """The posterior search of one segment (core/posterior.py): every block of every commit
        enters one posterior; it asks for the next block or build, then for a confirmation."""
        positions = [reference, *chain]
        n = len(chain)
        unbuildable: set[int] = set()
        failures: dict[str, list[bool]] = {}
        tau = self.ignore / TAU_PER_IGNORE
        cap = self.config.max_rounds * (math.ceil(math.log2(n + 1)) + 2)
        spent, retries = 0, 0
        self.events.phase(f"locating the change in {n} commits after {reference[:10]}")
        for end in (0, n):  # a merge's side line: its ends may not be measured yet
            while len(self._blocks(positions[end])) < self.config.min_rounds:
                if not self._measure_block(positions[end], failures):
                    raise ReferenceFailed(f"cannot measure {positions[end][:10]}, an end of the searched range")
        while True:
            blocks = {i: self._blocks(positions[i]) for i in range(n + 1)}
            times = {i: self._times(positions[i]) for i in range(n + 1)}
            req, post = locate.next_request(
                n, blocks, unbuildable=frozenset(unbuildable), tau=tau, blocks_left=cap - spent, times=times
            )
            if self.evaluation.out_of_time:
                lo, hi = self._credible_range(post)
                self._budget_spent(chain, reference, (lo, hi))
                return None
            if req.action in (locate.Action.MEASURE, locate.Action.BUILD):
                if not self._measure_block(positions[req.position], failures):
                    unbuildable.add(req.position)
                spent += 1
                continue
            self._place(positions, post, unbuildable)
            k, last = req.position, req.last_good
            culprit, last_good = positions[k], positions[last]
            self.events.phase(f"confirming {culprit[:10]} against {last_good[:10]}")
            confirm = self.compare(culprit, self.evaluation.stand_in(last_good), Purpose.CONFIRM, self.config.confirming())
            if confirm.rule is DecisionRule.BUDGET:
                self._budget_spent(chain, reference, (last, k))
                return None
            blocks = {i: self._blocks(positions[i]) for i in range(n + 1)}
            times = {i: self._times(positions[i]) for i in range(n + 1)}
            after = locate.posterior(n, blocks, tau=tau, times=times)
            held = sum(after.probs[last + 1 : k + 1])
            amb = tuple(positions[i] for i in req.ambiguous)
            if confirm.verdict is Verdict.BAD or req.action is locate.Action.EXHAUSTED or retries >= MAX_CONFIRM_RETRIES:
                if confirm.verdict is not Verdict.BAD:
                    self.notes.append(f"the step {last_good[:10]} -> {culprit[:10]} was not confirmed ({confirm.verdict.value})")
                return Culprit(culprit, last_good, amb, confirm, posterior=after.probs[k], range_posterior=held)
            if confirm.verdict is Verdict.GOOD and held >= locate.DEFAULT_LOCATE_AT:
                # the change is here, and the paired rounds put it at or near the ignored size
                return SmallerStep(culprit, last_good, confirm, math.nan)
            retries += 1  # the confirmation's rounds are blocks of both: the posterior moved
            self.notes.append(f"confirmation of {culprit[:10]} disagreed; searching on with its rounds")

    def _credible_range(self, post: locate.Posterior) -> tuple[int, int]:
        req = locate._exhausted(post, frozenset(), locate.DEFAULT_LOCATE_AT)
        return req.last_good, req.position

    def _place(self, positions: list[str], post: locate.Posterior, unbuildable: set[int]) -> None:
        """Verdicts for the report: each measured commit's side where the posterior settles it."""
        for i, sha in enumerate(positions[1:-1], start=1):
            if i in unbuildable:
                self.verdicts[sha] = (positions[0], Verdict.SKIP)
            elif self._blocks(sha):
                f = post.below(i)
                side = Verdict.BAD if f >= 0.99 else Verdict.GOOD if f <= 0.01 else Verdict.INCONCLUSIVE
                self.verdicts[sha] = (positions[0], side)

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
        last = {c.candidate: c.diffs for c in self.evaluation.comparisons if c.reference == reference and c.candidate in shas}
        self.events.phase(f"more samples for {len(shas)} inconclusive commit(s) at the boundary")
        comps = self.compare_many(
            shas, reference, Purpose.EXTEND, self.config.extended(), placed_against=seg.positions[0], resume=last
        )
        for i, comp in zip(todo, comps, strict=True):
            seg.verdicts[i] = comp.verdict
            # the extension continues the same test: its LLR replaces the earlier one
            seg.tests = [(p, llr) for p, llr in seg.tests if p != i] + [(i, comp.evidence)]
        return True

    def descend(self, found: Culprit) -> list[Culprit]:
        """A merge culprit stands for the commits it brought in: name the one inside."""
        info = self.evaluation.record(found.commit).info
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
            return RevertCheck(RevertStatus.UNAVAILABLE, None, None, "no way to make revert commits here")
        self.events.phase(f"revert check: {bad[:10]} with {culprit[:10]} reverted")
        info = self.reverter(culprit, bad)
        if info is None:
            return RevertCheck(RevertStatus.CONFLICT, None, None, f"reverting {culprit[:10]} on {bad[:10]} conflicts")
        self.evaluation.record(info.sha, info)
        build = self.evaluation.build(info.sha)
        if not build.ok:
            return RevertCheck(RevertStatus.BUILD_FAILED, info.sha, None, build.reason)
        comp = self.compare(bad, info.sha, Purpose.REVERT)
        status = {Verdict.BAD: RevertStatus.RECOVERED, Verdict.GOOD: RevertStatus.NOT_RECOVERED}.get(
            comp.verdict, RevertStatus.INCONCLUSIVE
        )
        return RevertCheck(status, info.sha, comp)

    def _note_unresolved(self, c: Culprit) -> None:
        undecided = tuple(a for a in c.ambiguous_with if self.verdicts.get(a, ("", None))[1] is Verdict.INCONCLUSIVE)
        untested = tuple(a for a in c.ambiguous_with if a not in self.verdicts)
        skipped = tuple(a for a in c.ambiguous_with if a not in undecided and a not in untested)
        if not undecided and not untested and c.confirmed:
            return
        causes = []
        if undecided:
            causes.append(Cause(UnresolvedCause.UNDECIDED_AT_CAP, undecided))
        if untested:
            causes.append(Cause(UnresolvedCause.NOT_MEASURED, untested))
        if skipped:
            causes.append(Cause(UnresolvedCause.UNBUILDABLE, skipped))
        if not c.confirmed:
            causes.append(
                Cause(
                    UnresolvedCause.NOT_CONFIRMED,
                    (c.last_good, c.commit),
                    rounds=len(c.confirmation.diffs),
                    verdict=c.confirmation.verdict,
                )
            )
        self.unresolved.append(Unresolved(c.last_good, c.commit, (*c.ambiguous_with, c.commit), tuple(causes)))

    def _outcome(
        self, status: Status, good: str, bad: str, culprits: list[Culprit], preflight: Comparison
    ) -> Outcome:
        ev = self.evaluation
        return Outcome(
            status=status,
            good=good,
            bad=bad,
            culprits=tuple(culprits),
            preflight=preflight,
            comparisons=tuple(ev.comparisons),
            verdicts=dict(self.verdicts),
            commits=dict(ev.records),
            order=tuple(self.order),
            notes=tuple(self.notes),
            unresolved=tuple(self.unresolved),
            drift=ev.drift([good, bad, *(c.commit for c in culprits)]),
            rounds=ev.rounds,
            smaller_steps=tuple(self.smaller),
            untouched=tuple(self.untouched),
            artifact_notes=tuple(ev.artifact_notes),
            samples_saved=ev.samples_saved(),
            times=ev.times,
            out_of_time=ev.out_of_time,
        )

    def _eta(self, open_commits: int) -> str:
        """' (elapsed .., about .. left)' from this bisection's own mean comparison time."""
        t = self.evaluation.times
        if not t.comparisons:
            return ""
        per = (t.build_s + t.measure_s + t.decide_s) / t.comparisons
        left = (math.ceil(math.log2(max(2, open_commits))) + 2) * per
        elapsed = t.build_s + t.measure_s + t.decide_s
        return f" (elapsed {_clock(elapsed)}, about {_clock(left)} left)"


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"
