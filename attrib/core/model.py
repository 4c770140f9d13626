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


class DecisionRule(StrEnum):
    """Which rule settled a comparison (docs/statistics.md)."""

    SPRT = "sprt"  # the likelihood ratio crossed one of Wald's boundaries
    TRUNCATION = "truncation"  # the truncation point: the fixed-sample rule decided
    CAP = "cap"  # max_rounds came first (noise too high for this minimum change): inconclusive
    # at max_rounds, the fixed-sample test of "no step beyond the zone's lower edge" rejected at
    # level alpha: bad (sequential.final_look)
    FINAL_LOOK = "final_look"
    FUTILITY = "futility"  # it could no longer reach either boundary by its cap: inconclusive at once
    SAME_ARTIFACT = "same_artifact"  # identical artifacts: the equal commit's verdict, no samples
    BUDGET = "budget"  # the time budget ran out first: inconclusive
    UNTESTABLE = "untestable"  # a build or the benchmark failed: skip


class Status(StrEnum):
    """Outcome of a whole bisection. Exit codes live in cli/guard.py."""

    CULPRIT_FOUND = "culprit_found"
    # culprits named, but what they leave of the whole change could not be decided and its
    # interval reaches the minimum: another culprit may be left (`Remainder` says how much)
    PARTIAL = "partial"
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


class Purpose(StrEnum):
    """Why a comparison was run: the search reads verdicts only from the purposes that place a
    commit (probe, retest, extend); the others confirm, verify or answer `attrib compare`."""

    PREFLIGHT = "preflight"  # bad against good: is there anything to find?
    PROBE = "probe"  # a search step: the candidate against the segment's reference
    RETEST = "retest"  # a probe again, after a confirmation disagreed with it
    EXTEND = "extend"  # an inconclusive probe at the boundary, continued past the cap
    CONFIRM = "confirm"  # the boundary directly: culprit^ against culprit
    REMAINING = "remaining"  # is bad still worse than the latest culprit?
    REVERT = "revert"  # bad against bad-with-the-culprit-reverted
    COMPARE = "compare"  # `attrib compare`

    @property
    def places_commit(self) -> bool:
        return self in (Purpose.PROBE, Purpose.RETEST, Purpose.EXTEND)


class RevertStatus(StrEnum):
    """What reverting a culprit on top of bad showed."""

    RECOVERED = "recovered"  # bad is worse than bad-with-the-revert: the culprit did it
    NOT_RECOVERED = "not_recovered"
    INCONCLUSIVE = "inconclusive"
    CONFLICT = "conflict"  # the revert does not apply
    BUILD_FAILED = "build_failed"
    UNAVAILABLE = "unavailable"  # nothing here can make revert commits


class UnresolvedCause(StrEnum):
    """Why an outcome stops short of a single confirmed culprit (the report words each one)."""

    NOT_CLEARLY_WORSE = "not_clearly_worse"  # preflight hit its cap: bad is not clearly worse
    UNDECIDED_AT_CAP = "undecided_at_cap"  # commits at the boundary stayed inconclusive
    NOT_MEASURED = "not_measured"  # the search stopped after too many inconclusive tests
    UNBUILDABLE = "unbuildable"  # commits at the boundary cannot be built or run
    NOT_CONFIRMED = "not_confirmed"  # the direct comparison of the boundary did not say bad
    OUT_OF_TIME = "out_of_time"  # the --budget ran out; rounds = comparisons left, seconds = their estimate


@dataclass(frozen=True)
class Cause:
    """One structured reason an outcome is unresolved: data, never a sentence."""

    kind: UnresolvedCause
    commits: tuple[str, ...] = ()
    rounds: int = 0
    change_pct: float | None = None
    verdict: Verdict | None = None
    seconds: float | None = None  # OUT_OF_TIME: estimated time to settle what is open


@dataclass(frozen=True)
class TextCause:
    """A cause as sentences, from a schema-1 document (written before causes were structured)."""

    why: str
    resolve: str
    kind: str = "text"


@dataclass(frozen=True)
class Unresolved:
    """An inconclusive outcome's smallest range that holds the change, and why it is open: one
    record for the search's outcome and the result (result/types.UnresolvedRange names it there);
    a search writes `Cause`s, a schema-1 document read back holds `TextCause`s."""

    last_good: str
    first_bad: str
    commits: tuple[str, ...]  # the candidates inside, ending with first_bad
    causes: tuple[Cause | TextCause, ...]


