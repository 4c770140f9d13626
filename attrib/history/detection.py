"""Change points of stored series: order, detect (pure: attrib/core/detect.py), persist.

Incremental and idempotent: every change point found is stored with the two commits it lies
between, and the next run hands those back to the detector as decided (`decided=`). Which
changes exist is decided on the data alone (attrib/core/detect.py), so running detect again on
the same data adds nothing, and new nights can only add changes after the last decided one.
A decided change whose two commits are no longer neighbours (a late result landed between
them) is handed over as `reopened`: it may move to where the level now moves, and the move is
written to its note. A decided point whose series went back is marked recovered (the commit
where it did), never dropped. `attrib detect` and the daemon
(after each POST /v1/results) both call detect_series; only the daemon goes on to flag.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from attrib.core.detect import ChangeDirection, DetectSettings, detect, detect_scale
from attrib.history.order import ordered
from attrib.history.store import Change, Estimates, FlagState, HistoryStore, Series


@dataclass(frozen=True)
class Finding:
    series: Series
    change: Change
    index: int | None  # position of `after` in the ordered series (None: no longer measured there)
    new: bool  # decided in this run
    recovered_now: bool  # its recovery was seen in this run

    @property
    def regression(self) -> bool:
        return self.change.direction is ChangeDirection.REGRESSION


def detect_series(
    store: HistoryStore, series: Series, line: Sequence[str], settings: DetectSettings, new_flag: FlagState = FlagState.DETECTED
) -> list[Finding]:
    o = ordered(store.points(series.id), line)
    scale = detect_scale(o.values)
    if scale is not series.scale:
        store.set_scale(series.id, scale)
        series = replace(series, scale=scale)
    stored = {c.after: c for c in store.changes(series.id)}
    index_of = {sha: i for i, sha in enumerate(o.commits)}
    decided = sorted(index_of[a] for a in stored if a in index_of and index_of[a] > 0)
    reopened = [
        index_of[c.after] for c in stored.values()
        if c.after in index_of and c.before in index_of and index_of[c.after] - index_of[c.before] > 1
    ]  # fmt: skip
    new: set[int] = set()
    recovered: set[int] = set()
    for cp in detect(o.values, series.direction, settings, decided, reopened) if len(o.values) >= 2 else []:
        after = o.commits[cp.index]
        known = stored.get(after)
        if known is None and cp.moved_from is not None:
            known = stored[o.commits[cp.moved_from]]
        before = o.commits[cp.last_before if cp.last_before >= 0 else cp.index - 1]
        if known is not None and (known.before, known.after) != (before, after) and known.before in index_of:
            # late results landed between its commits: the pair (and maybe the place) changed
            late = [o.commits[i] for i in range(index_of[known.before] + 1, index_of[known.after])]
            store.move_change(
                known.id, before, after,
                f"moved from {known.before[:10]}..{known.after[:10]} to {before[:10]}..{after[:10]}:"
                f" late result(s) at {', '.join(c[:10] for c in late)} landed between them",
            )  # fmt: skip
        est = Estimates(cp.direction, cp.change_pct, cp.ci_pct, cp.p_value, cp.before_mean, cp.after_mean)
        if known is None:
            change_id = store.add_change(series.id, before, after, est, new_flag)
            new.add(change_id)
        else:
            # its place and direction are decided; its size is re-estimated as nights arrive
            change_id = known.id
            store.refresh_estimates(change_id, est)
        if cp.recovered_at is not None and (known is None or known.recovered is None):
            store.set_recovered(change_id, o.commits[cp.recovered_at])
            recovered.add(change_id)
    return [
        Finding(series, c, index_of.get(c.after), c.id in new, c.id in recovered and c.id not in new)
        for c in store.changes(series.id)
    ]


def select(store: HistoryStore, project: str | None, benchmark: str | None) -> list[Series]:
    """The project's series whose benchmark matches the glob `benchmark` (all when None)."""
    return [s for s in store.series(project) if benchmark is None or fnmatch.fnmatchcase(s.benchmark, benchmark)]


def finding_json(f: Finding) -> dict[str, Any]:
    """One change point as `attrib detect --json` prints it. Stable: benchmark, before, after,
    direction, change_pct, ci_pct; added: the rest (docs/history.md)."""
    c = f.change
    return {
        "benchmark": f.series.benchmark,
        "before": c.before,
        "after": c.after,
        "direction": c.direction.value,
        "change_pct": c.change_pct,
        "ci_pct": list(c.ci_pct),
        "p_value": c.p_value,
        "before_mean": c.before_mean,
        "after_mean": c.after_mean,
        "unit": f.series.unit,
        "scale": f.series.scale.value if f.series.scale else None,
        "project": f.series.project,
        "config": f.series.config,
        "series": f.series.id,
        "index": f.index,
        "new": f.new,
        "recovered": c.recovered is not None,
        "recovered_at": c.recovered,
        "flag": c.flag.value,
        "job": c.job_id,
        "note": c.note,
    }
