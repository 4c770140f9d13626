"""The sequential search of one segment (`[search] method = "sequential"`): a method of the
product, not a leftover. It assumes nothing about how commits share a level (each probe is judged
by its own test against the segment's reference), so it stays right where the posterior's model
of one level before the change and one after is wrong, a creeping regression of many small steps
say, and every tested commit's verdict is its own test's; it is also the before/after peer the
benchmarks measure the posterior search against, from one run.

Each probe is its own sequential test against the segment's reference (core/search.py picks
the probes, bisection-style or at posterior quantiles when several run at once); inconclusive
commits at the boundary are tested longer once; the boundary is confirmed directly, culprit^
against culprit, and a confirmation that disagrees sends the search back to re-test both ends.
Every "bad" is sized: a confirmed step whose size check puts it below the minimum change is a
smaller step, never a culprit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from attrib.core.model import DecisionRule, Note, NoteKind, Purpose, Step, Verdict
from attrib.core.search import boundary, change_posterior, next_probe, posterior_quantiles
from attrib.core.stats import TestConfig
from attrib.evaluate.records import Comparison
from attrib.outcome import Culprit, Found, OutOfTime, SmallerStep
from attrib.segment.scope import MAX_CONFIRM_RETRIES, Scope

MAX_INCONCLUSIVE_PROBES = 4  # per segment: then the search stops and reports the open range


@dataclass
class _Segment:
    """Bookkeeping of one bisection segment: positions and the evidence about them."""

    positions: list[str]
    verdicts: list[Verdict | None]
    tests: list[tuple[int, float]] = field(default_factory=list)
    steps: list[tuple[int, int, float]] = field(default_factory=list)
    extended: set[str] = field(default_factory=set)  # commits whose inconclusive test was extended
    shifts: dict[tuple[str, str], tuple[float, ...]] = field(default_factory=dict)  # (candidate, reference): last test's

    def posterior(self) -> list[float]:
        return change_posterior(len(self.positions) - 1, self.tests, self.steps)


class SequentialSearch:
    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def _next_probes(self, seg: _Segment) -> list[int]:
        if self.scope.probes == 1:
            probe = next_probe(seg.verdicts)
            return [] if probe is None else [probe]
        b = boundary(seg.verdicts)
        open_positions = [i for i in range(b.last_good + 1, b.first_bad) if seg.verdicts[i] is None]
        return posterior_quantiles(seg.posterior(), self.scope.probes, open_positions)

    def search(self, chain: list[str], reference: str) -> Found:
        scope, ev = self.scope, self.scope.evidence
        seg = _Segment([reference, *chain], [Verdict.GOOD, *([None] * (len(chain) - 1)), Verdict.BAD])
        retries = 0
        measured_ref = ev.stand_in(reference)  # same bytes, possibly measured already
        scope.phase(Step.BISECTING, (reference,), len(chain))
        stopped = False
        while True:
            if ev.out_of_time:
                b = boundary(seg.verdicts)
                return OutOfTime(b.last_good, b.first_bad)
            probes = self._next_probes(seg)
            if probes and seg.verdicts.count(Verdict.INCONCLUSIVE) >= MAX_INCONCLUSIVE_PROBES:
                # The noise is too high for this minimum change: more probes would only walk
                # through neighbours at the cap. Stop and report the open range instead.
                scope.note(Note(NoteKind.STOPPED_PROBING, (reference,), count=MAX_INCONCLUSIVE_PROBES))
                probes, stopped = [], True
            if probes:
                comps = self._compare(seg, [seg.positions[p] for p in probes], measured_ref, Purpose.PROBE)
                for pos, comp in zip(probes, comps, strict=True):
                    seg.verdicts[pos] = comp.verdict
                    seg.tests.append((pos, comp.evidence))
                continue
            b = boundary(seg.verdicts)
            if stopped:
                b = replace(b, ambiguous=tuple(range(b.last_good + 1, b.first_bad)))
            elif self._extend_undecided(seg, b.ambiguous, measured_ref):
                continue
            culprit, last_good = seg.positions[b.first_bad], seg.positions[b.last_good]
            scope.phase(Step.CONFIRMING, (culprit, last_good))
            (confirm,) = self._compare(seg, [culprit], ev.stand_in(last_good), Purpose.CONFIRM, scope.curtailing(scope.config.confirming()))
            seg.steps.append((b.last_good, b.first_bad, confirm.evidence))
            if confirm.rule is DecisionRule.BUDGET:
                return OutOfTime(b.last_good, b.first_bad)
            if confirm.smaller:
                return SmallerStep(culprit, last_good, confirm, confirm.size_p)
            if confirm.verdict is Verdict.BAD or retries >= MAX_CONFIRM_RETRIES:
                if confirm.verdict is not Verdict.BAD:
                    scope.note(Note(NoteKind.NOT_CONFIRMED, (culprit, last_good), verdict=confirm.verdict))
                post = seg.posterior()
                # where the change is, times whether it is at least the minimum change
                size = confirm.size_p if confirm.size_p == confirm.size_p else 1.0
                return Culprit(
                    culprit,
                    last_good,
                    tuple(seg.positions[i] for i in b.ambiguous),
                    confirm,
                    posterior=post[b.first_bad] * size,
                    range_posterior=sum(post[i] for i in (*b.ambiguous, b.first_bad)) * size,
                )
            # The verdicts that led here disagree with a direct comparison: one was wrong.
            # Re-test both ends against the reference with fresh rounds and search on.
            retries += 1
            scope.note(Note(NoteKind.CONFIRMATION_DISAGREED, (culprit, last_good)))
            # The segment's end is bad by the test that opened it and the reference is good by
            # definition: neither is re-tested, so the segment stays closed.
            for pos in (b.first_bad, b.last_good):
                if 0 < pos < len(chain):
                    (comp,) = self._compare(seg, [seg.positions[pos]], measured_ref, Purpose.RETEST)
                    seg.verdicts[pos] = comp.verdict
                    seg.tests.append((pos, comp.evidence))

    def _compare(
        self,
        seg: _Segment,
        candidates: list[str],
        reference: str,
        purpose: Purpose,
        config: TestConfig | None = None,
        resume: Mapping[str, Sequence[float]] | None = None,
    ) -> list[Comparison]:
        """Comparisons of this segment, against `reference` (the segment's, or its measured
        stand-in): probes, retests and extensions place their commits against the segment's
        reference, and each test's shifts are kept for an extension to resume."""
        comps = self.scope.evidence.compare(candidates, reference, purpose, config, resume=resume)
        for comp in comps:
            seg.shifts[comp.candidate, comp.reference] = comp.diffs
        return self.scope.placed(comps, seg.positions[0])

    def _extend_undecided(self, seg: _Segment, ambiguous: Sequence[int], reference: str) -> bool:
        """Inconclusive commits that decide the boundary get more samples, once each: their
        tests go on from where they stopped, up to EXTEND_FACTOR times the cap."""
        todo = [
            i for i in ambiguous if seg.verdicts[i] is Verdict.INCONCLUSIVE and seg.positions[i] not in seg.extended
        ]
        if not todo:
            return False
        shas = [seg.positions[i] for i in todo]
        seg.extended.update(shas)
        last = {sha: seg.shifts[sha, reference] for sha in shas if (sha, reference) in seg.shifts}
        self.scope.phase(Step.MORE_SAMPLES, count=len(shas))
        comps = self._compare(seg, shas, reference, Purpose.EXTEND, self.scope.config.extended(), resume=last)
        for i, comp in zip(todo, comps, strict=True):
            seg.verdicts[i] = comp.verdict
            # the extension continues the same test: its LLR replaces the earlier one
            seg.tests = [(p, llr) for p, llr in seg.tests if p != i] + [(i, comp.evidence)]
        return True
