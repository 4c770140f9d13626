"""What peers do, re-implemented on attrib's simulated edges for the scenario benchmark.

Each baseline gets the same inputs as attrib: a linear `SimHistory` (c000 = good, last = bad),
a `SimRunner` whose `run(Path(f"/sim/{sha}"))` returns one block of `runner.reps` samples, and
the scenario's minimum meaningful change where the tool has such a knob. Builds are counted as
distinct commits a strategy had to build; samples are what the runner drew (`runner.samples`).

Every baseline returns a `BaselineResult`: the commits it names (with, per commit, the skipped
commits it cannot tell apart from, where the tool reports that), its cost, and an `error` when
the tool itself gives up. The faithfulness caveats are in each function's docstring.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from scipy.special import kolmogorov
from scipy.stats import mannwhitneyu

from attrib.simulation import SimHistory, SimRunner


@dataclass(frozen=True)
class BaselineResult:
    culprits: tuple[str, ...]
    ambiguous: tuple[tuple[str, ...], ...]  # per culprit: skipped commits it is ambiguous with
    builds: int
    samples: int
    error: str = ""


class _Commits:
    """Build bookkeeping shared by the baselines: a build is done once per commit."""

    def __init__(self, history: SimHistory) -> None:
        self.history = history
        self.built: set[str] = set()

    def build(self, sha: str) -> bool:
        self.built.add(sha)
        return sha not in self.history.broken


def _run(runner: SimRunner, sha: str, tries: int = 1) -> tuple[float, ...] | None:
    """One block of samples; a crashed run is retried up to `tries` times in all."""
    for _ in range(tries):
        result = runner.run(Path(f"/sim/{sha}"))
        if result.ok:
            return result.samples
    return None


# --- (a) git bisect run -------------------------------------------------------------------

PRN_MODULO = 32768  # git bisect.c


def _git_prn(count: int) -> int:
    count = (count * 1103515245 + 12345) & 0xFFFFFFFF
    return (count // 65536) % PRN_MODULO


def git_bisect(history: SimHistory, runner: SimRunner, min_change_pct: float = 0.0) -> BaselineResult:
    """`git bisect run ./script`, with the script most people write for a performance bisection.

    Before starting, good and bad are built and measured once (10 samples, i.e. one block at
    reps = 10); the threshold is the midpoint of their medians. The script builds the commit
    (failure: exit 125, "skip"), runs the benchmark (a crash is retried, 3 tries in all, then
    exit 125) and exits 1 (bad) when the 10-sample median is above the threshold, else 0.

    Commit choice follows git's bisect.c on a linear range: the candidate that best halves the
    range; when that one was skipped, git's `skip_away` picks from the non-skipped candidates
    (sorted by how well they halve, ties by object id, here a hash of the name) at the
    pseudo-random rank (count * prn / 32768) * sqrt(prn) / sqrt(32768), prn = git's LCG of the
    count. With only skipped commits left between the last good and the first bad, git lists
    them all ("the first bad commit could be any of"); scored like attrib's `ambiguous_with`.

    Caveats: no threshold knob (min_change_pct unused); git bisect always names a commit, even
    when nothing regressed: that is how the tool behaves, not a simulation artefact.
    """
    commits = _Commits(history)
    chain = history.main
    medians = []
    for sha in (history.good, history.bad):
        if not commits.build(sha):
            return BaselineResult((), (), len(commits.built), runner.samples, f"{sha} did not build")
        block = _run(runner, sha, tries=3)
        if block is None:
            return BaselineResult((), (), len(commits.built), runner.samples, f"{sha} did not run")
        medians.append(float(np.median(block)))
    threshold = (medians[0] + medians[1]) / 2
    lo, hi, skipped = 0, len(chain) - 1, set()
    oid = {i: hashlib.sha1(chain[i].encode()).hexdigest() for i in range(len(chain))}
    while True:
        inside = range(lo + 1, hi)
        if all(i in skipped for i in inside):
            return BaselineResult((chain[hi],), (tuple(chain[i] for i in inside),), len(commits.built), runner.samples)
        ranked = sorted(range(lo + 1, hi + 1), key=lambda i: (-min(i - lo, hi - i), oid[i]))
        pick = ranked[0]
        if pick in skipped:
            left = [i for i in ranked if i not in skipped]
            prn = _git_prn(len(left))
            index = (len(left) * prn // PRN_MODULO) * math.isqrt(prn) // math.isqrt(PRN_MODULO)
            pick = left[index] if index < len(left) else left[0]
            if pick == hi:
                pick = left[index - 1] if index > 0 else left[0]
        if not commits.build(chain[pick]):
            skipped.add(pick)
            continue
        block = _run(runner, chain[pick], tries=3)
        if block is None:
            skipped.add(pick)
        elif float(np.median(block)) > threshold:
            hi = pick
        else:
            lo = pick


# --- (b) asv find -------------------------------------------------------------------------


def asv_find(history: SimHistory, runner: SimRunner, min_change_pct: float = 0.0) -> BaselineResult:
    """`asv find good..bad benchmark`, after asv/commands/find.py.

    The range is `git log good..bad` (good itself is not in it). `do_search(lo, hi)` measures
    lo, mid = lo + floor((hi - lo) / 2) and hi, one value per commit (here the median of one
    10-sample block, as asv reports a median), and recurses into the half with the larger
    relative increase, (mid - lo) against (hi - mid), each over |lo| + |mid| + |hi|; ties go
    left. No statistical test. A commit without a result (build failure or crashed run) moves
    lo up, mid up or hi down by one; crossing mid aborts with "Too many commits failed"
    (error, nothing named). It stops when hi - lo <= 1 and names hi.

    Caveats: the issue describes the search as evaluating 1/3 and 2/3 of the range; asv's code
    measures lo, mid and hi (three points, hence `difference_3way`) and keeps one half, which
    is what is implemented. Because good is outside the range, the first commit after good
    can never be named. asv find always names a commit and only ever one.
    """
    commits = _Commits(history)
    hashes = history.main[1:]
    results: dict[int, float | None] = {}

    def value(i: int) -> float | None:
        if i not in results:
            block = _run(runner, hashes[i]) if commits.build(hashes[i]) else None
            results[i] = None if block is None else float(np.median(block))
        return results[i]

    def done(error: str = "", named: tuple[str, ...] = ()) -> BaselineResult:
        return BaselineResult(named, ((),) * len(named), len(commits.built), runner.samples, error)

    lo, hi = 0, len(hashes) - 1
    while hi - lo > 1:
        mid = (hi - lo) // 2 + lo
        while (lo_v := value(lo)) is None:
            lo += 1
            if lo >= mid:
                return done("Too many commits failed")
        while (mid_v := value(mid)) is None:
            mid += 1
            if mid >= hi:
                return done("Too many commits failed")
        while (hi_v := value(hi)) is None:
            hi -= 1
            if hi <= mid:
                return done("Too many commits failed")
        denom = abs(lo_v) + abs(mid_v) + abs(hi_v) or 1.0
        diff_a, diff_b = max(0.0, (mid_v - lo_v) / denom), max(0.0, (hi_v - mid_v) / denom)
        lo, hi = (lo, mid) if diff_a >= diff_b else (mid, hi)
    return done(named=(hashes[hi],))


# --- (c) Chromium Pinpoint ----------------------------------------------------------------

MIN_ATTEMPTS, MAX_ATTEMPTS, MAX_BUILDS = 10, 160, 60  # pinpoint/models/job_state.py
LOW_THRESHOLD = 0.01  # pinpoint/models/compare/thresholds.py
STDDEVS_PER_IQR = 1.3489795  # norm.ppf(0.75) - norm.ppf(0.25)


def pinpoint_high_threshold(magnitude_iqr: float, sample_size: int) -> float:
    """Pinpoint's "same" threshold, re-derived the way thresholds_performance.py derives its
    table: the 99th percentile of two-sided Mann-Whitney p-values between two normal samples
    of `sample_size` values, `magnitude_iqr` IQRs apart (magnitudes bucketed to 0.1 and clamped
    to 1.0..3.6 as thresholds.HighThreshold does). Seeded, so it is a fixed table too. Every
    row of Pinpoint's table falls below the 0.01 low threshold by 30 values and larger samples
    use the row's last entry, so beyond 30 values UNKNOWN is impossible."""
    bucket = min(max(int(magnitude_iqr * 10), 10), 36)
    if sample_size > 30:
        return min(_threshold_cell(bucket, 30), LOW_THRESHOLD)
    return _threshold_cell(bucket, sample_size)


