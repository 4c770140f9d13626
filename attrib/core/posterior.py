"""One posterior over where the change is in a segment: pure.

A segment is positions 0..n along a first-parent chain: 0 is the reference (good-like), n the
bad end. Hypothesis k (1..n) says commits at positions < k share one level and commits at
positions >= k another. Every block of every measured commit of the segment enters one
likelihood, so the endpoints are measured once and serve every probe, and nothing measured
is thrown away (a failed confirmation's rounds are blocks too). The search runs the reference
in every round, and each other block is read against the machine's state the reference's
blocks show around its round (`round_corrected`), as a paired test reads it.

The model, per hypothesis k:
  block level x_pj = mu_side(p) + u_p + e_pj,  u_p ~ N(0, tau^2)  (per-commit scatter: steps
  below `ignore` anywhere in the range), e_pj with the pooled within-commit spread sigma.
A commit enters through its robust location (`commit_level`: one outlying block moves it by
a bounded amount) with variance tau^2 + sigma^2 / n_p, and the commit-level residuals are
Student-t (NU degrees of freedom; NU_ONE_BLOCK, heavier, for a commit measured once), so one
commit that is off by more than its noise says little rather than everything, and one block
alone cannot settle a side. The two levels are fitted per hypothesis (iteratively
reweighted), with the Laplace term of a flat prior on them.

Hypotheses between two consecutive measured positions explain the data equally well, so the
likelihood is computed once per gap between measured positions; a gap shares its mass
uniformly. An unbuildable commit carries no data: the gap across it stays ambiguous, which is
the ambiguous range the report names.

What to ask next from this posterior (locating, batching) is core/choose.py, from core/requests.py's pieces; `mixture_bits`
here is what one block is worth: the mutual information between a commit's side and its block.

This module never builds, runs or prints: it takes block levels and returns numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import chdtri

NU = 10.0  # Student-t degrees of freedom of the commit-level residuals: an outlying commit says
# less than a Gaussian would let it, but a commit far from one level still decides (NU = 4 capped
# one commit's evidence at odds of about 18: two clean commits could never reach 0.99)
NU_ONE_BLOCK = 5.0  # ... of a commit measured once: one block can be an outlier (a load burst, the
# far mode of bimodal noise) that no second block contradicts yet, so it settles a side at odds
# of about 200 at most, not 1000, and a doubtful probe is measured again before the search builds
# beyond it (measured: a single bimodal block 5.5 sigma off read as the bad side at 0.999 and sent
# the search into the wrong half for two builds)
SIGMA_FLOOR = 1e-4  # 0.01 % in log space: deterministic benchmarks still get finite likelihoods
SIGMA_UPPER_QUANTILE = 0.2  # sigma used = its 80 % upper confidence bound: an underestimate is overconfidence
MIN_SIGMA_DOF = 4  # before this many within-commit degrees of freedom, sigma leans on `prior_sigma`
IRLS_STEPS = 6
WINSOR_SIGMAS = 2.5
_GRID = np.linspace(-7.0, 7.0, 141)  # standard-normal units for the mixture entropy


@dataclass(frozen=True)
class Posterior:
    """What is known: P(change at k) for k = 0..n (index 0 always 0) and the two levels under
    the most probable hypothesis, with the step's standard error."""

    probs: tuple[float, ...]
    mu0: float
    mu1: float
    step_se: float
    sigma: float  # per-block noise used
    tau: float  # per-commit scatter used
    dof: int = 0  # within-commit degrees of freedom the noise rests on

    @property
    def step(self) -> float:
        return self.mu1 - self.mu0

    @property
    def map(self) -> int:
        return int(np.argmax(self.probs))

    def below(self, j: int) -> float:
        """F(j) = P(change at a position <= j) = P(j is on the bad side)."""
        return float(sum(self.probs[1 : j + 1]))


def commit_level(b: Sequence[float], sigma: float) -> float:
    """A commit's location: the mean of its blocks with each pulled to within WINSOR_SIGMAS of
    their median, so one outlying block moves it by a bounded amount while clean blocks keep
    the mean's efficiency (a plain median has pi/2 times its variance, and that miscalibration
    kept clean boundaries from concentrating)."""
    arr = np.asarray(b, dtype=float)
    med = float(np.median(arr))
    return float(np.mean(np.clip(arr, med - WINSOR_SIGMAS * sigma, med + WINSOR_SIGMAS * sigma)))


