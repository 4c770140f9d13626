"""The driver of a group bisection: several members (benchmarks) over one range, in the order
a bisection of one takes (bisection.py), with what costs the machine time shared.

  1. the preflight of every member, in shared rounds (one process per round for a runner that
     measures them all); a member that does not reproduce is reported so and drawn no further;
  2. the search of the range for every reproduced member at once (the one search loop,
     segment/posterior_search.search_members, that searches a benchmark alone: each build
     measured for the strongest undecided member, the others checked at the pair it locates,
     the shared-culprit prior, one confirmation per position for the members that point there);
  3. for each member, the rest of its bisection as a bisection of it alone takes it, from its
     first finding on (merges, the remaining-change rule, further culprits, the revert check):
     the single search's own rules, on the member's own evaluation, which holds every block
     measured so far. A member the group search could not settle is searched alone there.

Each member keeps its own `Bisection` (its own evaluation, tests, verdicts and notes), so its
`Outcome` is the one a bisection of it alone would report, measured on shared builds and
rounds. A group of one is a `Bisection`, exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import cast

from attrib.bisection import Bisection, wired
from attrib.core.model import SearchMethod
from attrib.evaluate.evaluation import Settings, Stage
from attrib.evaluate.runners import Runner
from attrib.evaluate.shared import SharedBuilder, SharedRuns
from attrib.evaluate.twins import Builder
from attrib.events import Events
from attrib.outcome import CommitGraph, Dependencies, Found, GroupOutcome, Member, Reverter
from attrib.recipe import BenchmarkSpec
from attrib.segment.posterior_search import PosteriorSearch, search_members

# Called before each step taken for all members at once, with the members it measures when it
# knows (None: every member): each shared process's SharedRuns.next_phase.
NextPhase = Callable[[Collection[Member] | None], None]


@dataclass(frozen=True)
class MemberRun:
    """How one member is measured: its benchmark, its runner (a view of a shared process, or
    its own), and the round context its evaluation enters around each round."""

    bench: BenchmarkSpec
    runner: Runner
    round_context: Callable[[], AbstractContextManager[object]] | None = None


def shared_members(runs: SharedRuns, benches: Mapping[Member, BenchmarkSpec]) -> dict[Member, MemberRun]:
    """Members that one process measures together (evaluate/shared.py)."""
    return {m: MemberRun(b, runs.view(b.name), runs.round_context(b.name)) for m, b in benches.items()}


class GroupBisection:
    def __init__(
        self,
        repo: CommitGraph,
        builder: Builder,
        members: Mapping[Member, MemberRun],
        settings: Settings,
        events: Events | None = None,
        *,
        next_phase: NextPhase = lambda members: None,
        reverter: Reverter | None = None,
        dependencies: Dependencies | None = None,
    ) -> None:
        """`next_phase`: called before each step taken for all members at once, with the members
        the step measures when it knows (each shared process's SharedRuns.next_phase).
        `dependencies`: each member descends into a roll it names (bisection.py). Each member is
        wired as a bisection of it alone is (bisection.wired), member i from seed + i."""
        self.repo = repo
        self.settings = settings
        self._phase = next_phase
        shared = SharedBuilder(builder)
        self.members: dict[Member, Bisection] = {
            m: wired(
                repo, Stage(run.runner, run.bench, settings, events, run.round_context, i), shared,
                reverter=reverter, dependencies=dependencies,
            )  # fmt: skip
            for i, (m, run) in enumerate(members.items())
        }

    def run(self, good: str, bad: str, verify_revert: bool = False) -> GroupOutcome:
        self._phase(None)
        pre = {m: b.start(good, bad) for m, b in self.members.items()}
        searched = [m for m, p in pre.items() if p.status is None]
        first: dict[Member, Found] = {}
        if self.settings.method is SearchMethod.POSTERIOR and len(searched) > 1:
            lead = next(iter(self.members.values()))
            chain = lead.candidates(list(lead.order[1:]))
            if chain:
                # each member's own posterior search (the one its driver searches with after)
                searches = {m: cast(PosteriorSearch, self.members[m].segments) for m in searched}
                scouting = self.settings.deadline is None
                first = search_members(searches, chain, good, searched, self._phase, scouting)
        outcomes = []
        for m, b in self.members.items():
            self._phase(None)
            outcomes.append((m, b.finish(good, bad, pre[m], verify_revert, first.get(m))))
        return GroupOutcome(good, bad, tuple(outcomes))
