"""Which commit to evaluate next, and where the boundary is: pure functions over verdict lists.

A *segment* is a list of positions 0..n along a linear chain of commits. Position 0 is the
reference (known good-like), position n the known bad-like end; positions in between are
candidates, each with a verdict or None (untested). The culprit of a segment is the first
bad-like position; skip and inconclusive positions between the last good-like one and it
make the answer ambiguous, and the search says so instead of picking one.
"""

from __future__ import annotations

import math
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


SKIP_RUN_SCALE = 1.5  # how far (in commits) a build break is expected to reach past a known skip


def buildable_odds(distance: float) -> float:
    """Chance that a commit `distance` away from a known unbuildable one builds.

    Build breaks come in stretches (a break, a few commits, the fix), so the neighbours of a
    skip are poor probes; this prior decays that suspicion with distance."""
    return 1.0 - math.exp(-distance / SKIP_RUN_SCALE)


def _split_bits(i: int, lo: int, hi: int) -> float:
    p = (i - lo) / (hi - lo)
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def next_probe(verdicts: Sequence[Verdict | None]) -> int | None:
    """The untested position with the most expected information, or None when done.

    Expected information = bits of the split it makes x the chance it builds. Without skips
    this is plain bisection (the middle); after a skip it jumps clear of the broken stretch
    instead of walking through it one build at a time."""
    b = boundary(verdicts)
    lo, hi = b.last_good, b.first_bad
    open_positions = [i for i in range(lo + 1, hi) if verdicts[i] is None]
    if not open_positions:
        return None
    skips = [i for i, v in enumerate(verdicts) if v is Verdict.SKIP]
    middle = (lo + hi) / 2

    def value(i: int) -> tuple[float, float, int]:
        odds = buildable_odds(min((abs(i - s) for s in skips), default=math.inf))
        return (-round(_split_bits(i, lo, hi) * odds, 9), abs(i - middle), i)

    return min(open_positions, key=value)
