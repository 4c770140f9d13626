"""Change points in a benchmark's nightly history: pure, no I/O, no clocks, no randomness.

Why it exists: a fixed threshold on nightly results either cries wolf or misses slow, real
regressions; a change point detector looks at the whole history instead. This module turns a
series of values (ordered by the repository's first-parent history, by the caller) into
change points with their evidence. It never reads a store, never decides what to bisect and
never prints: docs/detection.md explains the method and its measured error rates.

The method ("robust PELT with a scan-calibrated penalty, then a local re-test"):

1. The scale is chosen per series (`detect_scale`): a strictly positive series is read as
   ratios, its values becoming oriented logs (larger is worse), as in `attrib.core.stats`; a
   series with a value <= 0 (a spill count, an error count, a signed delta) is read as plain
   differences, its values divided by the largest magnitude among them first, so that no sum,
   difference or square of values near the float limit (+-1e308) overflows; percentages are
   then relative to the level before. NaN/inf are gaps: skipped, and indices still refer to
   `values`.
2. Noise scale: 1.4826 x the MAD of night-to-night differences / sqrt(2) (differences cancel
   level shifts and slow drift; the median ignores spikes). Each value is then clipped to
   within CLIP_SCALES of that scale around a running median of 2 x min_segment + 1 nights,
   so a spike weighs at most as much as a 3-sigma night and cannot make a segment of its
   own. The variance the cost sees is re-estimated on the clipped values (half the mean
   squared successive difference) and raised to its 80 % upper confidence bound, so that a
   short history, whose scale is poorly known, does not look quieter than it is. When the
   nights are not independent (lag-2 differences spread more than lag-1 ones), that scale
   is widened by the AR(1) factor of `_dependence_factor`: neighbours that are alike make
   differences small next to the swings of the level.
3. Decided change points (`decided`) split the series into free stretches; they are never
   moved or dropped. In each free stretch, PELT (optimal partitioning with pruning, Killick
   et al. 2012) with the L2 cost and segments of at least `min_segment` points. Adding one
   change lowers the L2 cost by exactly sigma^2 Z^2, Z the standardised difference of the two
   sides' means, so the penalty b^2 sigma^2 is a threshold on the scan statistic max_k |Z_k|;
   b is chosen so that P(max |Z_k| > b | no change) = `alpha` by the Siegmund approximation
   for the standardised Brownian bridge (James, James & Siegmund 1987), which accounts for
   having looked at every split position.
4. Each new change is re-tested between its neighbours (Otava's merge step): the
   scan-adjusted p-value of Z on the two adjacent segments must be <= `alpha` (the newest
   change, re-tested every night on a few more points, <= NEWEST_ALPHA_SHARE x alpha), and
   the Hodges-Lehmann shift between the `window` points nearest to it on each side (raw, not
   clipped), less one standard error, must be at least `min_change_pct`. The weakest failure
   is merged away and the rest re-tested until every new change passes. Sizing a change on
   nearby points only keeps a slow drift from adding up to a "change"; the standard error
   off corrects for PELT having cut where the local difference peaks.
   The newest change also waits until the best split of its two segments, with any number
   of points after it, leaves `min_segment` points after it: otherwise, with three nights of
   a new level, the cut min_segment pins would be decided two nights too early.
5. A change whose level later comes back (the level after a later change point is within
   `min_change_pct` of the level before it, or indistinguishable from it at `level`) keeps its
   place and gets `recovered_at`.

Details beyond the brief: `ChangePoint.last_before` is the index of the last measured point
before the change (the caller's "pair of consecutive measured commits" is
(last_before, index)); `before_mean`/`after_mean` are arithmetic means of the raw values in
the estimation windows; `ci_pct` is the distribution-free (Mann-Whitney) interval of the
Hodges-Lehmann shift at `DetectSettings.level`. Estimates of a decided point are refreshed as
data arrives (its position and existence are not).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from statistics import NormalDist

import numpy as np
from scipy.special import chdtri  # as in attrib.core.stats: scipy.stats costs a second of start-up

from attrib.core.model import Direction

DEFAULT_MIN_SEGMENT = 5  # points on each side of a change: one or two wild nights are not a level
DEFAULT_DETECT_MIN_CHANGE_PCT = 1.0  # detection's (recipe/ has the bisection's): smaller steps are not worth a bisection; half a sigma of 2 % nightly noise
DEFAULT_DETECT_ALPHA = 0.001  # per look and free stretch (docs/detection.md: false alerts measured night by night)
DEFAULT_WINDOW = 50  # points each side used to size a change: local, so slow drift does not add up
DEFAULT_LEVEL = 0.95
CLIP_SCALES = 3.0  # a night further than this many noise scales from its neighbours' median is pulled in
SIGMA_UPPER_QUANTILE = 0.2  # sigma used = its 80 % upper bound: a short history must not look quiet
NEWEST_ALPHA_SHARE = 0.2  # see _passes: the tail is looked at once a night
LOCAL_SIGMA_ALPHA = 0.001  # see _local_sigma: white noise exceeds the bound once in a thousand segment pairs
SCALE_FLOOR = 1e-4  # 0.01 % in log space: deterministic metrics (register counts) still get finite evidence
# kappa - 1 for independent nights exceeds DEPENDENCE_Q[0] / (sqrt(n) - DEPENDENCE_Q[1]) once in a
# thousand series: fitted to 20,000 Gaussian series at each n of 30, 50, 100, 200, 500, 1000
# (within 6 % there; Student t3 and 2 % spikes fall inside it, a 30 % bimodal mixture exceeds it
# by up to 1.4x, see docs/detection.md)
DEPENDENCE_Q = (8.87, 3.78)
DEPENDENCE_MIN_POINTS = 30  # fewer nights cannot tell dependence from chance
MAX_LOG_RATIO = 700.0  # e^700 ~ 1e304: a larger ratio is reported as this one (exp would overflow)
DEPENDENCE_MAX_PHI = 0.95  # a factor of at most 28: beyond, the level is not measurable at all

_NORMAL = NormalDist()


@dataclass(frozen=True)
class DetectSettings:
    min_segment: int = DEFAULT_MIN_SEGMENT
    min_change_pct: float = DEFAULT_DETECT_MIN_CHANGE_PCT
    alpha: float = DEFAULT_DETECT_ALPHA
    window: int = DEFAULT_WINDOW
    level: float = DEFAULT_LEVEL

    def __post_init__(self) -> None:
        if self.min_segment < 2:
            raise ValueError(f"min_segment must be >= 2 (one point is a spike, not a level), got {self.min_segment}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if self.min_change_pct < 0:
            raise ValueError(f"min_change_pct must be >= 0, got {self.min_change_pct}")
        if self.window < self.min_segment:
            raise ValueError(f"window must be >= min_segment ({self.min_segment}), got {self.window}")
        if not 0 < self.level < 1:
            raise ValueError(f"level must be in (0, 1), got {self.level}")


class DetectScale(StrEnum):
    """How a series' steps are measured: ratios (logs) when every value is > 0, else differences."""

    RATIO = "ratio"
    DIFFERENCE = "difference"


