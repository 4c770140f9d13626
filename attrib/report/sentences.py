"""The words for structured outcomes: why a range stayed open, what the search noticed on the
way, what it is doing now, and what would settle it.

The search records causes, notes and progress phases as data (core/model.Cause, Note, Phase);
this is the one place that turns them into sentences for people, and the only place that names
CLI flags a user could reach for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from attrib.core.blocks import MIN_SAVING, BlockChoice, BlockReason
from attrib.core.model import (
    Cause,
    Decided,
    Direction,
    NoiseAdvice,
    Note,
    NoteKind,
    Phase,
    Remainder,
    Step,
    UnresolvedCause,
)
from attrib.core.stats import to_pct


def _shorts(commits: Sequence[str]) -> str:
    return ", ".join(c[:10] for c in commits)


def cause_why(cause: Cause, min_change_pct: float) -> str:
    n = len(cause.commits)
    match cause.kind:
        case UnresolvedCause.NOT_CLEARLY_WORSE:
            measured = f" (measured {cause.change_pct:+.2f} %)" if cause.change_pct is not None else ""
            return f"bad is not clearly worse than good by {min_change_pct:g} % after {cause.rounds} rounds{measured}"
        case UnresolvedCause.UNDECIDED_AT_CAP:
            return f"{n} commit(s) stayed inconclusive at the cap"
        case UnresolvedCause.NOT_MEASURED:
            return f"{n} commit(s) were not measured: the search stopped at too many inconclusive tests"
        case UnresolvedCause.UNBUILDABLE:
            return f"{n} commit(s) cannot be built or run"
        case UnresolvedCause.NOT_CONFIRMED:
            last_good, culprit = cause.commits
            verdict = cause.verdict.value if cause.verdict is not None else "undecided"
            return f"the step {last_good[:10]} -> {culprit[:10]} was not confirmed ({verdict})"
        case UnresolvedCause.OUT_OF_TIME:
            return f"the time budget ran out with {n} commit(s) still open"
    raise ValueError(f"unknown cause {cause.kind!r}")


def cause_resolve(cause: Cause, max_rounds: int, min_change_pct: float | None = None) -> str:
    match cause.kind:
        case UnresolvedCause.NOT_CLEARLY_WORSE:
            if min_change_pct is not None and cause.change_pct is not None and cause.change_pct >= min_change_pct:
                # Measured above the minimum and still undecided: the noise, not the size, kept it
                # open, and "it is below min_change_pct" would be false advice (benchmarks/REAL.md).
                return (
                    f"less noise or more rounds: the measured change is above min_change_pct but the rounds were"
                    f" too noisy to decide it (--max-rounds {max_rounds * 2}, a quieter machine, or more reps)"
                )
            return (
                f"more rounds (--max-rounds {max_rounds * 2}); or, if a change this small does not "
                "matter, nothing: it is below the recipe's min_change_pct"
            )
        case UnresolvedCause.UNDECIDED_AT_CAP:
            return f"more samples for {_shorts(cause.commits)} (--max-rounds {max_rounds * 2})"
        case UnresolvedCause.NOT_MEASURED:
            return "less noise (quieter machine, more reps) or a larger min_change_pct, then bisect this range"
        case UnresolvedCause.UNBUILDABLE:
            return f"a fixed build of {_shorts(cause.commits)}"
        case UnresolvedCause.NOT_CONFIRMED:
            return "more rounds for the confirmation, or a larger min_change_pct if the step is small"
        case UnresolvedCause.OUT_OF_TIME:
            more = f" (about {cause.seconds / 60:.0f} min more)" if cause.seconds is not None else ""
            return f"about {cause.rounds} more comparisons{more}: a larger --budget, then bisect this range"
    raise ValueError(f"unknown cause {cause.kind!r}")


def unresolved_text(causes: Sequence[Cause], min_change_pct: float, max_rounds: int) -> tuple[str, str]:
    """(why, resolve): each cause's sentence, joined as one line each."""
    return (
        "; ".join(cause_why(c, min_change_pct) for c in causes),
        "; ".join(cause_resolve(c, max_rounds, min_change_pct) for c in causes),
    )


def noise_warning(advice: NoiseAdvice) -> str:
    """Said once, by the first test that showed it (the preflight, or a test stopped for
    futility), when a test that finds no change cannot decide by the cap: the per-round noise,
    the rounds a decision would need, and the smallest minimum change this machine decides."""
    a = advice
    return (
        f"warning: the per-round noise is {a.sigma_pct:.1f} %: at that noise a test that finds no"
        f" {a.min_change_pct:g} % change may need {a.rounds_needed} rounds, over --max-rounds {a.max_rounds}, so such"
        f" tests end undecided; the smallest min_change_pct this machine can decide in {a.max_rounds} rounds is"
        f" {a.resolvable_pct:.1f} % (--max-rounds {a.rounds_needed}, a quieter machine, or a min_change_pct of"
        f" at least {a.resolvable_pct:.1f} % would let them decide)"
    )


