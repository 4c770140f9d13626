"""What one member's posterior (core/posterior.py) tells the chooser (core/choose.py): pure.

`locate`: CONFIRM once one position (with the unbuildable commits right before it, which no
data can tell apart) holds `locate_at`, or early, provisionally, when the change lies between
two adjacent measured commits. `block_levels`: what the next block of each open commit is drawn
from, the one valuation of a block (core/posterior.mixture_bits: the information one block gives
about "is j on the bad side"). `build_price`/`build_at`: an unmeasured commit costs a build plus
a block (`build_cost` blocks in all, dearer as the segment's build budget runs short of what
locating still needs), a measured one a block. `credible_range`: what is reported when nothing
is worth asking. Commits inside a build break are skipped without a build (`inside_breaks`).

This module never builds, runs or prints: it takes block levels and returns requests.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from attrib.core.posterior import Posterior, commit_level

MIN_LOCATE_DOF = 16  # within-commit degrees of freedom before sigma's usual bound is trusted to locate
LOCATE_SIGMA_QUANTILE = 0.01  # below MIN_LOCATE_DOF a position is located only if it holds at sigma's 99 % bound
DEFAULT_LOCATE_AT = 0.99  # stop when one position (or an ambiguous range) holds this much
DEFAULT_BUILD_COST = 3.0  # a build, in blocks of a built commit (checkout, compile, first run)
# what a commit with a prebuilt binary ([build] prebuilt) costs against a build: the archive is
# fetched and unpacked, nothing compiled; its first block is still measured (at least 1)
PREBUILT_COST_FRACTION = 0.1
CONFIRM_EARLY_AT = 0.9  # ... or confirm at once, provisionally, a gap of two adjacent measured commits holding this
BREAK_SPAN = 2.0  # a build break's typical reach in commits: see build_at
ENDS_SHARE = 2  # an end keeps at least 1/this of the blocks of the most-measured inside commit
MISFIT_Z = 4.0  # standard errors off both levels: a commit at neither level (Gaussian odds < 1e-4)
BUILD_SLACK_EASY = 2.0  # builds to spare beyond what locating still needs at which a build costs `build_cost`
BUILD_PRICE_STEP = 4.0  # each build of spare lost below BUILD_SLACK_EASY adds this many times `build_cost`


class Action(StrEnum):
    """What the search asks the evaluation stage for next."""

    MEASURE = "measure"  # one more block of a built commit
    BUILD = "build"  # build a commit and measure its first block
    EXTEND = "extend"  # a commit at its block cap still decides the boundary: more samples, once
    CHECK = "check"  # a group's followers: one round of culprit^, culprit and the reference: do they join?
    CONFIRM = "confirm"  # the posterior holds one position: confirm culprit^ vs culprit
    EXHAUSTED = "exhausted"  # nothing left to learn within the block cap: report the credible range
    # (a group's members: each is searched alone, by the same chooser)


@dataclass(frozen=True)
class Request:
    action: Action
    position: int = 0  # MEASURE/BUILD/EXTEND: where; CHECK/CONFIRM: the culprit's position
    last_good: int = 0  # CHECK/CONFIRM: the position it is confirmed against
    ambiguous: tuple[int, ...] = ()  # CONFIRM/EXHAUSTED: unbuildable or open positions beside it
    value: float = 0.0  # expected bits per unit of cost of a MEASURE/BUILD
    members: tuple[Hashable, ...] = ()  # the members it serves (core/choose.py)
    # CONFIRM: the members it stands for only if their posterior holds the position again with the
    # confirmation's blocks (located with the noise not yet known: fewer than MIN_LOCATE_DOF degrees
    # of freedom, or early; a group's member joined below `locate_at`)
    provisional: tuple[Hashable, ...] = ()


@dataclass(frozen=True)
class Span:
    """What one choice of requests reads of the segment, the same for every member."""

    n: int
    unbuildable: frozenset[int]
    locate_at: float
    cap: int | None  # the blocks one commit may cost
    extended: frozenset[int]  # commits given more blocks once
    prebuilt: frozenset[int]  # positions whose binary CI published: an unpacking, not a build


@dataclass(frozen=True)
class Segment:
    """What one choice of requests reads of one member in the segment's `span`: its blocks and
    its posterior from them."""

    span: Span
    blocks: Mapping[int, Sequence[float]]
    counts: Mapping[int, int]  # blocks per measured position
    post: Posterior
    untested: frozenset[int]  # not to be built (the build budget is spent)

    def capped(self, j: int) -> bool:
        cap = self.span.cap
        return cap is not None and 0 < j < self.span.n and self.counts.get(j, 0) >= cap


def untested(
    n: int,
    post: Posterior,
    counts: Mapping[int, int],
    unbuildable: frozenset[int],
    builds_left: int | None,
    locate_at: float,
) -> frozenset[int]:
    """The commits that will not be built: none while builds are left; once the budget is
    spent, every unmeasured one except those inside a gap that already holds `locate_at`."""
    if builds_left is None or builds_left > 0:
        return frozenset()
    untested = frozenset(j for j in range(1, n) if j not in counts and j not in unbuildable)
    if untested:
        located = credible(post, unbuildable, locate_at, untested)
        # (a gap that is the whole segment is not located: nothing inside was measured)
        if located is not None and len(located[1]) < n - 1:
            # the budget is spent but the change is located between two measured commits: the
            # untested ones inside that gap may still be built, since they are what names one
            # commit (at most log2 of the gap's width more builds); elsewhere nothing is built
            untested -= frozenset(located[1])
    return untested


def locate(seg: Segment, at_bound: Callable[[], Posterior]) -> tuple[Request, bool] | None:
    """CONFIRM when one position of this member's posterior holds `locate_at`, provisional (the
    flag returned beside it) while the noise is not yet known, or already at CONFIRM_EARLY_AT,
    provisionally, when the change lies between two adjacent measured commits and what is left is
    their sides; None: not located yet. `at_bound`: the member's posterior at sigma's
    LOCATE_SIGMA_QUANTILE bound (a boundary holding there stands from few blocks)."""
    post, counts, span = seg.post, seg.counts, seg.span
    hit = credible(post, span.unbuildable, span.locate_at, seg.untested)
    early = credible(post, span.unbuildable, CONFIRM_EARLY_AT, seg.untested) if hit is None else None
    if (
        early is not None
        and not early[1]
        and counts.get(early[0], 0) >= 2  # (one block of either could be an outlier that a
        and counts.get(early[0] - 1, 0) >= 2  # second block, far cheaper than a confirmation, tells)
        and _around(post, early[0], list(counts)) >= span.locate_at
    ):
        # the change is between two adjacent measured commits with CONFIRM_EARLY_AT, and the
        # rest of `locate_at` lies in the gaps just beside them: what is left to learn is the
        # two commits' sides, exactly what the confirmation's paired rounds of them measure,
        # so they are confirmed now (provisionally: the posterior must hold the position at
        # `locate_at` with the confirmation's blocks) rather than measured one block at a time
        # up to `locate_at` and then measured again by the confirmation
        return Request(Action.CONFIRM, early[0], early[0] - 1, ()), True
    if hit is None:
        return None
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
    sides = [p for p in (last, k) if not (seg.capped(p) and p in span.extended)]
    robust = dof < MIN_LOCATE_DOF and dof >= 2 and credible(at_bound(), span.unbuildable, span.locate_at) == hit
    provisional = dof < MIN_LOCATE_DOF and bool(sides) and not robust
    return Request(Action.CONFIRM, k, last, amb), provisional


def block_levels(
    post: Posterior, blocks: Mapping[int, Sequence[float]], open_: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per open position, what its next block is drawn from: the good side's level a, the bad
    side's b, the spread s. The one valuation of a block, for every member (core/choose.py)."""
    n = len(post.probs) - 1
    counts = {p: len(b) for p, b in blocks.items() if len(b)}
    a = np.full(len(open_), post.mu0)
    b = np.full(len(open_), post.mu1)
    s = np.full(len(open_), math.sqrt(post.sigma**2 + post.tau**2 + post.step_se**2 / 4))
    ends = [(e, commit_level(blocks[e], post.sigma)) for e in (0, n) if counts.get(e)]
    for idx, j in enumerate(open_):
        if j not in counts:
            continue
        # its next block: the commit's latent level given its own blocks, on either side
        prec = 1 / max(post.tau, 1e-12) ** 2 + counts[j] / post.sigma**2
        shrink = (1 / max(post.tau, 1e-12) ** 2) / prec
        ybar = commit_level(blocks[j], post.sigma)
        a[idx] = shrink * post.mu0 + (1 - shrink) * ybar
        b[idx] = shrink * post.mu1 + (1 - shrink) * ybar
        s[idx] = math.sqrt(post.sigma**2 + 1 / prec + post.step_se**2 / 4)
        # A commit whose own level sits decisively at neither level (a second step lies on
        # one side of it) stays at F ~ 1/2 however often it is measured: its blocks pin its
        # level, not its side, and the search would spend the block cap on it. Its next
        # block is worth nothing; builds on either side of it are what can tell.
        # (against the ends' own levels: the fitted two levels bend towards such commits)
        off = min(
            (
                abs(ybar - end_level) / math.sqrt(2 * post.tau**2 + post.sigma**2 * (1 / counts[j] + 1 / counts[e]))
                for e, end_level in ends
            ),
            default=0.0,
        )
        if off > MISFIT_Z:
            a[idx] = b[idx]
    return a, b, s


def credible(
    post: Posterior, unbuildable: frozenset[int], at: float, untested: frozenset[int] = frozenset()
) -> tuple[int, tuple[int, ...]] | None:
    """A position (with the unbuildable commits just before it) holding >= `at`, else None: the
    one rule of a located position, for the single search and a group's members (core/group.py).

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


def build_at(price: float, prebuilt: bool, from_break: int) -> float:
    """What building one candidate costs, `price` being a build's: a commit whose binary CI
    published (`prebuilt`) costs an unpacking, not a build; one `from_break` commits from an
    unbuildable commit (0: none known) costs 1 + BREAK_SPAN / from_break times more (above)."""
    base = max(1.0, price * PREBUILT_COST_FRACTION) if prebuilt else price
    return base * (1.0 + BREAK_SPAN / from_break if from_break else 1.0)


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


def ends_due(n: int, counts: Mapping[int, int]) -> list[int]:
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
