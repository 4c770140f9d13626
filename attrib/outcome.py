"""What a bisection returns: its culprits, smaller steps, open ranges and everything measured.

Plain records of the search layer; result/writer.py turns an `Outcome` into the versioned
result. The commit graph the search walks is named here too (`CommitGraph`), with the
`Reverter` a revert check needs: the driver and the segment searches share them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from attrib.core.blocks import BlockChoice
from attrib.core.model import (
    ArtifactNote,
    CommitInfo,
    DependencyRoll,
    Note,
    Remainder,
    RevertStatus,
    Status,
    Unresolved,
    Verdict,
)
from attrib.evaluate.records import CommitRecord, Comparison, Drift, PhaseTimes
from attrib.evaluate.twins import Builder
from attrib.recipe import member_label


class CommitGraph(Protocol):
    """The commit graph the search walks (git, or a simulated history)."""

    def info(self, sha: str) -> CommitInfo: ...
    def first_parent_chain(self, good: str, bad: str) -> list[str]: ...
    def merge_base(self, a: str, b: str) -> str: ...


@dataclass(frozen=True)
class RollSource:
    """A dependency one commit rolls (`roll`), and for a forward roll what searching it needs:
    the dependency's own commit graph, a builder that builds the superproject fixed at the
    roll's parent with the dependency at a candidate, and the same for the dependencies inside
    it (recursion)."""

    roll: DependencyRoll
    graph: CommitGraph | None = None
    builder: Builder | None = None
    inner: Dependencies | None = None


class Dependencies(Protocol):
    """The dependencies a commit rolls (evaluate/rolls.py; none for a tree without them)."""

    def rolls(self, sha: str) -> list[RollSource]: ...


# Makes a commit that reverts `culprit` on top of `onto`; None when the revert conflicts.
Reverter = Callable[[str, str], "CommitInfo | None"]


@dataclass(frozen=True)
class RevertCheck:
    """bad with the culprit reverted on top, compared with bad itself."""

    status: RevertStatus
    reverted: str | None  # sha of the revert commit (made in the work dir's mirror)
    comparison: Comparison | None  # candidate = bad, reference = the reverted build
    detail: str = ""


@dataclass(frozen=True)
class Culprit:
    commit: str
    last_good: str  # the good-like commit it was confirmed against (its parent unless skips)
    ambiguous_with: tuple[str, ...]
    confirmation: Comparison
    posterior: float = math.nan  # P(the change is exactly this commit | all measurements)
    range_posterior: float = math.nan  # P(it is this commit or one it is ambiguous with)
    via_merge: str | None = None  # set when found inside a merge's second-parent line
    revert: RevertCheck | None = None
    rolls: tuple[Roll, ...] = ()  # the dependencies this commit rolls, each searched or said why not

    @property
    def confirmed(self) -> bool:
        return self.confirmation.verdict is Verdict.BAD

    @property
    def size_p(self) -> float:
        """P(this step >= the minimum change | its confirmation): part of `posterior`."""
        return self.confirmation.size_p


@dataclass(frozen=True)
class SmallerStep:
    """A confirmed step the data put below the minimum change: reported, never a culprit."""

    commit: str
    last_good: str
    confirmation: Comparison  # its estimate is the step's size
    size_p: float  # P(step >= the minimum change): below 1/2


@dataclass(frozen=True)
class OutOfTime:
    """The budget ran out inside a segment: positions (in [reference, *chain]) of the smallest
    range it proved to hold the change."""

    last_good: int
    first_bad: int


# What searching one segment gives: its culprit, a smaller step, or the range the budget left open.
Found = Culprit | SmallerStep | OutOfTime


@dataclass(frozen=True)
class Roll:
    """A culprit's roll of one dependency, and what searching the dependency's range found
    (`outcome`: a whole bisection of old..new inside it; None when the roll is not forward)."""

    roll: DependencyRoll
    outcome: Outcome | None = None


@dataclass(frozen=True)
class Outcome:
    status: Status
    good: str
    bad: str
    culprits: tuple[Culprit, ...]
    preflight: Comparison
    comparisons: tuple[Comparison, ...]
    verdicts: dict[str, tuple[str, Verdict]]  # sha -> (reference sha, latest verdict against it)
    commits: dict[str, CommitRecord]
    order: tuple[str, ...]  # every commit of the range in history order (merge lines inlined)
    notes: tuple[Note, ...]
    unresolved: tuple[Unresolved, ...] = ()
    drift: tuple[Drift, ...] = ()
    rounds: int = 0  # measurement rounds, in sequence: what parallel probing shortens
    smaller_steps: tuple[SmallerStep, ...] = ()
    untouched: tuple[str, ...] = ()  # [search] paths: commits touching none of them, never built
    artifact_notes: tuple[ArtifactNote, ...] = ()  # artifacts differing only by a timestamp/path
    samples_saved: int = 0  # estimate: samples the same-artifact verdicts did not draw
    times: PhaseTimes = field(default_factory=PhaseTimes)
    out_of_time: bool = False  # the budget ended the search
    blocks: BlockChoice | None = None  # the samples per run the search chose (adaptive blocks)
    remainder: Remainder | None = None  # Status.PARTIAL: what the culprits leave, undecided


@dataclass(frozen=True)
class Member:
    """One benchmark of a group, with its configuration where it has one."""

    benchmark: str
    config: tuple[tuple[str, str], ...] = ()  # sorted (key, value) pairs; () when it has none

    @property
    def label(self) -> str:
        return member_label(self.benchmark, self.config)


@dataclass(frozen=True)
class GroupOutcome:
    """A bisection of several members over one range: each member's own Outcome, as a bisection of
    it alone would report it (its own status, culprits with their confirmations, preflight,
    verdicts, commits), measured on shared builds and rounds."""

    good: str
    bad: str
    members: tuple[tuple[Member, Outcome], ...]  # in the order asked