def block_sigma(
    blocks: Mapping[Any, Sequence[float]], prior_sigma: float | None = None, quantile: float = SIGMA_UPPER_QUANTILE
) -> float:
    """Pooled within-commit spread of the block levels, robust (the median absolute residual
    from each commit's mean, rescaled), inflated a little; with few degrees of freedom it is kept at least `prior_sigma`."""
    dev: list[float] = []
    dof = 0
    for b in blocks.values():
        if len(b) >= 2:
            arr = np.asarray(b, dtype=float)
            # residuals from the commit's mean, rescaled to the block variance: deviations from
            # a median include an exact zero in every odd group, which pulled sigma far too low
            dev.extend((np.abs(arr - arr.mean()) * math.sqrt(len(b) / (len(b) - 1))).tolist())
            dof += len(b) - 1
    if not dev:
        return max(prior_sigma or 0.0, SIGMA_FLOOR)
    mad = float(np.median(dev)) * 1.4826
    # its upper confidence bound (as core/stats does for the paired sigma): a sigma drawn low
    # from the first few blocks made a search with no step at all concentrate on noise
    sigma = max(mad, SIGMA_FLOOR) * math.sqrt(dof / chdtri(dof, 1 - quantile))
    if prior_sigma is not None and dof < MIN_SIGMA_DOF:
        sigma = max(sigma, prior_sigma)
    return sigma