@cache
def _threshold_cell(bucket: int, sample_size: int, sims: int = 20000) -> float:
    # (sims is part of the key: today's wider table is drawn with fewer sims, see pinpoint_today_high)
    rng = np.random.default_rng([bucket, sample_size])
    a = rng.normal(0.0, 1.0, (sims, sample_size))
    b = rng.normal(bucket / 10 * STDDEVS_PER_IQR, 1.0, (sims, sample_size))
    p = mannwhitneyu(a, b, axis=1, method="asymptotic").pvalue
    return float(np.percentile(p, 99))


def mann_whitney_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value as Pinpoint's mann_whitney_u.py computes it: normal
    approximation, tie correction, its 0.5 continuity offset (= scipy's method="asymptotic")."""
    n1, n2 = len(x), len(y)
    _, inverse, counts = np.unique(np.concatenate([x, y]), return_inverse=True, return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2.0)[inverse]
    u1 = n1 * n2 + n1 * (n1 + 1) / 2.0 - float(ranks[:n1].sum())
    n = n1 + n2
    tie = 1.0 - float((counts**3 - counts).sum()) / (n**3 - n)
    if tie == 0:
        return 1.0
    z = (max(u1, n1 * n2 - u1) - n1 * n2 / 2.0 - 0.5) / math.sqrt(tie * n1 * n2 * (n + 1) / 12.0)
    return min(1.0, math.erfc(abs(z) / math.sqrt(2.0)))


def kolmogorov_smirnov_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sample KS p-value as Pinpoint's kolmogorov_smirnov.py computes it (asymptotic, with
    the (en + 0.12 + 0.11 / en) small-sample factor); close to scipy's ks_2samp(method="asymp")."""
    xs, ys = np.sort(np.asarray(x, dtype=float)), np.sort(np.asarray(y, dtype=float))
    both = np.concatenate([xs, ys])
    d = float(
        np.max(np.abs(np.searchsorted(xs, both, "right") / xs.size - np.searchsorted(ys, both, "right") / ys.size))
    )
    en = math.sqrt(xs.size * ys.size / (xs.size + ys.size))
    return float(kolmogorov((en + 0.12 + 0.11 / en) * d))


