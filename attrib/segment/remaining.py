"""The remaining-change rule: whether a stretch beside a culprit found is still worth searching.

After each step it locates, the driver asks whether the bad end is still worse than the latest
culprit (and, with the posterior search, whether the good end of the stretch before a step is
still better than it): from the blocks already measured when they answer it, else by a paired
REMAINING test. With the posterior search it also asks, before any further range, whether the
steps found so far leave less than the minimum of the preflight's change.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import NormalDist

from attrib.core.model import Note, NoteKind, Purpose, Verdict
from attrib.core.posterior import Gap, level_gap
from attrib.core.stats import min_change_shift, remaining_upper, to_pct
from attrib.evaluate.evaluation import Comparison
from attrib.segment.scope import Scope


class RemainingChange:
    """What the driver has located so far (the preflight's whole change, each step's
    confirmation) and the rule that reads it."""

    def __init__(self, scope: Scope, posterior: bool) -> None:
        self.scope = scope
        self.posterior = posterior  # the posterior search: its levels answer most questions here
        self.total: Comparison | None = None  # the preflight: the whole change
        self.found: list[Comparison] = []  # each located step's confirmation
        self.said_nothing_left = False

    def still_worse(self, end: str, reference: str, order: Sequence[str]) -> Verdict:
        """Whether `end` is still worse than `reference` (the latest culprit, or the good end
        of a stretch before one): worth searching the commits between them. `order`: every
        commit of the range, whose blocks give the noise and the drift.

        The posterior search has measured both many times over, so their levels often answer
        it with no test of its own (core/posterior.level_gap): nothing worth a search is left
        when the gap's (1 - beta) upper bound is below the minimum (a step of the minimum is then
        missed with at most beta, as the zone's test would). Otherwise the paired test of the
        two decides: a "worse" read off unpaired blocks is not enough to start a search, whose
        builds cost most (on a loaded machine, whose load does not drift linearly, such a gap
        sent a search after a 64-commit tree's culprit into a stretch with no step: 14 builds
        against a budget of 10)."""
        scope, config = self.scope, self.scope.config
        measured_end, measured_ref = scope.evidence.stand_in(end), scope.evidence.stand_in(reference)
        if self.posterior:
            gap = self.gap(measured_ref, measured_end, order)
            if gap is not None:
                z = NormalDist().inv_cdf
                upper = gap.upper(z(1 - config.beta))
                if upper < min_change_shift(scope.bench.min_change_pct):
                    value = to_pct(upper, scope.bench.direction)
                    scope.note(Note(NoteKind.NOTHING_BETWEEN, (end, reference), value=value))
                    return Verdict.GOOD
        else:
            measured_end = end  # the sequential search measures each commit as itself
        return scope.compare_one(measured_end, measured_ref, Purpose.REMAINING).verdict

    def gap(self, a: str, b: str, order: Sequence[str]) -> Gap | None:
        """`b`'s level minus `a`'s from what the bisection measured (every commit's blocks, for
        the noise and the drift)."""
        evidence = self.scope.evidence
        blocks: dict[str, list[float]] = {}
        times: dict[str, list[float]] = {}
        # in the range's order, not a set's: the pooled sums then do not depend on string hashing
        for sha in dict.fromkeys([*(evidence.stand_in(c) for c in order), a, b]):
            levels, at = evidence.levels(sha)
            if levels:
                blocks[sha], times[sha] = levels, [float(t) for t in at]
        return level_gap(blocks, times, a, b)

    def nothing_left(self) -> bool:
        """The posterior search: whether the steps found so far leave of the preflight's change
        less than the minimum at P >= 1 - beta (core/stats.remaining_upper); then no further
        range is searched, before or after them, and the note says so once."""
        if not self.posterior or self.total is None or not self.found:
            return False
        if self.said_nothing_left:
            return True
        bench = self.scope.bench
        upper = remaining_upper(self.total.diffs, [c.diffs for c in self.found], self.scope.config.beta)
        if upper >= min_change_shift(bench.min_change_pct):
            return False
        self.said_nothing_left = True
        self.scope.note(Note(NoteKind.NOTHING_LEFT, value=to_pct(upper, bench.direction)))
        return True
