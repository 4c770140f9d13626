"""Whether a change point becomes a bisection: a pure decision (the daemon's nightly.py acts on it).

A regression's range is (last commit before, first commit after) on the branch's first-parent
line. It is not bisected again when a job for an overlapping range of the same recipe benchmark
is open or was queued before (from the history or from CI), and at most a project's
`max_bisections_per_day` are queued per day: a bad night waits, it is not dropped (the
rate-limited point is retried on the next ingestion). An improvement is recorded unless the
project asks for improvements to be bisected too.

Change points of one recipe whose ranges overlap or touch are one group (`groups`): one job
bisects all their benchmarks over the union of their ranges, and it counts once against the
day's limit (each member has its own search: two culprits in one group are both found).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attrib.history.projects import MapRule, ProjectConfig
from attrib.history.store import FlagState

DAY_S = 86_400.0


@dataclass(frozen=True)
class Span:
    """A range as positions on the first-parent line: (good, bad], the commits it can blame."""

    good: int
    bad: int

    def overlaps(self, other: Span) -> bool:
        return self.good < other.bad and other.good < self.bad

    def near(self, other: Span) -> bool:
        """Overlapping or touching: (19, 20] and (20, 21] are near. The detector may put a change
        a night late; in one group the later range's benchmark is bisected over both."""
        return self.good <= other.bad and other.good <= self.bad


@dataclass(frozen=True)
class Covered:
    """A range already taken: an open job's, or an earlier flag's."""

    span: Span
    job_id: str
    what: str  # "open job" | "earlier flag"


@dataclass(frozen=True)
class Decision:
    state: FlagState  # QUEUED means: queue it now
    rule: MapRule | None
    job_id: str | None = None
    note: str = ""


def decide(
    project: ProjectConfig,
    benchmark: str,
    regression: bool,
    span: Span,
    covered: Sequence[Covered],
    queued_today: int,
) -> Decision:
    """`covered`: ranges of jobs for the same recipe benchmark as `benchmark` maps to."""
    if not regression and not project.bisect_improvements:
        return Decision(FlagState.RECORDED, None, note="an improvement: recorded, not bisected")
    rule = project.rule_for(benchmark)
    if rule is None:
        return Decision(FlagState.UNMAPPED, None, note=f"no map pattern of project {project.name} matches {benchmark!r}")
    for c in covered:
        if c.span.overlaps(span) or c.span == span:
            return Decision(FlagState.DUPLICATE, rule, c.job_id, f"overlaps the range of {c.what} {c.job_id}")
    if queued_today >= project.max_bisections_per_day:
        return Decision(
            FlagState.RATE_LIMITED, rule, note=f"{queued_today} bisections queued for {project.name} in the last day (the limit)"
        )
    return Decision(FlagState.QUEUED, rule)


def groups(points: Sequence[tuple[str, Span]]) -> list[list[int]]:
    """The indices of `points` ((recipe, span) each) in groups: same recipe, ranges near one
    another (`Span.near`) directly or through others of the group; each group in input order,
    groups by their first point."""
    out: list[list[int]] = []
    by_recipe: dict[str, list[int]] = {}
    for i, (recipe, _) in enumerate(points):
        by_recipe.setdefault(recipe, []).append(i)
    for members in by_recipe.values():
        ordered = sorted(members, key=lambda i: (points[i][1].good, points[i][1].bad))
        current: list[int] = []
        reach = -1
        for i in ordered:
            span = points[i][1]
            if current and span.good > reach:
                out.append(current)
                current = []
            current.append(i)
            reach = max(reach, span.bad) if len(current) > 1 else span.bad
        if current:
            out.append(current)
    return sorted((sorted(g) for g in out), key=lambda g: g[0])


def union(spans: Sequence[Span]) -> Span:
    return Span(min(s.good for s in spans), max(s.bad for s in spans))
