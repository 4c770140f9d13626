"""Search: next_probe and boundary on hand-made verdict lists, and a bisection driven by an oracle."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from attrib.core.model import Verdict
from attrib.core.search import Boundary, boundary, next_probe

G, B, S, INC = Verdict.GOOD, Verdict.BAD, Verdict.SKIP, Verdict.INCONCLUSIVE
_ = None  # untested


def segment(n: int, **known: Verdict) -> list[Verdict | None]:
    """Positions 0..n, position n BAD, others untested unless given as p<i>=verdict."""
    v: list[Verdict | None] = [None] * n + [B]
    for key, verdict in known.items():
        v[int(key[1:])] = verdict
    return v


# --- next_probe ----------------------------------------------------------------------------


def test_first_probe_is_the_middle() -> None:
    assert next_probe(segment(8)) == 4
    assert next_probe(segment(16)) == 8
    assert next_probe(segment(2)) == 1


def test_even_split_ties_go_to_the_lower_position() -> None:
    assert next_probe(segment(9)) == 4  # middle 4.5: 4 and 5 are equally near
    assert next_probe(segment(3)) == 1


def test_probe_moves_into_the_open_half() -> None:
    assert next_probe(segment(8, p4=G)) == 6
    assert next_probe(segment(8, p4=B)) == 2
    assert next_probe(segment(8, p4=G, p6=B)) == 5
    assert next_probe(segment(8, p4=G, p6=G)) == 7


def test_reference_and_end_are_never_probed() -> None:
    assert next_probe([_, B]) is None
    assert next_probe([_, _, B]) == 1
    assert next_probe([G, _, B]) == 1  # a verdict at the reference itself changes nothing


def split_bits(i: int, lo: int, hi: int) -> float:
    p = (i - lo) / (hi - lo)
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def test_a_skip_at_the_middle_sends_the_next_probe_clear_of_it() -> None:
    # build breaks come in stretches: the neighbours of a skip are poor probes
    v = segment(8, p4=S)
    p = next_probe(v)
    assert p is not None and v[p] is None and abs(p - 4) >= 2
    v = segment(64, p32=S)
    p = next_probe(v)
    assert p is not None and abs(p - 32) >= 4
    assert split_bits(p, 0, 64) > 0.95  # ... but it still splits the interval nearly in half
    # a second skip pushes the next probe clear of both
    v[p] = S
    q = next_probe(v)
    assert q is not None and min(abs(q - 32), abs(q - p)) >= 3


def test_inconclusive_is_not_a_build_break() -> None:
    # an inconclusive commit built and ran: its neighbours are fine probes, the nearest one wins
    assert next_probe(segment(8, p4=INC)) == 3
    assert next_probe(segment(8, p4=INC, p3=INC)) == 5
    assert next_probe(segment(8, p4=INC, p3=INC, p5=INC)) == 2


def test_a_skip_far_away_does_not_move_the_probe() -> None:
    assert next_probe(segment(64, p16=G, p48=B, p10=S)) == 32
    assert next_probe(segment(64, p16=G, p48=B, p60=S)) == 32


def test_a_good_moves_the_interval_and_a_skip_does_not() -> None:
    assert boundary(segment(8, p4=S, p2=G)) == Boundary(2, 8, (4,))
    p = next_probe(segment(8, p4=S, p2=G))
    assert p is not None and 2 < p < 8 and p != 4


def test_undecided_only_between_good_and_bad_means_done() -> None:
    v = [_, G, S, INC, S, B, _, _, B]
    assert next_probe(v) is None
    assert boundary(v) == Boundary(last_good=1, first_bad=5, ambiguous=(2, 3, 4))


def test_adjacent_good_and_bad_means_done() -> None:
    v = segment(8, p4=G, p5=B)
    assert next_probe(v) is None
    assert boundary(v) == Boundary(4, 5, ())


def test_positions_after_the_first_bad_are_ignored() -> None:
    v = [_, _, B, _, G, _, B]  # a GOOD after a BAD does not reopen the search
    assert boundary(v) == Boundary(0, 2, ())
    assert next_probe(v) == 1


# --- boundary ------------------------------------------------------------------------------


def test_boundary_of_an_untested_segment() -> None:
    assert boundary(segment(5)) == Boundary(0, 5, ())
    assert boundary([_, B]) == Boundary(0, 1, ())


def test_boundary_uses_the_last_good_before_the_first_bad() -> None:
    assert boundary(segment(10, p2=G, p5=G, p7=B)) == Boundary(5, 7, ())
    # a skip left of the last GOOD is not ambiguous: the GOOD after it settles it
    assert boundary(segment(6, p1=S, p2=G, p3=B)) == Boundary(2, 3, ())


def test_boundary_lists_undecided_positions_between_good_and_bad() -> None:
    b = boundary(segment(10, p3=G, p4=S, p5=_, p6=INC, p7=B))
    assert b == Boundary(3, 7, (4, 6))  # 5 is untested, not undecided
    assert boundary([_, S, B]) == Boundary(0, 2, (1,))


@pytest.mark.parametrize(
    "verdicts",
    [[], [None], [_, _, G], [_, B, S], [_, B, INC], [_, B, _], [G]],
    ids=["empty", "only-reference", "ends-good", "ends-skip", "ends-inconclusive", "ends-untested", "one-good"],
)
def test_boundary_and_next_probe_require_a_bad_end(verdicts: list[Verdict | None]) -> None:
    with pytest.raises(ValueError):
        boundary(verdicts)
    with pytest.raises(ValueError):
        next_probe(verdicts)


# --- a bisection against an oracle ----------------------------------------------------------


def bisect(
    n: int,
    oracle: Callable[[int], Verdict],
    rule: Callable[[list[Verdict | None]], int | None] = next_probe,
) -> tuple[Boundary, list[int]]:
    """Drive next_probe to the end the way the engine does; return the boundary and the probes."""
    verdicts: list[Verdict | None] = [None] * n + [B]
    probes: list[int] = []
    while (pos := rule(verdicts)) is not None:
        assert 0 < pos < n, f"probe {pos} outside the open segment 1..{n - 1}"
        assert verdicts[pos] is None, f"position {pos} probed twice"
        probes.append(pos)
        verdicts[pos] = oracle(pos)
        assert len(probes) <= n
    return boundary(verdicts), probes


def test_exact_oracle_finds_every_culprit_within_log2_probes() -> None:
    worst: dict[int, int] = {}
    for n in range(1, 70):
        for culprit in range(1, n + 1):
            b, probes = bisect(n, lambda i, c=culprit: B if i >= c else G)
            assert b == Boundary(culprit - 1, culprit, ())
            assert len(probes) <= math.ceil(math.log2(n)) + 1
            worst[n] = max(worst.get(n, 0), len(probes))
    # binary search over n candidates needs ceil(log2 n) probes, and bisect should be that good
    assert all(worst[n] <= math.ceil(math.log2(n)) for n in worst), worst


def test_random_chains_with_an_exact_oracle() -> None:
    rng = np.random.default_rng(20240601)
    for _trial in range(400):
        n = int(rng.integers(10, 201))
        culprit = int(rng.integers(1, n + 1))
        b, probes = bisect(n, lambda i, c=culprit: B if i >= c else G)
        assert b.first_bad == culprit and b.last_good == culprit - 1 and b.ambiguous == ()
        assert len(probes) <= math.ceil(math.log2(n)) + 1


def scattered_skips(rng: np.random.Generator, n: int, culprit: int) -> set[int]:
    """A few untestable positions, often right around the culprit."""
    near = rng.integers(max(1, culprit - 3), min(n, culprit + 3), size=int(rng.integers(0, 4)))
    far = rng.integers(1, n, size=int(rng.integers(0, 6)))
    return {int(p) for p in (*near, *far) if 0 < p < n}


def broken_stretch(rng: np.random.Generator, n: int, culprit: int) -> set[int]:
    """One contiguous run of 1..15 commits that do not build (a break and, later, its fix)."""
    length = int(rng.integers(1, 16))
    start = int(rng.integers(1, max(2, n - length)))
    return set(range(start, min(n, start + length)))


@pytest.mark.parametrize("make_skips", [scattered_skips, broken_stretch])
def test_random_chains_with_skips(make_skips: Callable[[np.random.Generator, int, int], set[int]]) -> None:
    rng = np.random.default_rng(7)
    ambiguous_seen, over = 0, []
    for _trial in range(400):
        n = int(rng.integers(10, 201))
        culprit = int(rng.integers(1, n + 1))
        skipped = make_skips(rng, n, culprit)

        def oracle(i: int, c: int = culprit, sk: frozenset[int] = frozenset(skipped)) -> Verdict:
            if i in sk:
                return S
            return B if i >= c else G

        b, probes = bisect(n, oracle)
        assert b.last_good < culprit <= b.first_bad
        assert culprit in (*b.ambiguous, b.first_bad)
        # nothing testable is left between the two ends: the culprit range is as small as it can get
        assert set(b.ambiguous) == set(range(b.last_good + 1, b.first_bad))
        assert set(b.ambiguous) <= skipped
        assert b.first_bad == n or b.first_bad not in skipped
        assert b.last_good == 0 or b.last_good not in skipped
        if not b.ambiguous:
            assert b == Boundary(culprit - 1, culprit, ())
        # steering clear of skips costs a little off-centre splitting, not a lot
        decided = [p for p in probes if p not in skipped]
        over.append(len(decided) - math.ceil(math.log2(n)))
        assert len(decided) <= math.ceil(math.log2(n)) + 3
        ambiguous_seen += bool(b.ambiguous)
    print(f"\n[search] {make_skips.__name__}: decided probes - ceil(log2 n): max {max(over)}, mean {np.mean(over):.2f}")
    assert ambiguous_seen > 10  # the skips did make some answers ambiguous


def nearest_untested(verdicts: list[Verdict | None]) -> int | None:
    """The plain rule, for comparison: the untested commit nearest the middle."""
    b = boundary(verdicts)
    open_positions = [i for i in range(b.last_good + 1, b.first_bad) if verdicts[i] is None]
    middle = (b.last_good + b.first_bad) / 2
    return min(open_positions, key=lambda i: (abs(i - middle), i)) if open_positions else None


def test_a_broken_stretch_away_from_the_culprit_costs_few_builds() -> None:
    """next_probe jumps clear of a build break instead of walking through it one build at a time."""
    rng = np.random.default_rng(11)
    wasted: dict[str, list[int]] = {"next_probe": [], "nearest_untested": []}
    for _trial in range(400):
        n = int(rng.integers(30, 201))
        length = int(rng.integers(2, 16))
        start = int(rng.integers(1, n - length))
        broken = frozenset(range(start, start + length))
        culprit = int(rng.choice([c for c in range(1, n + 1) if c < start or c > start + length]))

        def oracle(i: int, c: int = culprit, sk: frozenset[int] = broken) -> Verdict:
            return S if i in sk else (B if i >= c else G)

        for name, rule in (("next_probe", next_probe), ("nearest_untested", nearest_untested)):
            b, probes = bisect(n, oracle, rule)
            assert b == Boundary(culprit - 1, culprit, ())
            wasted[name].append(sum(p in broken for p in probes))
    mean = {k: float(np.mean(v)) for k, v in wasted.items()}
    print(f"\n[search] builds spent in a broken stretch clear of the culprit (mean): {mean}")
    assert mean["next_probe"] <= 1.0
    assert mean["next_probe"] < 0.7 * mean["nearest_untested"]


def test_change_posterior_follows_the_evidence() -> None:
    from attrib.core.search import change_posterior

    post = change_posterior(8, [(4, -4.6), (5, 4.6), (6, 4.6)], [(4, 5, 10.0)])
    assert post[0] == 0.0 and abs(sum(post) - 1.0) < 1e-12
    assert post[5] > 0.999
    # Without tests there is no evidence: uniform.
    flat = change_posterior(4, [])
    assert flat[1:] == [0.25] * 4
    # Untested positions between a good and a bad test share the mass equally.
    split = change_posterior(10, [(3, -20.0), (7, 20.0)])
    assert [round(p, 6) for p in split[4:8]] == [0.25] * 4


def test_posterior_quantiles_spread_parallel_probes() -> None:
    from attrib.core.search import posterior_quantiles

    uniform = [0.0] + [1 / 63] * 63
    assert posterior_quantiles(uniform, 1, range(1, 63)) == [31]
    three = posterior_quantiles(uniform, 3, range(1, 63))
    assert three == sorted(set(three)) and len(three) == 3
    assert three[0] < 21 < three[1] < 42 < three[2]
    assert posterior_quantiles(uniform, 4, [5, 6]) == [5, 6]