def remainder_text(r: Remainder, min_change_pct: float, max_rounds: int) -> str:
    """Status partial: what the named culprits leave of the whole change, that it is undecided at
    this noise, and what would settle it (`max_rounds`: the rounds a stretch's test may run, its
    extension included)."""
    share = f", {r.share * 100:.0f} % of it" if math.isfinite(r.share) else ""
    quieter = f"a quieter machine (per-round noise at most {r.quiet_sigma_pct:.1f} %, measured {r.sigma_pct:.1f} %)"
    larger = f", or a min_change_pct of at least {r.resolvable_pct:.1f} %" if math.isfinite(r.resolvable_pct) else ""
    rounds = f"about {r.rounds_needed} rounds for that test (it ran {r.rounds} of the {max_rounds} it may)"
    return (
        f"{r.change_pct:+.1f} % [{r.low_pct:+.1f} %, {r.high_pct:+.1f} %] of the whole change ({r.whole_pct:+.1f} %{share})"
        f" unexplained, undecided at this noise: whether `{r.commits[0][:10]}` is still worse than `{r.commits[1][:10]}`"
        f" by the minimum change ({min_change_pct:g} %) could not be decided, so a further culprit may be left there."
        f" To settle it: {rounds}, {quieter}{larger}"
    )


def note_text(note: Note) -> str:
    """One line of the report's Notes for what the search noticed."""
    c = [x[:10] for x in note.commits]
    match note.kind:
        case NoteKind.NO_COMMIT_TOUCHES:
            return f"no commit after {c[0]} touches {', '.join(note.paths)}"
        case NoteKind.NOTHING_LEFT:
            bound = "" if note.value is None else f" (at most {note.value:+.2f} % at 99 %)"
            return (
                "the culprits found account for the whole change: what remains of the preflight's change"
                f"{bound} is below the minimum, so no further range was searched"
            )
        case NoteKind.NOTHING_BETWEEN:
            bound = "" if note.value is None else f"at most {note.value:+.2f} % (at 99 %)"
            return (
                f"{c[0]} differs from {c[1]} by {bound or 'less than the minimum'}, from the blocks already measured of"
                " both: below the minimum, so the commits between them were not searched"
            )
        case NoteKind.REMAINDER_UNDECIDED:
            return f"whether {c[0]} is worse than {c[1]} stayed undecided; a further small culprit after it cannot be ruled out"
        case NoteKind.SMALLER_STEP:
            size = "" if note.value is None else f" (P(>= minimum) = {note.value:.2f})"
            return f"{c[0]} is a smaller step than the minimum change{size}: not a culprit"
        case NoteKind.STOPPED_PROBING:
            return f"stopped probing after {note.count} inconclusive tests after {c[0]}"
        case NoteKind.NOT_CONFIRMED:
            verdict = f" ({note.verdict.value})" if note.verdict is not None else ""
            return f"the step {c[1]} -> {c[0]} was not confirmed{verdict}"
        case NoteKind.CONFIRMATION_DISAGREED:
            return f"the confirmation of {c[0]} against {c[1]} disagreed with the search that led there; both were measured again and the search went on"
        case NoteKind.INSIDE_BREAK:
            which = c[0] if len(c) == 1 else f"{c[0]}..{c[-1]} ({note.count} commits)"
            return (
                f"{which} not built: between commits that do not build, with nothing built between "
                "them, so taken to be inside the same build break (skipped, like it)"
            )
        case NoteKind.POSITION_NOT_HELD:
            return (
                f"{c[1]} -> {c[0]} was confirmed before the noise was known; with the confirmation's rounds "
                "the change was no longer placed there with 0.99, and the search went on"
            )
        case NoteKind.OUT_OF_TIME:
            cost = "" if note.value is None else f" (~{note.value / 60:.0f} min)"
            return f"the time budget ran out with {note.count} commit(s) open after {c[0]}{cost}"
        case NoteKind.MERGE_ITSELF:
            return f"the merge {c[0]} itself causes the change: its second parent alone does not"
        case NoteKind.CACHE_MISMATCH:
            return (
                f"WARNING: {c[0]} built again clean (no compiler cache, no incremental tree) gives other artifacts"
                " than the build it was measured with: the cache or the reused tree gave a wrong binary, so its"
                " verdicts are not to be trusted; clear the cache (or set incremental = false) and bisect again"
            )
        case NoteKind.TOO_NOISY:
            return noise_warning(note.noise) if note.noise is not None else "the noise is too high for the minimum change"
        case NoteKind.UNDECIDABLE:
            step = "" if note.value is None else f"; only a step of at least {note.value:.1f} % could still have been ruled out"
            return (
                f"whether {c[0]} is worse than {c[1]} cannot be decided at this noise: stopped after {note.count} rounds,"
                f" when the rounds left to the cap could no longer reach a verdict{step}; a further small culprit"
                " between them cannot be ruled out"
            )
        case NoteKind.TEXT:
            return note.text
    raise AssertionError(note.kind)


