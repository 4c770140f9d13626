"""Which commit to evaluate next, and where the boundary is: pure functions over verdict lists.

A *segment* is a list of positions 0..n along a linear chain of commits. Position 0 is the
reference (known good-like), position n the known bad-like end; positions in between are
candidates, each with a verdict or None (untested). The culprit of a segment is the first
bad-like position; skip and inconclusive positions between the last good-like one and it
make the answer ambiguous, and the search says so instead of picking one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .model import Verdict

UNDECIDED = (Verdict.SKIP, Verdict.INCONCLUSIVE)


@dataclass(frozen=True)
class Boundary:
    last_good: int
    first_bad: int
    ambiguous: tuple[int, ...]  # skip/inconclusive positions strictly between the two


def boundary(verdicts: Sequence[Verdict | None]) -> Boundary:
    """First BAD position, the last GOOD one before it, and what lies untestable between."""
    if not verdicts or verdicts[-1] is not Verdict.BAD:
        raise ValueError("a segment ends with a bad-like position")
    first_bad = next(i for i, v in enumerate(verdicts) if i > 0 and v is Verdict.BAD)
    last_good = max(i for i in range(first_bad) if i == 0 or verdicts[i] is Verdict.GOOD)
    ambiguous = tuple(i for i in range(last_good + 1, first_bad) if verdicts[i] in UNDECIDED)
    return Boundary(last_good, first_bad, ambiguous)


def next_probe(verdicts: Sequence[Verdict | None]) -> int | None:
    """The untested position closest to the middle of the open interval, or None when done."""
    b = boundary(verdicts)
    open_positions = [i for i in range(b.last_good + 1, b.first_bad) if verdicts[i] is None]
    if not open_positions:
        return None
    middle = (b.last_good + b.first_bad) / 2
    return min(open_positions, key=lambda i: (abs(i - middle), i))
