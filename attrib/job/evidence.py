"""What the runners know of the culprits' builds beyond the samples (the static kernel diff of
a culprit, the GPU it timed on), asked once after the search (runners.evidence_of), each member
of a group from a runner of its own."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from attrib.evaluate.executors import Executor
from attrib.evaluate.runners import RunnerEvidence, Step, evidence_of
from attrib.job.members import make_runner
from attrib.outcome import GroupOutcome, Outcome
from attrib.recipe import BenchmarkSpec, RunnerKind


def culprit_steps(outcome: Outcome) -> list[Step]:
    """Each culprit's step where both sides built: what a runner's evidence is about."""
    steps = []
    for culprit in outcome.culprits:
        before, after = _checkout_of(outcome, culprit.last_good), _checkout_of(outcome, culprit.commit)
        if before is not None and after is not None:
            steps.append(Step(culprit.commit, before, after))
    return steps


def _checkout_of(outcome: Outcome, sha: str) -> Path | None:
    rec = outcome.commits.get(sha)
    if rec is None or rec.build is None or not rec.build.ok:
        return None
    return Path(rec.build.checkout)


def member_evidence(
    group: GroupOutcome, benches: Mapping[str, BenchmarkSpec], executor: Executor
) -> dict[str, RunnerEvidence]:
    """Each group member's evidence, inspected by a runner of its own (not the daemon's
    recording wrapper); only the cupy runner inspects what it built, and only a member with
    culprits has steps to inspect."""
    return {
        m.benchmark: evidence_of(make_runner(benches[m.benchmark], executor), culprit_steps(o))
        for m, o in group.members
        if benches[m.benchmark].runner is RunnerKind.CUPY and o.culprits
    }
