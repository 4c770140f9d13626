"""The preflight: bad against good, before any search, and what it decides about the run.

No meaningful worsening ends the run as not reproduced; an undecided one ends it inconclusive,
with the whole chain as its open range; references that do not build or cannot be measured end
it with `ReferenceFailed`. When the noise it measured leaves a test that finds no change only
the cap, it says so once (`Scope.say_noise`: a progress line and the report's warning).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from attrib.core.model import DecisionRule, Purpose, Status, Step, Verdict
from attrib.core.stats import EXTEND_FACTOR
from attrib.errors import BenchmarkMissing, ReferenceFailed
from attrib.evaluate.records import Comparison
from attrib.evaluate.runners import names_no_benchmark
from attrib.outcome import Unresolved
from attrib.segment.open_ranges import not_clearly_worse
from attrib.segment.scope import Evidence, Scope


@dataclass(frozen=True)
class Preflight:
    comparison: Comparison  # bad against good: the whole change
    status: Status | None = None  # the outcome's, when no search follows (not reproduced, inconclusive)
    unresolved: Unresolved | None = None  # an undecided preflight's open range: the whole chain


def preflight(scope: Scope, good: str, bad: str, chain: Sequence[str], posterior: bool) -> Preflight:
    """Compare bad against good (`chain`: the commits between them, oldest first)."""
    scope.phase(Step.PREFLIGHT, (bad, good))
    config = scope.config
    # with the posterior method an undecided preflight at the cap is extended (below): the
    # futility rule looks that far ahead before it calls the preflight undecidable
    ahead = replace(config, horizon=config.max_rounds * EXTEND_FACTOR) if posterior else config
    (comp,) = scope.evidence.compare([bad], good, Purpose.PREFLIGHT, ahead)
    if (
        posterior
        and comp.verdict is Verdict.INCONCLUSIVE
        and comp.rule is not DecisionRule.BUDGET
        and len(comp.diffs) >= config.max_rounds
    ):
        # The zone's test (ignore_below against the minimum) needs more rounds than one of 0
        # against the minimum: an undecided preflight at the cap goes on, as an undecided
        # commit at the boundary does, before the outcome may be called inconclusive.
        scope.phase(Step.MORE_SAMPLES, (bad,), 1)
        (comp,) = scope.evidence.compare([bad], good, Purpose.EXTEND, config.extended(), resume={bad: comp.diffs})
    check_references(scope.evidence, good, bad, comp)
    if comp.verdict is Verdict.GOOD:
        return Preflight(comp, Status.NOT_REPRODUCED)
    # Said for an undecided preflight too: there, what noise this is and what minimum would
    # fit is the advice the run most needs (benchmarks/REAL.md's wall-clock runs got none).
    scope.say_noise(comp)
    if comp.verdict is Verdict.INCONCLUSIVE:
        return Preflight(comp, Status.INCONCLUSIVE, not_clearly_worse(good, bad, chain, comp, scope.bench.direction))
    return Preflight(comp)


def check_references(evidence: Evidence, good: str, bad: str, comp: Comparison) -> None:
    """Both references must build and be measured: without them there is nothing to search."""
    for sha, role in ((good, "good"), (bad, "bad")):
        build = evidence.build(sha)
        if build is not None and not build.ok:
            raise ReferenceFailed(
                f"the {role} revision {sha[:10]} did not build ({build.reason}); log: {build.log_path}"
            )
    if comp.verdict is Verdict.SKIP:
        for sha, role in ((good, "good"), (bad, "bad")):
            failed = evidence.record(sha).failed_runs
            if failed and all(names_no_benchmark(f) for f in failed):
                # the recipe names a benchmark the reference does not have: the input is wrong
                raise BenchmarkMissing(f"the {role} revision {sha[:10]}: {failed[0]}")
        raise ReferenceFailed(f"cannot measure the references: {comp.reason}")
