"""What a bisection records when a range stays open: an `Unresolved` range and its `Cause`s.

Plain data in, records out, for the driver to keep: the smallest range proved when the deadline
passed (with what finishing it would cost), a culprit whose range is still ambiguous or whose
confirmation did not hold, and a preflight that did not show the bad end clearly worse.
report/sentences.py words the causes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from attrib.core.model import Cause, Direction, Note, NoteKind, UnresolvedCause, Verdict
from attrib.core.stats import to_pct
from attrib.evaluate.records import Comparison, PhaseTimes
from attrib.outcome import Culprit, OutOfTime, Unresolved


def out_of_time(chain: Sequence[str], reference: str, left: OutOfTime, times: PhaseTimes) -> tuple[Unresolved, Note]:
    """The deadline passed: the smallest range proved so far, what finishing costs, and the
    note that says so."""
    positions = [reference, *chain]
    inside = tuple(positions[left.last_good + 1 : left.first_bad + 1])
    probes_left = math.ceil(math.log2(max(2, len(inside)))) + 1  # bisection steps + the confirmation
    per = (times.measure_s + times.decide_s) / times.comparisons if times.comparisons else None
    seconds = per * probes_left if per is not None else None
    cause = Cause(UnresolvedCause.OUT_OF_TIME, inside, rounds=probes_left, seconds=seconds)
    last_good = positions[left.last_good]
    note = Note(NoteKind.OUT_OF_TIME, (last_good,), count=len(inside), value=seconds)
    return Unresolved(last_good, positions[left.first_bad], inside, (cause,)), note


def culprit_range(c: Culprit, verdicts: Mapping[str, tuple[str, Verdict]]) -> Unresolved | None:
    """A culprit's range, when it is still open: commits it is ambiguous with that stayed
    undecided at the cap or were never measured (the unbuildable ones are named with them),
    or a confirmation that did not hold. None when the culprit stands alone (or beside
    unbuildable commits only) and is confirmed."""
    undecided = tuple(a for a in c.ambiguous_with if verdicts.get(a, ("", None))[1] is Verdict.INCONCLUSIVE)
    untested = tuple(a for a in c.ambiguous_with if a not in verdicts)
    skipped = tuple(a for a in c.ambiguous_with if a not in undecided and a not in untested)
    if not undecided and not untested and c.confirmed:
        return None
    causes = []
    if undecided:
        causes.append(Cause(UnresolvedCause.UNDECIDED_AT_CAP, undecided))
    if untested:
        causes.append(Cause(UnresolvedCause.NOT_MEASURED, untested))
    if skipped:
        causes.append(Cause(UnresolvedCause.UNBUILDABLE, skipped))
    if not c.confirmed:
        rounds = len(c.confirmation.diffs)
        causes.append(
            Cause(
                UnresolvedCause.NOT_CONFIRMED,
                (c.last_good, c.commit),
                rounds=rounds,
                verdict=c.confirmation.verdict,
            )
        )
    return Unresolved(c.last_good, c.commit, (*c.ambiguous_with, c.commit), tuple(causes))


def not_clearly_worse(
    good: str, bad: str, chain: Sequence[str], preflight: Comparison, direction: Direction
) -> Unresolved:
    """An undecided preflight: the whole chain is the open range, with the change it measured."""
    change = to_pct(preflight.estimate.shift, direction)
    cause = Cause(UnresolvedCause.NOT_CLEARLY_WORSE, rounds=len(preflight.diffs), change_pct=change)
    return Unresolved(good, bad, tuple(chain), (cause,))
