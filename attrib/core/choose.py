"""The one chooser of the posterior search: pure. A benchmark searched alone is a group of one.

`choose` takes what each member knows (core/group.MemberView: its posterior, under the group's
shared-culprit prior when it has company, and its blocks) and returns what to ask for next:

1. *Locate*: each member's own rule (core/requests.locate: a position holding `locate_at`, or
   early between two adjacent measured commits, provisional while the noise is not yet known);
   the member holding its position most leads. Alone, that member CONFIRMs it. In a group, the
   followers that have no block of the pair and do not rule it out are CHECKed first (one round
   of each side, the reference beside), then every member holding the position at JOIN_AT
   (CHECK_AT once checked there) joins one CONFIRM, each with its own test
   (core/group.joined).
2. *Blocks spent* (`blocks_left`): EXHAUSTED with the credible range; a group's members are
   then searched alone, each by this same chooser.
3. *Batch*: the MEASUREs and BUILDs with the most expected bits per unit of cost summed over the
   scouts (every member when `scouts` is None, or when the scouts have nothing left to learn),
   each further one (up to `width`, built concurrently) valued as if the sides of those chosen
   before it were known, for the members its block is worth MEMBER_BITS to; EXTEND a commit that
   still decides the boundary at its block cap; EXHAUSTED when nothing is worth a block.

Nothing here builds, runs or prints; the loop that asks the evaluation stage is
segment/posterior_search.search_members, for one member or many.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import replace
from typing import TypeVar

import numpy as np

from attrib.core.group import MEMBER_BITS, MemberView, held, joined
from attrib.core.posterior import mixture_bits
from attrib.core.requests import (
    DEFAULT_BUILD_COST,
    DEFAULT_LOCATE_AT,
    Action,
    Request,
    Segment,
    Span,
    block_levels,
    build_at,
    build_price,
    credible_range,
    ends_due,
    locate,
    untested,
)

M = TypeVar("M", bound=Hashable)

def choose(
    n: int,
    members: Mapping[M, MemberView],
    *,
    unbuildable: frozenset[int] = frozenset(),
    built: frozenset[int] = frozenset(),
    builds_left: int | None = None,
    blocks_left: int | None = None,
    width: int = 1,
    cap: int | None = None,
    extended: frozenset[int] = frozenset(),
    prebuilt: frozenset[int] = frozenset(),
    build_cost: float = DEFAULT_BUILD_COST,
    locate_at: float = DEFAULT_LOCATE_AT,
    scouts: frozenset[Hashable] | None = None,
    checked: frozenset[tuple[Hashable, int]] = frozenset(),
) -> tuple[Request, ...]:
    """The next requests over positions 0..n (see the module doc). `built`: positions built in
    this segment (a block of one costs a block, whoever has none yet); `builds_left`: the builds
    the segment may still make (None: no limit; spent, only measured commits are asked for, and
    a gap between two of them holding `locate_at` is located as one place); `blocks_left`: the
    blocks it may still draw; `cap`: the blocks one commit may cost, `extended` the commits given
    more once; `prebuilt`: positions whose binary CI published (an unpacking, not a build);
    `checked`: (member, position) pairs a group checked already."""
    if not members:
        return (Request(Action.EXHAUSTED),)
    span = Span(n, unbuildable, locate_at, cap, extended, prebuilt)
    segs = {m: _segment(span, v, builds_left) for m, v in members.items()}
    located = _located(segs, members)
    if located is not None:
        lead, req, provisional = located
        return (joined(members, req, lead, provisional, locate_at, checked),)
    first = next(iter(segs.values()))
    exhausted = (replace(credible_range(first.post, unbuildable, locate_at), members=tuple(members)),)
    if blocks_left is not None and blocks_left <= 0:
        return exhausted
    pool = {m: s for m, s in segs.items() if scouts is None or m in scouts}
    reqs = _batch(span, pool, built, build_cost, builds_left, width) if pool else None
    if reqs is None and len(pool) < len(segs):  # the scouts know their sides: everyone
        reqs = _batch(span, segs, built, build_cost, builds_left, width)
    return reqs or exhausted


def _segment(span: Span, view: MemberView, builds_left: int | None) -> Segment:
    """What the chooser reads of one member: its blocks, their counts, its posterior, and the
    commits it will not build (the budget spent: `untested`)."""
    counts = {p: len(b) for p, b in view.blocks.items() if len(b)}
    left_out = untested(span.n, view.post, counts, span.unbuildable, builds_left, span.locate_at)
    return Segment(span, view.blocks, counts, view.post, left_out)


def _located(
    segs: Mapping[M, Segment], members: Mapping[M, MemberView]
) -> tuple[M, Request, bool] | None:
    """The member whose own rule locates a position, holding it most, with its CONFIRM and
    whether it is provisional for that member."""
    best: tuple[float, M, Request, bool] | None = None
    for m, seg in segs.items():
        hit = locate(seg, members[m].robust_post)
        if hit is None:
            continue
        req, provisional = hit
        mass = held(seg.post, req.position, req.ambiguous)
        if best is None or mass > best[0]:
            best = (mass, m, req, provisional)
    return None if best is None else best[1:]


def _batch(
    span: Span, segs: Mapping[M, Segment], built: frozenset[int], build_cost: float, builds_left: int | None, width: int
) -> tuple[Request, ...] | None:
    """The MEASUREs and BUILDs with the most bits per unit cost summed over `segs`, each further
    one valued as if the sides of those chosen before it were known (so a batch spreads out
    instead of piling onto one gap, and each further probe is worth less), within `builds_left`;
    EXTEND when the most informative commit already has `cap` blocks of the members it serves and
    was not extended yet; None when nothing is worth a block to them."""
    n, unbuildable, extended = span.n, span.unbuildable, span.extended
    measured = built | frozenset(p for s in segs.values() for p in s.counts)
    cdfs = {m: np.cumsum(s.post.probs) for m, s in segs.items()}

    def open_for(m: M, j: int) -> bool:
        s, cdf = segs[m], cdfs[m]
        # an extended commit at its cap has had its extra rounds: it is asked for nothing more
        return j not in s.untested and 1e-9 < cdf[j] < 1 - 1e-9 and not (s.capped(j) and j in extended)

    open_ = [j for j in range(1, n) if j not in unbuildable and any(open_for(m, j) for m in segs)]
    if not open_:
        return None
    js = np.array(open_)
    mask = {m: np.array([open_for(m, j) for j in open_]) for m in segs}
    levels = {m: block_levels(s.post, s.blocks, open_) for m, s in segs.items()}
    # a build break usually spans several commits: one d commits from an unbuildable commit is
    # broken with a chance that falls with d, so its build costs 1 + BREAK_SPAN / d in
    # expectation, and the search steps away from a break instead of walking through it
    near = [min((abs(j - u) for u in unbuildable), default=0) for j in open_]
    price = build_cost * max(build_price(s.post, s.counts, builds_left) for s in segs.values())
    cost = np.array([1.0 if j in measured else build_at(price, j in span.prebuilt, d) for j, d in zip(open_, near, strict=True)])
    bits = {m: np.where(mask[m], mixture_bits(cdfs[m][js], *levels[m]), 0.0) for m in segs}
    value = sum(bits.values(), np.zeros(len(open_))) / cost
    best = int(np.argmax(value))
    if value[best] <= 1e-9:
        return None
    j = open_[best]
    asked = tuple(m for m in segs if bits[m][best] >= MEMBER_BITS) or tuple(segs)
    capped = tuple(m for m in asked if segs[m].capped(j))
    if capped:
        # the commit that decides the boundary had what one commit may cost: it gets more
        # samples once, as the sequential search extends an undecided probe
        return (Request(Action.EXTEND, j, value=float(value[best]), members=capped),)
    top = float(value[best])
    batch = [Request(Action.MEASURE if j in measured else Action.BUILD, j, value=top, members=asked)]
    due = sorted({e for m in asked for e in ends_due(n, segs[m].counts)})
    batch[:0] = [Request(Action.MEASURE, e, value=top, members=asked) for e in due]
    cuts = [j]
    builds = int(j not in measured)  # builds asked for in this batch, within `builds_left`
    while len(batch) < width:
        edges = [0, *sorted(cuts), n]
        lo = np.array([max(e for e in edges if e < p) for p in open_])
        hi = np.array([min(e for e in edges if e > p) if p not in cuts else p for p in open_])
        more = np.zeros(len(open_))
        for m, s in segs.items():
            cdf = cdfs[m]
            f_lo = cdf[lo]  # cdf[0] = 0: nothing lies at or before the reference
            mass = cdf[hi] - f_lo
            with np.errstate(divide="ignore", invalid="ignore"):
                f = np.where(mass > 1e-12, (cdf[js] - f_lo) / mass, 0.0)
            own = np.where(mask[m], mass * mixture_bits(f, *levels[m]), 0.0) / cost
            own[[i for i, p in enumerate(open_) if s.capped(p)]] = 0.0
            more += own
        more[[i for i, p in enumerate(open_) if p in cuts]] = 0.0
        if builds_left is not None and builds >= builds_left:
            more[[i for i, p in enumerate(open_) if p not in measured]] = 0.0
        nxt = int(np.argmax(more))
        if more[nxt] <= 1e-9:
            break
        p = open_[nxt]
        cuts.append(p)
        builds += int(p not in measured)
        batch.append(Request(Action.MEASURE if p in measured else Action.BUILD, p, value=float(more[nxt]), members=asked))
    return tuple(batch)