class NoteKind(StrEnum):
    """Something the search met on the way that the reader should know (report/sentences words each)."""

    NO_COMMIT_TOUCHES = "no_commit_touches"  # [search] paths: no commit after commits[0] touches `paths`
    REMAINDER_UNDECIDED = "remainder_undecided"  # is commits[0] worse than commits[1] (a culprit)? undecided
    SMALLER_STEP = "smaller_step"  # commits[0] is a step below the minimum change; value = P(>= minimum)
    STOPPED_PROBING = "stopped_probing"  # `count` inconclusive probes after commits[0]: the range stays open
    NOT_CONFIRMED = "not_confirmed"  # the step commits[1] -> commits[0] was not confirmed (`verdict`)
    CONFIRMATION_DISAGREED = "confirmation_disagreed"  # commits[1] -> commits[0]: the search went on
    INSIDE_BREAK = "inside_break"  # `commits` lie between two commits that do not build, with nothing
    # built between them: taken to be inside that build break, skipped and not built
    POSITION_NOT_HELD = "position_not_held"  # commits[1] -> commits[0], confirmed provisionally (the noise
    # not yet known): with the confirmation's rounds the posterior no longer held it; the search went on
    OUT_OF_TIME = "out_of_time"  # `count` commits open after commits[0]; value = seconds to settle, if known
    MERGE_ITSELF = "merge_itself"  # the merge commits[0] causes it: its second parent alone does not
    # the culprits found account for the whole change: what remains is below the minimum at
    # P >= 1 - beta (value = its upper bound in percent), so no further range was searched
    NOTHING_LEFT = "nothing_left"
    # commits[0] is within the minimum of commits[1] (a culprit, or a stretch's good end) by the
    # blocks measured of both (value = the gap's upper bound in percent): nothing between searched.
    # No longer written (the unpaired gap missed a culprit under load: segment/remaining.py); kept
    # so that results that carry it still read and word it
    NOTHING_BETWEEN = "nothing_between"
    # commits[0]'s artifacts built again without the compiler cache differ from what was built with
    # it (the cache served a wrong object): its verdicts came from a binary the tree does not make
    CACHE_MISMATCH = "cache_mismatch"
    # the noise is too high for the minimum change (`noise`: the per-round noise, the rounds a
    # decision needs, the smallest minimum this machine can decide), said once, by whichever
    # test showed it first: the preflight, or a test stopped for futility
    TOO_NOISY = "too_noisy"
    # whether commits[0] is worse than commits[1] cannot be decided at this noise: stopped for
    # futility after `count` rounds; value = the smallest step (percent) the rounds left could
    # still have ruled out
    UNDECIDABLE = "undecidable"
    TEXT = "text"  # a note of a result written before notes were structured (schema <= 2): `text`


@dataclass(frozen=True)
class Note:
    """One thing the search noticed: data, never a sentence (the report words it)."""

    kind: NoteKind
    commits: tuple[str, ...] = ()
    count: int = 0
    value: float | None = None
    verdict: Verdict | None = None
    paths: tuple[str, ...] = ()
    text: str = ""
    noise: NoiseAdvice | None = None  # TOO_NOISY


class Step(StrEnum):
    """What the search is doing now, for progress displays (progress.py words each)."""

    PREFLIGHT = "preflight"  # commits = (bad, good)
    TOO_NOISY = "too_noisy"  # the preflight's noise leaves tests that find no change only the cap: `noise`
    BISECTING = "bisecting"  # `count` commits after commits[0] (the sequential search)
    LOCATING = "locating"  # `count` commits after commits[0] (the posterior search)
    MORE_SAMPLES = "more_samples"  # `count` undecided commits at the boundary get more rounds
    CONFIRMING = "confirming"  # commits = (culprit, the commit it is confirmed against)
    MERGE = "merge"  # commits[0] is a merge: searching the `count` commits it brought in
    ROLL = "roll"  # commits[0] rolls a dependency's pin: searching the `count` commits of it, commits = (roll, old, new)
    REVERT_CHECK = "revert_check"  # commits = (bad, culprit): bad with the culprit reverted
    FINISHED = "finished"  # `status`


@dataclass(frozen=True)
class NoiseAdvice:
    """The preflight's noise against the minimum change: what a test finding no change needs."""

    sigma_pct: float  # per-round noise
    min_change_pct: float
    max_rounds: int
    rounds_needed: int
    resolvable_pct: float  # the smallest minimum change these rounds can settle


@dataclass(frozen=True)
class Remainder:
    """An attribution left partial (Status.PARTIAL): what the named steps leave of the whole
    change (percent of the measured value, with its 95 % interval), undecided at this noise by
    the test of `commits` (is commits[0] still worse than commits[1]?, `rounds` rounds), and what
    would settle it: that many rounds, a machine at most that noisy, or a minimum that large."""

    change_pct: float
    low_pct: float
    high_pct: float
    whole_pct: float  # the whole change (the preflight's estimate)
    share: float  # change over whole, as log shifts: the part of the whole change unexplained
    commits: tuple[str, ...]
    rounds: int
    rounds_needed: int  # a test of that stretch at this noise (the zone's truncation point)
    sigma_pct: float  # the per-round noise measured
    quiet_sigma_pct: float  # the per-round noise at which the extended cap decides it
    resolvable_pct: float  # the smallest minimum change the extended cap decides at this noise