def detect_scale(values: Sequence[float] | np.ndarray) -> DetectScale:
    """The scale detect reads `values` on: ratios when every finite value is > 0."""
    raw = np.asarray(values, dtype=float)
    return DetectScale.RATIO if bool(np.all(raw[np.isfinite(raw)] > 0)) else DetectScale.DIFFERENCE


class ChangeDirection(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"


@dataclass(frozen=True)
class ChangePoint:
    index: int  # first measured point after the change (an index into `values`)
    direction: ChangeDirection
    change_pct: float  # signed percent change of the value itself (after vs before)
    ci_pct: tuple[float, float]
    p_value: float  # scan-adjusted: the chance of a split this strong anywhere in its two segments
    before_mean: float
    after_mean: float
    recovered_at: int | None = None  # index of the change point that brought the level back
    last_before: int = -1  # last measured point before the change
    moved_from: int | None = None  # a reopened decided change's old index, when it moved


# --- the scan statistic's null distribution -------------------------------------------------


def scan_p_value(b: float, n: int, min_segment: int) -> float:
    """P(max_k |Z_k| > b) for the standardised rank-sum statistic over splits k with at least
    `min_segment` points each side of n exchangeable points (Siegmund's approximation, floored
    by the single-split two-sided p-value)."""
    if b <= 0 or n < 2 * min_segment:
        return 1.0
    single = 2.0 * (1.0 - _NORMAL.cdf(b))
    span = math.log((n - min_segment) / min_segment)
    scanned = b * _NORMAL.pdf(b) * ((1.0 - 1.0 / b**2) * 2.0 * span + 4.0 / b**2)
    return min(1.0, max(single, scanned))


def scan_threshold(alpha: float, n: int, min_segment: int) -> float:
    """The b with scan_p_value(b) = alpha (bisection: the function falls monotonically past 1.5)."""
    lo, hi = 1.5, 40.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if scan_p_value(mid, n, min_segment) > alpha:
            lo = mid
        else:
            hi = mid
    return hi


# --- segmentation ---------------------------------------------------------------------------


def pelt(u: np.ndarray, penalty: float, min_size: int) -> list[int]:
    """Optimal partition of u (L2 cost, `penalty` per change, segments >= min_size): the start
    index of every segment but the first. PELT's pruning keeps it near linear in practice."""
    n = u.size
    if n < 2 * min_size:
        return []
    s1 = np.concatenate(([0.0], np.cumsum(u)))
    s2 = np.concatenate(([0.0], np.cumsum(u * u)))
    best = np.full(n + 1, np.inf)
    best[0] = -penalty
    last = np.zeros(n + 1, dtype=int)
    pool = np.zeros(n + 1, dtype=int)  # admissible last-change positions: pool[:size]
    size = 1
    for t in range(min_size, n + 1):
        if t - min_size >= min_size:
            pool[size] = t - min_size
            size += 1
        s = pool[:size]
        base = best[s] + s2[t] - s2[s] - (s1[t] - s1[s]) ** 2 / (t - s)
        i = int(np.argmin(base))
        best[t], last[t] = base[i] + penalty, s[i]
        keep = s[base <= best[t]]  # never optimal again (PELT pruning, K = 0 for the L2 cost)
        size = keep.size
        pool[:size] = keep
    cuts, t = [], n
    while t > 0:
        t = int(last[t])
        if t > 0:
            cuts.append(t)
    return sorted(cuts)


def running_median(y: np.ndarray, half: int) -> np.ndarray:
    """Median of y[i - half : i + half + 1] (shrunk at the ends) for every i."""
    n = y.size
    out = np.empty(n)
    if n > 2 * half:
        out[half : n - half] = np.median(np.lib.stride_tricks.sliding_window_view(y, 2 * half + 1), axis=1)
        edges = [*range(half), *range(n - half, n)]
    else:
        edges = list(range(n))
    for i in edges:
        out[i] = np.median(y[max(0, i - half) : i + half + 1])
    return out


def _free_changes(y: np.ndarray, sigma: float, settings: DetectSettings) -> list[int]:
    """Change positions inside one free stretch of clipped values (relative to it)."""
    n = y.size
    if n < 2 * settings.min_segment:
        return []
    b = scan_threshold(settings.alpha, n, settings.min_segment)
    return pelt(y, (b * sigma) ** 2, settings.min_segment)


@dataclass(frozen=True)
class _Shift:
    shift: float
    low: float
    high: float


def _hl_shift(before: np.ndarray, after: np.ndarray, level: float) -> _Shift:
    """Hodges-Lehmann shift (median of after - before over all pairs) and its Mann-Whitney CI."""
    d = np.sort(np.subtract.outer(after, before).ravel())
    nb, na = before.size, after.size
    m = d.size
    z = _NORMAL.inv_cdf(0.5 + level / 2)
    k = math.floor(nb * na / 2 - z * math.sqrt(nb * na * (nb + na + 1) / 12))
    k = min(max(k, 0), (m - 1) // 2)
    return _Shift(float(np.median(d)), float(d[k]), float(d[m - 1 - k]))


def _dependence_factor(y: np.ndarray) -> float:
    """How much wider than night-to-night differences show the noise a level stands out from is,
    when the nights are not independent (1.0 when they are, or when that cannot be told).

    For independent nights y[t+2] - y[t] and y[t+1] - y[t] have one distribution, so
    kappa = (MAD of the lag-2 differences / MAD of the lag-1 differences)^2 is 1 whatever the
    noise's shape; steps and spikes move only a few differences and the MAD ignores them. A
    series whose neighbours are alike (seasonal, wandering, a balance that only moves on
    deposits) has kappa > 1: its differences are small next to the swings of its level, and a
    scale from differences calls every swing a step. For AR(1) nights with coefficient phi,
    kappa = 1 + phi, the difference scale is sqrt(1 - phi) of the nights' own, and a mean of n
    nights varies (1 + phi) / (1 - phi) times more than n independent ones: the factor is
    sqrt(1 + phi) / (1 - phi). phi is taken at its cautious value, kappa - 1 less the 99.9 %
    quantile of kappa - 1 for independent nights (DEPENDENCE_Q), so white noise, with or
    without steps, keeps its scale (factor 1) in all but about one series in a thousand."""
    n = y.size
    if n < DEPENDENCE_MIN_POINTS:
        return 1.0
    d1 = np.diff(y)
    d2 = y[2:] - y[:-2]
    s1 = float(np.median(np.abs(d1 - np.median(d1))))
    s2 = float(np.median(np.abs(d2 - np.median(d2))))
    if s1 <= 0.0:  # most nights repeat the last value exactly (a deterministic metric): cannot tell
        return 1.0
    phi = (s2 / s1) ** 2 - 1.0 - DEPENDENCE_Q[0] / (math.sqrt(n) - DEPENDENCE_Q[1])
    return _ar1_factor(min(phi, DEPENDENCE_MAX_PHI)) if phi > 0.0 else 1.0


def _ar1_factor(phi: float) -> float:
    return math.sqrt(1.0 + phi) / (1.0 - phi)


class _Series:
    """The measured points of one call: oriented values, their clipped twins, the noise scale."""

    def __init__(self, values: Sequence[float], direction: Direction, settings: DetectSettings) -> None:
        raw = np.asarray(values, dtype=float)
        self.valid = np.flatnonzero(np.isfinite(raw))
        self.raw = raw[self.valid]
        self.scale = detect_scale(self.raw)
        self.log = self.scale is DetectScale.RATIO
        # Values are read in units of the largest magnitude: means and differences of values near
        # the float limit stay finite (+-1e308: every sum of two would overflow).
        top = float(np.max(np.abs(self.raw))) if self.raw.size else 0.0
        self.unit = top if top > 0 else 1.0
        y = np.log(self.raw) if self.log else self.raw / self.unit
        self.y = y if direction is Direction.LOWER else -y
        self.direction = direction
        typical = float(np.median(np.abs(self.y))) if self.y.size else 0.0
        floor = SCALE_FLOOR if self.log else SCALE_FLOOR * max(typical, 1e-300)
        if self.y.size >= 3:
            d = np.diff(self.y)
            robust = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2)
            level = running_median(self.y, settings.min_segment)
            band = CLIP_SCALES * max(robust, floor)
            self.clipped = np.clip(self.y, level - band, level + band)
            self.outlier = self.clipped != self.y
            dof = self.y.size - 1
            inflate = math.sqrt(dof / float(chdtri(dof, 1.0 - SIGMA_UPPER_QUANTILE)))
            self.sigma = max(math.sqrt(float(np.mean(np.diff(self.clipped) ** 2)) / 2) * inflate, floor)
            self.white_sigma = self.sigma
            self.sigma *= _dependence_factor(self.y)
        else:
            self.clipped, self.sigma = self.y.copy(), floor
            self.white_sigma = floor
            self.outlier = np.zeros(self.y.size, dtype=bool)

    def levels(self, start: int, end: int) -> int:
        """Points in [start, end) that are not clipped outliers: what a level is made of."""
        return int(np.count_nonzero(~self.outlier[start:end]))

    def mean(self, start: int, end: int) -> float:
        """Arithmetic mean of the raw values in [start, end), computed in units of the largest."""
        return float(np.mean(self.raw[start:end] / self.unit)) * self.unit

    def pct(self, shift: float, base: float) -> float:
        """Oriented shift -> signed percent change of the value itself (base: the raw level before).
        Finite whatever the values: a ratio beyond e^MAX_LOG_RATIO is reported as that ratio, and
        a step from a level of exactly 0 as the step's size relative to the series' largest value."""
        raw = shift if self.direction is Direction.LOWER else -shift
        if self.log:
            return math.expm1(min(raw, MAX_LOG_RATIO)) * 100.0
        level = abs(base) / self.unit
        return raw / (level if level > 0 else 1.0) * 100.0


@dataclass(frozen=True)
class _Evidence:
    shift: _Shift
    p_value: float
    before: tuple[int, int]  # estimation windows, positions in the measured points
    after: tuple[int, int]
    trend: bool = False  # a straight line through both segments fits them better than the step


def _evidence(series: _Series, start: int, cut: int, end: int, settings: DetectSettings) -> _Evidence:
    """Evidence for a change at `cut` between segments [start, cut) and [cut, end)."""
    c = series.clipped
    nb, na = cut - start, end - cut
    z = (float(np.mean(c[cut:end])) - float(np.mean(c[start:cut]))) / (
        _local_sigma(c[start:end], nb, series.sigma, series.white_sigma) * math.sqrt(1 / nb + 1 / na)
    )
    p = scan_p_value(abs(z), end - start, min(settings.min_segment, nb, na))
    before = (max(start, cut - settings.window), cut)
    after = (cut, min(end, cut + settings.window))
    shift = _hl_shift(series.y[before[0] : before[1]], series.y[after[0] : after[1]], settings.level)
    return _Evidence(shift, p, before, after, _trend_fits_better(c[start:end], nb))


def _local_sigma(c: np.ndarray, nb: int, sigma: float, white: float) -> float:
    """The noise scale to test a step with: the series' scale (`sigma`, widened for dependent
    nights), unless the two segments scatter around their own means far more than the
    night-to-night scale (`white`) allows (beyond the 99.9 % chi-square bound): then the nights
    are not independent around a level (a wandering or seasonal series, whose neighbours are
    alike while the level swings), and the larger of that spread and `sigma` is the noise a
    step must stand out from."""
    dof = c.size - 2
    if dof < 2:
        return sigma
    rss = float(np.sum((c[:nb] - c[:nb].mean()) ** 2) + np.sum((c[nb:] - c[nb:].mean()) ** 2))
    bound = white**2 * float(chdtri(dof, LOCAL_SIGMA_ALPHA)) / dof
    return max(math.sqrt(rss / dof), sigma) if rss / dof > bound else sigma


def _trend_fits_better(c: np.ndarray, nb: int) -> bool:
    """Whether one straight line through both segments leaves less residual than the step
    between them (both models have two parameters, so no penalty is needed). Under a slow
    trend, PELT's piecewise-constant cost cuts the slope into a staircase, each stair
    significant against a noise scale taken from night-to-night differences (which a trend
    does not raise); a stair is then no better than the line and is merged away, so a trend
    is not reported at all (docs/detection.md). A real step beats any line through it."""
    n = c.size
    step = float(np.sum((c[:nb] - c[:nb].mean()) ** 2) + np.sum((c[nb:] - c[nb:].mean()) ** 2))
    t = np.arange(n, dtype=float) - (n - 1) / 2
    slope = float(np.dot(t, c - c.mean()) / np.dot(t, t))
    line = float(np.sum((c - c.mean() - slope * t) ** 2))
    return line <= step


def _passes(series: _Series, ev: _Evidence, settings: DetectSettings, newest: bool) -> bool:
    """Significant, and big enough to matter even one standard error below its estimate: PELT
    put the cut where the local difference peaks, so the estimate there is biased upwards
    (under slow drift, by about half a noise sigma in benchmarks/RESULTS-detect.md).
    The newest change is tested again every night on a few more points, so it must pass a
    stricter level (NEWEST_ALPHA_SHARE x alpha): its false alerts add up over the looks."""
    alpha = settings.alpha * (NEWEST_ALPHA_SHARE if newest else 1.0)
    # A clipped outlier still carries CLIP_SCALES of shift: it must not be the point that makes
    # a segment long enough (a wild last night plus four slightly high ones is not a level).
    if min(series.levels(*ev.before), series.levels(*ev.after)) < settings.min_segment or ev.trend:
        return False
    base = series.mean(*ev.before)
    se = (ev.shift.high - ev.shift.low) / (2 * _NORMAL.inv_cdf(0.5 + settings.level / 2))
    cautious = math.copysign(max(abs(ev.shift.shift) - se, 0.0), ev.shift.shift)
    return ev.p_value <= alpha and abs(series.pct(cautious, base)) >= settings.min_change_pct


# --- the entry point ------------------------------------------------------------------------


def detect(
    values: Sequence[float],
    direction: Direction,
    settings: DetectSettings = DetectSettings(),
    decided: Sequence[int] = (),
    reopened: Sequence[int] = (),
) -> list[ChangePoint]:
    """Change points of one series, oldest first.

    Idempotent by construction: which changes exist is decided on the data alone (one
    segmentation of the whole series, `_segment`), never on what earlier calls returned, so the
    same values give the same answer however often and in whatever order detect runs.
    `decided` (indices reported by earlier calls) only keeps what was reported: each stays in
    the answer at its place, with refreshed estimates, and a fresh change is added only after
    the last decided one (a fresh cut within min_segment of a decided one is that change).
    `reopened`: decided indices whose neighbourhood received a late value (a night that landed
    between its two commits); such a one moves to the fresh cut nearest to it within
    min_segment, if there is one, and the answer says so (`moved_from`)."""
    series = _Series(values, direction, settings)
    n_values = len(values)
    position = {int(i): p for p, i in enumerate(series.valid)}
    fixed: set[int] = set()
    for index in decided:
        if not 0 < index < n_values or index not in position or position[index] == 0:
            raise ValueError(f"decided change point {index} is not a measured point after the first one")
        fixed.add(position[index])
    fresh = _segment(series, settings)
    moved: dict[int, int] = {}  # new position -> old position
    for index in reopened:
        old = position.get(index)
        if old not in fixed:
            continue
        near = [c for c in fresh if abs(c - old) < settings.min_segment and c not in fixed]
        if near and old not in fresh:
            new = min(near, key=lambda c: (abs(c - old), c))
            fixed.discard(old)
            fixed.add(new)
            moved[new] = old
    if fixed:
        last = max(fixed)
        fresh = [c for c in fresh if c > last and all(abs(c - f) >= settings.min_segment for f in fixed)]
    cuts = sorted(fixed | set(fresh))
    points = _report(series, cuts, _all_evidence(series, cuts, settings), settings)
    if moved:
        points = [
            replace(p, moved_from=int(series.valid[moved[c]])) if c in moved else p
            for p, c in zip(points, cuts, strict=True)
        ]
    return points


def _segment(series: _Series, settings: DetectSettings) -> list[int]:
    """The change positions the data alone support: PELT over the whole series, then the
    re-test (merge the weakest failure until all pass), the newest change held back until
    settled. A pure function of the series: what makes detect idempotent."""
    ordered = _free_changes(series.clipped, series.sigma, settings)
    waited = False  # the newest change is checked once: a deferred one must not take older ones with it
    while True:
        evidence = _all_evidence(series, ordered, settings)
        failing = [
            (ev.p_value, -abs(ev.shift.shift), c)
            for c, ev in evidence.items()
            if not _passes(series, ev, settings, newest=c == ordered[-1])
        ]
        if not failing:
            if waited or not ordered or _settled(series, ordered, settings):
                return ordered
            ordered = ordered[:-1]
            waited = True
            continue
        ordered.remove(max(failing)[2])


def _settled(series: _Series, cuts: list[int], settings: DetectSettings) -> bool:
    """Whether the newest change sits where the data put it, not where min_segment pins it.

    With only a few nights of a new level, the latest cut PELT may place is min_segment
    before the end, which can be before the true change; reported there, it would be
    decided at the wrong commit. So the last change waits until the best split of its two
    segments, with any number of points after it, leaves min_segment points after it."""
    start = cuts[-2] if len(cuts) > 1 else 0
    c = series.clipped[start:]
    n = c.size
    k = np.arange(settings.min_segment, n)
    total = np.cumsum(c)
    left = total[k - 1] / k
    right = (total[-1] - total[k - 1]) / (n - k)
    gain = k * (n - k) / n * (left - right) ** 2
    best = int(k[int(np.argmax(gain))])
    return n - best >= settings.min_segment


def _all_evidence(series: _Series, cuts: list[int], settings: DetectSettings) -> dict[int, _Evidence]:
    edges = [0, *cuts, series.y.size]
    return {c: _evidence(series, edges[i], c, edges[i + 2], settings) for i, c in enumerate(cuts)}


def _report(
    series: _Series, cuts: list[int], evidence: dict[int, _Evidence], settings: DetectSettings
) -> list[ChangePoint]:
    edges = [0, *cuts, series.y.size]
    points = []
    for i, c in enumerate(cuts):
        ev = evidence[c]
        base = series.mean(*ev.before)
        lo, hi = sorted((series.pct(ev.shift.low, base), series.pct(ev.shift.high, base)))
        recovered = None
        for j in range(i + 1, len(cuts)):
            after_j = series.y[cuts[j] : min(edges[j + 2], cuts[j] + settings.window)]
            net = _hl_shift(series.y[ev.before[0] : ev.before[1]], after_j, settings.level)
            if abs(series.pct(net.shift, base)) < settings.min_change_pct or net.low <= 0 <= net.high:
                recovered = int(series.valid[cuts[j]])
                break
        points.append(
            ChangePoint(
                index=int(series.valid[c]),
                direction=ChangeDirection.REGRESSION if ev.shift.shift > 0 else ChangeDirection.IMPROVEMENT,
                change_pct=series.pct(ev.shift.shift, base),
                ci_pct=(lo, hi),
                p_value=ev.p_value,
                before_mean=base,
                after_mean=series.mean(*ev.after),
                recovered_at=recovered,
                last_before=int(series.valid[c - 1]),
            )
        )
    return points
