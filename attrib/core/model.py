"""The vocabulary: verdicts, statuses, and the immutable records that flow between modules."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Verdict(StrEnum):
    """What one evaluation says about a candidate relative to its reference."""

    GOOD = "good"  # no meaningful change from the reference
    BAD = "bad"  # worse than the reference by at least the recipe's minimum change
    SKIP = "skip"  # untestable: did not build or its benchmark did not run
    INCONCLUSIVE = "inconclusive"  # measured, but the sequential test hit its cap


class Status(StrEnum):
    """Outcome of a whole bisection. Exit codes live in cli.py."""

    CULPRIT_FOUND = "culprit_found"
    NOT_REPRODUCED = "not_reproduced"
    INCONCLUSIVE = "inconclusive"
    ERROR = "error"


class JobState(StrEnum):
    """Where a daemon job is. queued and running are active (deduplicated); the rest are final."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"  # a result exists (whatever its status: culprit found, not reproduced...)
    FAILED = "failed"  # no result: bad input found late, a reference that does not build, a crash
    CANCELLED = "cancelled"

    @property
    def active(self) -> bool:
        return self in (JobState.QUEUED, JobState.RUNNING)


class Direction(StrEnum):
    LOWER = "lower"  # lower is better (times)
    HIGHER = "higher"  # higher is better (throughput)


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    tree: str
    subject: str
    author: str
    author_email: str
    date: str  # ISO 8601
    parents: tuple[str, ...]
    files: tuple[str, ...] = field(default=())

    @property
    def short(self) -> str:
        return self.sha[:10]

    @property
    def is_merge(self) -> bool:
        return len(self.parents) > 1


class Purpose(StrEnum):
    """Why a comparison was run: the engine's step that asked for it."""

    PREFLIGHT = "preflight"
    PROBE = "probe"
    RETEST = "retest"
    EXTEND = "extend"
    CONFIRM = "confirm"
    REMAINING = "remaining"
    REVERT = "revert"
    COMPARE = "compare"


class RevertStatus(StrEnum):
    """What reverting a culprit on top of bad showed."""

    RECOVERED = "recovered"
    NOT_RECOVERED = "not_recovered"
    INCONCLUSIVE = "inconclusive"
    CONFLICT = "conflict"
    BUILD_FAILED = "build_failed"
    UNAVAILABLE = "unavailable"


class UnresolvedCause(StrEnum):
    """Why an inconclusive range is not pinned down; the report turns each into a sentence."""

    NOT_CLEARLY_WORSE = "not_clearly_worse"  # the preflight stayed inconclusive
    UNDECIDED_AT_CAP = "undecided_at_cap"
    NOT_MEASURED = "not_measured"  # the search stopped after too many inconclusive tests
    UNBUILDABLE = "unbuildable"
    NOT_CONFIRMED = "not_confirmed"


@dataclass(frozen=True)
class Cause:
    kind: UnresolvedCause
    commits: tuple[str, ...] = ()
    rounds: int = 0
    change_pct: float | None = None
    verdict: Verdict | None = None
