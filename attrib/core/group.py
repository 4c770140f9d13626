"""The search over a group of benchmarks that one range moved: pure.

Every member keeps its own posterior over where its change lies (core/posterior.py, from its
own blocks alone), and two things join them:

* A shared-culprit prior. Members share culprits far more often than not (a compiler, a
  header, a launch heuristic moves many kernels at once), so member m's prior over the
  position is a mixture: with weight 1 - `share` uniform, as a bisection of m alone has it,
  and with weight `share` the mean of the other members' posteriors (each from its own data
  under the uniform prior: leave-one-out, so no member's data counts twice and no feedback
  loop pulls the group onto one place). A weak member borrows strength from strong ones;
  the uniform part is never below (1 - share) / n, so a member whose own blocks put its step
  elsewhere overrules the group: the likelihood ratio its blocks reach grows without bound,
  the prior's odds are at most 1 + share * n / (1 - share).
* One choice of what to measure. A build (or one more block of a built commit) is valued by
  the expected information it gives summed over the *scouts* (the strongest undecided member,
  SCOUTS of them), per unit of cost, and measured for them alone: while members share a
  culprit, one strong member's blocks locate it, and every other member's block of the same
  build would say the same thing again. When a position is held, the followers that do not
  rule it out with their own blocks are CHECKed there (one block of culprit^ and of culprit
  each, the reference in the round), and every member whose posterior then holds it (a checked
  follower: whose check did not rule it out) joins one paired confirmation of culprit^ against
  culprit, each with its own test. A follower whose step lies elsewhere holds the pair at
  nothing after its check; it becomes a scout once the stronger members are decided.

Nothing here builds, runs or prints: blocks and posteriors in, requests out. The loop that
asks the evaluation stage is segment/group_search.py.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TypeVar

import numpy as np

from attrib.core.posterior import Posterior, mixture_bits
from attrib.core.requests import (
    DEFAULT_BUILD_COST,
    DEFAULT_LOCATE_AT,
    MIN_LOCATE_DOF,
    block_levels,
    build_at,
    build_price,
    credible,
)

M = TypeVar("M", bound=Hashable)

GROUP_SHARE = 0.5  # weight of the others' posteriors in a member's prior (the rest: uniform)
JOIN_AT = 0.5  # a member holding a located position at least this much joins its confirmation
MEMBER_BITS = 0.02  # a round measures a member only where its block is worth at least this (bits):
# a member whose posterior already knows the side of a commit draws nothing there
SCOUTS = 1  # undecided members the locating rounds measure (the strongest); the others follow
CHECK_AT = 0.01  # a follower holding a located gap at least this much (shared prior) is measured there


class GroupAction(StrEnum):
    """What the group search asks for next."""

    MEASURE = "measure"  # one more block of a built commit, for every undecided member
    BUILD = "build"  # build a commit and measure its first block, for every undecided member
    CHECK = "check"  # a round of culprit^, culprit and the reference for the followers listed: do they join?
    CONFIRM = "confirm"  # culprit^ vs culprit, in shared paired rounds, for the members listed
    ALONE = "alone"  # nothing the group can still tell: the members listed are searched alone


@dataclass(frozen=True)
class GroupRequest:
    action: GroupAction
    position: int = 0  # MEASURE/BUILD: where; CONFIRM: the culprit's position
    last_good: int = 0  # CONFIRM: the position it is confirmed against
    ambiguous: tuple[int, ...] = ()  # CONFIRM: unbuildable positions just before it
    members: tuple[Hashable, ...] = ()  # whom it serves
    value: float = 0.0  # MEASURE/BUILD: expected bits summed over members, per unit of cost
    provisional: tuple[Hashable, ...] = ()  # CONFIRM: members it stands for only if their posterior
    # holds the position with the confirmation's blocks (joined below `locate_at`, or the noise not yet known)


def shared_prior(own: Mapping[M, Sequence[float]], share: float = GROUP_SHARE) -> dict[M, np.ndarray]:
    """Each member's prior over positions 0..n (index 0 is 0): (1 - share) uniform plus
    `share` times the mean of the other members' own posteriors. `own` is every member's
    posterior under the uniform prior. With one member, or share 0, the prior is uniform:
    the single search's."""
    if not own:
        return {}
    size = len(next(iter(own.values())))
    n = size - 1
    uniform = np.zeros(size)
    uniform[1:] = 1.0 / n
    arrays = {m: _normalised(np.asarray(p, dtype=float)) for m, p in own.items()}
    total = sum(arrays.values(), np.zeros(size))
    out: dict[M, np.ndarray] = {}
    for m, p in arrays.items():
        if len(arrays) == 1 or share <= 0:
            out[m] = uniform.copy()
            continue
        others = (total - p) / (len(arrays) - 1)
        out[m] = (1 - share) * uniform + share * others
    return out


