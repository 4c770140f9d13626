"""Decision statistics: pure functions of samples. No I/O, no clocks, no randomness of their own.

The rule (docs/statistics.md explains it at length):

* Work in log space, oriented so that a larger value is worse. A ratio is what a regression
  is, and logs make "+5 %" the same step at every speed.
* One benchmark run is one block. A round runs the reference and the candidate back to back
  (in a random order) and reduces the two blocks to one paired value: the Hodges-Lehmann
  shift, the median of all pairwise differences candidate - reference. Pairing inside a
  round cancels machine drift; the pairwise median shrugs off a minority of interfered or
  outlying samples, which is what bimodal interference looks like.
* The per-round shifts feed Wald's SPRT of H0 "no change" (mean 0) against H1 "worse by the
  minimum meaningful change" (mean = delta); with an indifference zone (`TestConfig.ignore`,
  the posterior method's) they feed `zone_test`, a pair of mixture likelihood ratios of "at
  most ignore_below" against "at least the minimum". Each increment is clipped (Huber style) so that
  one wild round cannot decide alone. sigma is pooled over every paired set measured so far
  and inflated to an upper confidence bound, because an underestimated sigma is what makes
  an SPRT overconfident.
* The SPRT is truncated (`truncation_rounds`): once a test has run 1.5x the rounds a
  fixed-sample test with the same error rates needs at its sigma, it decides by that
  fixed-sample rule (the mean shift against delta z_a / (z_a + z_b)). That bounds the rounds at
  every true effect, the indifference zone between 0 and delta included, where Wald's test
  drifts nowhere. Only when even that point lies beyond `max_rounds` (the noise is too high
  for this minimum change) does the test answer INCONCLUSIVE at the cap.
* A test that can no longer reach either boundary by its cap stops for futility, undecided
  (`futile`, the rule in core/futility.py; `TestConfig.futility = False` runs it to the cap).
* A test needs at least `min_rounds` (`known_min_rounds` once earlier tests have pinned the
  noise down). Which rule decided is part of the `Decision` (`DecisionRule`).
* The search sizes every "bad" (`size_check`): P(effect >= delta | its shifts) under a flat
  prior on a positive effect (`size_posterior`); the test goes on until that is settled or the
  truncation point, and a step with P < 1/2 is a *smaller step*: verdict GOOD (not worse by
  the minimum change) with `smaller` set; at a boundary's confirmation it is reported apart.

Here: the test's settings (`TestConfig`, `Decision`), how a block is summarised (`block_level`,
`block_shift`), sigma's estimators (`pooled_sigma`, `pooled_sd`, `robust_sd`), the truncation
point and its rule, the size posterior, how much longer a confirmation or an extension may run
(`TestConfig.confirming`, `TestConfig.extended`), estimates, and how drift is read off a
reference's blocks (`level_drift`). One step of a running test (`sprt`, `zone_test`, the final
look, futility, `decide`) is core/sequential.py, so the evaluation stage only feeds rounds in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np
from scipy.special import chdtri  # scipy.stats costs a second of start-up; these are enough

from attrib.core.model import BlockStatistic, DecisionRule, Direction, Verdict

DEFAULT_TEST_ALPHA = 0.001  # a sequential test's: P(call a commit bad | it did not change): a false culprit costs most, so guard it hardest
DEFAULT_TEST_BETA = 0.01  # P(call a commit good | it is worse by the minimum change)
DEFAULT_MIN_ROUNDS = 3  # before the noise is known: the first test's sigma bound is wide anyway
KNOWN_MIN_ROUNDS = 2  # once earlier tests give the pooled sigma this many degrees of freedom:
KNOWN_NOISE_DOF = 12  # two rounds are then enough to cross a boundary at a clear effect
DEFAULT_MAX_ROUNDS = 60  # real machines have noisy spells: 40 left no-change tests undecided in CI
TRUNCATION_FACTOR = 1.5  # truncate at this many times the fixed-sample test's rounds (see sprt)
SIZE_SETTLED = 0.05  # a size check goes on until P(effect >= delta) is below this or above 1 - it
SIZE_AT_LEAST = 0.5  # settled or truncated, a step with P(effect >= delta) below this is a smaller step
CLIP_SIGMAS = 3.0  # one round moves the likelihood ratio by at most this many sigmas' worth
SIGMA_FLOOR = 1e-4  # 0.01 % in log space: deterministic benchmarks still get finite ratios
SIGMA_UPPER_QUANTILE = 0.2  # sigma used = its 80 % upper confidence bound
WINSOR_SCALES = 4.0  # residuals further than this many robust scales are pulled in before pooling
WINSOR_MIN_RESIDUALS = 20
FIRST_GOOD_ROUNDS = 5  # a "no change" verdict with no earlier paired set: rounds it needs (see decide)
CONFIRM_MIN_ROUNDS = 5  # a confirmation's estimate is the culprit's change and CI: not from 2 rounds
EXTEND_FACTOR = 2  # an inconclusive test at the boundary may go on to this many times the cap
DRIFT_MIN_BLOCKS = 10  # a reference needs this many blocks before its drift is reported
DRIFT_WINDOW = 5  # blocks at the start and at the end whose levels are compared


@dataclass(frozen=True)
class TestConfig:
    __test__ = False  # not a pytest class, despite the name
    alpha: float = DEFAULT_TEST_ALPHA
    beta: float = DEFAULT_TEST_BETA
    min_rounds: int = DEFAULT_MIN_ROUNDS
    max_rounds: int = DEFAULT_MAX_ROUNDS
    known_min_rounds: int = KNOWN_MIN_ROUNDS  # min rounds once the pooled noise is known
    truncate: bool = True  # False: Wald's open SPRT, inconclusive at max_rounds (the old rule)
    size_check: bool = False  # a confirmation: also settle whether the step is >= delta
    # The indifference zone's lower edge (log shift): > 0 tests "step <= ignore" (GOOD) against
    # "step >= delta" (BAD) instead of 0 against delta, so a step of exactly the minimum is BAD
    # with probability 1 - beta and one at or below `ignore` is BAD with at most alpha.
    ignore: float = 0.0
    # Stop for futility (core/futility.py): a test that can no longer reach either boundary by
    # `horizon` rounds ends INCONCLUSIVE at once. False runs every test to its cap (the old rule).
    futility: bool = True
    horizon: int = 0  # the rounds the test may reach, an extension that follows included; 0: max_rounds
    # Where the futility rule's predictive over the step starts (mean, variance; log shift): the
    # unexplained change (core/remainder.curtailing); None: a flat prior, the test's rounds alone
    prior: tuple[float, float] | None = None

    def confirming(self) -> TestConfig:
        """The direct comparison of a boundary: it sizes the step (culprit or smaller step), and
        its rounds are the culprit's estimate, so it keeps CONFIRM_MIN_ROUNDS even with the
        noise known."""
        floor = min(max(self.min_rounds, CONFIRM_MIN_ROUNDS), self.max_rounds)
        return replace(self, size_check=True, min_rounds=floor, known_min_rounds=floor)

    def standalone(self) -> TestConfig:
        """A comparison that is its own final verdict with no earlier paired set (`attrib
        compare`): "worse" too waits FIRST_GOOD_ROUNDS rounds. With sigma from its own 3 rounds,
        a step at ignore_below was called worse in 15 of 3000 seeded tests (alpha allows 3); from
        5 rounds, 3 of 3000. In a bisection that early "worse" only starts a search."""
        floor = min(max(self.min_rounds, FIRST_GOOD_ROUNDS), self.max_rounds)
        return replace(self, min_rounds=floor)

    def extended(self) -> TestConfig:
        """An inconclusive test that decides the boundary continues up to this cap."""
        return replace(self, max_rounds=self.max_rounds * EXTEND_FACTOR)

    @property
    def upper(self) -> float:
        return math.log((1 - self.beta) / self.alpha)

    @property
    def lower(self) -> float:
        return math.log(self.beta / (1 - self.alpha))


@dataclass(frozen=True)
class Decision:
    verdict: Verdict | None  # None: keep measuring
    llr: float
    rounds: int
    sigma: float
    rule: DecisionRule | None = None  # what decided; None while measuring
    size_p: float = math.nan  # P(effect >= delta | shifts), for a size-checked BAD
    smaller: bool = False  # worse than 0, but the size check puts it below delta: verdict GOOD


def oriented_logs(samples: Sequence[float], direction: Direction) -> np.ndarray:
    """log of each sample, sign chosen so that larger always means worse."""
    logs = np.log(np.asarray(samples, dtype=float))
    return logs if direction is Direction.LOWER else -logs


def faster_half(block: np.ndarray) -> np.ndarray:
    """The better half of a block (oriented values: the lower half), at least two values.

    Interference from other work on the machine only ever makes a repetition worse, never
    better, so the better half of a block is what the code costs when nothing interfered."""
    ordered = np.sort(block)
    return ordered[: max(2, (ordered.size + 1) // 2)]


def summarised(block: np.ndarray, statistic: BlockStatistic) -> np.ndarray:
    """The part of a block (oriented logs) that the statistic keeps."""
    return faster_half(block) if BlockStatistic(statistic) is BlockStatistic.FASTER_HALF else block


def block_level(block: np.ndarray, statistic: BlockStatistic = BlockStatistic.FASTER_HALF) -> float:
    """One run's level (oriented log): the median of what the statistic keeps. Drift is read
    off these levels over time."""
    return float(np.median(summarised(block, statistic)))


def block_shift(
    reference: np.ndarray, candidate: np.ndarray, statistic: BlockStatistic = BlockStatistic.FASTER_HALF
) -> float:
    """Hodges-Lehmann two-sample shift (median over all pairs of candidate - reference),
    of the faster halves of the two blocks by default, of the whole blocks with "all"."""
    return float(np.median(np.subtract.outer(summarised(candidate, statistic), summarised(reference, statistic))))


def pooled_sigma(sets: Iterable[Sequence[float]], floor: float = SIGMA_FLOOR) -> float:
    """Upper-confidence estimate of the per-round sd, pooled over sets centred on their own means.

    Residuals beyond WINSOR_SCALES robust scales (1.4826 x MAD) are pulled in first: one wild
    round (seen: a shift 40x the typical one under bimodal noise) would otherwise inflate sigma
    for every later test and run them all to the cap."""
    sd, dof = pooled_sd(sets)
    if dof == 0:
        return math.inf
    inflate = math.sqrt(dof / float(chdtri(dof, 1.0 - SIGMA_UPPER_QUANTILE)))
    return max(sd * inflate, floor)


def pooled_sd(sets: Iterable[Sequence[float]]) -> tuple[float, int]:
    """The pooled, winsorised per-round sd (its point estimate) and its degrees of freedom."""
    residuals, dof = [], 0
    for values in sets:
        arr = np.asarray(values, dtype=float)
        if arr.size >= 2:
            residuals.append(arr - arr.mean())
            dof += arr.size - 1
    if dof == 0:
        return math.inf, 0
    r = np.concatenate(residuals)
    robust = robust_sd(r)
    if r.size >= WINSOR_MIN_RESIDUALS and robust > 0:  # a MAD of a handful of values is no scale
        r = np.clip(r, -WINSOR_SCALES * robust, WINSOR_SCALES * robust)
    return math.sqrt(float(np.sum(r**2)) / dof), dof


def robust_sd(values: Sequence[float] | np.ndarray) -> float:
    """1.4826 x the median absolute deviation: the sd of normal data, deaf to a few outliers."""
    arr = np.asarray(values, dtype=float)
    return 1.4826 * float(np.median(np.abs(arr - np.median(arr))))


def z_quantiles(config: TestConfig) -> tuple[float, float]:
    """z_(1-alpha) and z_(1-beta): the fixed-sample test's two critical values."""
    return NormalDist().inv_cdf(1 - config.alpha), NormalDist().inv_cdf(1 - config.beta)


