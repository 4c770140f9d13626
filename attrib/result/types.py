"""The result as immutable records: what a bisection (or one comparison) found, and how.

These are the only shape consumers see (report, plot, CLI, trackers, daemon); the JSON
document (docs/result-schema.md) is written by `to_json` and read back, validated and migrated
from older schemas, by `from_json` (both result/schema.py). Field names are the JSON keys and
their order is the document's. Mappings are plain dicts inside frozen records: nobody edits
a result after the writer (result/writer.py) made it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from attrib.core.blocks import BlockChoice
from attrib.core.detect import ChangeDirection
from attrib.core.environment import Fingerprint
from attrib.core.model import (
    ArtifactNote,
    BuildHow,
    CacheServed,
    DecisionRule,
    DependencyRoll,
    Direction,
    Note,
    Purpose,
    Remainder,
    RevertStatus,
    SearchMethod,
    Status,
    Unresolved,
    Verdict,
    VerifyMode,
)
from attrib.evaluate.executors.base import (
    DESCRIPTIONS,
    DockerDescription,
    ExecutorDescription,
    ExecutorKind,
    LocalDescription,
    SlurmDescription,
)

RESULT_SCHEMA = 7


class ResultKind(StrEnum):
    BISECT = "bisect"
    COMPARE = "compare"


class Role(StrEnum):
    """A tested commit's place in the range."""

    GOOD = "good"
    BAD = "bad"
    CANDIDATE = "candidate"


class DriftRole(StrEnum):
    GOOD = "good"
    BAD = "bad"
    CULPRIT = "culprit"


@dataclass(frozen=True)
class ComparisonRecord:
    """One sequential test, in percent of the reference (positive: larger)."""

    candidate: str
    reference: str
    purpose: Purpose
    verdict: Verdict
    rounds: int
    change_pct: float | None  # None when nothing was measured (a skip)
    ci_pct: tuple[float, float] | None
    llr: float
    sigma: float
    reason: str = ""
    shifts: tuple[float, ...] = ()  # per-round oriented log shifts
    rule: DecisionRule | None = None  # which rule decided (None in documents written before)
    size_p: float | None = None  # P(change >= the minimum change), where the step was sized
    smaller: bool = False  # confirmed, but below the minimum change: never a culprit
    same_artifact_as: str | None = None  # settled with zero samples: byte-identical to this commit
    samples: int = 0  # samples this comparison drew (both sides)


@dataclass(frozen=True)
class RevertRecord:
    status: RevertStatus
    reverted_commit: str | None
    detail: str = ""
    bad_vs_reverted_pct: float | None = None  # how much of the regression the revert takes away
    ci_pct: tuple[float, float] | None = None
    rounds: int = 0


@dataclass(frozen=True)
class CulpritRecord:
    """A culprit as the result reports it: a reading of the search's `outcome.Culprit` (the
    commit's metadata, its change in percent, what it reproduces with), not its copy:
    docs/architecture.md, "In memory and on disk"."""

    commit: str
    subject: str
    author: str
    author_email: str
    date: str
    files: tuple[str, ...]
    change_pct: float
    ci_pct: tuple[float, float]
    share: float | None  # fraction of the whole change; None when there was none
    ambiguous_with: tuple[str, ...]
    compared_with: str  # the good-like commit it was confirmed against
    confirmed: bool
    confirmation: ComparisonRecord
    via_merge: str | None = None
    posterior: float | None = None
    range_posterior: float | None = None
    size_p: float | None = None  # P(step >= the minimum change | the confirmation)
    # Its estimate is below min_change_pct: a step in the indifference zone (between
    # ignore_below_pct and the minimum), named because the search put the change here.
    below_minimum: bool = False
    revert: RevertRecord | None = None
    reproduce: str = ""
    # From a runner that inspects the built kernels (runners' `evidence`): metric -> (before,
    # after) for those that changed ({} when none did), or why there is no diff.
    static_diff: Mapping[str, tuple[int, int]] | None = None
    static_diff_unavailable: str | None = None
    # The group's culprit (BisectResult.culprits): every member it moved, largest change first.
    # () in a member's own list (MemberResult.culprits), where the member is the one it moved.
    members: tuple[MemberChange, ...] = ()
    # The dependencies this commit rolls (a submodule's pin), each with the search of its own
    # range inside (the chain: roll -> the dependency's commit); () for any other commit.
    rolls: tuple[RollRecord, ...] = ()