def with_prior(post: Posterior, prior: Sequence[float] | np.ndarray) -> Posterior:
    """`post` (computed under the uniform prior) under another prior over its positions."""
    probs = np.asarray(post.probs, dtype=float)
    n = len(probs) - 1
    weighted = probs * np.asarray(prior, dtype=float) * n  # the uniform prior's 1/n divided out
    return replace(post, probs=tuple(float(x) for x in _normalised(weighted)))


def _normalised(p: np.ndarray) -> np.ndarray:
    p = np.where(np.isfinite(p) & (p > 0), p, 0.0)
    p[0] = 0.0
    s = p.sum()
    if s <= 0:
        p = np.ones_like(p)
        p[0] = 0.0
        s = p.sum()
    return p / s


@dataclass(frozen=True)
class MemberView:
    """What the chooser knows of one undecided member: its posterior under the shared prior,
    its blocks per position (round-corrected, as the single search reads them)."""

    post: Posterior
    blocks: Mapping[int, Sequence[float]]


def next_group_request(
    n: int,
    members: Mapping[M, MemberView],
    *,
    unbuildable: frozenset[int] = frozenset(),
    built: frozenset[int] = frozenset(),
    builds_left: int | None = None,
    build_cost: float = DEFAULT_BUILD_COST,
    locate_at: float = DEFAULT_LOCATE_AT,
    scouts: frozenset[Hashable] | None = None,
    checked: frozenset[tuple[Hashable, int]] = frozenset(),
    prebuilt: frozenset[int] = frozenset(),
) -> GroupRequest:
    """The next request of a group's search over positions 0..n.

    CONFIRM as soon as any member's posterior holds one position at `locate_at`: every member
    holding that position at JOIN_AT or more (CHECK_AT, once checked there) joins the
    confirmation (those below `locate_at`,
    or located with fewer than MIN_LOCATE_DOF degrees of freedom, provisionally: the culprit
    stands for them only if their posterior holds it with the confirmation's blocks). Before
    it, CHECK the members that have no block of the pair and do not rule the gap out (hold it
    at CHECK_AT or more): one block of each side tells whether they join. Else the MEASURE or
    BUILD with the most bits summed over the `scouts` (every member when None, or when the
    scouts have nothing left to learn) per unit of cost, for those its block is worth
    MEMBER_BITS to (the others know its side already); ALONE for every member when nothing is
    worth anything (the driver searches them one by one, with the single search's own rules),
    or when builds are spent. `checked`: (member, position) pairs checked already (a check
    whose run failed is not asked again). `prebuilt`: positions whose binary CI published, which
    cost an unpacking, not a build (as core/requests.next_requests prices them)."""
    if not members:
        return GroupRequest(GroupAction.ALONE)
    located_at = _located(members, unbuildable, locate_at)
    if located_at is not None:
        return _join(members, unbuildable, locate_at, checked, *located_at)
    measured = built | frozenset(p for v in members.values() for p, b in v.blocks.items() if len(b))
    open_ = [j for j in range(1, n) if j not in unbuildable]
    no_builds = builds_left is not None and builds_left <= 0
    if no_builds:
        open_ = [j for j in open_ if j in measured]
    if not open_:
        return GroupRequest(GroupAction.ALONE, members=tuple(members))
    pool = {m: v for m, v in members.items() if scouts is None or m in scouts}
    req = _most_bits(pool, open_, measured, unbuildable, builds_left, build_cost, prebuilt) if pool else None
    if req is None and len(pool) < len(members):  # the scouts know their sides: everyone, as before
        req = _most_bits(members, open_, measured, unbuildable, builds_left, build_cost, prebuilt)
    return req or GroupRequest(GroupAction.ALONE, members=tuple(members))


def _located(
    members: Mapping[M, MemberView], unbuildable: frozenset[int], locate_at: float
) -> tuple[int, tuple[int, ...]] | None:
    """The position some member holds at `locate_at` (the one held most), with its ambiguous
    unbuildable positions before it."""
    best: tuple[float, tuple[int, tuple[int, ...]]] | None = None
    for view in members.values():
        hit = credible(view.post, unbuildable, locate_at)
        if hit is not None and (best is None or _held(view.post, hit) > best[0]):
            best = (_held(view.post, hit), hit)
    return None if best is None else best[1]