def critical_z(config: TestConfig) -> float:
    """z_(1-alpha) + z_(1-beta): what the rounds of a fixed-sample test scale with."""
    return sum(z_quantiles(config))


def fixed_sample_rounds(sigma: float, delta: float, config: TestConfig) -> float:
    """Rounds a fixed-sample one-sided z-test of 0 against delta needs for (alpha, beta)."""
    return (critical_z(config) * sigma / delta) ** 2


def truncation_rounds(sigma: float, delta: float, config: TestConfig) -> int:
    """Where the truncated SPRT stops at the latest: TRUNCATION_FACTOR x the fixed-sample rounds.

    At that many rounds the fixed-sample rule's own error rates are far below alpha and beta
    (z scaled by sqrt(1.5)), so the truncation adds little to the SPRT's errors
    (docs/statistics.md measures the sum)."""
    if not math.isfinite(sigma) or delta <= 0:
        return config.max_rounds + 1
    return max(config.min_rounds, math.ceil(TRUNCATION_FACTOR * fixed_sample_rounds(sigma, delta, config)))


def resolvable_change(sigma: float, config: TestConfig) -> float:
    """The smallest minimum change (oriented log shift) whose truncated test still ends by
    config.max_rounds at this per-round sigma: below it, tests that find no change can only run
    to the cap and answer INCONCLUSIVE. The inverse of `truncation_rounds` in delta."""
    if not math.isfinite(sigma):
        return math.inf
    z = sum(z_quantiles(config))
    return z * sigma * math.sqrt(TRUNCATION_FACTOR / config.max_rounds)


