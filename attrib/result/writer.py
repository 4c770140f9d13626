"""The one writer of a result: the search driver's Outcome plus what the run knew, as typed records.

It reads no file and asks the machine nothing: the machine and the recipe's hash come in as
`Provenance` (gathered at the edge, result/gather.py), a runner's evidence (static kernel
diffs, the GPU) as `RunnerEvidence`. So a result is a function of its inputs, and tests
build real ones from simulated bisections.
"""

from __future__ import annotations

import math
import shlex
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from attrib import __version__
from attrib.core.environment import Fingerprint
from attrib.core.model import Direction, Purpose, RevertStatus, SearchMethod, Status, Verdict, VerifyMode
from attrib.core.stats import TestConfig, below_minimum, to_pct
from attrib.evaluate.builds import log_tail
from attrib.evaluate.executors.base import ExecutorDescription, ExecutorKind
from attrib.evaluate.records import Comparison, PhaseTimes
from attrib.evaluate.runners import RunnerEvidence, StaticDiff
from attrib.outcome import GroupOutcome, Member, Outcome, RevertCheck, Roll
from attrib.recipe import BenchmarkSpec, Recipe
from attrib.result.types import (
    MEMBER_FIELDS,
    BisectResult,
    BuildFailure,
    BuildInfo,
    CommitRow,
    CompareResult,
    ComparisonRecord,
    CulpritRecord,
    DriftRecord,
    DriftRole,
    Environment,
    ExecutorInfo,
    Machine,
    MemberResult,
    PhaseTimesRecord,
    RecipeRef,
    RevertRecord,
    Role,
    RollRecord,
    Settings,
    SmallerStepRecord,
    Tool,
    UnresolvedRange,
    member_change,
)

# Per tested commit the result keeps a bounded picture of its samples for the report's plot:
# fixed quantiles, and at most this many values (the samples' own quantiles at evenly spaced
# probabilities when there are more, so the shape survives and a long run stays small).
QUANTILE_PROBS = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)
MAX_SAMPLE_VALUES = 64


@dataclass(frozen=True)
class RunContext:
    """What the outcome alone does not know: how the run was asked for and where it ran."""

    repo: Path
    recipe: Recipe
    bench: BenchmarkSpec
    executor: str
    config: TestConfig
    seed: int
    workdir: Path
    wall_s: float
    builds_fresh: int
    probes: int = 1  # commits proposed per search step (--probes)
    verify: VerifyMode = VerifyMode.CONFIRM
    executor_info: ExecutorDescription | None = None  # the executor's own (Executor.describe)
    # A group's members whose recipe benchmark is not `bench` (unit, direction, minimum change):
    # by the member's benchmark name; a member not named here is measured as `bench` says.
    member_specs: Mapping[str, BenchmarkSpec] = field(default_factory=dict)
    # Each member's own runner evidence (its kernels' static diffs), by its benchmark name; a
    # member not named here gets the evidence build_result is given.
    member_evidence: Mapping[str, RunnerEvidence] = field(default_factory=dict)

    def spec_for(self, member: Member) -> BenchmarkSpec:
        return self.member_specs.get(member.benchmark, self.bench)


@dataclass(frozen=True)
class Provenance:
    """What the edge read about the machine and the inputs (result/gather.py)."""

    machine: Machine
    recipe_sha256: str
    fingerprint: Fingerprint | None = None  # where the work ran (evaluate/fingerprint.py)


def _pct_ci(comp: Comparison, direction: Direction) -> tuple[float, tuple[float, float]]:
    est = comp.estimate
    lo, hi = sorted((to_pct(est.low, direction), to_pct(est.high, direction)))
    return round(to_pct(est.shift, direction), 3), (round(lo, 3), round(hi, 3))


def comparison_record(comp: Comparison, direction: Direction) -> ComparisonRecord:
    change, ci = _pct_ci(comp, direction) if comp.diffs else (None, None)
    return ComparisonRecord(
        candidate=comp.candidate,
        reference=comp.reference,
        purpose=Purpose(comp.purpose),
        verdict=comp.verdict,
        rounds=len(comp.diffs),
        change_pct=change,
        ci_pct=ci,
        llr=round(comp.llr, 4),
        sigma=comp.sigma,
        reason=comp.reason,
        shifts=tuple(round(d, 6) for d in comp.diffs),
        rule=comp.rule,
        size_p=_prob(comp.size_p),
        smaller=comp.smaller,
        same_artifact_as=comp.same_artifact_as,
        samples=comp.samples,
    )


