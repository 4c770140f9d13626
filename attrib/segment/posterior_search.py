"""The posterior search of one segment (the default, `[search] method = "posterior"`).

Every block of every commit of the segment enters one posterior (core/posterior.py), which
asks for the next blocks or builds by expected information per unit of cost (with `--probes`
k, up to k of them, built concurrently and measured in one shared round); when one position
holds the posterior it is confirmed, culprit^ against culprit in paired rounds, under the
indifference zone. A confirmation's rounds are blocks of both commits: one that disagrees
moves the posterior and the search goes on.

The segment's reference runs in every round, the confirmation's included, and each other
block enters the posterior less the machine's state the reference's blocks show around its
round (core/posterior.round_corrected): blocks of commits measured minutes apart are then
compared as a paired test compares them. Without it, a machine that ran 7 % faster for a
dozen rounds sent the search to build on the wrong side: on the CI tests' real trees 8 of 40
runs went over the build budget and 5 of 20 confirmed a wrong pair; with it, 0 of 90 traced
runs did either, and the two tests failed 1 run in 30 (12 builds against 10, under load); they
now draw their samples from a stated distribution (tests/test_cli_bisect.py, STATED).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from attrib.core import group as grouped
from attrib.core import posterior as model
from attrib.core import requests as locate
from attrib.core.blocks import hopeless
from attrib.core.choose import choose
from attrib.core.confirmation import Meaning, meaning
from attrib.core.model import DecisionRule, Note, NoteKind, Purpose, Step, Verdict
from attrib.core.remainder import still_unexplained
from attrib.core.requests import LOCATE_SIGMA_QUANTILE, Action
from attrib.core.stats import EXTEND_FACTOR, min_change_shift, size_posterior
from attrib.errors import ReferenceFailed
from attrib.evaluate.records import Comparison
from attrib.outcome import Culprit, Found, OutOfTime, SmallerStep
from attrib.segment.scope import MAX_CONFIRM_RETRIES, Scope

TAU_PER_IGNORE = 4.0  # per-commit scatter in the posterior = ignore_below / this
BUILD_SLACK = 2  # a segment of n commits may build ceil(log2 n) + this of them: what bisection
# needs, and room for a build break or a boundary the noise moves once; with the two ends that
# is issue 19's ceil(log2 N) + 4 for a whole single-step range


def build_budget(n: int) -> int:
    """The commits a search over a segment of n may build (its ends, measured before, aside).

    A one-step search needs ceil(log2 n) builds; what the budget stops is the search that
    keeps building because its model misfits (a second step below the minimum leaves commits
    at neither level, and the posterior never settles), or that walks through a build break
    one failed commit at a time. Spent, the search measures the commits it has and names the
    gap between two of them (core/choose.choose, `builds_left`)."""
    return math.ceil(math.log2(max(n, 2))) + BUILD_SLACK


def block_cap(n: int, max_rounds: int) -> int:
    """The blocks a search over a segment of n may draw: a commit's cap for each build that
    bisection needs and two more (the single search and a group's alike)."""
    return max_rounds * (math.ceil(math.log2(n + 1)) + 2)


class PosteriorSearch:
    def __init__(self, scope: Scope, ignore: float) -> None:
        self.scope = scope
        self.tau = ignore / TAU_PER_IGNORE
        self.failures: dict[str, list[bool]] = {}  # per measured commit: whether each run produced a block
        self.twins: set[str] = set()  # commits placed by a byte-identical twin's blocks, said once
        self.inferred: set[int] = set()  # positions of this segment taken to be inside a build break

    def _levels(self, sha: str) -> tuple[list[float], list[int]]:
        return self.scope.evidence.levels(self.scope.evidence.stand_in(sha))

    def measure_round(
        self, shas: list[str], fresh: set[str], beside: str | None = None, before: Callable[[], None] | None = None
    ) -> set[str]:
        """One shared round: a block of each of `shas` (their byte-identical stand-ins'), built
        concurrently first; returns those that are hopeless (did not build, or fail as often as
        they run). One of `fresh` (asked to be built) that turns out byte-identical to a
        measured commit needs no block of its own: its twin's blocks are its data already.
        `beside`: the segment's reference, measured in the round to place its blocks
        (core/posterior.round_corrected), unless every commit asked turned out such a twin:
        a round with no block to place needs no reference block either. `before`: called once
        the round is known to measure something (the block size is chosen then: `sized`)."""
        ev = self.scope.evidence
        shas = [*shas, beside] if beside is not None and beside not in shas else shas
        lost = {s for s in shas if not ev.build(s).ok}  # Evidence.blocks builds them concurrently
        twins = {s for s in shas if s not in lost and s in fresh and ev.stand_in(s) != s}
        targets = [s for s in shas if s not in lost and s not in twins]
        if twins and targets == [beside]:
            targets = []
        if targets and before is not None:
            before()
        runs = dict(zip(targets, ev.blocks([ev.stand_in(s) for s in targets]), strict=True))
        for sha, ok in runs.items():
            record = self.failures.setdefault(ev.stand_in(sha), [])
            record.append(ok)
            if hopeless(record.count(False), record.count(True)):
                lost.add(sha)
        return lost

    def measure_ends(self, positions: list[str]) -> None:
        """Blocks of both ends of the segment (`positions[0]`, `positions[-1]`) up to the minimum
        rounds at the current block size: a posterior needs both. Raises ReferenceFailed when
        an end cannot be measured."""
        for end in (positions[0], positions[-1]):
            while len(self._levels(end)[0]) < self.scope.config.min_rounds:
                if self.measure_round([end], set()):
                    raise ReferenceFailed(f"cannot measure {end[:10]}, an end of the searched range")

    def _extend(self, sha: str, reference: str) -> int:
        """More samples for a commit at its cap that still decides the boundary: paired rounds
        against the segment's reference, at least as many as the blocks the cap gave it and up
        to EXTEND_FACTOR times that (the sequential search extends an undecided probe as far);
        its rounds are blocks of both. Returns the blocks it cost."""
        scope = self.scope
        at = scope.config.max_rounds
        config = replace(scope.config, min_rounds=at, known_min_rounds=at, max_rounds=at * EXTEND_FACTOR)
        scope.phase(Step.MORE_SAMPLES, (sha,), 1)
        (comp,) = scope.placed(scope.evidence.compare([sha], scope.evidence.stand_in(reference), Purpose.EXTEND, config), reference)
        return 2 * len(comp.diffs)

    def corrected_blocks(self, positions: list[str]) -> dict[int, list[float]]:
        """Every block of the segment, each less the machine's state the reference's blocks
        show around its round (core/posterior.round_corrected)."""
        levels = [self._levels(sha) for sha in positions]
        return model.round_corrected(
            {i: b for i, (b, _) in enumerate(levels)}, {i: r for i, (_, r) in enumerate(levels)}
        )

    def begin(self) -> None:
        """A segment's start: no failed runs or inferred breaks counted yet (they are the
        segment's)."""
        self.failures = {}
        self.inferred = set()

    def sized(self, positions: list[str]) -> None:
        """The block size chosen (once per bisection, from the preflight's runs: sizing.py)
        before the search's first block beyond the ends': a search whose every commit asked is
        byte-identical to good or bad places them all from the preflight's blocks and confirms
        with the preflight's pair, at the preflight's size, and a new size would only measure
        the ends again. A new size leaves the ends without blocks of it: they are measured."""
        self.scope.evidence.adapt_blocks()
        self.measure_ends(positions)

    def search(self, chain: list[str], reference: str) -> Found:
        """This benchmark's first finding in `chain` against `reference`: the one search loop
        (`search_members`) over a group of one."""
        return search_members({self: self}, chain, reference)[self]

    def _exhausted(
        self, positions: list[str], post: model.Posterior, blocks: Mapping[int, Sequence[float]], unbuildable: set[int]
    ) -> Found | tuple[int, int, tuple[int, ...]]:
        """The cap is spent and no one position holds: the one-step model does not fit (a
        second step puts some commits at neither level; the Student-t residuals then let either
        end be the outlier) or the noise is at the cap. Between the two measured commits around
        the most probable position the one-step model holds again, so that gap is searched as a
        segment of its own (its own build budget: log2 of its width), and what it finds is
        returned; the driver's remaining-change rule takes the rest of the range, as after any
        culprit. Confirming the most probable position itself would name a commit no data point
        at (with the gap's mass shared uniformly, that is its first commit). A gap of one commit
        is confirmed as it is, against its nearest buildable parent: (culprit, last good,
        ambiguous positions) are returned for it."""
        n = len(positions) - 1
        top = min(i for i in range(post.map, n + 1) if i not in unbuildable and blocks.get(i))
        bottom = max(i for i in range(top) if i not in unbuildable and blocks.get(i))
        if 1 < top - bottom < n and any(i not in unbuildable for i in range(bottom + 1, top)):
            inner = self.search(positions[bottom + 1 : top + 1], positions[bottom])
            if isinstance(inner, OutOfTime):
                return OutOfTime(inner.last_good + bottom, inner.first_bad + bottom)
            return inner
        k, last = post.map, post.map - 1
        while last > 0 and last in unbuildable:
            last -= 1
        return k, last, tuple(range(last + 1, k))

    def paired_confirmation(self, positions: list[str], k: int, last: int) -> tuple[Comparison, float] | OutOfTime:
        """culprit^ against culprit, paired, and P(step >= the minimum) of it; OutOfTime when the
        budget ended it. The group search's confirmations run through this too."""
        scope, ev = self.scope, self.scope.evidence
        culprit, last_good, reference = positions[k], positions[last], positions[0]
        # both sides by their measured stand-ins (the same bytes, and no binary measured twice),
        # with the segment's reference beside them in every round: its blocks there place the
        # confirmation's blocks in the posterior as the search's are (core/posterior.round_corrected)
        config = scope.curtailing(scope.config.confirming())
        (confirm,) = ev.compare(
            [ev.stand_in(culprit)], ev.stand_in(last_good), Purpose.CONFIRM, config, alongside=(ev.stand_in(reference),)
        )
        if confirm.rule is DecisionRule.CAP and still_unexplained(config, confirm.diffs, confirm.sigma, scope.delta):
            # undecided at the cap with the minimum still unexplained: it goes on (core/remainder.py)
            (confirm,) = ev.compare(
                [ev.stand_in(culprit)], ev.stand_in(last_good), Purpose.CONFIRM, config.extended(),
                resume={ev.stand_in(culprit): confirm.diffs}, alongside=(ev.stand_in(reference),),
            )  # fmt: skip
        if confirm.rule is DecisionRule.BUDGET:
            return OutOfTime(last, k)
        # the zone decided the confirmation; its size, P(step >= the minimum), is still what
        # the result reports beside the estimate
        size = size_posterior(confirm.diffs, confirm.sigma, min_change_shift(scope.bench.min_change_pct))
        return (replace(confirm, size_p=size) if math.isnan(confirm.size_p) else confirm), size

    def judged(
        self,
        positions: list[str],
        k: int,
        last: int,
        amb_at: tuple[int, ...],
        unbuildable: set[int],
        *,
        provisional: bool,
        final: bool,
        prior: Sequence[float] | np.ndarray | None = None,
    ) -> Found | None:
        """The paired confirmation of (positions[last], positions[k]) and what it means
        (core/confirmation.meaning, the one decision for a search alone and for each member of a
        group): a culprit, a smaller step, the deadline; None when the search goes on (the
        confirmation's rounds, blocks of both, moved the posterior; noted why). `prior`: a
        group member's shared-culprit prior over the positions (core/group.py), None alone."""
        scope = self.scope
        n = len(positions) - 1
        culprit, last_good = positions[k], positions[last]
        paired = self.paired_confirmation(positions, k, last)
        if isinstance(paired, OutOfTime):
            return paired
        confirm, size = paired
        after = model.posterior(n, self.corrected_blocks(positions), tau=self.tau, anchored=True)
        if prior is not None:
            after = grouped.with_prior(after, prior)
        # the verdicts as the confirmation's blocks leave them: a boundary confirmed early
        # (at CONFIRM_EARLY_AT) was placed with its two sides still below 0.99
        self.place_verdicts(positions, after, unbuildable)
        held = sum(after.probs[last + 1 : k + 1])
        said = meaning(
            confirm.verdict, confirm.rule, size, scope.config.beta, held, provisional=provisional, final=final
        )
        if said is Meaning.SMALLER:
            # the driver's remaining-change rule looks for the rest of the change
            return SmallerStep(culprit, last_good, confirm, size)
        if said is Meaning.NOT_HELD:
            scope.note(Note(NoteKind.POSITION_NOT_HELD, (culprit, last_good)))
            return None
        if said is Meaning.DISAGREED:
            scope.note(Note(NoteKind.CONFIRMATION_DISAGREED, (culprit, last_good)))
            return None
        if confirm.verdict is not Verdict.BAD:
            scope.note(Note(NoteKind.NOT_CONFIRMED, (culprit, last_good), verdict=confirm.verdict))
        amb = tuple(positions[i] for i in amb_at)
        return Culprit(culprit, last_good, amb, confirm, posterior=after.probs[k], range_posterior=held)

    def mark_inside_breaks(self, positions: list[str], unbuildable: set[int]) -> None:
        """Commits between two that do not build, with nothing built between them, are taken to
        be inside the break (core/requests.inside_breaks): never built, skipped like the break,
        and said once per stretch. Only failed builds make a break: a commit that builds but
        whose runs fail is lost to the search too, but says nothing about its neighbours."""
        ev = self.scope.evidence
        broken = [i for i in unbuildable if i not in self.inferred and not ev.build(positions[i]).ok]
        measured = [i for i, sha in enumerate(positions) if self._levels(sha)[0]]
        inner = sorted(locate.inside_breaks(broken, measured) - unbuildable)
        self.inferred.update(inner)
        unbuildable.update(inner)
        stretch: list[int] = []
        for i in [*inner, -1]:  # runs of consecutive positions, one note each
            if stretch and i != stretch[-1] + 1:
                self.scope.note(Note(NoteKind.INSIDE_BREAK, tuple(positions[j] for j in stretch), count=len(stretch)))
                stretch = []
            if i >= 0:
                stretch.append(i)

    def out_of_time(self, post: model.Posterior) -> OutOfTime:
        """What the search proved when the budget (--budget) ends it: the smallest range that
        holds the step at DEFAULT_LOCATE_AT under `post`."""
        req = locate.credible_range(post, frozenset(), locate.DEFAULT_LOCATE_AT)
        return OutOfTime(req.last_good, req.position)

    def place_verdicts(self, positions: list[str], post: model.Posterior, unbuildable: set[int]) -> None:
        """Verdicts for the report: each measured commit's side where the posterior settles it.
        A commit byte-identical to a measured one was placed by its twin's blocks, with no
        samples of its own: it says so, as the sequential search's same-artifact verdicts do."""
        ev = self.scope.evidence
        for i, sha in enumerate(positions[1:-1], start=1):
            if i in unbuildable:
                self.scope.place(sha, positions[0], Verdict.SKIP)
            elif self._levels(sha)[0]:
                f = post.below(i)
                side = Verdict.BAD if f >= 0.99 else Verdict.GOOD if f <= 0.01 else Verdict.INCONCLUSIVE
                self.scope.place(sha, positions[0], side)
                # placed at an end's level: byte-different builds of one program say why
                if side is not Verdict.INCONCLUSIVE:
                    ev.note_traps(sha, positions[0] if side is Verdict.GOOD else positions[-1])
                twin = ev.stand_in(sha)
                if twin != sha and sha not in self.twins:
                    self.twins.add(sha)
                    ev.same_artifact(sha, positions[0], Purpose.PROBE, side, twin)


def search_members(
    searches: Mapping[Any, PosteriorSearch],
    chain: list[str],
    reference: str,
    members: Sequence[Any] | None = None,
    next_phase: Callable[[Collection[Any] | None], None] | None = None,
    scouting: bool = True,
) -> dict[Any, Found]:
    """The one search loop: each member's first finding in `chain` against `reference`, the
    members sharing builds and rounds (a benchmark searched alone is a group of one).

    Each member has its own evaluation and `PosteriorSearch` (its blocks, tests and verdicts);
    core/choose.py asks what next, from each member's posterior (under the shared-culprit
    prior, in a group: core/group.py). A round measures what it asks for the members it serves
    (with a multi-benchmark runner, one process for all: `next_phase`, evaluate/shared.py); a
    located position is confirmed, culprit^ against culprit, by each member that joins it, each
    with its own test and the one decision of core/confirmation.py. A member is done when its
    confirmation names what is there (or its deadline ends it); it draws no more samples then.
    What a group cannot settle (blocks or builds spent, nothing worth measuring) its members
    search alone, by this loop, reading every block measured (the driver: group_bisection.py);
    alone, the member's blocks spent name the gap the posterior holds (`_exhausted`).
    `scouting` False: every undecided member is measured at every build (under a deadline, so
    that each member keeps the range its own blocks prove when time ends)."""
    active = list(searches) if members is None else list(members)
    return _SegmentRun(searches, chain, reference, active, next_phase or (lambda members: None), scouting).run()


class _SegmentRun:
    """One run of `search_members`: what the segment's search has asked, built and found so far."""

    def __init__(
        self,
        searches: Mapping[Any, PosteriorSearch],
        chain: list[str],
        reference: str,
        active: list[Any],
        step: Callable[[Collection[Any] | None], None],
        scouting: bool,
    ) -> None:
        self.searches = searches
        self.reference = reference
        self.positions = [reference, *chain]
        self.n = len(chain)
        self.active = active
        self.step = step
        self.scouting = scouting
        self.found: dict[Any, Found] = {}
        self.retries: Counter[Any] = Counter()
        self.unbuildable: set[int] = set()
        self.extended: set[int] = set()
        # the commits this segment asked to build, and its limit: a commit asked for again
        # (built, but its runs failed so far, so it still has no block) is one build, not one per ask
        self.built: set[str] = set()
        self.culprits: set[int] = set()
        self.cap = block_cap(self.n, max(searches[m].scope.config.max_rounds for m in active))
        self.spent = 0
        self.scouts: frozenset[Hashable] = frozenset()
        self.checked: set[tuple[Hashable, int]] = set()
        # the commits whose binary CI published: an unpacking, no build of the budget (every
        # member's scope holds the same, from the one builder)
        self.prebuilt = frozenset().union(*(searches[m].scope.prebuilt for m in active))

    def run(self) -> dict[Any, Found]:
        for m in self.active:
            self.searches[m].begin()
            self.searches[m].scope.phase(Step.LOCATING, (self.reference,), self.n)
            # a merge's side line leaves the ends without blocks: a posterior needs both
            self.searches[m].measure_ends(self.positions)
        while self.active:
            views, priors = _views(self.searches, self.positions, self.active)
            if any(self.searches[m].scope.evidence.out_of_time for m in self.active):  # --budget is spent
                self.found.update((m, self.searches[m].out_of_time(views[m].post)) for m in self.active)
                break
            reqs = self._ask(views)
            req = reqs[0]
            if req.action is Action.EXHAUSTED and len(self.active) > 1:
                break  # nothing the group can still tell: each member alone
            self.step(req.members)
            if req.action is Action.CHECK:
                self._check(req)
            elif req.action in (Action.MEASURE, Action.BUILD):
                self._measure(reqs)
            elif req.action is Action.EXTEND:
                self.extended.add(req.position)
                at = self.positions[req.position]
                for m in req.members:
                    self.searches[m].sized(self.positions)
                self.spent += max(self.searches[m]._extend(at, self.reference) for m in req.members)
            elif self._confirm(req, views, priors):
                break
            self.active = [m for m in self.active if m not in self.found]
        return self.found

    def _ask(self, views: Mapping[Any, grouped.MemberView]) -> tuple[locate.Request, ...]:
        """What core/choose.py asks next, within the segment's builds and blocks."""
        # builds: the budget of one located step for each culprit the group may still have to
        # locate: one more than it confirmed while an undecided member points elsewhere (holds
        # less than half at the culprits confirmed), else none more
        elsewhere = any(sum(views[m].post.probs[c] for c in self.culprits) < 0.5 for m in self.active)
        budget = build_budget(self.n) * (len(self.culprits) + (1 if elsewhere or not self.culprits else 0))
        self.scouts = grouped.scouts_of(views, self.scouts) if self.scouting else frozenset(views)
        first = self.searches[self.active[0]].scope
        positions = self.positions
        return choose(
            self.n, views, unbuildable=frozenset(self.unbuildable), built=frozenset(positions.index(s) for s in self.built),
            builds_left=budget - len(self.built - self.prebuilt), blocks_left=self.cap - self.spent, width=first.probes,
            cap=first.config.max_rounds, extended=frozenset(self.extended), scouts=self.scouts,
            checked=frozenset(self.checked), prebuilt=frozenset(i for i, sha in enumerate(positions) if sha in self.prebuilt),
        )  # fmt: skip

    def _check(self, req: locate.Request) -> None:
        """The followers' own blocks of the pair the scouts located: whether they join its
        confirmation (their step is there) or rule it out; with the reference in the round, as
        every round of the search, so that a machine off its level for a while does not move
        both sides of the pair away from its ends."""
        pair = [self.positions[req.last_good], self.positions[req.position], self.reference]
        for m in req.members:
            self.searches[m].sized(self.positions)
            self.searches[m].measure_round(pair, set())
            self.checked.add((m, req.position))
        self.spent += 1

    def _measure(self, reqs: Sequence[locate.Request]) -> None:
        """One shared round of the commits asked (built first where asked), for the members
        served; the reference runs in every round: its block there is what the machine did while
        the others ran (core/posterior.round_corrected)."""
        fresh = {self.positions[r.position] for r in reqs if r.action is Action.BUILD}
        asked = [self.positions[r.position] for r in reqs]
        lost: set[str] = set()
        for m in reqs[0].members:
            search = self.searches[m]
            lost |= search.measure_round(asked, fresh, beside=self.reference, before=partial(search.sized, self.positions))
        self.unbuildable.update(r.position for r in reqs if self.positions[r.position] in lost)
        for m in self.active:
            self.searches[m].mark_inside_breaks(self.positions, self.unbuildable)
        self.spent += len(reqs)
        self.built.update(fresh)

    def _confirm(
        self, req: locate.Request, views: Mapping[Any, grouped.MemberView], priors: Mapping[Any, np.ndarray | None]
    ) -> bool:
        """The located position (or, alone with the blocks spent, the gap the posterior holds)
        confirmed by each member it serves, each by its own test and the one decision of
        core/confirmation.py; True when the search of this segment ends here."""
        positions, unbuildable = self.positions, self.unbuildable
        for m in req.members:
            # the verdicts as the blocks leave them, for the report
            self.searches[m].place_verdicts(positions, views[m].post, unbuildable)
        k, last, amb_at = req.position, req.last_good, req.ambiguous
        if req.action is Action.EXHAUSTED and any(i not in unbuildable for i in req.ambiguous):
            (m,) = self.active
            gap = self.searches[m]._exhausted(positions, views[m].post, views[m].blocks, unbuildable)
            if not isinstance(gap, tuple):
                self.found[m] = gap
                return True
            k, last, amb_at = gap
        for m in req.members or self.active:
            self.searches[m].scope.phase(Step.CONFIRMING, (positions[k], positions[last]))
            final = req.action is Action.EXHAUSTED or self.retries[m] >= MAX_CONFIRM_RETRIES
            result = self.searches[m].judged(
                positions, k, last, amb_at, unbuildable, provisional=m in req.provisional, final=final, prior=priors[m]
            )  # fmt: skip
            if isinstance(result, Culprit):
                self.culprits.add(k)
            if result is not None:
                self.found[m] = result
            else:
                self.retries[m] += 1  # the confirmation's rounds are blocks of both: the posterior moved
        return False


def _views(
    searches: Mapping[Any, PosteriorSearch], positions: list[str], active: Sequence[Any]
) -> tuple[dict[Any, grouped.MemberView], dict[Any, np.ndarray | None]]:
    """Each undecided member's posterior from its own blocks, under the shared prior where it
    has company (alone, the prior is uniform: none), with its blocks and its robust posterior."""
    n = len(positions) - 1
    blocks = {m: searches[m].corrected_blocks(positions) for m in active}
    own = {m: model.posterior(n, blocks[m], tau=searches[m].tau, anchored=True) for m in active}
    priors: dict[Any, np.ndarray | None] = (
        dict(grouped.shared_prior({m: p.probs for m, p in own.items()})) if len(active) > 1 else dict.fromkeys(active)
    )

    def robust(m: Any) -> Callable[[], model.Posterior]:
        def at_bound() -> model.Posterior:
            post = model.posterior(
                n, blocks[m], tau=searches[m].tau, sigma_quantile=LOCATE_SIGMA_QUANTILE, anchored=True
            )
            prior = priors[m]
            return post if prior is None else grouped.with_prior(post, prior)

        return at_bound

    views = {}
    for m in active:
        prior = priors[m]
        post = own[m] if prior is None else grouped.with_prior(own[m], prior)
        views[m] = grouped.MemberView(post, blocks[m], robust(m))
    return views, priors
