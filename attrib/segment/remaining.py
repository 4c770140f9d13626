"""The remaining-change rule: whether a stretch beside a culprit found is still worth searching.

After each step it locates, the driver asks whether the bad end is still worse than the latest
culprit (and, with the posterior search, whether the good end of the stretch before a step is
still better than it), by a paired REMAINING test of the two. With the posterior search it also
asks, before any further range, whether the steps found so far leave less than the minimum of
the preflight's change.
"""

from __future__ import annotations

import math

from attrib.core import futility, remainder
from attrib.core.model import DecisionRule, Direction, Note, NoteKind, Purpose, Remainder, Step
from attrib.core.stats import EXTEND_FACTOR, TRUNCATION_FACTOR, critical_z, min_change_shift, to_pct
from attrib.evaluate.records import Comparison
from attrib.segment.scope import Scope


class RemainingChange:
    """The rule that reads what the driver has located so far (the preflight's whole change, each
    step's confirmation: kept by the Scope, whose confirmations read it too)."""

    def __init__(self, scope: Scope, posterior: bool) -> None:
        self.scope = scope
        self.posterior = posterior  # the posterior search: its levels answer most questions here
        self._said_nothing_left = False
        self._open: list[tuple[str, str, Comparison]] = []  # remaining-change tests left undecided

    def start(self, preflight: Comparison) -> None:
        """The whole change, as the preflight measured it: what the steps found are read against."""
        self.scope.whole_change(preflight)

    def located(self, confirmation: Comparison) -> None:
        """A step found (a culprit's, or a smaller step's), by its confirmation."""
        self.scope.located(confirmation)

    def still_worse(self, end: str, reference: str) -> Comparison:
        """Whether `end` is still worse than `reference` (the latest culprit, or the good end
        of a stretch before one): worth searching the commits between them, by a paired
        REMAINING test of the two (their byte-identical stand-ins with the posterior search).

        Always a paired test: the blocks the search already measured of the two were not
        measured together, and a gap read off them trusts the machine's drift to be linear.
        That shortcut (a level gap from every block measured, with a linear drift taken out;
        note `nothing_between`, which old results still carry) was tried and removed: with three
        bisections sharing a 2-CPU machine it read a 10 % step as under 5 % and missed the second
        of two culprits in 2 of 36 runs of test_cli_artifacts' tree; paired rounds cancel what
        the load does to both."""
        scope = self.scope
        measured_end, measured_ref = end, reference
        if self.posterior:
            measured_end, measured_ref = scope.evidence.stand_in(end), scope.evidence.stand_in(reference)
        # not stopped for futility while the whole change less the steps found, with this
        # test's rounds, still puts the step at the minimum (core/remainder.py): such a stop
        # lost the second culprit in 5 of 20 runs of issue 39's tree
        config = scope.curtailing(scope.config)
        (comp,) = scope.evidence.compare([measured_end], measured_ref, Purpose.REMAINING, config)
        if comp.rule is DecisionRule.CAP and remainder.still_unexplained(config, comp.diffs, comp.sigma, scope.delta):
            # undecided at the cap with the minimum still unexplained: it goes on, as an
            # undecided preflight does, before the stretch may be left undecided
            scope.phase(Step.MORE_SAMPLES, (end,), 1)
            (comp,) = scope.evidence.compare(
                [measured_end], measured_ref, Purpose.REMAINING, config.extended(), resume={measured_end: comp.diffs}
            )
        return comp

    def undecided(self, end: str, reference: str, comp: Comparison) -> Note:
        """The note for a remaining-change test that ended undecided: at its cap, or stopped for
        futility, when the stretch is undecidable at this noise; then with the smallest step the
        rounds it had left could still have ruled out (the zone kept at its ratio). Kept for
        `remainder`."""
        self._open.append((end, reference, comp))
        if comp.rule is not DecisionRule.FUTILITY:
            return Note(NoteKind.REMAINDER_UNDECIDED, (end, reference))
        config, bench = self.scope.config, self.scope.bench
        # a test extended past its cap (still_worse) had twice the cap to run
        cap = config.max_rounds * (EXTEND_FACTOR if len(comp.diffs) > config.max_rounds else 1)
        left = max(1, cap - len(comp.diffs))
        delta = min_change_shift(bench.min_change_pct)
        f = futility.forecast(comp.sigma, 0, delta, config.ignore, left, critical_z(config), TRUNCATION_FACTOR)
        step = to_pct(f.smallest_change, Direction.LOWER) if math.isfinite(f.smallest_change) else None
        return Note(NoteKind.UNDECIDABLE, (end, reference), count=len(comp.diffs), value=step)

    def nothing_left(self) -> bool:
        """The posterior search: whether the steps found so far leave of the preflight's change
        less than the minimum at P >= 1 - beta (core/remainder.py); then no further
        range is searched, before or after them, and the note says so once."""
        rest = self.scope.unexplained()
        if not self.posterior or rest is None or not self.scope.found_any:
            return False
        if self._said_nothing_left:
            return True
        bench = self.scope.bench
        upper = rest.bound(1 - self.scope.config.beta)
        if upper >= min_change_shift(bench.min_change_pct):
            return False
        self._said_nothing_left = True
        self.scope.note(Note(NoteKind.NOTHING_LEFT, value=to_pct(upper, bench.direction)))
        return True

    def remainder(self) -> Remainder | None:
        """The attribution is partial when a remaining-change test ended undecided and the whole
        change less the steps found, read with that test's own rounds, still reaches the minimum
        by its 95 % interval: how much is unexplained, by which stretch's test (the undecided one
        whose interval reaches furthest), and what would settle it (core/remainder.settling)."""
        whole, delta = self.scope.unexplained(), self.scope.delta
        if not self._open or whole is None:
            return None
        # each undecided stretch read with its own test's rounds (core/remainder.with_rounds):
        # partial when any of them still reaches the minimum; the one reaching furthest is named
        read = [
            (remainder.with_rounds(whole, comp.diffs, comp.sigma), end, reference, comp)
            for end, reference, comp in self._open
        ]
        rest, end, reference, comp = max(read, key=lambda r: r[0].interval()[1])
        if not remainder.reaches(rest, delta):
            return None
        config, direction = self.scope.config, self.scope.bench.direction
        horizon = config.max_rounds * EXTEND_FACTOR
        rounds, quiet, smallest = remainder.settling(
            comp.sigma, delta, config.ignore, horizon, critical_z(config), TRUNCATION_FACTOR
        )
        low, high = sorted(to_pct(b, direction) for b in rest.interval())  # a higher-is-better value falls
        return Remainder(
            change_pct=to_pct(rest.shift, direction), low_pct=low, high_pct=high,
            whole_pct=to_pct(rest.whole, direction), share=rest.shift / rest.whole if rest.whole else math.nan,
            commits=(end, reference), rounds=len(comp.diffs),
            rounds_needed=math.ceil(rounds) if math.isfinite(rounds) else 0,
            sigma_pct=math.expm1(comp.sigma) * 100, quiet_sigma_pct=math.expm1(quiet) * 100,
            resolvable_pct=math.expm1(smallest) * 100 if math.isfinite(smallest) else math.nan,
        )  # fmt: skip
