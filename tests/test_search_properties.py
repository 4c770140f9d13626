"""Property tests of the pure search (hypothesis): any history, any skips, any evidence."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from attrib.core.model import Verdict
from attrib.core.search import boundary, change_posterior, next_probe, posterior_quantiles


@st.composite
def histories(draw):
    n = draw(st.integers(min_value=1, max_value=120))
    culprit = draw(st.integers(min_value=1, max_value=n))
    broken = draw(st.sets(st.integers(min_value=1, max_value=n - 1), max_size=max(0, min(10, n - 1)))) if n > 1 else set()
    return n, culprit, broken


@given(histories())
@settings(max_examples=300, deadline=None)
def test_exact_verdicts_always_bracket_the_culprit(history):
    n, culprit, broken = history
    verdicts: list[Verdict | None] = [Verdict.GOOD, *([None] * (n - 1)), Verdict.BAD]
    probes = 0
    while (p := next_probe(verdicts)) is not None:
        assert verdicts[p] is None, "never probes a commit twice"
        verdicts[p] = Verdict.SKIP if p in broken else (Verdict.BAD if p >= culprit else Verdict.GOOD)
        probes += 1
        assert probes <= n
    b = boundary(verdicts)
    if culprit in broken:
        # an unbuildable culprit is unknowable: it must be among the ambiguous ones
        assert culprit in b.ambiguous
    else:
        assert b.first_bad == culprit
        assert all(verdicts[i] is Verdict.SKIP for i in b.ambiguous)
    if not broken:
        assert probes <= max(1, math.ceil(math.log2(n)))


@given(
    st.integers(min_value=1, max_value=60),
    st.lists(st.tuples(st.integers(min_value=0, max_value=60), st.floats(min_value=-40, max_value=40)), max_size=12),
)
@settings(max_examples=300, deadline=None)
def test_posterior_is_a_distribution_over_candidates(n, tests):
    post = change_posterior(n, [(min(p, n), llr) for p, llr in tests])
    assert len(post) == n + 1 and post[0] == 0.0
    assert abs(sum(post) - 1.0) < 1e-9
    assert all(p >= 0 for p in post)


@given(st.integers(min_value=2, max_value=80), st.integers(min_value=1, max_value=8))
@settings(max_examples=200, deadline=None)
def test_quantile_probes_are_distinct_open_positions(n, k):
    post = change_posterior(n, [])
    pool = list(range(1, n))
    chosen = posterior_quantiles(post, k, pool)
    assert chosen == sorted(set(chosen))
    assert set(chosen) <= set(pool)
    assert len(chosen) == min(k, len(pool))
