"""STAND-IN for issue-14a's detector (same interface); replaced by theirs before merging.

A binary segmentation with Welch's t-test: enough for the history edge to be written and
tested against the interface, not the method issue 14 chooses."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from scipy import stats

from attrib.core.model import Direction


class ChangeDirection(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"


@dataclass(frozen=True)
class DetectSettings:
    min_segment: int = 4
    min_change_pct: float = 2.0
    alpha: float = 0.001


@dataclass(frozen=True)
class ChangePoint:
    index: int
    direction: ChangeDirection
    change_pct: float
    ci_pct: tuple[float, float]
    p_value: float
    before_mean: float
    after_mean: float
    recovered_at: int | None = None


def _split(x: np.ndarray, lo: int, hi: int, s: DetectSettings) -> tuple[int, float] | None:
    best: tuple[int, float] | None = None
    for k in range(lo + s.min_segment, hi - s.min_segment + 1):
        a, b = x[lo:k], x[k:hi]
        p = float(stats.ttest_ind(a, b, equal_var=False).pvalue) if np.std(a) + np.std(b) > 0 else (0.0 if a.mean() != b.mean() else 1.0)
        if best is None or p < best[1]:
            best = (k, p)
    return best


def detect(values: Sequence[float], direction: Direction, settings: DetectSettings, decided: Sequence[int] = ()) -> list[ChangePoint]:
    x = np.asarray(values, dtype=float)
    cuts = sorted(set(decided))
    queue = [(lo, hi) for lo, hi in zip([0, *cuts], [*cuts, len(x)], strict=True)]
    while queue:
        lo, hi = queue.pop()
        found = _split(x, lo, hi, settings)
        if found is None or found[1] > settings.alpha:
            continue
        k = found[0]
        before, after = x[lo:k].mean(), x[k:hi].mean()
        if abs(after / before - 1) * 100 < settings.min_change_pct:
            continue
        cuts = sorted({*cuts, k})
        queue += [(lo, k), (k, hi)]
    out = []
    bounds = [0, *cuts, len(x)]
    for i, k in enumerate(cuts):
        a, b = x[bounds[i] : k], x[k : bounds[i + 2]]
        pct = (b.mean() / a.mean() - 1) * 100
        se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)) / a.mean() * 100 if len(a) > 1 and len(b) > 1 else 0.0
        worse = pct > 0 if direction is Direction.LOWER else pct < 0
        p = float(stats.ttest_ind(a, b, equal_var=False).pvalue) if a.std() + b.std() > 0 else 0.0
        recovered = None
        if i + 1 < len(cuts):
            nxt = x[cuts[i + 1] : bounds[i + 3]].mean()
            if abs(nxt / a.mean() - 1) * 100 < settings.min_change_pct:
                recovered = cuts[i + 1]
        out.append(
            ChangePoint(k, ChangeDirection.REGRESSION if worse else ChangeDirection.IMPROVEMENT, round(pct, 3),
                        (round(pct - 1.96 * se, 3), round(pct + 1.96 * se, 3)), p, float(a.mean()), float(b.mean()), recovered)
        )  # fmt: skip
    return out
