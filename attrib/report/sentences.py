"""The words for structured outcomes: why a range stayed open and what would settle it.

The search driver records causes as data (core/model.Cause); this is the one place that turns them
into sentences for people, and the only place that names CLI flags a user could reach for.
"""

from __future__ import annotations

from collections.abc import Sequence

from attrib.core.model import Cause, UnresolvedCause


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


def noise_warning(
    sigma_pct: float, min_change_pct: float, max_rounds: int, rounds_needed: int, resolvable_pct: float
) -> str:
    """Said once the preflight has measured the noise, when a test that finds no change would
    run to the cap: better known before the search than read off a row of inconclusive tests."""
    return (
        f"warning: the preflight's per-round noise is {sigma_pct:.1f} %: at that noise a test that finds no"
        f" {min_change_pct:g} % change may need {rounds_needed} rounds, over --max-rounds {max_rounds}, so some"
        f" tests may end inconclusive; --max-rounds {rounds_needed}, a quieter machine, or a min_change_pct of"
        f" at least {resolvable_pct:.1f} % would let them decide"
    )
