"""The search driver: the order of a bisection, and what its findings mean.

  1. preflight: compare bad against good; no meaningful worsening -> not reproduced;
  2. search the first-parent chain for the change, one segment at a time (attrib/segment/:
     the posterior search by default, the sequential one by `[search] method`), which
     confirms the boundary it finds, culprit^ against culprit;
  3. a merge culprit is descended into (its second-parent line, against the merge base);
  4. while the bad end is still worse than the latest culprit, search again after it, and,
     since the posterior finds the largest step rather than the first, before it too:
     several culprits in one range are found one after another;
  5. a culprit that rolls a dependency's pin (a submodule, a pin file) is descended into: the
     dependency's own range old..new is bisected by a whole bisection of its own, the
     superproject fixed at the roll's parent and the dependency at each candidate (recursive);
  6. optionally, revert each culprit on top of bad and show the regression goes away.

The steps beside the segment searches are modules of segment/ too: preflight.py (1),
remaining.py (whether a stretch is still worth searching, 4), revert_check.py (5) and
open_ranges.py (the records of a range left open).

It asks the evaluation stage for builds, blocks and comparisons only through
segment/scope.Evidence, and it writes no sentences: what it noticed is `Note`s, why a range
stayed open is `Cause`s, progress is `Phase` events (core/model.py); report/ and progress.py
word them. With `[search] paths` only commits touching them are candidates; with a deadline
the search stops when it is spent and reports the smallest range it proved.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from attrib.core.model import DecisionRule, Note, NoteKind, RollRelation, SearchMethod, Status, Step, Verdict
from attrib.core.stats import TestConfig
from attrib.evaluate.evaluation import Settings, Stage
from attrib.evaluate.records import Comparison
from attrib.evaluate.runners import Runner
from attrib.evaluate.twins import Builder
from attrib.events import Events, NullEvents
from attrib.outcome import (
    CommitGraph,
    Culprit,
    Dependencies,
    Found,
    Outcome,
    OutOfTime,
    Reverter,
    Roll,
    SmallerStep,
    Unresolved,
)
from attrib.recipe import BenchmarkSpec
from attrib.segment.open_ranges import culprit_range, out_of_time
from attrib.segment.posterior_search import PosteriorSearch
from attrib.segment.preflight import Preflight, preflight
from attrib.segment.remaining import RemainingChange
from attrib.segment.revert_check import revert_check
from attrib.segment.scope import Scope, SegmentSearch
from attrib.segment.sequential_search import SequentialSearch


def bisection(
    repo: CommitGraph,
    builder: Builder,
    runner: Runner,
    bench: BenchmarkSpec,
    config: TestConfig,
    seed: int,
    events: Events | None = None,
    *,
    method: SearchMethod = SearchMethod.POSTERIOR,
    probes: int = 1,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Bisection:
    """A driver of one benchmark over simulated or local edges (the simulation, the tests and
    benchmarks), wired as every driver is (`wired`); job/run.py wires a group, of one or many."""
    settings = Settings(config, seed, method, probes, deadline, clock)
    return wired(repo, Stage(runner, bench, settings, events), builder)


def wired(
    repo: CommitGraph,
    stage: Stage,
    builder: Builder,
    *,
    reverter: Reverter | None = None,
    dependencies: Dependencies | None = None,
) -> Bisection:
    """The one place a driver is wired: its evaluation of `repo` over `builder` (the stage's),
    the scope its searches share, its segment search (the settings' method), and the settings
    record; a group's members (group_bisection.py) and a descent into a roll are wired here too."""
    s = stage.settings
    scope = Scope(stage.over(repo, builder), stage.bench, stage.events or NullEvents(), max(1, s.probes), s.prebuilt)
    search: SegmentSearch = (
        PosteriorSearch(scope, scope.config.ignore) if s.method is SearchMethod.POSTERIOR else SequentialSearch(scope)
    )
    return Bisection(repo, scope, search, stage, reverter=reverter, dependencies=dependencies)


def touches(files: Sequence[str], paths: Sequence[str]) -> bool:
    """Whether a commit's changed files fall under any of `paths` (a directory or a file)."""
    return any(f == p.rstrip("/") or f.startswith(p.rstrip("/") + "/") for f in files for p in paths)


class Bisection:
    """The driver of one bisection, handed what it uses: the scope over its evaluation stage
    (`scope.evidence`), its segment search, and the stage it was wired from (`wired`), whose
    settings it reads and over which a descent into a roll evaluates the dependency."""

    def __init__(
        self,
        repo: CommitGraph,
        scope: Scope,
        segments: SegmentSearch,
        stage: Stage,
        *,
        reverter: Reverter | None = None,
        dependencies: Dependencies | None = None,
    ) -> None:
        self.repo = repo
        self.scope = scope
        self.evidence = scope.evidence
        self.segments = segments
        self.stage = stage
        self.method = stage.settings.method
        self.paths = stage.settings.paths
        self.dependencies = dependencies
        self.reverter = reverter
        self.smaller: list[SmallerStep] = []
        self.untouched: list[str] = []
        self.order: list[str] = []
        self.unresolved: list[Unresolved] = []
        self.remaining = RemainingChange(self.scope, self.method is SearchMethod.POSTERIOR)

    def run(self, good: str, bad: str, verify_revert: bool = False) -> Outcome:
        return self.finish(good, bad, self.start(good, bad), verify_revert)

    def start(self, good: str, bad: str) -> Preflight:
        """The preflight (step 1); a group bisection runs it for every member before any search."""
        chain = self.repo.first_parent_chain(good, bad)
        self.order = [good, *chain]
        pre = preflight(self.scope, good, bad, chain, self.method is SearchMethod.POSTERIOR)
        if pre.unresolved is not None:
            self.unresolved.append(pre.unresolved)
        return pre

    def finish(
        self, good: str, bad: str, pre: Preflight, verify_revert: bool = False, first: Found | None = None
    ) -> Outcome:
        """Steps 2-5 after the preflight `pre`, and the outcome. `first`: the answer of the first
        segment search of the range, when a group's search gave it (group_bisection.py)."""
        if pre.status is not None:
            return self._outcome(pre.status, good, bad, [], pre.comparison)
        self.remaining.start(pre.comparison)
        culprits = self.find_culprits(self.order[1:], good, pre.comparison, first)
        if verify_revert:
            culprits = [replace(c, revert=revert_check(self.scope, self.reverter, c.commit, bad)) for c in culprits]
        for c in culprits:
            if (open_range := culprit_range(c, self.scope.verdicts)) is not None:
                self.unresolved.append(open_range)
        status = Status.INCONCLUSIVE if self.unresolved or not culprits else Status.CULPRIT_FOUND
        # a stretch left undecided while what the culprits leave of the whole change may still
        # hold the minimum: the attribution is partial, and the outcome says how much is left
        rest = self.remaining.remainder() if status is Status.CULPRIT_FOUND else None
        outcome = self._outcome(Status.PARTIAL if rest else status, good, bad, culprits, pre.comparison)
        return replace(outcome, remainder=rest)

    def candidates(self, chain: list[str]) -> list[str]:
        """With [search] paths, the commits of `chain` touching them (like `git bisect -- paths`);
        the others are recorded as untouched and never built."""
        if not self.paths:
            return chain
        keep = [c for c in chain if touches(self.repo.info(c).files, self.paths)]
        self.untouched.extend(c for c in chain if c not in keep and c not in self.untouched)
        return keep

    def find_culprits(
        self, chain: list[str], reference: str, known_bad: Comparison | None, first: Found | None = None
    ) -> list[Culprit]:
        """Culprits along `chain` (oldest first) relative to `reference`, one after another.
        Smaller steps found on the way go to self.smaller and the search goes on after them.
        `first`: the first segment search's answer, given (a group's search found it for this
        member); it stands even when the budget is spent: a range the group's search proved
        (OutOfTime) is this member's own, not the whole range."""
        culprits: list[Culprit] = []
        chain = self.candidates(chain)
        if not chain:
            self.scope.note(Note(NoteKind.NO_COMMIT_TOUCHES, (reference,), paths=self.paths))
        while chain:
            if self.evidence.out_of_time and first is None:
                self._budget_spent(chain, reference, OutOfTime(0, len(chain)))
                break
            if known_bad is None and self.remaining.nothing_left():
                break
            end = chain[-1]
            test = None if known_bad is not None else self.remaining.still_worse(end, reference)
            known_bad = None
            if test is not None and test.verdict is not Verdict.BAD:
                if test.verdict is Verdict.INCONCLUSIVE:
                    self.scope.note(self.remaining.undecided(end, reference, test))
                break
            found = first if first is not None else self.segments.search(chain, reference)
            first = None
            if isinstance(found, OutOfTime):  # the budget ran out inside the segment
                self._budget_spent(chain, reference, found)
                break
            if isinstance(found, SmallerStep):
                self.smaller.append(found)
                size_p = found.size_p if math.isfinite(found.size_p) else None
                self.scope.note(Note(NoteKind.SMALLER_STEP, (found.commit,), value=size_p))
            mark = len(culprits)
            if isinstance(found, SmallerStep):
                self.remaining.located(found.confirmation)
            else:
                inner = self.descend(found)
                if inner == [found]:  # a merge's inner culprits counted their own steps
                    self.remaining.located(found.confirmation)
                culprits.extend(self.into_rolls(c) for c in inner)
            if self.method is SearchMethod.POSTERIOR and found.last_good != reference:
                # the posterior finds the largest step, not the first: the stretch before it
                # is searched too, when its end is still worse than the reference
                culprits[mark:mark] = self.find_culprits(chain[: chain.index(found.last_good) + 1], reference, None)
            reference, chain = found.commit, chain[chain.index(found.commit) + 1 :]
        return culprits

    def _budget_spent(self, chain: Sequence[str], reference: str, left: OutOfTime) -> None:
        """The deadline passed: record the smallest range proved so far and what finishing costs."""
        open_range, note = out_of_time(chain, reference, left, self.evidence.times)
        self.unresolved.append(open_range)
        self.scope.note(note)

    def descend(self, found: Culprit) -> list[Culprit]:
        """A merge culprit stands for the commits it brought in: name the one inside."""
        info = self.repo.info(found.commit)
        if not info.is_merge or found.ambiguous_with:
            return [found]
        first, second = info.parents[0], info.parents[1]
        base = self.repo.merge_base(first, second)
        side = self.repo.first_parent_chain(base, second)
        if not side:
            return [found]
        at = self.order.index(found.commit)
        self.order[at:at] = [s for s in side if s not in self.order]
        self.scope.phase(Step.MERGE, (found.commit,), len(side))
        inner = self.find_culprits(side, base, None)
        if not inner:
            self.scope.note(Note(NoteKind.MERGE_ITSELF, (found.commit,)))
            return [found]
        scale = found.posterior
        return [
            replace(c, via_merge=found.commit, posterior=c.posterior * scale, range_posterior=c.range_posterior * scale)
            for c in inner
        ]

    def into_rolls(self, found: Culprit) -> Culprit:
        """A culprit that rolls dependencies: each forward roll's range is bisected inside the
        dependency (a Bisection of its own over the dependency's graph and a builder of the
        superproject at the roll's parent with the dependency at each candidate); a roll that
        cannot be searched is kept with why."""
        if self.dependencies is None or found.ambiguous_with:
            return found
        rolls = []
        for src in self.dependencies.rolls(found.commit):
            roll = src.roll
            if roll.relation is not RollRelation.FORWARD or src.graph is None or src.builder is None:
                rolls.append(Roll(roll))
                continue
            self.scope.phase(Step.ROLL, (found.commit, roll.old, roll.new), len(src.graph.first_parent_chain(roll.old, roll.new)))
            # the dependency's range alone: the superproject's paths and prebuilt binaries are not its
            stage = replace(self.stage, settings=replace(self.stage.settings, paths=(), prebuilt=frozenset()))
            inside = wired(src.graph, stage, src.builder, dependencies=src.inner)
            rolls.append(Roll(roll, inside.run(roll.old, roll.new)))
        return replace(found, rolls=tuple(rolls)) if rolls else found

    def _outcome(self, status: Status, good: str, bad: str, culprits: list[Culprit], preflight: Comparison) -> Outcome:
        account = self.evidence.account([good, bad, *(c.commit for c in culprits)])
        # the noise warning, when the preflight measured too little to give it: from the first
        # test stopped for futility (Scope.say_noise says it once)
        stopped = [c for c in account.comparisons if c.rule is DecisionRule.FUTILITY]
        if stopped:
            self.scope.say_noise(stopped[0])
        return Outcome(
            status=status,
            good=good,
            bad=bad,
            culprits=tuple(culprits),
            preflight=preflight,
            comparisons=account.comparisons,
            verdicts=dict(self.scope.verdicts),
            commits=account.commits,
            order=tuple(self.order),
            notes=self.scope.notes,
            unresolved=tuple(self.unresolved),
            drift=account.drift,
            rounds=account.rounds,
            smaller_steps=tuple(self.smaller),
            untouched=tuple(self.untouched),
            artifact_notes=account.artifact_notes,
            samples_saved=account.samples_saved,
            times=account.times,
            out_of_time=account.out_of_time,
            blocks=account.blocks,
        )