def truncation_threshold(delta: float, config: TestConfig) -> float:
    """The fixed-sample rule's critical mean shift: it splits delta as z_alpha : z_beta."""
    za, zb = z_quantiles(config)
    return delta * za / (za + zb)


def size_posterior(z: Sequence[float] | np.ndarray, sigma: float, delta: float) -> float:
    """P(effect >= delta | shifts) for a step that exists: normal likelihood of the mean shift
    (standard error sigma / sqrt(n)), flat prior on a positive effect. The composite
    alternative behind a culprit's size: an effect anywhere in (0, delta) is a smaller step."""
    arr = np.asarray(z, dtype=float)
    if arr.size == 0 or not math.isfinite(sigma) or sigma <= 0:
        return math.nan
    m, se = float(arr.mean()), sigma / math.sqrt(arr.size)
    nd = NormalDist()
    above0 = nd.cdf(m / se)
    if above0 <= 0:
        return 0.0
    return min(1.0, nd.cdf((m - delta) / se) / above0)


def size_log_odds(size_p: float, bound: float = 50.0) -> float:
    """log P(effect >= delta) / P(effect < delta): a size-checked comparison's evidence for the
    posterior over where the change is (a composite alternative: (0, delta) counts as no change)."""
    if size_p != size_p:
        return math.nan
    # Clip the log-odds, not p: 1 - exp(-50) is exactly 1.0 in floating point, and a size check
    # that is certain (size_p == 1.0) divided by zero and ended a daemon bisection.
    if size_p >= 1.0:
        return bound
    if size_p <= 0.0:
        return -bound
    return max(-bound, min(bound, math.log(size_p) - math.log1p(-size_p)))