def _where_the_work_went(outcome: Outcome, direction: Direction) -> dict[str, Any]:
    """What was not measured and why, smaller steps, time per phase."""
    t = outcome.times
    smaller = []
    for s in outcome.smaller_steps:
        change, ci = _pct_ci(s.confirmation, direction) if s.confirmation.diffs else (None, None)
        smaller.append(SmallerStepRecord(s.commit, s.last_good, change, ci, _prob(s.size_p)))
    return {
        "smaller_steps": tuple(smaller),
        "untouched": tuple(outcome.untouched),
        "same_artifact": {c.candidate: c.same_artifact_as for c in outcome.comparisons if c.same_artifact_as},
        "artifacts": {sha: rec.artifact for sha, rec in outcome.commits.items() if rec.artifact},
        "artifact_notes": tuple(outcome.artifact_notes),
        "samples_saved_estimate": int(outcome.samples_saved),
        "phase_times_s": phase_times([t]),
        "out_of_time": outcome.out_of_time,
        "blocks": outcome.blocks,
    }


def phase_times(times: Sequence[PhaseTimes]) -> PhaseTimesRecord:
    """Wall seconds per phase of one bisection, or of a group's members together: each build and
    each shared process run is timed by the member that made it (the others' wait for it is
    none), so the sums are the group's."""
    t = PhaseTimes(
        build_s=sum(x.build_s for x in times), build_check_s=sum(x.build_check_s for x in times),
        measure_s=sum(x.measure_s for x in times), decide_s=sum(x.decide_s for x in times),
        comparisons=sum(x.comparisons for x in times),
    )  # fmt: skip
    return PhaseTimesRecord(
        round(t.build_s, 3), round(t.measure_s, 3), round(t.decide_s, 3), round(t.overhead_per_comparison(), 4),
        build_check=round(t.build_check_s, 3),
    )


def _prob(p: float) -> float | None:
    return None if math.isnan(p) else round(p, 4)


def _revert(check: RevertCheck | None, direction: Direction) -> RevertRecord | None:
    if check is None:
        return None
    comp = check.comparison
    measured = comp is not None and bool(comp.diffs)
    change, ci = _pct_ci(comp, direction) if comp is not None and measured else (None, None)
    return RevertRecord(
        status=RevertStatus(check.status),
        reverted_commit=check.reverted,
        detail=check.detail,
        bad_vs_reverted_pct=change,  # bad against the reverted build
        ci_pct=ci,
        rounds=len(comp.diffs) if comp else 0,
    )


def _sig(v: float) -> float:
    return float(f"{v:.6g}")  # six significant digits: far below any noise, keeps the JSON small


def sample_summary(samples: Sequence[float]) -> tuple[tuple[float, ...] | None, tuple[float, ...]]:
    """(quantiles at QUANTILE_PROBS, sample_values: at most MAX_SAMPLE_VALUES) of a commit."""
    if not samples:
        return None, ()
    arr = np.asarray(samples, dtype=float)
    values = arr if arr.size <= MAX_SAMPLE_VALUES else np.quantile(arr, np.linspace(0.0, 1.0, MAX_SAMPLE_VALUES))
    return tuple(_sig(q) for q in np.quantile(arr, QUANTILE_PROBS)), tuple(_sig(v) for v in values)


def reproduce_command(ctx: RunContext, good: str, bad: str, benchmarks: Sequence[str] = ()) -> str:
    """`benchmarks`: a group's members' names, each a --benchmark (default: ctx.bench)."""
    names = list(dict.fromkeys(benchmarks)) or [ctx.bench.name]
    argv = [
        "attrib", "bisect",
        "--repo", str(ctx.repo),
        "--good", good,
        "--bad", bad,
        "--recipe", str(ctx.recipe.path),
        *(a for name in names for a in ("--benchmark", name)),
        "--executor", ctx.executor,
        "--seed", str(ctx.seed),
    ]  # fmt: skip
    if ctx.probes > 1:
        argv += ["--probes", str(ctx.probes)]
    if ctx.verify != "confirm":
        argv += ["--verify", ctx.verify]
    return shlex.join(argv)


def compare_command(ctx: RunContext, reference: str, candidate: str) -> str:
    argv = [
        "attrib", "compare",
        "--repo", str(ctx.repo),
        "--recipe", str(ctx.recipe.path),
        "--benchmark", ctx.bench.name,
        "--executor", ctx.executor,
        reference, candidate,
    ]  # fmt: skip
    return shlex.join(argv)


