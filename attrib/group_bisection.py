"""The driver of a group bisection: several members (benchmarks) over one range, in the order
a bisection of one takes (bisection.py), with what costs the machine time shared.

  1. the preflight of every member, in shared rounds (one process per round for a runner that
     measures them all); a member that does not reproduce is reported so and drawn no further;
  2. the search of the range for every reproduced member at once (segment/group_search.py:
     each build measured for the strongest undecided member, the others checked at the pair it
     locates, the shared-culprit prior, one confirmation per position for the members that
     point there);
  3. for each member, the rest of its bisection as a bisection of it alone takes it, from its
     first finding on (merges, the remaining-change rule, further culprits, the revert check):
     the single search's own rules, on the member's own evaluation, which holds every block
     measured so far. A member the group search could not settle is searched alone there.

Each member keeps its own `Bisection` (its own evaluation, tests, verdicts and notes), so its
`Outcome` is the one a bisection of it alone would report, measured on shared builds and
rounds. A group of one is a `Bisection`, exactly as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass

from attrib.bisection import Bisection
from attrib.core.model import SearchMethod
from attrib.core.stats import TestConfig
from attrib.evaluate.evaluation import Stage
from attrib.evaluate.runners import Runner
from attrib.evaluate.shared import SharedBuilder, SharedRuns
from attrib.evaluate.twins import Builder
from attrib.events import Events
from attrib.outcome import CommitGraph, Dependencies, GroupOutcome, Member, Reverter
from attrib.recipe import BenchmarkSpec
from attrib.segment.group_search import GroupSearch


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
        config: TestConfig,
        seed: int,
        events: Events | None = None,
        *,
        next_phase: Callable[[Collection[Member] | None], None] = lambda members: None,
        probes: int = 1,
        reverter: Reverter | None = None,
        paths: tuple[str, ...] = (),
        deadline: float | None = None,
        clock: Callable[[], float] | None = None,
        method: SearchMethod = SearchMethod.POSTERIOR,
        dependencies: Dependencies | None = None,
        prebuilt: frozenset[str] = frozenset(),
    ) -> None:
        """`next_phase`: called before each step taken for all members at once, with the members
        the step measures when it knows (each shared process's SharedRuns.next_phase). `dependencies`: each member descends into a roll it
        names (bisection.py). `prebuilt`: the commits whose binary CI published, cheaper to
        have (bisection.py), for the group's search and each member's own."""
        self.repo = repo
        self.method = method
        self.deadline = deadline
        self._phase = next_phase
        shared = SharedBuilder(builder)
        self.members: dict[Member, Bisection] = {}
        for i, (m, run) in enumerate(members.items()):
            stage = Stage(
                method, run.runner, run.bench, config, seed + i, events, probes, run.round_context, deadline,
                clock or time.monotonic,
            )  # fmt: skip
            self.members[m] = Bisection(
                repo, stage.over(repo, shared), run.bench, events, method=method, probes=probes, reverter=reverter,
                paths=paths, dependencies=dependencies, inside=stage.over, prebuilt=prebuilt,
            )  # fmt: skip

    def run(self, good: str, bad: str, verify_revert: bool = False) -> GroupOutcome:
        self._phase(None)
        pre = {m: b.start(good, bad) for m, b in self.members.items()}
        searched = [m for m, p in pre.items() if p.status is None]
        if self.method is SearchMethod.POSTERIOR and len(searched) > 1:
            first = next(iter(self.members.values()))
            chain = first.candidates(list(first.order[1:]))
            if chain:
                scopes = {m: self.members[m].scope for m in searched}
                found = GroupSearch(scopes, self._phase, scouting=self.deadline is None).search(chain, good, searched)
                for m, f in found.items():
                    self.members[m].begin_with(f)
        outcomes = []
        for m, b in self.members.items():
            self._phase(None)
            outcomes.append((m, b.finish(good, bad, pre[m], verify_revert)))
        return GroupOutcome(good, bad, tuple(outcomes))