def _fit_sides(
    y: np.ndarray, v: np.ndarray, good: np.ndarray, nu: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row of `good` (1 = that commit on the good side): the two levels fitted to the
    commit levels y with variances v by iteratively reweighted least squares under Student-t
    residuals. Returns (mu0, mu1, log-likelihood less half the log-determinant of the
    information, the step's standard error) per row."""
    rows, m = good.shape
    nu = np.full(m, NU) if nu is None else nu
    x = np.stack([good, 1.0 - good], axis=2)  # rows x m x 2
    w = np.broadcast_to(1.0 / v, (rows, m))
    wt = w.copy()
    for _ in range(IRLS_STEPS + 1):
        xtw = x * wt[:, :, None]
        a = np.einsum("rmi,rmj->rij", xtw, x) + np.eye(2) * 1e-12
        beta = np.linalg.solve(a, np.einsum("rmi,m->ri", xtw, y)[:, :, None])[:, :, 0]
        r2 = (y[None, :] - np.einsum("rmi,ri->rm", x, beta)) ** 2 / v
        wt = w * (nu + 1) / (nu + r2)
    ll = np.sum(-(nu + 1) / 2 * np.log1p(r2 / nu) - 0.5 * np.log(v), axis=1)
    info = np.einsum("rmi,rmj->rij", x * (w * (nu + 1) / (nu + 3))[:, :, None], x)
    _, logdet = np.linalg.slogdet(info + np.eye(2) * 1e-12)
    cov = np.linalg.inv(info + np.eye(2) * 1e-12)
    se = np.sqrt(np.maximum(cov[:, 0, 0] + cov[:, 1, 1] - 2 * cov[:, 0, 1], 0.0))
    return beta[:, 0], beta[:, 1], ll - 0.5 * logdet, se


ROUND_WINDOW = 2  # reference blocks either side of a round that its machine state is read from


def round_corrected(
    blocks: Mapping[int, Sequence[float]], rounds: Mapping[int, Sequence[int]], ref: int = 0
) -> dict[int, list[float]]:
    """Each block of another commit less the machine's state when it ran, as the reference's
    blocks around that time show it: the mean of the reference's blocks from ROUND_WINDOW
    before to ROUND_WINDOW after the block's round (its own round's among them when the
    reference ran in it), less the reference's median level.

    The search runs the reference in every round, so a machine that is faster or slower for a
    while (a frequency state, a neighbour's load, a drift of any shape) is seen in the
    reference's blocks of those rounds and taken out of the others', as a paired comparison
    takes it out. A mean of 2 * ROUND_WINDOW + 1 blocks rather than the round's one block:
    a state that lasts a few rounds is still followed, and the reference's own block noise
    enters each corrected block at a fifth of its variance instead of in full. A round with no
    reference block (an end's first blocks, measured alone) is read from the nearest ones.
    The reference's own blocks are its level, as measured."""
    ref_blocks = list(blocks.get(ref, ()))
    pairs = sorted(zip(rounds.get(ref, ()), ref_blocks, strict=True))
    if not pairs:
        return {p: list(b) for p, b in blocks.items()}
    centre = float(np.median(ref_blocks))
    at = np.array([r for r, _ in pairs])
    xs = np.array([x for _, x in pairs])
    window = np.array(
        [xs[max(0, i - ROUND_WINDOW) : i + ROUND_WINDOW + 1].mean() for i in range(len(xs))]
    ) - centre

    def state(r: int) -> float:
        return float(window[int(np.argmin(np.abs(at - r)))])

    return {
        p: list(b) if p == ref else [x - state(r) for x, r in zip(b, rounds.get(p, ()), strict=True)]
        for p, b in blocks.items()
    }


def posterior(
    n: int,
    blocks: Mapping[int, Sequence[float]],
    *,
    tau: float,
    prior_sigma: float | None = None,
    sigma_quantile: float = SIGMA_UPPER_QUANTILE,
    anchored: bool = False,
) -> Posterior:
    """P(change at k), k = 1..n, from every block level measured at positions 0..n.

    Positions 0 and n must have blocks (the reference and the bad end). `anchored`: the blocks
    of positions > 0 are read against the reference's (`round_corrected`, as the search runs
    the reference in every round), so their spread holds the reference's block noise too, and
    the reference's own spread (which holds what the machine did) says nothing of theirs: sigma
    is pooled over the others. A machine's drift is taken out round by round there; the search
    fits no drift of its own (an averaged linear drift term did, before the search ran the
    reference in every round, and could not follow a spell of a dozen rounds)."""
    if n < 1:
        raise ValueError("a segment has at least one candidate position")
    if not blocks.get(0) or not blocks.get(n):
        raise ValueError("both ends of a segment need at least one block")
    spread: Mapping[int, Sequence[float]] = blocks
    if anchored:
        others = {p: b for p, b in blocks.items() if p != 0}
        spread = others if any(len(b) >= 2 for b in others.values()) else blocks
    sigma = block_sigma(spread, prior_sigma, sigma_quantile)
    measured = sorted(p for p, b in blocks.items() if len(b))
    y = np.array([commit_level(blocks[p], sigma) for p in measured])
    v = np.array([tau**2 + sigma**2 / len(blocks[p]) for p in measured])
    m = len(measured)
    # gap c: k in (measured[c], measured[c+1]]; the commits measured[: c+1] are on the good side
    good = np.tri(m - 1, m, dtype=float)  # row c: ones at columns 0..c
    widths = np.log(np.diff(np.array(measured, dtype=float)))
    nu = np.array([NU if len(blocks[p]) >= 2 else NU_ONE_BLOCK for p in measured])
    m0, m1, evidence, se = _fit_sides(y, v, good, nu)
    logs = evidence + widths
    mass = np.exp(logs - logs.max())
    mass /= mass.sum()
    probs = np.zeros(n + 1)
    for c in range(m - 1):
        lo, hi = measured[c], measured[c + 1]
        probs[lo + 1 : hi + 1] = mass[c] / (hi - lo)
    best = int(np.argmax(mass))
    return Posterior(
        tuple(float(p) for p in probs),
        float(m0[best]),
        float(m1[best]),
        float(se[best]),
        sigma,
        tau,
        sum(len(blocks[p]) - 1 for p in measured if not (anchored and p == 0)),
    )


def mixture_bits(f: np.ndarray, a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Mutual information (bits) between a side (bad with probability f) and one value drawn
    from N(a, s^2) on the good side or N(b, s^2) on the bad side; elementwise over arrays."""
    f = np.clip(f, 1e-12, 1 - 1e-12)
    half = np.abs(b - a) / (2 * s)
    t = _GRID[None, :] * (1 + half[:, None] / 7)  # covers both modes at any separation
    za = t + half[:, None]  # (x - a) / s with x = (a + b) / 2 + t s, oriented so b > a
    zb = t - half[:, None]
    pa, pb = np.exp(-0.5 * za**2), np.exp(-0.5 * zb**2)
    mix = ((1 - f)[:, None] * pa + f[:, None] * pb) / math.sqrt(2 * math.pi)  # density in z units
    with np.errstate(divide="ignore", invalid="ignore"):
        integrand = np.where(mix > 0, -mix * np.log2(mix), 0.0)
    h_mix = np.trapezoid(integrand, t, axis=1)
    h_comp = 0.5 * math.log2(2 * math.pi * math.e)
    h_side = -(f * np.log2(f) + (1 - f) * np.log2(1 - f))
    return np.clip(h_mix - h_comp, 0.0, h_side)