@dataclass(frozen=True)
class MemberChange:
    """What one culprit did to one member of the group: its own estimate, CI and posterior."""

    benchmark: str
    config: Mapping[str, str]
    change_pct: float
    ci_pct: tuple[float, float]
    posterior: float | None
    confirmed: bool
    below_minimum: bool = False
    share: float | None = None  # of that member's whole change

    @property
    def label(self) -> str:
        return member_label(self.benchmark, self.config)


def member_label(benchmark: str, config: Mapping[str, str]) -> str:
    """`gemm` or `gemm[dtype=bf16,gpu=H100]` (outcome.Member.label, from a document's fields)."""
    return benchmark if not config else benchmark + "[" + ",".join(f"{k}={v}" for k, v in sorted(config.items())) + "]"


@dataclass(frozen=True)
class RollRecord(DependencyRoll):
    """One dependency a culprit rolls (its path, repository and pins, how they relate: the roll's
    one record, core/model.DependencyRoll, whose fields it writes as they are) and the bisection
    of old..new (first parent) inside it, with the superproject held at the roll's parent. A
    roll that is not forward was not searched: `why` says so, `status` is None."""

    status: Status | None = None  # of the search inside the dependency
    range_commits: int = 0
    total_change_pct: float | None = None  # new pin against old, the superproject at the parent
    total_ci_pct: tuple[float, float] | None = None
    culprits: tuple[CulpritRecord, ...] = ()  # commits of the dependency
    unresolved: tuple[UnresolvedRange, ...] = ()
    commits: tuple[CommitRow, ...] = ()
    build_failures: tuple[BuildFailure, ...] = ()
    builds: int = 0
    samples: int = 0
    reproduce: str = ""  # the bisection of the roll alone, which descends into it again


@dataclass(frozen=True)
class BuildInfo:
    ok: bool
    cached: bool
    reason: str
    log: str
    how: BuildHow = BuildHow.CLEAN  # how it was built and what the compiler cache served it
    cache: CacheServed = CacheServed()
    note: str = ""  # why it is not what the recipe asked first (core/model.BuildRecord)


@dataclass(frozen=True)
class CommitRow:
    commit: str
    subject: str
    role: Role
    verdict: Verdict  # relative to the range
    verdict_vs_reference: Verdict
    reference: str | None
    samples: int
    median: float | None
    build: BuildInfo | None = None
    failed_runs: tuple[str, ...] = ()
    nodes: Mapping[str, int] = field(default_factory=dict)  # usable runs per node (slurm: where it ran)
    quantiles: tuple[float, ...] | None = None  # at result.writer.QUANTILE_PROBS
    sample_values: tuple[float, ...] = ()


@dataclass(frozen=True)
class BuildFailure:
    commit: str
    subject: str
    reason: str
    log: str
    log_tail: str


# The smallest range that holds the change of an inconclusive outcome, and why: the search's own
# record (core/model.Unresolved), written as it is.
UnresolvedRange = Unresolved


@dataclass(frozen=True)
class DriftRecord:
    commit: str
    role: DriftRole
    blocks: int
    change_pct: float


@dataclass(frozen=True)
class Settings:
    alpha: float
    beta: float
    min_rounds: int
    max_rounds: int
    min_change_pct: float
    reps: int
    seed: int
    executor: str
    jobs: int = 1  # the probes: commits proposed per search step (`--probes`); the key every schema wrote
    verify: VerifyMode = VerifyMode.CONFIRM
    search: SearchMethod = SearchMethod.SEQUENTIAL  # `[search] method` (schema 2 knew only the sequential one)
    ignore_below_pct: float | None = None  # a step this small is never named; None: no zone (the sequential search)
    futility: bool = False  # tests stopped for futility (`[search] futility`); results before it ran every test to its cap


@dataclass(frozen=True)
class RecipeRef:
    path: str
    name: str
    sha256: str


@dataclass(frozen=True)
class Tool:
    name: str
    version: str


@dataclass(frozen=True)
class Machine:
    """Where it ran; gathered at the edge (result/gather.py), never by the writer."""

    hostname: str
    platform: str
    cpu: str
    cpus: int | None
    python: str
    user: str


