"""Whether a sequential test can still finish: its rounds predicted before it starts, and
stochastic curtailment while it runs. Pure numbers in, numbers out.

A test of the zone (or Wald's test of 0 against the minimum) decides when the sum of its
round shifts S_n crosses one of its boundaries, or at its truncation point by the
fixed-sample rule. When the noise is high for the minimum change the truncation point lies
beyond the cap, and a test whose shifts sit in the middle of the zone can only run to the cap
and end undecided: each of those rounds is spent on a decision that cannot be reached.

The rule (`reach_probability`): the probability that the test reaches either boundary within
the rounds it has left, predictive over the step it measures (a flat prior, so the step is
N(mean shift, sigma^2 / n) given its rounds; for a test whose outcome changes what the report
names, that combined with the unexplained change, core/remainder.py) and the rounds to come (S moves as a Brownian
motion with that drift and the per-round noise). Every boundary of the mixtures is replaced
by the line of one component (a mixture of likelihood ratios reaches its threshold only if
one of them does), continuous time stands for rounds, and the components' crossing
probabilities are added: each of the three only raises the probability, so the rule stops
late rather than early. The test's final look at its cap (core/sequential.final_look: BAD when the
sum then stands above a bar) is one more way to decide, added the same way. A test stops for futility when that probability is below
FUTILITY_AT, at the noise's point estimate and at its lower confidence bound alike.

Why it cannot add a false decision: a futility stop only ever ends a test UNDECIDED, at a
round where neither boundary was crossed; on every sample path, a test that stops for
futility calls BAD or GOOD no more often than the same test run to the cap. So alpha (BAD at
a step <= ignore_below) and beta (GOOD at a step >= the minimum) hold as stated; what it can
cost is power (BAD at the minimum), which the rule gives up only where its probability of
deciding at all was below FUTILITY_AT (measured: docs/statistics.md).

This module never measures, prints or reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import chdtri, log_ndtr, ndtr

from attrib.core.model import NoiseAdvice

FUTILITY_AT = 0.2  # stop when (an upper bound of) the chance of a verdict by the cap is below this
FUTILITY_MIN_DOF = 12  # the noise must rest on this many degrees of freedom before a test is curtailed
SIGMA_LOW_QUANTILE = 0.05  # the noise's lower confidence bound the rule also asks at (optimistic)
_NODES, _WEIGHTS = hermegauss(24)  # the step's predictive normal, by Gauss-Hermite quadrature
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


@dataclass(frozen=True)
class Line:
    """A boundary of the running sum of round shifts: S_n = intercept + slope * n."""

    intercept: float
    slope: float


def sigma_bounds(sd: float, dof: int, quantile: float = SIGMA_LOW_QUANTILE) -> tuple[float, float]:
    """sigma's (quantile, 1 - quantile) confidence bounds from a pooled sd with `dof` degrees of freedom."""
    if dof <= 0 or not math.isfinite(sd):
        return 0.0, math.inf
    return (
        sd * math.sqrt(dof / float(chdtri(dof, quantile))),
        sd * math.sqrt(dof / float(chdtri(dof, 1.0 - quantile))),
    )


def crossing_probability(gap: np.ndarray, drift: np.ndarray, sigma: float, rounds: float) -> np.ndarray:
    """P(a Brownian motion with this drift and sigma per round rises by `gap` within `rounds`):
    Phi((m T - h) / s) + exp(2 m h / sigma^2) Phi((-m T - h) / s), s = sigma sqrt(T); 1 where
    the gap is already closed. Elementwise."""
    gap = np.asarray(gap, dtype=float)
    drift = np.asarray(drift, dtype=float)
    if rounds <= 0:
        return (gap <= 0).astype(float)
    s = sigma * math.sqrt(rounds)
    h = np.maximum(gap, 0.0)
    first = ndtr((drift * rounds - h) / s)
    second = np.exp(np.minimum(2 * drift * h / sigma**2 + log_ndtr((-drift * rounds - h) / s), 0.0))
    return np.where(gap <= 0, 1.0, np.minimum(1.0, first + second))


def step_predictive(total: float, n: int, sigma: float, prior: tuple[float, float] | None) -> tuple[float, float]:
    """The step's predictive normal (mean, sd) after n rounds summing to `total`: N(total / n,
    sigma^2 / n) from a flat prior, or that combined with a normal `prior` (mean, variance) by
    their precisions (the unexplained change, core/remainder.py)."""
    if prior is None or not prior[1] > 0 or not math.isfinite(prior[1]):
        return total / n, sigma / math.sqrt(n)
    precision = n / sigma**2 + 1 / prior[1]
    return (total / sigma**2 + prior[0] / prior[1]) / precision, 1 / math.sqrt(precision)


