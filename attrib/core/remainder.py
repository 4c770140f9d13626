"""The whole change less the named steps: what is still unexplained, and what a test may give up.

The preflight measures the whole change (bad against good, paired rounds); each located step's
confirmation measures its own share (culprit^ against culprit). Their difference is the change
no step found so far accounts for, an estimate from independent paired sets (drift cancels in
each), with one per-round variance pooled over them and Student's t at their degrees of freedom.

It serves three rules (docs/statistics.md, "Futility" and "A remainder left undecided"):
* `remaining_upper`: below the minimum at P >= 1 - beta, nothing is left to search;
* `curtailing`: the remaining-change test's and the confirmation's predictive over the step
  starts from this estimate, not from a flat prior, and they are never stopped for futility while
  the estimate's 1 - beta upper bound (the bound `remaining_upper` reads), or that predictive
  (the estimate combined with the test's own rounds), puts the step at the minimum or above: a
  stop there could cost a culprit the report would otherwise name;
* `reaches`: a remainder whose interval still reaches the minimum when the search could not
  decide it makes the attribution partial (Status.PARTIAL), and `settling` says what would
  settle it.

Pure: shifts in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import stdtrit

from attrib.core.futility import forecast, step_predictive
from attrib.core.stats import TestConfig

REMAINDER_LEVEL = 0.95  # the unexplained change's interval in the report (two-sided)


@dataclass(frozen=True)
class Unexplained:
    """The whole change's mean shift less the named steps' (oriented log), with its standard
    error and the degrees of freedom of the per-round variance pooled over the sets."""

    shift: float
    se: float
    dof: int
    whole: float  # the whole change's mean shift, which `shift` is part of

    def bound(self, p: float) -> float:
        """The p-quantile of the estimate (Student's t at its degrees of freedom)."""
        return self.shift + float(stdtrit(self.dof, p)) * self.se

    def interval(self, level: float = REMAINDER_LEVEL) -> tuple[float, float]:
        return self.bound((1 - level) / 2), self.bound((1 + level) / 2)


def unexplained(total: Sequence[float], found: Sequence[Sequence[float]]) -> Unexplained | None:
    """The whole change (the preflight's paired shifts) less each named step's (its
    confirmation's shifts); None when any set has fewer than two rounds (no variance)."""
    sets = [np.asarray(total, dtype=float), *(np.asarray(f, dtype=float) for f in found)]
    if any(s.size < 2 for s in sets):
        return None
    rest = float(sets[0].mean()) - sum(float(f.mean()) for f in sets[1:])
    # one per-round variance pooled over the sets (each is paired shifts of one benchmark) and
    # Student's t at its degrees of freedom, not each set's own variance with the normal
    # quantile: a preflight or confirmation of 3-5 rounds states its variance from 2-4 degrees
    # of freedom, and one drawn low said "nothing left" with a second culprit still in the range
    dof = sum(s.size - 1 for s in sets)
    var = sum(float(s.var(ddof=1)) * (s.size - 1) for s in sets) / dof
    return Unexplained(rest, math.sqrt(var * sum(1 / s.size for s in sets)), dof, float(sets[0].mean()))


def with_rounds(rest: Unexplained, diffs: Sequence[float], sigma: float) -> Unexplained:
    """The unexplained change read with a remaining-change test's own rounds (`diffs`, paired
    shifts of the stretch's two ends at per-round noise `sigma`): the decomposition as the prior,
    the test's rounds as the data, combined by their precisions (futility.step_predictive, the
    predictive the test's futility rule reads). The decomposition alone rests on the preflight's
    few rounds (5-10: an interval of about +-10 % at 12 % noise); a test that ran 120 rounds on
    the stretch says far more of it, and leaving it out called partial what those rounds had
    settled. Unchanged without rounds or noise."""
    if len(diffs) < 2 or not sigma > 0 or not rest.se > 0:
        return rest
    mean, sd = step_predictive(float(np.sum(diffs)), len(diffs), sigma, (rest.shift, rest.se**2))
    return Unexplained(mean, sd, rest.dof + len(diffs) - 1, rest.whole)


def reaches(rest: Unexplained | None, delta: float) -> bool:
    """Whether the unexplained change's interval reaches the minimum `delta`: a remainder the
    search could not decide then makes the attribution partial (Status.PARTIAL)."""
    return rest is not None and rest.interval()[1] >= delta


def settling(
    sigma: float, delta: float, ignore: float, horizon: int, z: float, factor: float
) -> tuple[float, float, float]:
    """What would settle a stretch left undecided at per-round noise `sigma` (log): the rounds its
    test needs (the zone's truncation point), the per-round noise at which `horizon` rounds decide
    it, and the smallest minimum change `horizon` rounds decide (log, the zone kept at its ratio)."""
    width = delta - ignore if 0 < ignore < delta else delta
    f = forecast(sigma, 0, delta, ignore, horizon, z, factor)
    return f.rounds, width * math.sqrt(horizon / factor) / z, f.smallest_change


def remaining_upper(total: Sequence[float], found: Sequence[Sequence[float]], beta: float) -> float:
    """The (1 - beta) upper bound of what the culprits found leave of the whole change. Below the
    minimum, a further step >= the minimum exists with probability < beta: searching for it
    again would be the zone's test repeated at a cost of many rounds (`remaining` of issue 19)."""
    rest = unexplained(total, found)
    return math.inf if rest is None else rest.bound(1 - beta)


def curtailing(config: TestConfig, rest: Unexplained | None) -> TestConfig:
    """The test settings of a test whose outcome can change what the report names (the
    remaining-change test, a confirmation), given what is still unexplained: the futility rule's
    predictive over the step starts from the unexplained change (`TestConfig.prior`), and no
    futility stop while the unexplained change's 1 - beta bound, or that predictive (it with the
    test's own rounds), is at least the minimum (`core/sequential.futile`).
    Unchanged when nothing measures the remainder yet."""
    if rest is None or not config.futility:
        return config
    return replace(config, prior=(rest.shift, rest.se**2))


def still_unexplained(config: TestConfig, diffs: Sequence[float], sigma: float, delta: float) -> bool:
    """Whether a test with a prior (`curtailing`) still puts the step at the minimum or above,
    its rounds `diffs` combined with the unexplained change: then it may not be curtailed, and
    one undecided at its cap goes on (segment/remaining.py)."""
    if config.prior is None or not diffs or not sigma > 0:
        return False
    mean, _ = step_predictive(float(np.sum(diffs)), len(diffs), sigma, config.prior)
    return mean >= delta