@dataclass(frozen=True)
class Environment:
    """`gpu`: the GPU(s) the samples came from (open-ended keys: name, driver, cuda, clocks...);
    `fingerprint`: the environment where the work ran (core/environment.py; None before schema 5
    or when none was read); `extra`: anything else a layer recorded, shown as it is. In JSON one
    flat object."""

    gpu: tuple[Mapping[str, Any], ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    fingerprint: Fingerprint | None = None


@dataclass(frozen=True)
class ExecutorInfo:
    """Where builds and runs happened: the executor's kind and its own typed description of it
    (`Executor.describe`, evaluate/executors/base.py), in the field named after the kind; the
    others are None. In JSON one flat object: `name` beside the description's keys."""

    name: ExecutorKind
    local: LocalDescription | None = None
    docker: DockerDescription | None = None
    slurm: SlurmDescription | None = None

    @classmethod
    def of(cls, name: ExecutorKind, description: ExecutorDescription | None) -> ExecutorInfo:
        """None (nothing described, as in a simulation): the kind's empty description, which is
        also what its JSON (`{"name": ...}`) reads back as."""
        described = description if description is not None else DESCRIPTIONS[name]()
        if not isinstance(described, DESCRIPTIONS[name]):
            raise TypeError(f"a {name} executor described itself as {type(described).__name__}")  # a bug
        return cls(
            name,
            local=described if isinstance(described, LocalDescription) else None,
            docker=described if isinstance(described, DockerDescription) else None,
            slurm=described if isinstance(described, SlurmDescription) else None,
        )

    @property
    def description(self) -> ExecutorDescription | None:
        return {ExecutorKind.LOCAL: self.local, ExecutorKind.DOCKER: self.docker, ExecutorKind.SLURM: self.slurm}[self.name]


@dataclass(frozen=True)
class SmallerStepRecord:
    """A confirmed step below the minimum change: reported apart, never a culprit."""

    commit: str
    compared_with: str
    change_pct: float | None
    ci_pct: tuple[float, float] | None
    size_p: float | None


# Two builds whose artifacts differ only by bytes that are no code (a reproducibility trap): the
# evaluation's own record (core/model.ArtifactNote), written as it is (each trap as its value).
ArtifactNoteRecord = ArtifactNote


@dataclass(frozen=True)
class PhaseTimesRecord:
    """Wall seconds per phase; decide is attrib's own overhead. A reading of the evaluation's
    running `PhaseTimes` (rounded, a group's members' summed, the overhead per comparison in
    place of the count), not its copy: docs/architecture.md, "In memory and on disk"."""

    build: float = 0.0
    measure: float = 0.0
    decide: float = 0.0
    decide_per_comparison: float = 0.0
    build_check: float = 0.0  # of `build`: the end check's clean builds of the culprits' ends (issue 31)


@dataclass(frozen=True)
class DetectedChange:
    """A change point in nightly history that this bisection was queued for (daemon/nightly.py)."""

    project: str
    series: str
    before: str
    after: str
    direction: ChangeDirection
    change_pct: float
    ci_pct: tuple[float, float]
    p_value: float
    url: str
    # The series itself, for the report's text plot: each night's value in first-parent order
    # (at most SERIES_POINTS, the latest) and the position of the first night after the change.
    series_values: tuple[float, ...] = ()
    change_at: int | None = None
    # The environment keys that differ between the nights on either side (`compiler nvcc
    # 12.4.131 -> 12.6.85`; history/environment.py), "" when none: code and environment changed together.
    environment: str = ""


@dataclass(frozen=True)
class MemberResult:
    """One member of a group: what a bisection of it alone reports (its own status, culprits,
    commits, comparisons...), measured on the group's builds and rounds. The fields that are
    the same for the whole group (builds, settings, machine, ...) stay on the BisectResult."""

    benchmark: str
    config: Mapping[str, str]
    status: Status
    culprits: tuple[CulpritRecord, ...]
    commits: tuple[CommitRow, ...]
    samples: int
    unit: str
    direction: Direction
    total_change_pct: float
    total_ci_pct: tuple[float, float]
    min_change_pct: float
    ignore_below_pct: float | None
    comparisons: tuple[ComparisonRecord, ...]
    notes: tuple[Note, ...]
    unresolved: tuple[UnresolvedRange, ...]
    drift: tuple[DriftRecord, ...]
    excluded_samples: Mapping[str, int]
    rounds: int
    reproduce: str
    error: str | None = None
    smaller_steps: tuple[SmallerStepRecord, ...] = ()
    same_artifact: Mapping[str, str] = field(default_factory=dict)
    samples_saved_estimate: int = 0
    out_of_time: bool = False
    blocks: BlockChoice | None = None
    remainder: Remainder | None = None  # status partial: what the culprits leave, undecided (schema 6)

    @property
    def label(self) -> str:
        return member_label(self.benchmark, self.config)


# The fields a member shares with a single bisection's result, by name (the lead member's are
# the BisectResult's own): what BisectResult.view and the schema-3 migration carry across.
MEMBER_FIELDS = ("status", "culprits", "commits", "samples", "unit", "direction", "total_change_pct", "total_ci_pct",
                 "comparisons", "notes", "unresolved", "drift", "excluded_samples", "rounds", "reproduce", "error",
                 "smaller_steps", "same_artifact", "samples_saved_estimate", "out_of_time", "blocks",
                 "remainder")  # fmt: skip


@dataclass(frozen=True)
class BisectResult:
    status: Status
    repo: str
    good: str
    bad: str
    benchmark: str
    culprits: tuple[CulpritRecord, ...]
    commits: tuple[CommitRow, ...]
    builds: int
    samples: int
    wall_s: float
    unit: str
    direction: Direction
    total_change_pct: float
    total_ci_pct: tuple[float, float]
    range_commits: int
    builds_fresh: int
    builds_cached: int
    build_failures: tuple[BuildFailure, ...]
    comparisons: tuple[ComparisonRecord, ...]
    notes: tuple[Note, ...]  # what the search noticed, as data (report/sentences words them)
    unresolved: tuple[UnresolvedRange, ...]
    drift: tuple[DriftRecord, ...]
    excluded_samples: Mapping[str, int]
    rounds: int
    reproduce: str
    settings: Settings
    recipe: RecipeRef
    executor: ExecutorInfo
    tool: Tool
    machine: Machine
    workdir: str
    environment: Environment = field(default_factory=Environment)
    error: str | None = None  # status error: what went wrong
    detected: tuple[DetectedChange, ...] = ()  # set when the job came from nightly history
    # Where the work went (what was not measured and why):
    smaller_steps: tuple[SmallerStepRecord, ...] = ()
    untouched: tuple[str, ...] = ()  # commits touching none of [search] paths: never built
    same_artifact: Mapping[str, str] = field(default_factory=dict)  # candidate -> byte-identical commit
    artifacts: Mapping[str, str] = field(default_factory=dict)  # commit -> artifact digest
    artifact_notes: tuple[ArtifactNoteRecord, ...] = ()
    samples_saved_estimate: int = 0
    phase_times_s: PhaseTimesRecord = field(default_factory=PhaseTimesRecord)
    out_of_time: bool = False  # the --budget ran out before everything was settled
    blocks: BlockChoice | None = None  # adaptive blocks: the samples per run chosen, and why
    # Schema 6: status partial: what the named culprits leave of the whole change, undecided at
    # this noise, and what would settle it (the lead member's; each member has its own)
    remainder: Remainder | None = None
    # Schema 4: every member of the group (one for a single benchmark), in the order asked. The
    # fields above that describe one benchmark's measurements are the lead member's (the one
    # `benchmark` names: the largest change of the group's outcome); `status` and `culprits`
    # are the group's.
    members: tuple[MemberResult, ...] = ()

    kind = ResultKind.BISECT

    @property
    def group(self) -> bool:
        return len(self.members) > 1

    def view(self, member: MemberResult) -> BisectResult:
        """The result as a bisection of `member` alone would have written it (a group of one):
        what a report per member renders."""
        settings = replace(
            self.settings, min_change_pct=member.min_change_pct, ignore_below_pct=member.ignore_below_pct
        )
        own = {name: getattr(member, name) for name in MEMBER_FIELDS}
        own["culprits"] = tuple(replace(c, members=(member_change(c, member),)) for c in member.culprits)
        return replace(self, **own, benchmark=member.label, settings=settings, members=(member,))


def member_change(c: CulpritRecord, member: MemberResult) -> MemberChange:
    """A member's own culprit record, as the line the group's culprit lists for it."""
    return MemberChange(
        member.benchmark,
        dict(member.config),
        c.change_pct,
        c.ci_pct,
        c.posterior,
        c.confirmed,
        c.below_minimum,
        c.share,
    )


@dataclass(frozen=True)
class CompareResult:
    """`attrib compare`: one sequential test of a candidate against a reference."""

    benchmark: str
    comparison: ComparisonRecord
    # What makes a comparison a pair of history points (history/attrib_result.py): the unit,
    # the direction and each side's median (sha -> value); empty in documents written before.
    unit: str = ""
    direction: Direction | None = None
    medians: Mapping[str, float] = field(default_factory=dict)
    # where both sides ran (core/environment.py); None before schema 5 or when none was read
    environment: Fingerprint | None = None

    kind = ResultKind.COMPARE


Result = BisectResult | CompareResult
