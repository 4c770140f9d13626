"""Is it the code or the machine? A change point whose nightlies differ in environment (pure).

A results row may say where it ran (`env.compiler`, `--env driver=560.35`): stored with the row,
never part of the series (docs/history.md, "The environment"). When the nightly on either side
of a change point ran in different environments, the change is the environment's when the code
cannot explain it: the old code was measured in the new environment too (the nightly re-ran a
commit after the upgrade: no commit between the two environments) and already sits at the new
level. Then nothing is bisected: every series that one environment change moved is one issue
(`EnvGroup`). Without that evidence the code may explain it: the change is bisected as today
(the bisection's preflight rebuilds both ends in today's environment) and its note says the
environment changed too.

Data in, decision out: the daemon's nightly.py reads the points and files the issue.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from attrib.core.environment import EnvChange, Fingerprint, changes
from attrib.history.store import Change, Point, Series


def agree(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """Two environments are one when every key both state has one value: a key one side does
    not state says nothing (a team that starts recording the driver did not change it)."""
    return all(a[k] == b[k] for k in a.keys() & b.keys())


@dataclass(frozen=True)
class EnvShift:
    """The keys that differ between two nights, in key order (core/environment.EnvChange each:
    the names and the comparison the executors' fingerprint uses)."""

    keys: tuple[EnvChange, ...]

    @property
    def label(self) -> str:
        """`compiler nvcc 12.4.131 -> 12.6.85` (keys joined by `; `)."""
        return "; ".join(c.text() for c in self.keys)

    def as_json(self) -> dict[str, dict[str, str]]:
        return {c.key: {"before": c.before, "after": c.after} for c in self.keys}


def env_change(before: Mapping[str, str], after: Mapping[str, str]) -> EnvShift | None:
    """What changed between two environments (keys both state), or None."""
    keys = changes(Fingerprint(before), Fingerprint(after))
    return EnvShift(keys) if keys else None


def commit_env(points: Sequence[Point], commit: str) -> Mapping[str, str] | None:
    """The environment a commit's value in the series was measured in (its first, as
    history/order.py keeps it), or None when the commit has no point."""
    first = min((p for p in points if p.commit == commit), key=lambda p: p.measured_at, default=None)
    return None if first is None else first.environment


@dataclass(frozen=True)
class Attribution:
    change: EnvShift | None  # None: the environment did not change across the point
    environment: bool  # True: the environment explains it; nothing is bisected
    why: str  # one phrase for the change point's note


def attribute(points: Sequence[Point], change: Change) -> Attribution:
    """Whether `change` (of the series whose `points` these are) is its environment's: the
    nightlies on either side differ in environment, and the code before the change measured in
    the after side's environment is at the new level (nearer the after mean than the before
    mean). An environment change without that evidence is bisected, with the change named."""
    before_env, after_env = commit_env(points, change.before), commit_env(points, change.after)
    shift = env_change(before_env or {}, after_env or {})
    if shift is None or after_env is None:
        return Attribution(None, False, "")
    # the before commit measured again in the new environment: no commit between the two
    same_code = [
        p.value for p in points
        if p.commit == change.before and agree(p.environment, after_env) and not agree(p.environment, before_env or {})
    ]  # fmt: skip
    if not same_code:
        return Attribution(shift, False, f"the environment changed too ({shift.label}); no value of {change.before[:10]} in the new one")
    m = statistics.median(same_code)
    if abs(m - change.after_mean) < abs(m - change.before_mean):
        return Attribution(
            shift, True, f"{change.before[:10]} measured again in the new environment is at the new level ({m:.6g}): not the code"
        )
    return Attribution(
        shift, False, f"the environment changed too ({shift.label}), but {change.before[:10]} in it stays at the old level ({m:.6g})"
    )


@dataclass(frozen=True)
class EnvGroup:
    """One environment change over every series it moved: one issue."""

    project: str
    change: EnvShift
    members: tuple[tuple[Series, Change], ...]

    @property
    def change_pct(self) -> float:
        return statistics.median(c.change_pct for _, c in self.members)

    @property
    def ci_pct(self) -> tuple[float, float]:
        """A typical series' interval: the medians of the members' interval bounds."""
        return statistics.median(c.ci_pct[0] for _, c in self.members), statistics.median(c.ci_pct[1] for _, c in self.members)

    @property
    def title(self) -> str:
        """`compiler nvcc 12.4.131 -> 12.6.85: 24 series +6.0 % [5.6, 6.4]`"""
        lo, hi = self.ci_pct
        return f"{self.change.label}: {len(self.members)} series {self.change_pct:+.1f} % [{lo:.1f}, {hi:.1f}]"


def env_groups(project: str, found: Sequence[tuple[Series, Change, EnvShift]]) -> list[EnvGroup]:
    """The environment changes found, one group per change (its keys and values), each with its
    series in the order found; groups in the order of their first series."""
    by: dict[EnvShift, list[tuple[Series, Change]]] = {}
    for s, c, e in found:
        by.setdefault(e, []).append((s, c))
    return [EnvGroup(project, e, tuple(m)) for e, m in by.items()]


def issue_body(group: EnvGroup, series_url: str) -> str:
    """The filed issue's text: what changed, how much each series moved, where to see them."""
    lines = [
        f"attrib attributes this change to the environment, not the code: **{group.change.label}**.",
        "",
        "| key | before | after |",
        "|---|---|---|",
        *(f"| `{c.key}` | `{c.before}` | `{c.after}` |" for c in group.change.keys),
        "",
        f"{len(group.members)} series moved, median {group.change_pct:+.2f} %; each was measured again at its last commit"
        " before the change in the new environment, already at the new level, so no bisection was run.",
        "",
        "| series | before | after | change | interval |",
        "|---|---|---|---|---|",
    ]
    for s, c in group.members:
        lines.append(
            f"| {s.label} | `{c.before[:10]}` | `{c.after[:10]}` | {c.change_pct:+.2f} % | [{c.ci_pct[0]:+.2f}, {c.ci_pct[1]:+.2f}] |"
        )
    if series_url:
        lines += ["", f"The series: {series_url}"]
    return "\n".join(lines)
