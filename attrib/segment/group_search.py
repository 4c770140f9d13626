"""The search of one range for a group of members at once (the posterior method).

Each member has its own evaluation (its own blocks, tests and verdicts) and its own
`PosteriorSearch`, whose pieces this loop reuses: a member's blocks, read against its
reference's in the same rounds, give its own posterior (core/posterior.py); core/group.py adds
the shared-culprit prior and chooses the next build or block by the information summed over
the scouts (the strongest undecided member). A round measures the chosen commit for the scouts
(with a multi-benchmark runner, one process for all: evaluate/shared.py); when a position is
held, the followers that may share it draw one round of each side of the pair with the
reference (CHECK), and a confirmation of culprit^ against culprit runs once, in shared paired
rounds, for every member whose posterior holds it (a checked follower: does not rule it out),
each member with its own test under the indifference zone, as a bisection of it alone
confirms. A member is done when its culprit is confirmed (or its step is smaller than the
minimum); it stops drawing samples then.

What the group cannot settle, a member searches alone: when the group has nothing left worth
measuring, its build budget is spent, or a member's confirmations disagreed more than the
single search allows, the member is left out of the result and the driver runs the single
search for it, which reads every block already measured (nothing measured is lost).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from attrib.core import group as grouped
from attrib.core import posterior as model
from attrib.outcome import Culprit, Found
from attrib.segment.posterior_search import PosteriorSearch, block_cap, build_budget
from attrib.segment.scope import MAX_CONFIRM_RETRIES


class GroupSearch:
    def __init__(
        self,
        searches: Mapping[Any, PosteriorSearch],
        next_phase: Callable[[Collection[Any] | None], None],
        scouting: bool = True,
    ) -> None:
        """`searches`: each member's own posterior search (its driver's, at its own indifference
        zone: its recipe table's), whose pieces this loop uses. `scouting` False: every undecided
        member is measured at every build (the rule under a deadline, so that each member keeps
        the range its own blocks prove when time ends)."""
        self.searches = dict(searches)
        self.scopes = {m: search.scope for m, search in self.searches.items()}
        self.scouting = scouting
        # a step for all members, and the ones it measures (evaluate/shared.SharedRuns.next_phase)
        self.next_phase = next_phase

    def search(self, chain: list[str], reference: str, members: Sequence[Any]) -> dict[Any, Found]:
        """Each member's first finding in `chain` against `reference`; the members it leaves out
        are for the single search."""
        positions = [reference, *chain]
        n = len(chain)
        active = list(members)
        found: dict[Any, Found] = {}
        retries: Counter[Any] = Counter()
        unbuildable: set[int] = set()
        built: set[str] = set()
        culprits: set[int] = set()
        cap = block_cap(n, max(self.scopes[m].config.max_rounds for m in active))
        spent = 0
        scouts: frozenset[Any] = frozenset()
        checked: set[tuple[Any, int]] = set()
        # the commits whose binary CI published: an unpacking, no build of the budget (every
        # member's scope holds the same, from the one builder)
        prebuilt = frozenset().union(*(self.scopes[m].prebuilt for m in active))
        for m in active:
            self.searches[m].begin()
            # a new block size leaves the ends without blocks of that size (the single search
            # measures them too): a posterior needs both
            self.searches[m].measure_ends(positions)
        while active:
            views, priors = self._views(positions, active)
            if any(self.scopes[m].evidence.out_of_time for m in active):  # the budget (--budget) is spent
                for m in active:
                    found[m] = self.searches[m].out_of_time(views[m].post)
                break
            # builds: the single search's budget for each culprit the group may still have to
            # locate: one more than it confirmed while an undecided member points elsewhere
            # (holds less than half at the culprits confirmed), else none more
            elsewhere = any(sum(views[m].post.probs[c] for c in culprits) < 0.5 for m in active)
            budget = build_budget(n) * (len(culprits) + (1 if elsewhere or not culprits else 0))
            scouts = grouped.scouts_of(views, scouts) if self.scouting else frozenset(views)
            req = grouped.next_group_request(
                n, views, unbuildable=frozenset(unbuildable), built=frozenset(positions.index(s) for s in built),
                builds_left=budget - len(built - prebuilt), scouts=scouts, checked=frozenset(checked),
                prebuilt=frozenset(i for i, s in enumerate(positions) if s in prebuilt),
            )  # fmt: skip
            if req.action is grouped.GroupAction.ALONE or spent >= cap:
                break
            if req.action is grouped.GroupAction.CHECK:
                # the followers' own blocks of the pair the scouts located: whether they join its
                # confirmation (their step is there) or rule it out; with the reference in the
                # round, as every round of the search, so that a machine off its level for a
                # while does not move both sides of the pair away from its ends
                self.next_phase(req.members)
                for m in req.members:
                    self.searches[m].measure_round(
                        [positions[req.last_good], positions[req.position], reference], set()
                    )
                    checked.add((m, req.position))
                spent += 1
                continue
            if req.action in (grouped.GroupAction.MEASURE, grouped.GroupAction.BUILD):
                sha = positions[req.position]
                fresh = {sha} if req.action is grouped.GroupAction.BUILD else set()
                self.next_phase(req.members)
                lost = False
                for m in req.members:
                    lost = sha in self.searches[m].measure_round([sha], fresh, beside=reference) or lost
                built.update(fresh)
                spent += 1
                if lost:
                    unbuildable.add(req.position)
                    for m in active:
                        self.searches[m].mark_inside_breaks(positions, unbuildable)
                continue
            self.next_phase(req.members)
            for m in req.members:
                result = self._confirm(m, positions, req, m in req.provisional, priors[m], unbuildable, retries[m])
                if isinstance(result, Culprit):
                    culprits.add(req.position)
                if result is not None:
                    found[m] = result
                else:
                    retries[m] += 1
            active = [m for m in active if m not in found]
        return found

    def _views(
        self, positions: list[str], active: Sequence[Any]
    ) -> tuple[dict[Any, grouped.MemberView], dict[Any, Any]]:
        """Each undecided member's posterior from its own blocks, and under the shared prior."""
        n = len(positions) - 1
        blocks = {m: self.searches[m].corrected_blocks(positions) for m in active}
        own = {m: model.posterior(n, blocks[m], tau=self.searches[m].tau, anchored=True) for m in active}
        priors = grouped.shared_prior({m: p.probs for m, p in own.items()})
        views = {m: grouped.MemberView(grouped.with_prior(own[m], priors[m]), blocks[m]) for m in active}
        return views, priors

    def _confirm(
        self,
        member: Any,
        positions: list[str],
        req: grouped.GroupRequest,
        provisional: bool,
        prior: Any,
        unbuildable: set[int],
        retries: int,
    ) -> Found | None:
        """One member's confirmation of the group's position, in the shared rounds of this phase,
        and what it means for that member: the single search's own decision
        (PosteriorSearch.judged) under the member's shared-culprit prior, with its own count of
        disagreeing confirmations (`retries`); None: not this position, the member searches on."""
        return self.searches[member].judged(
            positions, req.position, req.last_good, req.ambiguous, unbuildable, provisional=provisional,
            final=retries >= MAX_CONFIRM_RETRIES, prior=prior,
        )  # fmt: skip