def _p_value(a: Sequence[float], b: Sequence[float]) -> float:
    """Pinpoint's p = min(Kolmogorov-Smirnov, Mann-Whitney U)."""
    if len(set(a) | set(b)) < 2:
        return 1.0
    return min(mann_whitney_p(a, b), kolmogorov_smirnov_p(a, b))


TODAY_LOW, TODAY_HIGH_FLOOR = 0.05, 0.10  # compare.py since 2024-03
TODAY_BUCKETS = (3, 40)  # thresholds.py since 2023-08: magnitudes 0.3..4 IQR
TODAY_MAX_N = 360  # its longest row (0.3 IQR); larger samples use the row's last entry


def pinpoint_today_high(magnitude_iqr: float, sample_size: int) -> float:
    """Today's "same" threshold: max(the simulated 99th-percentile table over 0.3..4 IQR, 0.10)."""
    bucket = min(max(int(magnitude_iqr * 10), TODAY_BUCKETS[0]), TODAY_BUCKETS[1])
    return max(_threshold_cell(bucket, min(sample_size, TODAY_MAX_N), 4000), TODAY_HIGH_FLOOR)


def pinpoint_today(history: SimHistory, runner: SimRunner, min_change_pct: float = 2.0) -> BaselineResult:
    """Catapult's rule today: DIFFERENT at p <= 0.05, SAME at p > max(table, 0.10), the table
    over 0.3..4 IQR; otherwise the same exploration as `pinpoint` (attempts doubling 10 -> 160,
    all values of a change pooled for both neighbouring comparisons)."""
    return pinpoint(history, runner, min_change_pct, low=TODAY_LOW, high_rule=pinpoint_today_high)


