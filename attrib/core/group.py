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

The choice itself is core/choose.py's, for a group of one as for many; here are the group's
parts of it (the prior, the scouts, who joins a located position). Nothing here builds, runs
or prints: blocks and posteriors in, requests out. The loop that asks the evaluation stage is
segment/posterior_search.search_members.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np

from attrib.core.posterior import Posterior
from attrib.core.requests import MIN_LOCATE_DOF, Action, Request

M = TypeVar("M", bound=Hashable)

GROUP_SHARE = 0.5  # weight of the others' posteriors in a member's prior (the rest: uniform)
JOIN_AT = 0.5  # a member holding a located position at least this much joins its confirmation
MEMBER_BITS = 0.02  # a round measures a member only where its block is worth at least this (bits):
# a member whose posterior already knows the side of a commit draws nothing there
SCOUTS = 1  # undecided members the locating rounds measure (the strongest); the others follow
CHECK_AT = 0.01  # a follower holding a located gap at least this much (shared prior) is measured there


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
    """What the chooser (core/choose.py) knows of one undecided member: its posterior (under the
    shared prior, in a group), its blocks per position (round-corrected, as the search reads
    them), and its posterior at sigma's LOCATE_SIGMA_QUANTILE bound, computed when asked (a
    boundary that holds there stands from few blocks: core/requests.locate)."""

    post: Posterior
    blocks: Mapping[int, Sequence[float]]
    robust: Callable[[], Posterior] | None = None

    def robust_post(self) -> Posterior:
        return self.robust() if self.robust is not None else self.post


def joined(
    members: Mapping[M, MemberView],
    req: Request,
    lead: M,
    provisional: bool,
    locate_at: float,
    checked: frozenset[tuple[Hashable, int]],
) -> Request:
    """What the position `lead` located (its CONFIRM, `req`) asks of the group: CHECK the
    followers with no block of the pair that may share it; then CONFIRM it for every member
    holding it at JOIN_AT (CHECK_AT once checked there), provisionally for those holding it below
    `locate_at` or with fewer than MIN_LOCATE_DOF degrees of freedom (the lead: as its own rule
    said). Alone, the lead's CONFIRM."""
    k, last, amb = req.position, req.last_good, req.ambiguous
    # a follower checked here joins unless its blocks rule the pair out: one block of each side
    # (read against the reference's few blocks around it) may leave it short of JOIN_AT when the
    # machine was off its level for a while, and its own confirmation decides anyway
    joining = [
        m for m, v in members.items()
        if m == lead or held(v.post, k, amb) >= (CHECK_AT if (m, k) in checked else JOIN_AT)
    ]  # fmt: skip
    unseen = tuple(
        m for m, v in members.items()
        if m not in joining and (m, k) not in checked and not (v.blocks.get(k) and v.blocks.get(last))
        and held(v.post, k, amb) >= CHECK_AT
    )  # fmt: skip
    if unseen:
        return Request(Action.CHECK, k, last, amb, members=unseen)
    stand_in = tuple(
        m for m in joining
        if (provisional if m == lead else held(members[m].post, k, amb) < locate_at or members[m].post.dof < MIN_LOCATE_DOF)
    )  # fmt: skip
    return replace(req, members=tuple(joining), provisional=stand_in)
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


def held(post: Posterior, k: int, amb: Sequence[int]) -> float:
    """The mass `post` puts on position k with the ambiguous positions just before it."""
    lo = amb[0] if amb else k
    return float(sum(post.probs[lo : k + 1]))