def _executor(name: str, info: ExecutorDescription | None) -> ExecutorInfo:
    return ExecutorInfo.of(ExecutorKind(name), info)


def _culprits(
    outcome: Outcome, ctx: RunContext, static: Mapping[str, StaticDiff], roll_of: tuple[str, str] | None = None
) -> tuple[CulpritRecord, ...]:
    """`roll_of`: (the roll's parent, the roll) when these are a dependency's commits, found
    inside that roll: what reproduces them is the bisection of the roll, which descends again."""
    direction = ctx.bench.direction
    total_shift = outcome.preflight.estimate.shift
    out = []
    for c in outcome.culprits:
        info = outcome.commits[c.commit].info
        change, ci = _pct_ci(c.confirmation, direction)
        share = c.confirmation.estimate.shift / total_shift if total_shift > 0 else None
        diff = static.get(c.commit)
        out.append(
            CulpritRecord(
                commit=c.commit,
                subject=info.subject,
                author=info.author,
                author_email=info.author_email,
                date=info.date,
                files=tuple(info.files),
                change_pct=change,
                ci_pct=ci,
                share=None if share is None else round(share, 3),
                ambiguous_with=tuple(c.ambiguous_with),
                compared_with=c.last_good,
                confirmed=c.confirmed,
                confirmation=comparison_record(c.confirmation, direction),
                via_merge=c.via_merge,
                posterior=_prob(c.posterior),
                range_posterior=_prob(c.range_posterior),
                size_p=_prob(c.size_p),
                below_minimum=below_minimum(c.confirmation.estimate.shift, ctx.bench.min_change_pct),
                revert=_revert(c.revert, direction),
                reproduce=compare_command(ctx, c.last_good, c.commit) if roll_of is None else reproduce_command(ctx, *roll_of),
                static_diff=None if diff is None or diff.unavailable else dict(diff.changed),
                static_diff_unavailable=diff.unavailable if diff is not None and diff.unavailable else None,
                rolls=tuple(_roll(r, ctx, outcome.commits[c.commit].info.parents[0], c.commit, roll_of) for r in c.rolls),
            )
        )
    return tuple(out)


def _roll(roll: Roll, ctx: RunContext, parent: str, commit: str, outer: tuple[str, str] | None) -> RollRecord:
    """A culprit's roll and the search inside it. The reproduce command of every level below
    the superproject bisects the superproject's roll, which descends to it again."""
    at = outer or (parent, commit)
    out = roll.outcome
    pins = asdict(roll.roll)  # the roll's own fields, written as they are
    if out is None:
        return RollRecord(**pins, reproduce=reproduce_command(ctx, *at))
    change, ci = _pct_ci(out.preflight, ctx.bench.direction) if out.preflight.diffs else (None, None)
    return RollRecord(
        **pins,
        status=out.status,
        range_commits=len(out.order) - 1,
        total_change_pct=change,
        total_ci_pct=ci,
        culprits=_culprits(out, ctx, {}, at),
        unresolved=_unresolved(out),
        commits=_commit_rows(out),
        build_failures=_build_failures(out),
        builds=sum(1 for r in out.commits.values() if r.build is not None),
        samples=sum(len(r.samples) for r in out.commits.values()),
        reproduce=reproduce_command(ctx, *at),
    )  # fmt: skip


def _unresolved(outcome: Outcome) -> tuple[UnresolvedRange, ...]:
    return tuple(outcome.unresolved)


def _build_failures(outcome: Outcome) -> tuple[BuildFailure, ...]:
    return tuple(
        BuildFailure(sha, rec.info.subject, rec.build.reason, rec.build.log_path, log_tail(rec.build))
        for sha, rec in outcome.commits.items()
        if rec.build is not None and not rec.build.ok
    )


