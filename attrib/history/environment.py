"""Is it the code or the machine? A change point whose nightlies differ in environment (pure).

A results row may say where it ran (`env.compiler`, `--env driver=560.35`): stored with the row,
never part of the series (docs/history.md, "The environment"). When the nightly on either side
of a change point ran in different environments, the change is the environment's when the code
cannot explain it: the old code was measured in the new environment too (the nightly re-ran a
commit after the upgrade: no commit between the two environments) and already sits at the new
level (the change's interval holds the environment's effect, estimated over every series the
same environment change moved: when the code moved a series too, its change lies beyond). Then
nothing is bisected: every series that one environment change moved is one issue
(`EnvGroup`). Without that evidence the code may explain it: the change is bisected as today
and its report says the environment changed too; when that bisection's preflight (both ends
rebuilt in today's environment: the controlled comparison) does not reproduce it, the
environment made it after all, and it is filed the same way (daemon/nightly.py,
environment_not_reproduced).

Data in, decision out: the daemon's nightly.py reads the points and files the issue.
"""

from __future__ import annotations

import math
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
    """One change point alone (attribute_all of one)."""
    return attribute_all([(points, change)])[0]


def attribute_all(found: Sequence[tuple[Sequence[Point], Change]]) -> list[Attribution]:
    """Whether each change point (with its series' points) is its environment's. The nights on
    either side must differ in environment, and the last commit before the change must have
    been measured again in the new environment (no commit between the two): its step there,
    (re-run - before mean) in percent, is the environment's effect on that series. Points
    whose nights changed the same keys the same way are one environment change, whose effect is
    the median of its series' re-run steps (many series: a precise estimate). A change point is
    the environment's when its change's interval holds that effect; when the code moved the
    series too, its change lies beyond it, and it is bisected, its note naming the keys."""
    shifts: list[EnvShift | None] = []
    reruns: list[float | None] = []
    for points, change in found:
        before_env, after_env = commit_env(points, change.before), commit_env(points, change.after)
        shift = env_change(before_env or {}, after_env or {}) if after_env is not None else None
        same_code = [
            p.value for p in points
            if shift is not None and after_env is not None and p.commit == change.before
            and agree(p.environment, after_env) and not agree(p.environment, before_env or {})
        ]  # fmt: skip
        shifts.append(shift)
        reruns.append(_pct(statistics.median(same_code), change.before_mean) if same_code else None)
    effect: dict[EnvShift, tuple[float, float]] = {}  # the median re-run step and its standard error
    for shift in {s for s in shifts if s is not None}:
        mine = [i for i, (s, r) in enumerate(zip(shifts, reruns, strict=True)) if s == shift and r is not None]
        steps = [r for i in mine if (r := reruns[i]) is not None]
        if not steps:
            continue
        mid = statistics.median(steps)
        # one re-run's spread: the steps' own (robust) when there are enough, else the series' noise
        one = 1.4826 * statistics.median(abs(r - mid) for r in steps) if len(steps) >= 3 else max(
            100.0 * noise(found[i][0]) / abs(found[i][1].before_mean or 1.0) for i in mine
        )  # fmt: skip
        effect[shift] = mid, MEDIAN_EFFICIENCY * one / math.sqrt(len(steps))
    out = []
    for (_, change), shift in zip(found, shifts, strict=True):
        if shift is None:
            out.append(Attribution(None, False, ""))
        elif shift not in effect:
            out.append(Attribution(shift, False, f"the environment changed too ({shift.label}); no value of {change.before[:10]} in the new one"))
        elif _holds(change, *effect[shift]):
            out.append(Attribution(
                shift, True,
                f"the old code measured again in the new environment moved {effect[shift][0]:+.2f} % (median over the series it changed),"
                f" inside this change's interval: not the code",
            ))  # fmt: skip
        else:
            out.append(Attribution(
                shift, False,
                f"the environment changed too ({shift.label}: {effect[shift][0]:+.2f} % on the old code), but this change is"
                f" {change.change_pct:+.2f} % [{change.ci_pct[0]:+.2f}, {change.ci_pct[1]:+.2f}]: the code moved it too",
            ))  # fmt: skip
    return out


MEDIAN_EFFICIENCY = 1.2533  # a median's standard error over a mean's, for normal data
Z = 1.96  # the effect's own interval, at the level of the change's
# Both intervals widened by this much (about 3 standard errors): a change the environment made
# whose interval misses the effect by a little is bisected for nothing, while the code moving a
# series as well shows as a change far beyond the effect (benchmarks/env_history.py).
WIDEN = 1.5


def _holds(change: Change, effect: float, se: float) -> bool:
    """Whether the change agrees with the environment's effect: their difference within the
    change's interval (on that side) and the effect's, added in quadrature."""
    half = change.change_pct - change.ci_pct[0] if effect < change.change_pct else change.ci_pct[1] - change.change_pct
    return abs(change.change_pct - effect) <= WIDEN * math.hypot(half, Z * se)


def noise(points: Sequence[Point]) -> float:
    """A series' night-to-night noise (one value's standard deviation): the median absolute
    difference of consecutive nights, scaled to a normal's sigma; a step moves one difference of
    many, so the series' own changes hardly move it."""
    values = [p.value for p in sorted(points, key=lambda p: p.measured_at)]
    diffs = [abs(b - a) for a, b in zip(values, values[1:], strict=False)]
    return 1.4826 * statistics.median(diffs) / math.sqrt(2) if diffs else 0.0


def _pct(value: float, base: float) -> float:
    return 100.0 * (value - base) / abs(base) if base else math.copysign(math.inf, value - base) if value != base else 0.0


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


def issue_body(group: EnvGroup, series_url: str, evidence: str) -> str:
    """The filed issue's text: what changed, how much each series moved, where to see them."""
    lines = [
        f"attrib attributes this change to the environment, not the code: **{group.change.label}**.",
        "",
        "| key | before | after |",
        "|---|---|---|",
        *(f"| `{c.key}` | `{c.before}` | `{c.after}` |" for c in group.change.keys),
        "",
        f"{len(group.members)} series moved, median {group.change_pct:+.2f} %; {evidence}.",
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