@dataclass(frozen=True)
class Phase:
    """A progress event: which step, about which commits, with the numbers an ETA needs."""

    step: Step
    commits: tuple[str, ...] = ()
    count: int = 0
    elapsed_s: float = 0.0  # time this bisection has spent so far
    per_comparison_s: float | None = None  # its mean time per measured comparison; None before one
    noise: NoiseAdvice | None = None
    status: Status | None = None


class RollRelation(StrEnum):
    """How a roll moves a dependency's pin: only a forward roll has a range to search."""

    FORWARD = "forward"  # the old pin is an ancestor of the new one
    BACKWARD = "backward"  # the new pin is an ancestor of the old one: the roll undoes commits
    DIVERGED = "diverged"  # they share history, but neither contains the other
    UNRELATED = "unrelated"  # no common history: the dependency was replaced
    UNAVAILABLE = "unavailable"  # the dependency's repository or a pin could not be fetched


@dataclass(frozen=True)
class DependencyRoll:
    """A dependency one commit rolls: where it sits, its two pins, how they relate. The one
    record of a roll: what the tree says of it (outcome.RollSource), what searching it found in
    memory (outcome.Roll) and on disk (result/types.RollRecord, these fields and its findings)
    all carry it."""

    path: str  # in the superproject's checkout
    url: str
    old: str
    new: str
    relation: RollRelation
    why: str = ""  # the relation in words, or why the pins could not be had


@dataclass(frozen=True)
class Decided:
    """How one comparison ended, as a progress event carries it (report/sentences.py words it)."""

    rounds: int
    llr: float
    rule: DecisionRule | None = None
    smaller: bool = False  # worse, but below the minimum change
    size_p: float = float("nan")  # P(step >= the minimum), where a size check ran
    reason: str = ""  # a skip's reason
    same_binary_as: str | None = None  # settled with no samples: the byte-identical commit (short sha)


class VerifyMode(StrEnum):
    """How a found culprit is proven (`--verify`)."""

    CONFIRM = "confirm"  # a direct paired comparison culprit^ vs culprit
    REVERT = "revert"  # that, and bad with the culprit reverted must recover


class SearchMethod(StrEnum):
    """How the search walks a range (`[search] method`): the posterior by default; the
    sequential one when no level model may be assumed (segment/sequential_search.py)."""

    SEQUENTIAL = "sequential"  # one sequential test per probe against fresh reference rounds
    POSTERIOR = "posterior"  # one posterior over the change's position, fed every block (core/posterior.py)


class BlockStatistic(StrEnum):
    """How one run's samples are summarised before pairing (docs/statistics.md)."""

    FASTER_HALF = "faster_half"  # interference only slows: the better half is the code's cost
    ALL = "all"


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


class BuildHow(StrEnum):
    """How a build's artifacts came to be (evaluate/build_step.py)."""

    CLEAN = "clean"  # the recipe's commands in a fresh checkout
    INCREMENTAL = "incremental"  # in a build directory carried over from an already-built commit
    PREBUILT = "prebuilt"  # unpacked from an archive the recipe named, nothing compiled


@dataclass(frozen=True)
class CacheServed:
    """What the recipe's compiler cache served one build (evaluate/compiler_cache.py)."""

    tool: str = ""  # the [build] cache it ran under; "" when none
    hits: int = 0  # compilations the cache served
    misses: int = 0  # compilations it ran and stored
    note: str = ""  # why the recipe's cache was not used, or its figures are unknown


@dataclass(frozen=True)
class BuildRecord:
    """One build of one commit, as the builder wrote it down (evaluate/builds.py). It sits here,
    with the rest of the vocabulary, because the progress protocol (events.py) and the records of
    the result name it; only the builder makes one."""

    key: str
    commit: str
    tree: str
    ok: bool
    reason: str  # why it failed; empty when ok
    log_path: str
    checkout: str
    duration_s: float
    cached: bool = False
    artifact: str = ""  # content digest of the [build] artifacts; "" when none are declared
    artifact_files: tuple[tuple[str, str], ...] = ()  # (path, sha256) of each artifact file
    how: BuildHow = BuildHow.CLEAN
    cache: CacheServed = CacheServed()
    note: str = ""  # why it is not what the recipe asked first (no prebuilt archive, an incremental build failed)


class ArtifactTrap(StrEnum):
    """Why two builds of one program differ in bytes but not in code (evaluate/artifacts.py finds them)."""

    TIMESTAMP = "timestamp"  # an embedded build date or time
    BUILD_PATH = "build_path"  # the checkout's own path (each commit is built in its own directory)


@dataclass(frozen=True)
class ArtifactNote:
    """Two builds whose artifacts differ only in bytes that are no code (a reproducibility trap).
    One record for the evaluation that notes it (evaluate/twins.py), the outcome and the result
    (result/types.ArtifactNoteRecord names it there, its traps written as their values)."""

    a: str
    b: str
    traps: tuple[ArtifactTrap, ...]
