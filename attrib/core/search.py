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

from attrib.core.model import Verdict

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


def change_posterior(
    n: int,
    tests: Sequence[tuple[int, float]],
    steps: Sequence[tuple[int, int, float]] = (),
) -> list[float]:
    """Posterior over where the change is in a segment of positions 0..n.

    Hypothesis k (1..n): positions >= k are bad-like, positions < k good-like; prior uniform.
    `tests` are (position, LLR) of comparisons against the segment's reference, where LLR is
    log f(data | bad-like) / f(data | good-like); `steps` are (a, b, LLR) of direct
    comparisons b vs a, evidence that the change lies in (a, b]. Returns a list of n + 1
    probabilities, index 0 always 0. Untested (skipped) positions share the mass between
    their tested neighbours, which is exactly the ambiguity the report names.
    """
    if n < 1:
        raise ValueError("a segment has at least one candidate position")
    log_post = [0.0] * (n + 1)
    for pos, llr in tests:
        for k in range(1, min(pos, n) + 1):  # hypotheses under which `pos` is bad-like
            log_post[k] += llr
    for a, b, llr in steps:
        for k in range(a + 1, min(b, n) + 1):
            log_post[k] += llr
    top = max(log_post[1:])
    weights = [0.0] + [math.exp(v - top) for v in log_post[1:]]
    total = sum(weights)
    return [w / total for w in weights]


def posterior_quantiles(posterior: Sequence[float], k: int, candidates: Sequence[int]) -> list[int]:
    """Up to k distinct candidate positions at the posterior's quantiles i/(k+1).

    With k parallel workers this tests where the change most likely splits (Flake Aware
    Culprit Finding, ICST 2023); with k = 1 it is the posterior median."""
    pool = sorted(set(candidates))
    if not pool:
        return []
    cdf, acc = [], 0.0
    for p in posterior:
        acc += p
        cdf.append(acc)
    chosen: list[int] = []
    for i in range(1, k + 1):
        q = i / (k + 1)
        target = next((pos for pos, c in enumerate(cdf) if c >= q), len(cdf) - 1)
        # the change at `target` means target-1 is good and target bad: probe just below it
        best = min((p for p in pool if p not in chosen), key=lambda p: (abs(p - (target - 0.5)), p), default=None)
        if best is not None:
            chosen.append(best)
    return sorted(chosen)