def decided_text(d: Decided) -> str:
    """Why a comparison ended as it did, in the parentheses of its progress line."""
    if d.same_binary_as is not None:
        return f"same binary as {d.same_binary_as}, no samples"
    rule = f", {d.rule.value}" if d.rule else ""
    rule += f", smaller than the minimum (P(>= min) = {d.size_p:.2f})" if d.smaller else ""
    return d.reason or f"{d.rounds} rounds, LLR {d.llr:+.2f}{rule}"


def clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


def eta_text(phase: Phase) -> str:
    """' (elapsed .., about .. left)' for a search of `count` open commits: about log2 of them
    probes and a confirmation, at this bisection's own mean comparison time."""
    if phase.per_comparison_s is None or phase.count < 1:
        return ""
    left = (math.ceil(math.log2(max(2, phase.count))) + 2) * phase.per_comparison_s
    return f" (elapsed {clock(phase.elapsed_s)}, about {clock(left)} left)"


def phase_text(phase: Phase) -> str:
    """The progress line of a phase."""
    c = [x[:10] for x in phase.commits]
    match phase.step:
        case Step.PREFLIGHT:
            return f"preflight: is {c[0]} worse than {c[1]}?"
        case Step.TOO_NOISY:
            assert phase.noise is not None
            return noise_warning(phase.noise)
        case Step.BISECTING:
            return f"bisecting {phase.count} commits after {c[0]}{eta_text(phase)}"
        case Step.LOCATING:
            return f"locating the change in {phase.count} commits after {c[0]}{eta_text(phase)}"
        case Step.MORE_SAMPLES:
            return f"more samples for {phase.count} inconclusive commit(s) at the boundary"
        case Step.CONFIRMING:
            return f"confirming {c[0]} against {c[1]}"
        case Step.MERGE:
            return f"{c[0]} is a merge: searching the {phase.count} commits it brought in"
        case Step.ROLL:
            return f"{c[0]} rolls a dependency from {c[1]} to {c[2]}: searching its {phase.count} commits"
        case Step.REVERT_CHECK:
            return f"revert check: {c[0]} with {c[1]} reverted"
        case Step.FINISHED:
            return f"finished: {phase.status.value if phase.status else ''}"
    raise AssertionError(phase.step)


def blocks_text(choice: BlockChoice) -> str:
    """What the adaptive block size did, with the spreads and costs it was chosen from."""
    c = choice
    spreads = ""
    if c.within is not None and c.between is not None:
        spreads = f"per-sample spread inside a run {to_pct(c.within, Direction.LOWER):.2f} %, between runs {to_pct(c.between, Direction.LOWER):.2f} %"
    if c.overhead_s is not None and c.per_sample_s is not None:
        spreads += f"; a run costs {c.overhead_s:.3g} s plus {c.per_sample_s:.3g} s per sample"
    spreads = f" ({spreads})" if spreads else ""
    match c.reason:
        case BlockReason.CHOSEN:
            return f"samples per run: {c.reps} instead of {c.reps_before}{spreads}, about {c.saving:.0%} less time to a decision predicted"
        case BlockReason.CLOSE:
            return f"samples per run: kept at {c.reps}{spreads}: no other size predicted at least {MIN_SAVING:.0%} less time"
        case BlockReason.NO_COST:
            return f"samples per run: kept at {c.reps}{spreads}: the samples are not times, so what a run costs beside them is unknown"
        case BlockReason.FIXED:
            return f"samples per run: kept at {c.reps}: this runner cannot be asked for another number"
        case BlockReason.PINNED:
            return f"samples per run: kept at {c.reps}: the recipe pins it (adapt_reps = false)"
        case BlockReason.TOO_FEW_RUNS:
            return f"samples per run: kept at {c.reps}: too few runs before the search to tell the spreads apart"
        case BlockReason.UNNEEDED:
            return (
                f"samples per run: kept at {c.reps}: every commit the search asked was byte-identical to one "
                "already measured, so the search needed no block of its own and no other size was chosen"
            )
    raise AssertionError(c.reason)