def _join(
    members: Mapping[M, MemberView],
    unbuildable: frozenset[int],
    locate_at: float,
    checked: frozenset[tuple[Hashable, int]],
    k: int,
    amb: tuple[int, ...],
) -> GroupRequest:
    """CHECK the followers with no block of the located pair that may share it; then CONFIRM
    it for every member holding it at JOIN_AT."""
    last = (amb[0] - 1) if amb else k - 1
    while last > 0 and last in unbuildable:
        last -= 1
    # a follower checked here joins unless its blocks rule the pair out: one block of each side
    # (read against the reference's few blocks around it) may leave it short of JOIN_AT when the
    # machine was off its level for a while, and its own confirmation decides anyway
    joined = [
        m for m, v in members.items()
        if _held(v.post, (k, amb)) >= (CHECK_AT if (m, k) in checked else JOIN_AT)
    ]  # fmt: skip
    unseen = tuple(
        m for m, v in members.items()
        if m not in joined and (m, k) not in checked and not (v.blocks.get(k) and v.blocks.get(last))
        and _held(v.post, (k, amb)) >= CHECK_AT
    )  # fmt: skip
    if unseen:
        return GroupRequest(GroupAction.CHECK, k, last, amb, unseen)
    provisional = tuple(
        m for m in joined
        if _held(members[m].post, (k, amb)) < locate_at or members[m].post.dof < MIN_LOCATE_DOF
    )  # fmt: skip
    return GroupRequest(GroupAction.CONFIRM, k, last, amb, tuple(joined), provisional=provisional)


def _most_bits(
    members: Mapping[M, MemberView],
    open_: list[int],
    measured: frozenset[int],
    unbuildable: frozenset[int],
    builds_left: int | None,
    build_cost: float,
    prebuilt: frozenset[int] = frozenset(),
) -> GroupRequest | None:
    """The MEASURE or BUILD with the most bits summed over `members` per unit of cost; None
    when nothing is worth anything to them."""
    bits = {m: _bits(view, open_) for m, view in members.items()}
    value = sum(bits.values(), np.zeros(len(open_)))
    counts = {p: 1 for p in measured}
    price = build_cost * max(build_price(v.post, counts, builds_left) for v in members.values())
    near = [min((abs(j - u) for u in unbuildable), default=0) for j in open_]
    cost = np.array([1.0 if j in measured else build_at(price, j in prebuilt, d) for j, d in zip(open_, near, strict=True)])
    value = value / cost
    i = int(np.argmax(value))
    if value[i] <= 1e-9:
        return None
    j = open_[i]
    asked = tuple(m for m, b in bits.items() if b[i] >= MEMBER_BITS) or tuple(members)
    return GroupRequest(
        GroupAction.MEASURE if j in measured else GroupAction.BUILD, j, members=asked, value=float(value[i])
    )


def scouts_of(members: Mapping[M, MemberView], kept: frozenset[Hashable], count: int = SCOUTS) -> frozenset[M]:
    """The members the locating rounds measure: the undecided ones of `kept` (scouts so far,
    whose blocks along the range the search already reads), filled up to `count` with the
    strongest others (the step their own blocks show, in standard errors): a strong member
    locates a shared step in the fewest blocks, and its followers borrow that position."""
    keep = [m for m in members if m in kept]
    rest = sorted(
        (m for m in members if m not in kept),
        key=lambda m: -abs(members[m].post.step) / max(members[m].post.step_se, 1e-12),
    )
    return frozenset([*keep, *rest][: max(count, len(keep))])


def _held(post: Posterior, hit: tuple[int, tuple[int, ...]]) -> float:
    k, amb = hit
    lo = amb[0] if amb else k
    return float(sum(post.probs[lo : k + 1]))


def _bits(view: MemberView, open_: Sequence[int]) -> np.ndarray:
    """Expected bits of one more block at each open position, for one member: valued as the
    single search values it (core/requests.block_levels, the misfit rule included)."""
    cdf = np.cumsum(view.post.probs)
    js = np.asarray(open_)
    a, b, s = block_levels(view.post, view.blocks, open_)
    f = np.clip(cdf[js], 0.0, 1.0)
    inside = (f > 1e-9) & (f < 1 - 1e-9)
    return np.where(inside, mixture_bits(f, a, b, s), 0.0)
