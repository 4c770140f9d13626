"""A fast slice of the scenario benchmark (benchmarks/scenarios.py): attrib's real engine on
simulated histories with known truth, scored the way the benchmark scores it.

The bounds sit below what the full benchmark measures (benchmarks/RESULTS.md) with some room,
so they fail when attrib gets clearly worse, not on the luck of one draw. Every trial is a
pure function of (seed, family, index): the same code always gives the same answer.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "scenarios.py"


def _load():
    if "scenarios" in sys.modules:
        return sys.modules["scenarios"]
    spec = importlib.util.spec_from_file_location("scenarios", _PATH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["scenarios"] = module
    spec.loader.exec_module(module)
    return module


S = _load()
SEED = 3  # not the RESULTS.md seed: a different draw of the same families


def run(family: str, trials: int, strategy: str = "attrib", start: int = 0):
    fam = S.FAMILY[family]
    return [S.run_strategy(S.make_trial(fam, i, SEED), strategy) for i in range(start, start + trials)]


def test_scoring_rule_for_ambiguous_and_several_culprits():
    assert S.exact_match(("c5",), (("c3", "c4"),), {"c4"})
    assert not S.exact_match(("c5",), (("c3", "c4"),), {"c4", "c5"})  # one group, two truths
    assert S.exact_match(("c2", "c9"), ((), ()), {"c2", "c9"})
    assert not S.exact_match(("c2",), ((),), {"c2", "c9"})
    assert S.exact_match((), (), set())
    assert not S.exact_match(("c1",), ((),), set())


@pytest.mark.parametrize("family", [f.name for f in S.FAMILIES if f.group == "null"])
def test_no_false_culprit_without_a_regression(family):
    records = run(family, 25)
    false = [(r.index, r.named) for r in records if r.false_culprit]
    assert not false, f"{family}: culprits named where nothing regressed: {false}"


def test_exact_culprit_at_two_to_three_sigma():
    records = (
        run("sweep 2 sigma", 30)
        + run("sweep 3 sigma", 15)
        + run("lognormal 2 sigma", 10)
        + run("heavy 2 sigma", 10)
        + run("drift 2 sigma", 10)
        + run("bimodal 2 sigma", 10)
    )
    misses = [(r.family, r.index, r.status, r.named, r.truth) for r in records if not r.exact]
    assert len(misses) <= 2, misses  # the full benchmark measures 99.8 % over 1950 trials
    clean = [r for r in records if r.family != "bimodal 2 sigma"]
    over = [(r.family, r.index, r.builds, r.budget) for r in clean if r.builds > r.budget]
    assert len(over) <= 1 and all(b - budget <= 2 for _, _, b, budget in over), over


def test_exact_culprit_at_one_sigma():
    records = run("sweep 1 sigma", 25)
    assert sum(r.exact for r in records) >= 23, [(r.index, r.status, r.named, r.truth) for r in records]


def test_several_culprits_build_breaks_and_crashing_runs():
    records = (
        run("two culprits 2+4 sigma", 6)
        + run("three culprits 2+3+5 sigma", 4)
        + run("break before culprit 3 sigma", 8)
        + run("failed runs 2 sigma", 8)
    )
    misses = [(r.family, r.index, r.status, r.named, r.truth, r.error) for r in records if not r.exact]
    assert len(misses) <= 1, misses


def _shared_slice():
    families = ("sweep 2 sigma", "sweep 3 sigma", "lognormal 2 sigma")
    return {s: [r for f in families for r in run(f, 8, s, start=100)] for s in ("attrib", "pinpoint")}


@pytest.fixture(scope="module")
def shared():
    return _shared_slice()


def test_as_accurate_as_pinpoint_in_fewer_runs_and_bounded_samples(shared):
    a, p = shared["attrib"], shared["pinpoint"]
    assert sum(r.exact for r in a) >= sum(r.exact for r in p)
    # Benchmark invocations: attrib's 10-sample blocks against Pinpoint's 1-value attempts.
    assert sum(r.runs for r in a) < sum(r.runs for r in p)
    # Samples: attrib draws about 4-5x Pinpoint's here since issue 12 (8-9x before; RESULTS.md);
    # guard against it growing back.
    assert sum(r.samples for r in a) <= 7 * sum(r.samples for r in p)


@pytest.mark.xfail(
    strict=True,
    reason="target not met: attrib draws ~4-5x the samples of the Pinpoint baseline in these families "
    "(benchmarks/RESULTS.md, 'Why targets are missed'); when this passes, remove the xfail",
)
def test_fewer_samples_than_pinpoint(shared):
    assert sum(r.samples for r in shared["attrib"]) < sum(r.samples for r in shared["pinpoint"])


def test_no_step_below_the_minimum_is_named_and_identical_binaries_cost_no_samples():
    small = run("small 1/2 + culprit 2 sigma", 8) + run("small 3/4 + culprit 2 sigma", 8)
    assert not [(r.family, r.index, r.named) for r in small if set(r.named) - set(r.truth)]
    assert sum(r.exact for r in small) >= 14
    same = run("same binary 2 sigma", 10)
    plain = run("sweep 2 sigma", 10)
    assert sum(r.exact for r in same) >= 9
    # 85 % of those commits keep their binary: fewer samples than the same search without it
    assert sum(r.samples for r in same) < sum(r.samples for r in plain)


def test_pinpoint_p_values_follow_scipy():
    import numpy as np
    from baselines import kolmogorov_smirnov_p, mann_whitney_p
    from scipy.stats import ks_2samp, mannwhitneyu

    rng = np.random.default_rng(0)
    for _ in range(50):
        x, y = rng.normal(0, 1, 12), rng.normal(0.8, 1, 20)
        assert mann_whitney_p(x, y) == pytest.approx(mannwhitneyu(x, y, method="asymptotic").pvalue, abs=1e-12)
        # Pinpoint's own KS port uses a small-sample factor scipy does not: close, not equal.
        assert kolmogorov_smirnov_p(x, y) == pytest.approx(ks_2samp(x, y, method="asymp").pvalue, abs=0.06)