def _commit_rows(outcome: Outcome) -> tuple[CommitRow, ...]:
    culprit_shas = {c.commit for c in outcome.culprits}
    rows = []
    for sha in outcome.order:
        rec = outcome.commits.get(sha)
        if rec is None:
            continue
        reference: str | None
        if sha == outcome.good:
            verdict, reference, role = Verdict.GOOD, None, Role.GOOD
        elif sha == outcome.bad:
            verdict, reference, role = outcome.preflight.verdict, outcome.good, Role.BAD
        elif sha in outcome.verdicts:
            reference, verdict = outcome.verdicts[sha]
            role = Role.CANDIDATE
        else:
            continue  # built only as a confirmation partner's neighbour: nothing decided about it
        if rec.build is not None and not rec.build.ok:
            verdict = Verdict.SKIP
        # A candidate that matches a culprit is as bad as that culprit is relative to good.
        overall = Verdict.BAD if verdict is Verdict.GOOD and reference in culprit_shas else verdict
        quantiles, values = sample_summary(rec.samples)
        b = rec.build
        rows.append(
            CommitRow(
                commit=sha,
                subject=rec.info.subject,
                role=role,
                verdict=overall,
                verdict_vs_reference=verdict,
                reference=reference,
                samples=len(rec.samples),
                median=statistics.median(rec.samples) if rec.samples else None,
                build=None if b is None else BuildInfo(b.ok, b.cached, b.reason, b.log_path, b.how, b.cache, b.note),
                failed_runs=tuple(rec.failed_runs),
                nodes=dict(Counter(n for n in rec.nodes if n)),
                quantiles=quantiles,
                sample_values=values,
            )
        )
    return tuple(rows)


def _single_result(outcome: Outcome, ctx: RunContext, provenance: Provenance, evidence: RunnerEvidence) -> BisectResult:
    """One benchmark's bisection as schema 3 wrote it (no members yet): the part of the result
    each member of a group has of its own."""
    direction = ctx.bench.direction
    total_change, total_ci = _pct_ci(outcome.preflight, direction)
    excluded: Counter[str] = Counter()
    for rec in outcome.commits.values():
        excluded.update(rec.excluded)
    built = [r.build for r in outcome.commits.values() if r.build is not None]
    drift_role = {outcome.good: DriftRole.GOOD, outcome.bad: DriftRole.BAD}
    return BisectResult(
        status=outcome.status,
        repo=str(ctx.repo),
        good=outcome.good,
        bad=outcome.bad,
        benchmark=ctx.bench.name,
        culprits=_culprits(outcome, ctx, evidence.static_diffs),
        commits=_commit_rows(outcome),
        builds=len(built),
        samples=sum(len(r.samples) for r in outcome.commits.values()),
        wall_s=round(ctx.wall_s, 2),
        unit=ctx.bench.unit,
        direction=direction,
        total_change_pct=total_change,
        total_ci_pct=total_ci,
        range_commits=len(outcome.order) - 1,
        builds_fresh=ctx.builds_fresh,
        builds_cached=sum(1 for b in built if b.cached),
        build_failures=_build_failures(outcome),
        comparisons=tuple(comparison_record(c, direction) for c in outcome.comparisons),
        notes=tuple(outcome.notes),
        unresolved=_unresolved(outcome),
        drift=tuple(
            DriftRecord(d.commit, drift_role.get(d.commit, DriftRole.CULPRIT), d.blocks, round(d.change_pct, 3))
            for d in outcome.drift
        ),
        excluded_samples=dict(excluded),
        **_where_the_work_went(outcome, direction),
        rounds=outcome.rounds,
        remainder=outcome.remainder,
        reproduce=reproduce_command(ctx, outcome.good, outcome.bad),
        settings=Settings(
            alpha=ctx.config.alpha,
            beta=ctx.config.beta,
            min_rounds=ctx.config.min_rounds,
            max_rounds=ctx.config.max_rounds,
            min_change_pct=ctx.bench.min_change_pct,
            reps=ctx.bench.reps,
            seed=ctx.seed,
            executor=ctx.executor,
            jobs=ctx.probes,
            verify=VerifyMode(ctx.verify),
            search=ctx.recipe.search_method,
            # the zone decides only the posterior search; the sequential one sizes steps instead
            ignore_below_pct=ctx.bench.ignore_pct if ctx.recipe.search_method is SearchMethod.POSTERIOR else None,
            futility=ctx.config.futility,
        ),
        recipe=RecipeRef(str(ctx.recipe.path), ctx.recipe.name, provenance.recipe_sha256),
        executor=_executor(ctx.executor, ctx.executor_info),
        tool=Tool("attrib", __version__),
        machine=provenance.machine,
        workdir=str(ctx.workdir),
        environment=Environment(gpu=(dict(evidence.gpu),) if evidence.gpu else (), fingerprint=provenance.fingerprint),
    )


