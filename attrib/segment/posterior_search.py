"""The posterior search of one segment (the default, `[search] method = "posterior"`).

Every block of every commit of the segment enters one posterior (core/posterior.py), which
asks for the next block or build by expected information per unit of cost; when one position
holds the posterior it is confirmed, culprit^ against culprit in paired rounds, under the
indifference zone. A confirmation's rounds are blocks of both commits: one that disagrees
moves the posterior and the search goes on.
"""

from __future__ import annotations

import math

from attrib.core import posterior as locate
from attrib.core.model import DecisionRule, Note, NoteKind, Purpose, Step, Verdict
from attrib.errors import ReferenceFailed
from attrib.outcome import Culprit, Found, OutOfTime, SmallerStep
from attrib.segment.scope import Scope

MAX_CONFIRM_RETRIES = 2  # times a disagreeing confirmation may send the search on
MAX_FAILED_RUNS = 3  # runs of one commit that may fail before it is a skip
TAU_PER_IGNORE = 4.0  # per-commit scatter in the posterior = ignore_below / this


class PosteriorSearch:
    def __init__(self, scope: Scope, ignore: float) -> None:
        self.scope = scope
        self.tau = ignore / TAU_PER_IGNORE
        self.failures: dict[str, list[bool]] = {}  # per measured commit: whether each run produced a block

    def _levels(self, sha: str) -> tuple[list[float], list[int]]:
        return self.scope.evidence.levels(self.scope.evidence.stand_in(sha))

    def _measure_block(self, sha: str) -> bool:
        """One more block of `sha` (its byte-identical stand-in's); False once it is hopeless."""
        ev = self.scope.evidence
        if not ev.build(sha).ok:
            return False
        target = ev.stand_in(sha)
        runs = self.failures.setdefault(target, [])
        runs.append(ev.block(target))
        fails = runs.count(False)
        return not (fails >= MAX_FAILED_RUNS and fails > runs.count(True))

    def _data(self, positions: list[str]) -> tuple[dict[int, list[float]], dict[int, list[float]]]:
        levels = [self._levels(sha) for sha in positions]
        return {i: b for i, (b, _) in enumerate(levels)}, {
            i: [float(t) for t in ts] for i, (_, ts) in enumerate(levels)
        }

    def search(self, chain: list[str], reference: str) -> Found:
        scope, ev = self.scope, self.scope.evidence
        positions = [reference, *chain]
        n = len(chain)
        self.failures = {}
        ev.adapt_blocks()  # once per bisection, from the preflight's runs: samples per run
        unbuildable: set[int] = set()
        cap = scope.config.max_rounds * (math.ceil(math.log2(n + 1)) + 2)
        spent, retries = 0, 0
        scope.phase(Step.LOCATING, (reference,), n)
        for end in (0, n):  # a merge's side line: its ends may not be measured yet
            while len(self._levels(positions[end])[0]) < scope.config.min_rounds:
                if not self._measure_block(positions[end]):
                    raise ReferenceFailed(f"cannot measure {positions[end][:10]}, an end of the searched range")
        while True:
            blocks, times = self._data(positions)
            req, post = locate.next_request(
                n, blocks, unbuildable=frozenset(unbuildable), tau=self.tau, blocks_left=cap - spent, times=times
            )
            if ev.out_of_time:
                lo, hi = self._credible_range(post)
                return OutOfTime(lo, hi)
            if req.action in (locate.Action.MEASURE, locate.Action.BUILD):
                if not self._measure_block(positions[req.position]):
                    unbuildable.add(req.position)
                spent += 1
                continue
            self._place(positions, post, unbuildable)
            k, last = req.position, req.last_good
            culprit, last_good = positions[k], positions[last]
            scope.phase(Step.CONFIRMING, (culprit, last_good))
            confirm = scope.compare_one(culprit, ev.stand_in(last_good), Purpose.CONFIRM, scope.config.confirming())
            if confirm.rule is DecisionRule.BUDGET:
                return OutOfTime(last, k)
            blocks, times = self._data(positions)
            after = locate.posterior(n, blocks, tau=self.tau, times=times)
            held = sum(after.probs[last + 1 : k + 1])
            amb = tuple(positions[i] for i in req.ambiguous)
            if (
                confirm.verdict is Verdict.BAD
                or req.action is locate.Action.EXHAUSTED
                or retries >= MAX_CONFIRM_RETRIES
            ):
                if confirm.verdict is not Verdict.BAD:
                    scope.note(Note(NoteKind.NOT_CONFIRMED, (culprit, last_good), verdict=confirm.verdict))
                return Culprit(culprit, last_good, amb, confirm, posterior=after.probs[k], range_posterior=held)
            if confirm.verdict is Verdict.GOOD and held >= locate.DEFAULT_LOCATE_AT:
                # the change is here, and the paired rounds put it at or near the ignored size
                return SmallerStep(culprit, last_good, confirm, math.nan)
            retries += 1  # the confirmation's rounds are blocks of both: the posterior moved
            scope.note(Note(NoteKind.CONFIRMATION_DISAGREED, (culprit, last_good)))

    def _credible_range(self, post: locate.Posterior) -> tuple[int, int]:
        req = locate._exhausted(post, frozenset(), locate.DEFAULT_LOCATE_AT)
        return req.last_good, req.position

    def _place(self, positions: list[str], post: locate.Posterior, unbuildable: set[int]) -> None:
        """Verdicts for the report: each measured commit's side where the posterior settles it."""
        for i, sha in enumerate(positions[1:-1], start=1):
            if i in unbuildable:
                self.scope.verdicts[sha] = (positions[0], Verdict.SKIP)
            elif self._levels(sha)[0]:
                f = post.below(i)
                side = Verdict.BAD if f >= 0.99 else Verdict.GOOD if f <= 0.01 else Verdict.INCONCLUSIVE
                self.scope.verdicts[sha] = (positions[0], side)