def pinpoint(
    history: SimHistory,
    runner: SimRunner,
    min_change_pct: float = 2.0,
    high: float | None = None,
    *,
    low: float = LOW_THRESHOLD,
    high_rule=None,
) -> BaselineResult:
    """A Pinpoint performance bisection (pinpoint/models/job_state.py, exploration.py, compare/).

    Changes start as [good, bad] with 10 attempts each. Each pass compares every adjacent pair:
    DIFFERENT inserts the midpoint commit (speculation level 1); UNKNOWN adds attempts to the
    side with fewer (doubling: 10, 20, 40, 80, 160); SAME does nothing. It ends when a pass adds
    nothing; the culprits are the later commit of every adjacent pair that compares DIFFERENT.
    An attempt is one run of one value (the runner must have reps = 1; see scenarios.py). New
    attempts of all changes run interleaved, as Pinpoint's bots run them concurrently.

    A comparison, as `_Compare` does it: attempt failures (a failed build fails every attempt,
    a crashed run fails one) are compared as a functional test, p <= 0.01 -> DIFFERENT (with
    magnitude 1.0, the functional table's high threshold is below 0.01 from 5 attempts on, so
    it never answers UNKNOWN). Then the values: if mean(b) < mean(a) it is an improvement ->
    SAME (the improvement direction is known); else p = min(KS, MWU) over all values; p <= 0.01
    -> DIFFERENT; p <= high threshold -> UNKNOWN; else SAME. The high threshold comes from
    `pinpoint_high_threshold` at magnitude = comparison_magnitude / max(IQR_a, IQR_b, 0.001),
    comparison_magnitude = the good median x min_change_pct (the alert size; values in ms);
    `high=` replaces it with a constant. Still UNKNOWN at 160 attempts: no midpoint, not a
    culprit (same). More than 60 changes: BuildNumberExceeded (error, nothing named).

    Caveats: the table is re-derived by simulation (20000 draws per cell, not Pinpoint's
    million), so its values differ slightly; the post-bisection culprit verification
    (Wilcoxon A/B) of the newest Pinpoint is not modelled; comparing failures as a difference
    is what Pinpoint does, so a build break is reported as a culprit (catapult #3895).
    """
    if runner.reps != 1:
        raise ValueError("pinpoint attempts are single values: give it a SimRunner with reps=1")
    chain, commits = history.main, _Commits(history)
    values: dict[int, list[float]] = {}
    failed: dict[int, list[bool]] = {}
    pending: dict[int, int] = {}
    changes = [0, len(chain) - 1]
    magnitude_abs: list[float] = []
    cache: dict[tuple[int, int, int, int], str] = {}

    def add_attempts(i: int) -> None:
        pending[i] = pending.get(i, 0) + max(len(failed.setdefault(i, [])) + pending.get(i, 0), MIN_ATTEMPTS)

    def work() -> None:
        while any(pending.values()):
            for i in [i for i in changes if pending.get(i)]:
                pending[i] -= 1
                ok = commits.build(chain[i]) and (block := _run(runner, chain[i])) is not None
                failed[i].append(not ok)
                if ok:
                    values.setdefault(i, []).extend(1000.0 * v for v in block)

    def compare(a: int, b: int) -> str:
        key = (a, b, len(failed[a]), len(failed[b]))
        if key not in cache:
            cache[key] = _compare(a, b)
        return cache[key]

    def _compare(a: int, b: int) -> str:
        if _p_value(failed[a], failed[b]) <= LOW_THRESHOLD:
            return "different"
        va, vb = values.get(a, []), values.get(b, [])
        if not va or not vb:
            return "same"
        if np.mean(vb) < np.mean(va):
            return "same"
        if not magnitude_abs:
            magnitude_abs.append(float(np.median(values.get(0, va))) * min_change_pct / 100)
        iqr = max(float(np.subtract(*np.percentile(v, [75, 25]))) for v in (va, vb))
        n = (len(va) + len(vb)) // 2
        p = _p_value(va, vb)
        if p <= low:
            return "different"
        rule = high_rule or pinpoint_high_threshold
        limit = high if high is not None else rule(magnitude_abs[0] / max(iqr, 0.001), n)
        return "unknown" if p <= limit else "same"

    for i in changes:
        add_attempts(i)
    while True:
        work()
        refine, insert = set(), []
        for a, b in zip(changes, changes[1:], strict=False):
            verdict = compare(a, b)
            if verdict == "unknown":
                na, nb = len(failed[a]), len(failed[b])
                refine |= {i for i, mine, other in ((a, na, nb), (b, nb, na)) if mine <= other and mine < MAX_ATTEMPTS}
            elif verdict == "different" and b - a > 1:
                insert.append((a + b) // 2)
        if not refine and not insert:
            break
        for i in refine:
            add_attempts(i)
        for m in insert:
            changes = sorted([*changes, m])
            add_attempts(m)
        if len(changes) > MAX_BUILDS:
            return BaselineResult((), (), len(commits.built), runner.samples, "BuildNumberExceeded")
    named = tuple(chain[b] for a, b in zip(changes, changes[1:], strict=False) if compare(a, b) == "different")
    return BaselineResult(named, ((),) * len(named), len(commits.built), runner.samples)


BASELINES = {"git-bisect": git_bisect, "asv-find": asv_find, "pinpoint": pinpoint, "pinpoint-today": pinpoint_today}