def reach_probability(
    total: float,
    n: int,
    sigma: float,
    left: int,
    bad: Sequence[Line],
    good: Sequence[Line],
    prior: tuple[float, float] | None = None,
    looks: Sequence[tuple[int, float]] = (),
) -> float:
    """The predictive probability that a test with round shifts summing to `total` after n
    rounds crosses one of its `bad` lines (from below) or `good` lines (from above) within
    `left` more rounds, or stands at or above a final look's bar (`looks`: rounds from now to
    the look, the sum it asks; core/sequential.final_look) there, at per-round noise sigma (see the
    module doc: an upper bound); the step from `step_predictive` (a flat prior, or `prior`)."""
    if left <= 0 or n <= 0 or not math.isfinite(sigma) or sigma <= 0:
        return 1.0
    centre, spread = step_predictive(total, n, sigma, prior)
    mu = centre + spread * _NODES  # the step, at the quadrature's nodes
    p = np.zeros_like(mu)
    for line in bad:
        p += crossing_probability(
            np.full_like(mu, line.intercept + line.slope * n - total), mu - line.slope, sigma, left
        )
    for line in good:
        p += crossing_probability(
            np.full_like(mu, total - line.intercept - line.slope * n), line.slope - mu, sigma, left
        )
    for ahead, bar in looks:
        if 0 < ahead <= left:
            p += ndtr((total + mu * ahead - bar) / (sigma * math.sqrt(ahead)))
    return float(np.sum(_WEIGHTS * np.minimum(p, 1.0)))


def boundary_lines(
    delta: float,
    ignore: float,
    sigma: float,
    upper: float,
    lower: float,
    steps: Sequence[tuple[float, float]],
    nulls: Sequence[tuple[float, float]],
) -> tuple[list[Line], list[Line]]:
    """A test's BAD and GOOD boundaries as lines in the sum of its round shifts at noise sigma:
    one per component of each of the zone's mixtures (steps k x delta against ignore, BAD at
    log-ratio `upper`; nulls f x ignore against delta, GOOD at `-lower`), or Wald's two when
    there is no zone (ignore 0)."""
    s2 = sigma**2
    if not 0 < ignore < delta:
        return [Line(s2 * upper / delta, delta / 2)], [Line(s2 * lower / delta, delta / 2)]
    bad = [Line(s2 * upper / (k * delta - ignore), (ignore + k * delta) / 2) for k, _ in steps]
    good = [Line(s2 * lower / (delta - f * ignore), (f * ignore + delta) / 2) for f, _ in nulls]
    return bad, good


def rounds_needed(sigma: float, width: float, z: float, factor: float) -> float:
    """The truncated test's rounds at this noise: factor x the fixed-sample test's (z sigma / width)^2."""
    if not math.isfinite(sigma) or width <= 0:
        return math.inf
    return factor * (z * sigma / width) ** 2


def rule_out_width(sigma: float, rounds: int, z: float, factor: float) -> float:
    """The narrowest zone (minimum less ignore_below, log units) a test of `rounds` rounds still
    decides at this noise: `rounds_needed` undone in the width."""
    if rounds <= 0 or not math.isfinite(sigma):
        return math.inf
    return z * sigma * math.sqrt(factor / rounds)


@dataclass(frozen=True)
class Forecast:
    """A test's rounds, predicted before it starts from the noise measured so far."""

    rounds: float  # at the noise's point estimate
    rounds_low: float  # at its lower confidence bound: the fewest the noise allows
    horizon: int  # the rounds the test may run (its cap, with an extension where one follows)
    smallest_change: float  # the smallest minimum change (log) the horizon decides, at the same zone ratio


def forecast(sd: float, dof: int, delta: float, ignore: float, horizon: int, z: float, factor: float) -> Forecast:
    """The rounds a test of the zone (ignore, delta) needs at a per-round noise measured as `sd`
    with `dof` degrees of freedom, and the smallest minimum change its `horizon` decides (the
    zone kept at the same ratio ignore / delta)."""
    low, _ = sigma_bounds(sd, dof)
    width = delta - ignore
    ratio = 1.0 - ignore / delta if delta > 0 else 1.0
    return Forecast(
        rounds_needed(sd, width, z, factor),
        rounds_needed(low, width, z, factor),
        horizon,
        rule_out_width(sd, horizon, z, factor) / ratio,
    )


def noise_advice(
    sigma: float, delta: float, ignore: float, max_rounds: int, z: float, factor: float, min_change_pct: float
) -> NoiseAdvice | None:
    """What the user is told once when a test that finds no change cannot decide by the cap at
    this per-round noise: the noise, the rounds such a test needs and the smallest minimum
    change the cap decides (percent). None when the cap is enough."""
    f = forecast(sigma, 0, delta, ignore, max_rounds, z, factor)
    if not math.isfinite(f.rounds) or math.ceil(f.rounds) <= max_rounds:
        return None
    return NoiseAdvice(
        sigma_pct=math.expm1(sigma) * 100,
        min_change_pct=min_change_pct,
        max_rounds=max_rounds,
        rounds_needed=math.ceil(f.rounds),
        resolvable_pct=math.expm1(f.smallest_change) * 100,
    )
