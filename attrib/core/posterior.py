"""One posterior over where the change is in a segment, and what to measure next: pure.

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

What next (`next_requests`): the request with the most expected information about the change's
position per unit of cost. A block at position j tells us about k only through "is j on the
bad side", so its information is the mutual information between that side (probability F(j) =
P(k <= j)) and one block drawn from the two-level mixture, exact up to the Gaussian shapes.
An unmeasured commit costs a build plus a block (`build_cost` blocks in all, dearer as the
segment's build budget runs short of what locating still needs: `build_price`); a measured one
costs one block.

This module never builds, runs or prints: it takes block levels and returns numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
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
MIN_LOCATE_DOF = 16  # within-commit degrees of freedom before sigma's usual bound is trusted to locate
LOCATE_SIGMA_QUANTILE = 0.01  # below MIN_LOCATE_DOF a position is located only if it holds at sigma's 99 % bound
MIN_SIGMA_DOF = 4  # before this many within-commit degrees of freedom, sigma leans on `prior_sigma`
DEFAULT_BUILD_COST = 3.0  # a build, in blocks of a built commit (checkout, compile, first run)
# what a commit with a prebuilt binary ([build] prebuilt) costs against a build: the archive is
# fetched and unpacked, nothing compiled; its first block is still measured (at least 1)
PREBUILT_COST_FRACTION = 0.1
DEFAULT_LOCATE_AT = 0.99  # stop when one position (or an ambiguous range) holds this much
CONFIRM_EARLY_AT = 0.9  # ... or confirm at once, provisionally, a gap of two adjacent measured commits holding this
IRLS_STEPS = 6
WINSOR_SIGMAS = 2.5
BREAK_SPAN = 2.0  # a build break's typical reach in commits: see next_requests
ENDS_SHARE = 2  # an end keeps at least 1/this of the blocks of the most-measured inside commit
MISFIT_Z = 4.0  # standard errors off both levels: a commit at neither level (Gaussian odds < 1e-4)
BUILD_SLACK_EASY = 2.0  # builds to spare beyond what locating still needs at which a build costs `build_cost`
BUILD_PRICE_STEP = 4.0  # each build of spare lost below BUILD_SLACK_EASY adds this many times `build_cost`
_GRID = np.linspace(-7.0, 7.0, 141)  # standard-normal units for the mixture entropy


class Action(StrEnum):
    """What the search asks the evaluation stage for next."""

    MEASURE = "measure"  # one more block of a built commit
    BUILD = "build"  # build a commit and measure its first block
    EXTEND = "extend"  # a commit at its block cap still decides the boundary: more samples, once
    CONFIRM = "confirm"  # the posterior holds one position: confirm culprit^ vs culprit
    EXHAUSTED = "exhausted"  # nothing left to learn within the block cap: report the credible range


@dataclass(frozen=True)
class Request:
    action: Action
    position: int = 0  # MEASURE/BUILD/EXTEND: where; CONFIRM: the culprit's position
    last_good: int = 0  # CONFIRM: the position it is confirmed against
    ambiguous: tuple[int, ...] = ()  # CONFIRM/EXHAUSTED: unbuildable or open positions beside it
    value: float = 0.0  # expected bits per unit of cost of a MEASURE/BUILD
    provisional: bool = False  # CONFIRM: located with the noise not yet known (fewer than
    # MIN_LOCATE_DOF degrees of freedom): it stands only if the posterior holds it again with
    # the confirmation's blocks


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


def _credible(
    post: Posterior, unbuildable: frozenset[int], at: float, untested: frozenset[int] = frozenset()
) -> tuple[int, tuple[int, ...]] | None:
    """A position (with the unbuildable commits just before it) holding >= `at`, else None.

    `untested`: commits that will not be built (the build budget is spent); like unbuildable
    ones they carry no data, so the gap across them is one place, named by the measured commit
    at its top."""
    probs = post.probs
    unbuildable = unbuildable | untested
    for k in range(1, len(probs)):
        if probs[k] <= 0:
            continue
        lo = k
        while lo - 1 >= 1 and lo - 1 in unbuildable:
            lo -= 1
        if k in unbuildable:
            continue
        if sum(probs[lo : k + 1]) >= at:
            return k, tuple(range(lo, k))
    return None


def next_request(
    n: int,
    blocks: Mapping[int, Sequence[float]],
    **kw: object,
) -> tuple[Request, Posterior]:
    """The single best request (`next_requests` with width 1)."""
    reqs, post = next_requests(n, blocks, **kw)  # type: ignore[arg-type]
    return reqs[0], post


def next_requests(
    n: int,
    blocks: Mapping[int, Sequence[float]],
    *,
    unbuildable: frozenset[int] = frozenset(),
    tau: float,
    prior_sigma: float | None = None,
    build_cost: float = DEFAULT_BUILD_COST,
    locate_at: float = DEFAULT_LOCATE_AT,
    blocks_left: int | None = None,
    builds_left: int | None = None,
    width: int = 1,
    cap: int | None = None,
    extended: frozenset[int] = frozenset(),
    anchored: bool = False,
    prebuilt: frozenset[int] = frozenset(),
) -> tuple[tuple[Request, ...], Posterior]:
    """The next requests for a segment (at most `width`, to be built concurrently and measured
    in one shared round), and the posterior they were chosen from.

    CONFIRM once one position (with the unbuildable commits right before it, which no data can
    tell apart) holds `locate_at`, marked `provisional` when the noise is not yet known (see
    below), or already at CONFIRM_EARLY_AT, provisionally, when the change lies between two
    adjacent measured commits and what is left is their sides; EXHAUSTED when no request is worth anything or the block
    cap (`blocks_left`) is spent; EXTEND when the most informative commit already has `cap`
    blocks (the recipe's max_rounds: what one commit may cost) and was not extended yet; else
    the MEASUREs and BUILDs with the most bits per unit cost, each valued as if the sides of
    the ones chosen before it were known (so a batch spreads out instead of piling onto one
    gap, and each further probe is worth less). `anchored`: the blocks are read against the
    reference's of their rounds (`round_corrected`; see `posterior`).

    `builds_left`: how many more commits the segment may build (None: no limit). A batch asks
    for at most that many BUILDs; once none are left only measured commits are asked for, and
    a gap between two measured commits that holds `locate_at` is located as one place; the
    untested commits inside that gap may still be built (that finishes the search in at most
    log2 of its width builds), and when none are, the gap is named by the commit at its top with
    the others as its ambiguous range (the driver reports it unresolved: not measured). A build costs
    `build_cost` blocks in the value (a position in `prebuilt`, whose binary CI published,
    PREBUILT_COST_FRACTION of that and at least a block), but the budget is what bounds builds: where the one-step
    model misfits (a second, smaller step elsewhere puts some commits at neither level) the
    posterior keeps a share on the far mode and each build still looks worth its cost."""
    post = posterior(n, blocks, tau=tau, prior_sigma=prior_sigma, anchored=anchored)
    counts = {p: len(b) for p, b in blocks.items() if len(b)}
    no_builds = builds_left is not None and builds_left <= 0
    untested = (
        frozenset(j for j in range(1, n) if j not in counts and j not in unbuildable) if no_builds else frozenset()
    )
    if untested:
        located = _credible(post, unbuildable, locate_at, untested)
        # (a gap that is the whole segment is not located: nothing inside was measured)
        if located is not None and len(located[1]) < n - 1:
            # the budget is spent but the change is located between two measured commits: the
            # untested ones inside that gap may still be built, since they are what names one
            # commit (at most log2 of the gap's width more builds); elsewhere nothing is built
            untested -= frozenset(located[1])

    def capped(j: int) -> bool:
        return cap is not None and 0 < j < n and counts.get(j, 0) >= cap

    hit = _credible(post, unbuildable, locate_at, untested)
    early = _credible(post, unbuildable, CONFIRM_EARLY_AT, untested) if hit is None else None
    if (
        early is not None
        and not early[1]
        and counts.get(early[0], 0) >= 2  # (one block of either could be an outlier that a
        and counts.get(early[0] - 1, 0) >= 2  # second block, far cheaper than a confirmation, tells)
        and _around(post, early[0], list(counts)) >= locate_at
    ):
        # the change is between two adjacent measured commits with CONFIRM_EARLY_AT, and the
        # rest of `locate_at` lies in the gaps just beside them: what is left to learn is the
        # two commits' sides, exactly what the confirmation's paired rounds of them measure,
        # so they are confirmed now (provisionally: the posterior must hold the position at
        # `locate_at` with the confirmation's blocks) rather than measured one block at a time
        # up to `locate_at` and then measured again by the confirmation
        return (Request(Action.CONFIRM, early[0], early[0] - 1, (), provisional=True),), post
    if hit is not None:
        k, amb = hit
        last = (amb[0] - 1) if amb else k - 1
        dof = post.dof
        # a boundary resting on a sigma from a handful of blocks can be luck: it is taken as it
        # is when it holds even at sigma's 99 % upper bound (a step many times the noise does
        # from the first blocks), else it is confirmed provisionally: the confirmation's paired
        # rounds are blocks of exactly the two commits that decide it, so they pin the noise
        # down where it matters (at least CONFIRM_MIN_ROUNDS more blocks of each), and the
        # driver takes the culprit only if the posterior still holds it with them. (Measuring
        # the two sides until MIN_LOCATE_DOF first, as this did, drew 6-8 blocks that the
        # confirmation then drew again: 80 of a median 2 % step's 396 samples.)
        sides = [p for p in (last, k) if not (capped(p) and p in extended)]
        robust = (
            dof < MIN_LOCATE_DOF
            and dof >= 2
            and _credible(
                posterior(
                    n, blocks, tau=tau, prior_sigma=prior_sigma, sigma_quantile=LOCATE_SIGMA_QUANTILE, anchored=anchored
                ),
                unbuildable,
                locate_at,
            )
            == hit
        )
        provisional = dof < MIN_LOCATE_DOF and bool(sides) and not robust
        return (Request(Action.CONFIRM, k, last, amb, provisional=provisional),), post
    if blocks_left is not None and blocks_left <= 0:
        return (credible_range(post, unbuildable, locate_at),), post
    cdf = np.cumsum(post.probs)
    # an extended commit at its cap has had its extra rounds: it is asked for nothing more
    open_ = [
        j
        for j in range(1, n)
        if j not in unbuildable and j not in untested and 1e-9 < cdf[j] < 1 - 1e-9 and not (capped(j) and j in extended)
    ]
    if not open_:
        return (credible_range(post, unbuildable, locate_at),), post
    js = np.array(open_)
    a = np.full(js.size, post.mu0)
    b = np.full(js.size, post.mu1)
    s = np.full(js.size, math.sqrt(post.sigma**2 + post.tau**2 + post.step_se**2 / 4))
    # A build break usually spans several commits: one d commits from an unbuildable commit is
    # broken with a chance that falls with d, so its build costs 1 + BREAK_SPAN / d in
    # expectation, and the search steps away from a break instead of walking through it one
    # failed build at a time.
    near = [min((abs(j - u) for u in unbuildable), default=0) for j in open_]
    price = build_cost * build_price(post, counts, builds_left)
    # `prebuilt`: positions whose binary CI published, which cost an unpacking, not a build
    cost = np.array(
        [
            (max(1.0, price * PREBUILT_COST_FRACTION) if j in prebuilt else price) * (1.0 + BREAK_SPAN / d if d else 1.0)
            for j, d in zip(open_, near, strict=True)
        ]
    )
    ends = [(e, commit_level(blocks[e], post.sigma)) for e in (0, n)]
    for idx, j in enumerate(open_):
        if j in counts:
            # its next block: the commit's latent level given its own blocks, on either side
            prec = 1 / max(post.tau, 1e-12) ** 2 + counts[j] / post.sigma**2
            shrink = (1 / max(post.tau, 1e-12) ** 2) / prec
            ybar = commit_level(blocks[j], post.sigma)
            a[idx] = shrink * post.mu0 + (1 - shrink) * ybar
            b[idx] = shrink * post.mu1 + (1 - shrink) * ybar
            s[idx] = math.sqrt(post.sigma**2 + 1 / prec + post.step_se**2 / 4)
            cost[idx] = 1.0
            # A commit whose own level sits decisively at neither level (a second step lies on
            # one side of it) stays at F ~ 1/2 however often it is measured: its blocks pin its
            # level, not its side, and the search would spend the block cap on it. Its next
            # block is worth nothing; builds on either side of it are what can tell.
            # (against the ends' own levels: the fitted two levels bend towards such commits)
            off = min(
                abs(ybar - end_level) / math.sqrt(2 * post.tau**2 + post.sigma**2 * (1 / counts[j] + 1 / counts[e]))
                for e, end_level in ends
            )
            if off > MISFIT_Z:
                a[idx] = b[idx]
    value = mixture_bits(cdf[js], a, b, s) / cost
    best = int(np.argmax(value))
    if value[best] <= 1e-9:
        return (credible_range(post, unbuildable, locate_at),), post
    j = open_[best]
    if capped(j):
        # the commit that decides the boundary had what one commit may cost: it gets more
        # samples once, as the sequential search extends an undecided probe
        return (Request(Action.EXTEND, j, value=float(value[best])),), post
    batch = [Request(Action.MEASURE if j in counts else Action.BUILD, j, value=float(value[best]))]
    batch[:0] = [Request(Action.MEASURE, e, value=float(value[best])) for e in _ends_due(n, counts)]
    cuts = [j]
    builds = int(j not in counts)  # builds asked for in this batch, within `builds_left`
    while len(batch) < width:
        edges = [0, *sorted(cuts), n]
        lo = np.array([max(e for e in edges if e < p) for p in open_])
        hi = np.array([min(e for e in edges if e > p) if p not in cuts else p for p in open_])
        f_lo = cdf[lo]  # cdf[0] = 0: nothing lies at or before the reference
        mass = cdf[hi] - f_lo
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(mass > 1e-12, (cdf[js] - f_lo) / mass, 0.0)
        more = mass * mixture_bits(f, a, b, s) / cost
        more[[i for i, p in enumerate(open_) if p in cuts or capped(p)]] = 0.0
        if builds_left is not None and builds >= builds_left:
            more[[i for i, p in enumerate(open_) if p not in counts]] = 0.0
        nxt = int(np.argmax(more))
        if more[nxt] <= 1e-9:
            break
        p = open_[nxt]
        cuts.append(p)
        builds += int(p not in counts)
        batch.append(Request(Action.MEASURE if p in counts else Action.BUILD, p, value=float(more[nxt])))
    return tuple(batch), post


def inside_breaks(unbuildable: Iterable[int], measured: Iterable[int]) -> frozenset[int]:
    """The positions taken to be inside a build break without being built: those strictly
    between two unbuildable positions with no measured position between them.

    A break is a stretch (a commit breaks the build, a later one mends it), so the commits
    between two that do not build, with nothing built between them, almost always do not build
    either; building each of them costs a build and tells nothing a report can use, since the
    change stays ambiguous across the break whatever they are. Should one of them build after
    all, the culprit's ambiguous range still holds it: the range runs from the last good
    commit to the culprit. (In the scenario benchmark's "break before culprit" family, trying
    every commit of the break put 14 of 30 trials over the build budget; see
    docs/statistics.md.)"""
    seen = sorted(set(unbuildable))
    built = set(measured)
    inner: set[int] = set()
    for lo, hi in zip(seen, seen[1:], strict=False):
        if hi - lo > 1 and not any(lo < p < hi for p in built):
            inner.update(range(lo + 1, hi))
    return frozenset(inner)


def _around(post: Posterior, k: int, measured: Sequence[int]) -> float:
    """P(the change is at k, or in the gap just below k - 1 or just above k, between the
    measured commits): the mass that blocks of k - 1 and k move between them."""
    lo = max((p for p in measured if p < k - 1), default=0)
    hi = min((p for p in measured if p > k), default=len(post.probs) - 1)
    return float(sum(post.probs[lo + 1 : hi + 1]))


def builds_needed(post: Posterior, measured: Sequence[int]) -> float:
    """The builds that locating the change still needs, in expectation: a gap of w positions
    between two measured commits takes log2 w builds to split down to one, weighted by the
    gap's mass. (Which gap holds the change is settled by blocks of measured commits, not by
    builds.)"""
    edges = sorted(set(measured) | {0, len(post.probs) - 1})
    need = 0.0
    for lo, hi in zip(edges, edges[1:], strict=False):
        if hi - lo > 1:
            need += float(sum(post.probs[lo + 1 : hi + 1])) * math.log2(hi - lo)
    return need


def build_price(post: Posterior, counts: Mapping[int, int], builds_left: int | None) -> float:
    """A build's cost, in units of `build_cost`, given the builds left in the segment's budget.

    Builds are a budget, blocks are not: a build spent on the wrong side of a probe whose one
    block was misread is lost, and the search that still needs every build it has left cannot
    afford that. So a build is priced by the spare the budget still has over what locating
    needs (`builds_needed`): at BUILD_SLACK_EASY or more spare, at `build_cost`; below, dearer by
    BUILD_PRICE_STEP for each build of spare lost, so a probe whose side is in doubt is measured
    again (one block) before the search builds beyond it. A search whose probes decide cleanly
    keeps its spare (each build halves the gap) and never pays the higher price."""
    if builds_left is None:
        return 1.0
    spare = builds_left - builds_needed(post, list(counts))
    return 1.0 + BUILD_PRICE_STEP * max(0.0, BUILD_SLACK_EASY - spare)


def _ends_due(n: int, counts: Mapping[int, int]) -> list[int]:
    """The end due for another block, if any.

    The ends are where the two levels are pinned down: a side's information is exact only when
    its level is known, so an end is measured again once an inside commit has more than twice
    its blocks (with a change at position 1 the good level rests on the reference alone). The
    driver runs the reference in every round besides (segment/posterior_search.py)."""
    inside = max((c for p, c in counts.items() if 0 < p < n), default=0)
    for end in sorted((0, n), key=lambda e: counts.get(e, 0)):
        if counts.get(end, 0) * ENDS_SHARE < inside:
            return [end]
    return []


def credible_range(post: Posterior, unbuildable: frozenset[int], at: float) -> Request:
    """The smallest run of positions around the most probable one that holds `at`: what is
    reported when the search stops there (blocks spent, or the budget)."""
    probs = post.probs
    k = post.map
    lo = hi = k
    while sum(probs[lo : hi + 1]) < at and (lo > 1 or hi < len(probs) - 1):
        left = probs[lo - 1] if lo > 1 else -1.0
        right = probs[hi + 1] if hi < len(probs) - 1 else -1.0
        if left >= right:
            lo -= 1
        else:
            hi += 1
    return Request(Action.EXHAUSTED, hi, lo - 1, tuple(range(lo, hi)))