def level_drift(levels: Sequence[float]) -> float | None:
    """Shift (oriented log) of the last DRIFT_WINDOW block levels against the first ones; None
    with fewer than DRIFT_MIN_BLOCKS levels."""
    if len(levels) < DRIFT_MIN_BLOCKS:
        return None
    return float(np.median(levels[-DRIFT_WINDOW:]) - np.median(levels[:DRIFT_WINDOW]))


@dataclass(frozen=True)
class Estimate:
    """A shift in oriented log units with its confidence interval."""

    shift: float
    low: float
    high: float
    n: int


def shift_estimate(diffs: Sequence[float], level: float = 0.95, sigma: float | None = None) -> Estimate:
    """One-sample Hodges-Lehmann estimate (median of Walsh averages) with the signed-rank CI.

    With `sigma` (the test's per-round sigma) the interval is widened to cover the normal one,
    mean +- z sigma / sqrt(n), too: a test decided in 2 or 3 rounds has no 95 % signed-rank
    interval at all (its Walsh averages span less), and its culprit's CI must not pretend to."""
    d = np.sort(np.asarray(diffs, dtype=float))
    n = d.size
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    i, j = np.triu_indices(n)
    walsh = np.sort((d[i] + d[j]) / 2)
    m = walsh.size
    z = NormalDist().inv_cdf(0.5 + level / 2)
    k = n * (n + 1) / 4 - z * math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    k_idx = int(min(max(math.floor(k), 0), (m - 1) // 2))
    low, high = float(walsh[k_idx]), float(walsh[m - 1 - k_idx])
    if sigma is not None and math.isfinite(sigma) and sigma > 0:
        half = z * sigma / math.sqrt(n)
        low, high = min(low, float(d.mean()) - half), max(high, float(d.mean()) + half)
    return Estimate(float(np.median(walsh)), low, high, n)


def to_pct(shift: float, direction: Direction) -> float:
    """Oriented log shift -> signed percent change of the measured value itself."""
    raw = shift if direction is Direction.LOWER else -shift
    return (math.exp(raw) - 1.0) * 100.0


def min_change_shift(min_change_pct: float) -> float:
    """The recipe's minimum meaningful change as an oriented log shift."""
    return math.log1p(min_change_pct / 100.0)


def to_shift(pct: float, direction: Direction) -> float:
    """Signed percent change of the measured value -> oriented log shift (`to_pct` undone)."""
    raw = math.log1p(pct / 100.0)
    return raw if direction is Direction.LOWER else -raw


def below_minimum(shift: float, min_change_pct: float) -> bool:
    """A named step whose estimate (oriented log shift) is below the minimum change: it lies in
    the indifference zone, where naming is allowed and the report says it is below."""
    return shift < min_change_shift(min_change_pct)
