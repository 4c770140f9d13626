"""Peers' change point detectors, re-implemented from their published source for the detection
benchmark (benchmarks/detect_scenarios.py). Facts carried over, code written here.

Every detector takes a series (floats, NaN = missing) and returns the indices of the first
point after each change it reports, in `values` positions. Where a tool skips missing data,
so do these; the faithfulness notes are in each docstring.

Peers (what the issue asks to beat):
  perfherder  Mozilla Treeherder `perfalert.detect_changes` + `generate_new_alerts_in_series`
  otava       Apache Otava `analysis.compute_change_points` (Hunter: E-divisive split in
              windows + t-test significance, then merge)
  asv         airspeed velocity `step_detect.detect_steps` (L1 Potts model, automatic gamma)
Candidates tried for attrib's own method (docs/detection.md):
  ruptures-pelt / ruptures-binseg   the `ruptures` package (only when it is installed), L2 cost on log values, penalty
              from the same scan threshold attrib uses, noise scale from the MAD of differences
  bocpd       Adams & MacKay's Bayesian online change point detection (Normal-Gamma model)
  rank-pelt   attrib's first design (PELT on ranks, no clipping, no re-test)
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy.stats import t as student_t
from scipy.stats import ttest_ind_from_stats

from attrib.core.detect import pelt, scan_threshold

Detector = Callable[[Sequence[float]], list[int]]


def _valid(values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    raw = np.asarray(values, dtype=float)
    idx = np.flatnonzero(np.isfinite(raw))
    return raw[idx], idx


# --- Perfherder ---------------------------------------------------------------------------


def perfherder(
    values: Sequence[float],
    min_back_window: int = 12,
    max_back_window: int = 24,
    fore_window: int = 12,
    t_threshold: float = 7.0,
    alert_threshold_pct: float = 2.0,
) -> list[int]:
    """Treeherder's sliding t-test (one value per revision here).

    Facts from treeherder/perfalert/perfalert/__init__.py and perf/alerts.py: the back window
    grows from 12 up to 24 revisions while no change is seen (`last_seen_regression`); the
    fore window is 12; both means are linearly weighted towards the point (weight (n-i)/n,
    i = distance), variances are plain sample variances around the weighted mean; t is Welch's
    form; a point is a change when t > 7, it has full windows, and its t is at least its
    neighbours'. An alert is then only made when |new/old - 1| >= PERFHERDER_REGRESSION_THRESHOLD
    (2 %), old/new being the unweighted means of the two windows."""
    y, idx = _valid(values)
    n = y.size
    t = np.zeros(n)
    prev_n = np.zeros(n, dtype=int)
    next_n = np.zeros(n, dtype=int)
    hist_avg = np.zeros(n)
    fore_avg = np.zeros(n)
    last_seen = 0
    for i in range(1, n):
        back = min(max(last_seen, min_back_window), max_back_window)
        lo = max(0, i - back)
        jw = y[lo:i][::-1]  # nearest first: the linear weights favour it
        kw = y[i : i + fore_window]
        prev_n[i], next_n[i] = jw.size, kw.size
        hist_avg[i], fore_avg[i] = float(np.mean(jw)), float(np.mean(kw))
        t[i] = abs(_perfherder_t(jw, kw))
        last_seen = 0 if t[i] > t_threshold else last_seen + 1
    out = []
    for i in range(1, n):
        if prev_n[i] < min_back_window or next_n[i] < fore_window or t[i] <= t_threshold:
            continue
        if t[i - 1] > t[i] or (i + 1 < n and t[i + 1] > t[i]):
            continue
        if hist_avg[i] and abs(fore_avg[i] / hist_avg[i] - 1) * 100 < alert_threshold_pct:
            continue
        out.append(int(idx[i]))
    return out


def _perfherder_t(w1: np.ndarray, w2: np.ndarray) -> float:
    def stats(w: np.ndarray) -> tuple[float, float, int]:
        m = w.size
        weights = (m - np.arange(m)) / m
        avg = float(np.sum(w * weights) / np.sum(weights))
        var = float(np.sum((w - avg) ** 2) / (m - 1)) if m > 1 else 0.0
        return avg, var, m

    if w1.size == 0 or w2.size == 0:
        return 0.0
    a1, v1, n1 = stats(w1)
    a2, v2, n2 = stats(w2)
    if a2 == a1:
        return 0.0
    if v1 == 0 and v2 == 0:
        return math.inf
    return (a2 - a1) / math.sqrt(v1 / n1 + v2 / n2)


# --- Apache Otava (Hunter) ----------------------------------------------------------------


def _qhat(x: np.ndarray) -> tuple[int, float]:
    """E-divisive candidate in x: the tau maximising Q(tau, kappa) over both tau and kappa
    (Matteson & James; Otava's PairDistanceCalculator, power 1). Returns (tau, Q)."""
    n = x.size
    d = np.abs(x[:, None] - x[None, :])
    upper = np.triu(d, k=1)
    p_full = np.zeros((n + 1, n + 1))
    p_full[1:, 1:] = d.cumsum(0).cumsum(1)
    p_up = np.zeros((n + 1, n + 1))
    p_up[1:, 1:] = upper.cumsum(0).cumsum(1)

    def block(p: np.ndarray, r0, r1, c0, c1):
        return p[r1, c1] - p[r0, c1] - p[r1, c0] + p[r0, c0]

    tau = np.arange(1, n)[:, None]  # X = x[0:tau], Y = x[tau:kappa]
    kappa = np.arange(2, n + 1)[None, :]
    valid = kappa > tau
    tau_b, kappa_b = np.broadcast_arrays(tau, kappa)
    nx, ny = tau_b, kappa_b - tau_b
    cross = block(p_full, 0, tau_b, tau_b, kappa_b)
    wx = block(p_up, 0, tau_b, 0, tau_b)
    wy = block(p_up, tau_b, kappa_b, tau_b, kappa_b)
    tot = nx + ny
    with np.errstate(divide="ignore", invalid="ignore"):
        q = 2 / tot * cross
        q -= np.where(nx > 1, 2 * ny / (tot * (nx - 1)) * wx, 0.0)
        q -= np.where(ny > 1, 2 * nx / (tot * (ny - 1)) * wy, 0.0)
    q = np.where(valid, q, -np.inf)
    i, _ = np.unravel_index(int(np.argmax(q)), q.shape)
    return int(i + 1), float(q.max())


def _ttest(left: np.ndarray, right: np.ndarray) -> tuple[float, float]:
    """Otava's TTestSignificanceTester.compare: (p, magnitude)."""
    ml, mr = float(np.mean(left)), float(np.mean(right))
    sl = float(np.std(left)) if left.size >= 2 else 0.0
    sr = float(np.std(right)) if right.size >= 2 else 0.0
    p = 1.0
    if left.size + right.size > 2:
        with np.errstate(all="ignore"):
            p = float(ttest_ind_from_stats(ml, sl, left.size, mr, sr, right.size, alternative="two-sided")[1])
        if not math.isfinite(p):
            p = 1.0 if ml == mr else 0.0
    fwd = mr / ml - 1.0 if ml else 0.0
    bwd = ml / mr - 1.0 if mr else 0.0
    return p, max(abs(fwd), abs(bwd))


def _divisive(x: np.ndarray, max_pvalue: float) -> list[int]:
    """Otava's ChangePointDetector with the t-test tester (stop at the first weak candidate)."""
    cps: list[int] = []
    while True:
        edges = [0, *cps, x.size]
        best = None
        for lo, hi in zip(edges, edges[1:], strict=False):
            if hi - lo > 1:
                tau, q = _qhat(x[lo:hi])
                if best is None or q > best[0]:
                    best = (q, lo + tau, lo, hi)
        if best is None:
            return cps
        _, index, lo, hi = best
        p, _ = _ttest(x[lo:index], x[index:hi])
        if p > max_pvalue:
            return cps
        cps = sorted([*cps, index])


def otava(
    values: Sequence[float], window_len: int = 50, max_pvalue: float = 0.001, min_magnitude: float = 0.0
) -> list[int]:
    """Otava's compute_change_points with its defaults (window 50, p 0.001, no magnitude).

    Facts from otava/analysis.py: missing values are forward-filled; split() runs E-divisive
    in windows of window_len stepping by window_len/2 (restarting at the last change found),
    with a first-pass p-value of 10x max_pvalue; each candidate's significance is Student's
    t-test (np.std, equal variances) between the two sides of its interval. merge() then
    repeatedly drops the change point with the weakest p above max_pvalue (or the smallest
    magnitude below min_magnitude) and recomputes the change point at the removed one's
    position in the list and the next one, as Otava's merge does."""
    raw = np.asarray(values, dtype=float)
    y = raw.copy()
    finite = np.isfinite(y)
    if not finite.any():
        return []
    for i in range(y.size):  # forward fill, then back fill the start (fill_missing)
        if not finite[i] and i > 0 and np.isfinite(y[i - 1]):
            y[i] = y[i - 1]
    first = int(np.flatnonzero(np.isfinite(y))[0])
    y[:first] = y[first]
    first_pass = max_pvalue * 10 if max_pvalue < 0.05 else (max_pvalue * 2 if max_pvalue < 0.5 else max_pvalue)
    start, step, found = 0, window_len // 2, set()
    while start < y.size:
        end = min(start + window_len, y.size)
        new = [start + c for c in _divisive(y[start:end], first_pass)]
        found.update(new)
        start = max(max(new) if new else 0, start + step)
    cps = sorted(found)

    def stats(k: int) -> tuple[float, float]:
        edges = [0, *cps, y.size]
        return _ttest(y[edges[k] : edges[k + 1]], y[edges[k + 1] : edges[k + 2]])

    evidence = [stats(k) for k in range(len(cps))]
    while cps:
        weakest = max(range(len(cps)), key=lambda k: evidence[k][0])
        if evidence[weakest][0] < max_pvalue:
            weakest = min(range(len(cps)), key=lambda k: evidence[k][1])
            if evidence[weakest][1] > min_magnitude:
                break
        del cps[weakest], evidence[weakest]
        for k in (weakest, weakest + 1):
            if 0 <= k < len(cps):
                evidence[k] = stats(k)
    return [c if finite[c] else c + int(np.flatnonzero(finite[c:])[0]) for c in cps if finite[c:].any()]


# --- asv ----------------------------------------------------------------------------------


class _L1:
    """Memoised weighted-median level and L1 cost of y[l..r] (asv's L1Dist, unit weights)."""

    def __init__(self, y: np.ndarray, short: int = 20) -> None:
        self.y = y
        self.memo: dict[tuple[int, int], tuple[float, float]] = {}
        # every interval of up to `short` points at once: the exact Potts pass asks for all of them
        n = y.size
        self.table = np.full((short, n), np.inf)  # table[L - 1, lo] = dist(lo, lo + L - 1)
        for length in range(1, min(short, n) + 1):
            windows = np.lib.stride_tricks.sliding_window_view(y, length)
            mus = np.median(windows, axis=1)
            dists = np.sum(np.abs(windows - mus[:, None]), axis=1)
            self.table[length - 1, : n - length + 1] = dists
            for lo, (m, c) in enumerate(zip(mus.tolist(), dists.tolist(), strict=True)):
                self.memo[(lo, lo + length - 1)] = (m, c)

    def get(self, lo: int, hi: int) -> tuple[float, float]:
        hit = self.memo.get((lo, hi))
        if hit is None:
            seg = self.y[lo : hi + 1]
            mu = float(np.median(seg))
            hit = (mu, float(np.sum(np.abs(seg - mu))))
            self.memo[(lo, hi)] = hit
        return hit

    def mu(self, lo: int, hi: int) -> float:
        return self.get(lo, hi)[0]

    def dist(self, lo: int, hi: int) -> float:
        return self.get(lo, hi)[1]


def _potts(d: _L1, n: int, gamma: float, max_size: int) -> list[int]:
    """Exact Potts solution with intervals of at most max_size (asv solve_potts, min_size 1).
    Ties go to the rightmost start, as asv's `<=` over an increasing scan does."""
    table = d.table
    best = np.full(n + 1, np.inf)
    best[0] = -gamma
    prev = np.zeros(n, dtype=int)
    for r in range(n):
        lo = np.arange(max(r + 1 - max_size, 0), r + 1)
        b = best[lo] + gamma + table[r - lo, lo]
        k = b.size - 1 - int(np.argmin(b[::-1]))
        best[r + 1], prev[r] = b[k], lo[k] - 1
    rights = []
    r = n - 1
    while r >= 0:
        rights.append(r + 1)
        r = int(prev[r])
    return rights[::-1]


def _merge_pieces(d: _L1, gamma: float, right: list[int], max_size: int) -> list[int]:
    right = list(right)
    while True:
        min_change, min_j, lo = 0.0, len(right), 0
        for j in range(1, len(right)):
            if min_j < j - 2:
                break
            change = d.dist(lo, right[j] - 1) - (
                d.dist(lo, right[j - 1] - 1) + d.dist(right[j - 1], right[j] - 1) + gamma
            )
            if change <= min_change:
                min_change, min_j = change, j - 1
            lo = right[j - 1]
        if min_j < len(right):
            del right[min_j]
        else:
            break
    lo = 0
    for j in range(1, len(right)):
        score = d.dist(lo, right[j - 1] - 1) + d.dist(right[j - 1], right[j] - 1)
        new_off = 0
        for off in range(-max_size, max_size + 1):
            if right[j - 1] + off - 1 < lo or right[j - 1] + off > right[j] - 1 or off == 0:
                continue
            s = d.dist(lo, right[j - 1] + off - 1) + d.dist(right[j - 1] + off, right[j] - 1)
            if s < score:
                new_off, score = off, s
        right[j - 1] += new_off
        lo = right[j - 1]
    return right


def _golden(f: Callable[[float], float], a: float, b: float, xatol: float, ftol: float = 0.0) -> float:
    ratio = 2 / (1 + math.sqrt(5))
    x0 = (ratio * a - (1 - ratio) * b) / (2 * ratio - 1)  # expand_bounds=True
    x3 = (ratio * b - (1 - ratio) * a) / (2 * ratio - 1)
    x1, x2 = ratio * x0 + (1 - ratio) * x3, (1 - ratio) * x0 + ratio * x3
    f1, f2 = f(x1), f(x2)
    f0 = max(abs(f1), abs(f2))
    while not (abs(x0 - x3) < xatol or abs(f1 - f2) < ftol * f0):
        if f2 < f1:
            x0, x1 = x1, x2
            x2 = ratio * x1 + (1 - ratio) * x3
            f1, f2 = f2, f(x2)
        else:
            x3, x2 = x2, x1
            x1 = ratio * x2 + (1 - ratio) * x0
            f2, f1 = f1, f(x1)
    return x2 if f2 < f1 else x1


def asv(values: Sequence[float]) -> list[int]:
    """asv's detect_steps: the L1 Potts model solved approximately (exact on intervals of at
    most 20 points, then merging and boundary moves), gamma chosen by a golden-section search
    on log(gamma) between 0.1/n and 1 (times the one-segment cost) minimising
    beta * pieces + log(sigma_0 + sigma*), beta = 4 ln(n)/n, sigma* the L1 residual with a
    fitted lag-1 correlation rho. Facts from asv/step_detect.py; missing points are skipped."""
    y, idx = _valid(values)
    n = y.size
    if n == 0:
        return []
    d = _L1(y)
    beta = 4 * math.log(n) / n
    gamma_0 = d.dist(0, n - 1) or 1.0
    max_size = 20
    best: dict[str, object] = {"obj": math.inf, "right": [n]}

    def objective(x: float) -> float:
        gamma = gamma_0 * math.exp(x)
        right = _merge_pieces(d, gamma, _potts(d, n, gamma, max_size), max_size)
        fitted = np.empty(n)
        lo = 0
        levels = []
        for r in right:
            levels.append(d.mu(lo, r - 1))
            fitted[lo:r] = levels[-1]
            lo = r
        e = y - fitted

        def sigma_star(rho: float) -> float:
            return float(abs(e[0]) + np.sum(np.abs(e[1:] - rho * e[:-1])))

        rho = _golden(sigma_star, -1, 1, xatol=0.05)
        if len(levels) > 2:
            sigma_0 = 0.1 * min(abs(levels[j + 1] - levels[j]) for j in range(len(levels) - 1))
        else:
            sigma_0 = 0.001 * min(abs(v) for v in levels)
        obj = beta * len(right) + math.log(max(1e-300, sigma_0) + sigma_star(rho))
        if obj < best["obj"]:
            best["obj"], best["right"] = obj, right
        return obj

    a = math.log(0.1 / n)
    _golden(objective, a, 0.0, xatol=abs(a) * 0.1)
    right = best["right"]
    assert isinstance(right, list)
    return [int(idx[r]) for r in right[:-1]]


# --- candidates for attrib's own method ---------------------------------------------------


def _oriented_log(values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    y, idx = _valid(values)
    return np.log(y), idx


def _ruptures(values: Sequence[float], algo: str, min_size: int = 5, alpha: float = 0.001) -> list[int]:
    import ruptures

    y, idx = _oriented_log(values)
    if y.size < 2 * min_size:
        return []
    sigma = 1.4826 * float(np.median(np.abs(np.diff(y) - np.median(np.diff(y))))) / math.sqrt(2) or 1e-12
    b = scan_threshold(alpha, y.size, min_size)
    model = (
        ruptures.Pelt(model="l2", min_size=min_size, jump=1)
        if algo == "pelt"
        else ruptures.Binseg(model="l2", min_size=min_size, jump=1)
    )
    bkps = model.fit(y).predict(pen=b * b * sigma * sigma)
    return [int(idx[k]) for k in bkps[:-1]]


def ruptures_pelt(values: Sequence[float]) -> list[int]:
    """ruptures' Pelt, L2 cost on log values, penalty b^2 sigma^2 (b: attrib's scan threshold)."""
    return _ruptures(values, "pelt")


def ruptures_binseg(values: Sequence[float]) -> list[int]:
    """ruptures' Binseg, same cost and penalty."""
    return _ruptures(values, "binseg")


def bocpd(
    values: Sequence[float], hazard: float = 1 / 200, threshold: float = 0.999, min_segment: int = 5, max_run: int = 400
) -> list[int]:
    """Adams & MacKay (2007) with a Normal-Gamma prior (Student-t predictive) on log values.

    A change is reported at t - r* when, after point t, the posterior probability that the
    current run started after the last reported change exceeds `threshold` and the MAP run
    length r* is at least min_segment - 1 (r* + 1 points after the change). Run lengths are
    truncated at max_run (the tail mass folded into the last one)."""
    y, idx = _oriented_log(values)
    n = y.size
    if n < 2 * min_segment:
        return []
    scale = 1.4826 * float(np.median(np.abs(np.diff(y) - np.median(np.diff(y))))) / math.sqrt(2) or 1e-6
    mu0, kappa0, alpha0, beta0 = float(np.median(y[:min_segment])), 0.1, 1.0, scale * scale
    log_r = np.array([0.0])
    mu, kappa, a, b = np.array([mu0]), np.array([kappa0]), np.array([alpha0]), np.array([beta0])
    last_cp, out = 0, []
    log_h, log_1h = math.log(hazard), math.log1p(-hazard)
    for t in range(n):
        x = y[t]
        df = 2 * a
        pred_scale = np.sqrt(b * (kappa + 1) / (a * kappa))
        log_pred = student_t.logpdf(x, df, loc=mu, scale=pred_scale)
        growth = log_r + log_pred + log_1h
        cp = np.logaddexp.reduce(log_r + log_pred + log_h)
        log_r = np.concatenate(([cp], growth))
        log_r -= np.logaddexp.reduce(log_r)
        mu_new = (kappa * mu + x) / (kappa + 1)
        b_new = b + kappa * (x - mu) ** 2 / (2 * (kappa + 1))
        mu = np.concatenate(([mu0], mu_new))
        kappa = np.concatenate(([kappa0], kappa + 1))
        a = np.concatenate(([alpha0], a + 0.5))
        b = np.concatenate(([beta0], b_new))
        if log_r.size > max_run:
            log_r[max_run - 1] = np.logaddexp(log_r[max_run - 1], np.logaddexp.reduce(log_r[max_run:]))
            log_r, mu, kappa, a, b = log_r[:max_run], mu[:max_run], kappa[:max_run], a[:max_run], b[:max_run]
        run_since = t + 1 - last_cp  # the run that began at the last reported change has this length
        usable = min(run_since, log_r.size - 1 if log_r.size == max_run else log_r.size)
        p_recent = float(np.exp(np.logaddexp.reduce(log_r[:usable]))) if usable > 0 else 0.0
        r_star = int(np.argmax(log_r))
        change = t + 1 - r_star
        if p_recent > threshold and min_segment <= r_star < run_since and change - last_cp >= min_segment:
            out.append(int(idx[change]))
            last_cp = change
    return out


def rank_pelt(values: Sequence[float], min_size: int = 5, alpha: float = 0.001) -> list[int]:
    """attrib's first design: PELT on ranks standardised to unit variance, penalty b^2 (the
    same scan threshold), no clipping and no re-test. Distribution-free under no change, but
    the global rank variance overstates the within-segment one once there are several levels,
    and a rank statistic with 5 points after a change cannot reach b (latency >= 7)."""
    y, idx = _valid(values)
    n = y.size
    if n < 2 * min_size:
        return []
    order = np.argsort(y, kind="mergesort")
    ranks = np.empty(n)
    ranks[order] = np.arange(1, n + 1)
    u = (ranks - (n + 1) / 2) / math.sqrt((n * n - 1) / 12)
    b = scan_threshold(alpha, n, min_size)
    return [int(idx[k]) for k in pelt(u, b * b, min_size)]


PEERS: dict[str, Detector] = {"perfherder": perfherder, "otava": otava, "asv": asv}
CANDIDATES: dict[str, Detector] = {"rank-pelt": rank_pelt, "bocpd": bocpd}
if importlib.util.find_spec("ruptures") is not None:  # optional: `pip install ruptures` to compare with it
    CANDIDATES.update({"ruptures-pelt": ruptures_pelt, "ruptures-binseg": ruptures_binseg})