def build_result(
    outcome: Outcome | GroupOutcome, ctx: RunContext, provenance: Provenance, evidence: RunnerEvidence | None = None
) -> BisectResult:
    """The result of a bisection of a group, or of one benchmark (a group of one, `ctx.bench`)."""
    evidence = evidence or RunnerEvidence()
    if isinstance(outcome, Outcome):
        outcome = GroupOutcome(outcome.good, outcome.bad, ((Member(ctx.bench.name), outcome),))
    singles = [
        (m, _single_result(o, replace(ctx, bench=replace(ctx.spec_for(m), name=m.benchmark)), provenance,
                           ctx.member_evidence.get(m.benchmark, evidence)))  # fmt: skip
        for m, o in outcome.members
    ]
    # the group's builds are shared: each commit once, whichever members measured it
    built = {
        sha: rec.build.cached for _, o in outcome.members for sha, rec in o.commits.items() if rec.build is not None
    }
    reproduce = reproduce_command(ctx, outcome.good, outcome.bad, [m.benchmark for m, _ in singles])
    return group_result(singles, reproduce, built, phase_times([o.times for _, o in outcome.members]))


def group_result(
    singles: Sequence[tuple[Member, BisectResult]], reproduce: str, built: Mapping[str, bool], times: PhaseTimesRecord
) -> BisectResult:
    """The schema-4 result of a group from each member's own result (written as a bisection of it
    alone): the members, the group's status and culprits, and the lead member's measurements at
    the top (for a single benchmark: its result as it always read, with its one member).
    `built`: every commit built for the group -> whether from the cache; `times`: the group's
    wall seconds per phase."""
    members = tuple(_member(m, r) for m, r in singles)
    status = group_status([m.status for m in members])
    lead = max(
        (i for i, m in enumerate(members) if m.status is status), key=lambda i: (abs(members[i].total_change_pct), -i)
    )
    first = singles[lead][1]
    failures = {f.commit: f for _, r in singles for f in r.build_failures}
    traps = {(n.a, n.b): n for _, r in singles for n in r.artifact_notes}
    return replace(
        first,
        status=status,
        benchmark=members[lead].label,
        culprits=group_culprits(members, status, first),
        builds=len(built),
        builds_cached=sum(built.values()),
        samples=sum(m.samples for m in members),
        build_failures=tuple(failures.values()),
        artifact_notes=tuple(traps.values()),
        phase_times_s=times,
        rounds=max(m.rounds for m in members),
        reproduce=reproduce if len(singles) > 1 else first.reproduce,
        members=members,
    )


def _member(m: Member, r: BisectResult) -> MemberResult:
    own = {name: getattr(r, name) for name in MEMBER_FIELDS}
    return MemberResult(
        benchmark=m.benchmark, config=dict(m.config), min_change_pct=r.settings.min_change_pct,
        ignore_below_pct=r.settings.ignore_below_pct, **own,
    )  # fmt: skip


# A group's status: the most telling of its members' (a culprit anywhere is the news; one left
# partial makes the group's attribution partial, its culprits are named all the same).
_STATUS_ORDER = (Status.PARTIAL, Status.CULPRIT_FOUND, Status.INCONCLUSIVE, Status.ERROR, Status.NOT_REPRODUCED)
_NAMING = (Status.PARTIAL, Status.CULPRIT_FOUND)  # the statuses whose culprits are named


def group_status(statuses: Sequence[Status]) -> Status:
    return next(s for s in _STATUS_ORDER if s in statuses)


def group_culprits(members: Sequence[MemberResult], status: Status, lead: BisectResult) -> tuple[CulpritRecord, ...]:
    """One record per culprit commit of the members that have the group's status (partial and
    culprit_found both name theirs): the record of
    the member it moved most (its change, CI, confirmation, static diff), listing every such
    member it moved, largest change first; in history order."""
    moved: dict[str, list[tuple[MemberResult, CulpritRecord]]] = {}
    for m in members:
        if m.status is status or (status in _NAMING and m.status in _NAMING):
            for c in m.culprits:
                moved.setdefault(c.commit, []).append((m, c))
    position = {row.commit: i for i, row in enumerate(lead.commits)}
    for m in members:
        for row in m.commits:
            position.setdefault(row.commit, len(position))
    out = []
    for pairs in moved.values():
        pairs.sort(key=lambda mc: -abs(mc[1].change_pct))
        out.append(replace(pairs[0][1], members=tuple(member_change(c, m) for m, c in pairs)))
    return tuple(sorted(out, key=lambda c: position.get(c.commit, len(position))))


def compare_result(
    comp: Comparison, bench: BenchmarkSpec, medians: Mapping[str, float] | None = None, environment: Fingerprint | None = None
) -> CompareResult:
    return CompareResult(
        bench.name, comparison_record(comp, bench.direction), bench.unit, bench.direction, dict(medians or {}), environment
    )
