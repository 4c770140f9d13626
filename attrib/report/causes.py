"""Why an inconclusive range is not pinned down, and what would settle it, in words.

The engine records structured causes (core.model.Cause); the sentences, and the CLI flags they
name, belong to the report: the engine knows nothing of the command line.
"""

from __future__ import annotations

from attrib.core.model import Cause, UnresolvedCause
from attrib.result.types import Settings, TextCause, UnresolvedRange


def _shas(commits: tuple[str, ...]) -> str:
    return ", ".join(a[:10] for a in commits)


def _why(c: Cause, u: UnresolvedRange, s: Settings) -> str:
    n = len(c.commits)
    match c.kind:
        case UnresolvedCause.NOT_CLEARLY_WORSE:
            measured = f" (measured {c.change_pct:+.2f} %)" if c.change_pct is not None else ""
            return f"bad is not clearly worse than good by {s.min_change_pct:g} % after {c.rounds} rounds{measured}"
        case UnresolvedCause.UNDECIDED_AT_CAP:
            return f"{n} commit(s) stayed inconclusive at the cap"
        case UnresolvedCause.NOT_MEASURED:
            return f"{n} commit(s) were not measured: the search stopped at too many inconclusive tests"
        case UnresolvedCause.UNBUILDABLE:
            return f"{n} commit(s) cannot be built or run"
        case UnresolvedCause.NOT_CONFIRMED:
            verdict = c.verdict.value if c.verdict is not None else "not decided"
            return f"the step {u.last_good[:10]} -> {u.first_bad[:10]} was not confirmed ({verdict})"


def _resolve(c: Cause, s: Settings) -> str:
    more_rounds = f"--max-rounds {2 * s.max_rounds}"
    match c.kind:
        case UnresolvedCause.NOT_CLEARLY_WORSE:
            return (
                f"more rounds ({more_rounds}); or, if a change this small does not matter, nothing: "
                "it is below the recipe's min_change_pct"
            )
        case UnresolvedCause.UNDECIDED_AT_CAP:
            return f"more samples for {_shas(c.commits)} ({more_rounds})"
        case UnresolvedCause.NOT_MEASURED:
            return "less noise (quieter machine, more reps) or a larger min_change_pct, then bisect this range"
        case UnresolvedCause.UNBUILDABLE:
            return f"a fixed build of {_shas(c.commits)}"
        case UnresolvedCause.NOT_CONFIRMED:
            return "more rounds for the confirmation, or a larger min_change_pct if the step is small"


def why_text(u: UnresolvedRange, s: Settings) -> str:
    return "; ".join(c.why if isinstance(c, TextCause) else _why(c, u, s) for c in u.causes)


def resolve_text(u: UnresolvedRange, s: Settings) -> str:
    return "; ".join(c.resolve if isinstance(c, TextCause) else _resolve(c, s) for c in u.causes)
