"""The decision rule: its pieces one by one, then the whole sequential test on simulated timings.

The simulations follow the engine's procedure (engine.Bisection.compare): each round measures a
reference block and a candidate block of `reps` samples, reduces them to one paired shift with
block_shift on oriented logs (with the recipe's block statistic: the faster halves by default,
or whole blocks with "all"), pools sigma over the earlier comparisons' diffs and this one's,
and asks sprt for a verdict until it gives one. The truth is known, so the error rates can be
checked against alpha = beta = 0.01 with a margin. Run with -s to see the measured rates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats as sps

from attrib.core.model import DecisionRule, Direction, Verdict
from attrib.core.sequential import sprt
from attrib.core.stats import (
    SIGMA_FLOOR,
    SIGMA_UPPER_QUANTILE,
    block_shift,
    faster_half,
    min_change_shift,
    oriented_logs,
    pooled_sigma,
    resolvable_change,
    shift_estimate,
    size_posterior,
    to_pct,
    truncation_rounds,
)
from attrib.core.stats import TestConfig as SprtConfig  # a name pytest would not take for a test class
from attrib.recipe import BLOCK_STATISTICS, BenchmarkSpec

REPS = 10
# what the engine passes to block_shift unless the recipe says otherwise
DEFAULT_STATISTIC = BenchmarkSpec(name="b", runner="command", command=("b",)).block_statistic
BASE_S = 1.7e-3  # a typical sample: 1.7 ms

# A noise model turns (rng, shape) into positive multiplicative factors around 1.
Noise = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]


def gaussian(sd: float = 0.02) -> Noise:
    return lambda rng, shape: 1.0 + rng.normal(0.0, sd, shape)


def lognormal(sd: float = 0.02) -> Noise:
    return lambda rng, shape: np.exp(rng.normal(0.0, sd, shape))


def bimodal(frac: float = 0.25, slow: float = 1.25, sd: float = 0.01) -> Noise:
    """Interference: a fraction of the repetitions is slowed by a fixed step."""
    return lambda rng, shape: np.exp(rng.normal(0.0, sd, shape)) * np.where(rng.random(shape) < frac, slow, 1.0)


def student_t(sd: float = 0.02, dof: int = 3) -> Noise:
    """Heavy tails: log noise is a t distribution with `dof` degrees of freedom scaled to sd."""
    scale = sd / math.sqrt(dof / (dof - 2))
    return lambda rng, shape: np.exp(scale * rng.standard_t(dof, shape))


def outliers(frac: float = 0.05, factor: float = 3.0, sd: float = 0.02) -> Noise:
    """Occasional 3x samples (a preempted repetition) on top of 2 % log-normal noise."""
    return lambda rng, shape: np.exp(rng.normal(0.0, sd, shape)) * np.where(rng.random(shape) < frac, factor, 1.0)


# Per-sample noise of about 2 % (bimodal: 1 % plus 25 % of samples 25 % slower).
MODELS: dict[str, Noise] = {
    "gaussian": gaussian(),
    "lognormal": lognormal(),
    "bimodal": bimodal(),
    "student_t3": student_t(),
    "outliers_3x": outliers(),
}
SD_2PCT = ("gaussian", "lognormal", "student_t3")  # the models whose per-sample sd is 2 %


@dataclass(frozen=True)
class Rates:
    good: float
    bad: float
    inconclusive: float
    mean_rounds: float
    trials: int


def compare(
    rng: np.random.Generator,
    noise: Noise,
    worse_by: float,
    delta: float,
    history: Sequence[Sequence[float]] = (),
    reps: int = REPS,
    direction: Direction = Direction.LOWER,
    statistic: str = DEFAULT_STATISTIC,
    cand_noise: Noise | None = None,
    config: SprtConfig = SprtConfig(),
) -> tuple[Verdict, list[float]]:
    """One sequential comparison as the engine runs it. `worse_by` is the candidate's true change
    as a fraction (0.05: 5 % worse; negative: better) in the benchmark's own direction."""
    shape = (config.max_rounds, reps)
    factor = 1.0 + worse_by if direction is Direction.LOWER else 1.0 / (1.0 + worse_by)
    ref_blocks = BASE_S * noise(rng, shape)
    cand_blocks = BASE_S * (cand_noise or noise)(rng, shape) * factor
    diffs: list[float] = []
    for ref, cand in zip(ref_blocks, cand_blocks, strict=True):
        diffs.append(block_shift(oriented_logs(ref, direction), oriented_logs(cand, direction), statistic))
        sigma = pooled_sigma([*history, diffs])
        decision = sprt(diffs, delta, sigma, config)
        if decision.verdict is not None:
            return decision.verdict, diffs
    raise AssertionError("sprt gave no verdict at max_rounds")


def simulate(
    name: str,
    noise: Noise,
    worse_by: float,
    trials: int,
    seed: int,
    min_change_pct: float = 2.0,
    with_history: bool = False,
    direction: Direction = Direction.LOWER,
    statistic: str = DEFAULT_STATISTIC,
    cand_noise: Noise | None = None,
) -> Rates:
    rng = np.random.default_rng(seed)
    delta = min_change_shift(min_change_pct)
    counts = dict.fromkeys(Verdict, 0)
    rounds = 0
    for _ in range(trials):
        history: list[list[float]] = []
        if with_history:
            # what the engine has seen before a probe: the preflight of a real 10 % regression
            _, pre = compare(rng, noise, 0.10, delta, direction=direction, statistic=statistic)
            history = [pre] if len(pre) >= 2 else []
        verdict, diffs = compare(
            rng, noise, worse_by, delta, history, direction=direction, statistic=statistic, cand_noise=cand_noise
        )
        counts[verdict] += 1
        rounds += len(diffs)
    rates = Rates(
        good=counts[Verdict.GOOD] / trials,
        bad=counts[Verdict.BAD] / trials,
        inconclusive=counts[Verdict.INCONCLUSIVE] / trials,
        mean_rounds=rounds / trials,
        trials=trials,
    )
    print(
        f"\n[sim] {name:<34} {statistic:<11} worse_by={worse_by:+.3f} min_change={min_change_pct}% "
        f"history={with_history} trials={trials}: GOOD {rates.good:.3f} BAD {rates.bad:.3f} "
        f"INCONCLUSIVE {rates.inconclusive:.3f} mean rounds {rates.mean_rounds:.1f}"
    )
    return rates


# --- the whole rule on simulated data --------------------------------------------------------
# Every model with the engine's default block statistic; the false-culprit rate, which matters
# most, and the 5 % power also with block_statistic = "all".


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("statistic", BLOCK_STATISTICS)
def test_no_change_is_rarely_called_bad(model: str, statistic: str) -> None:
    r = simulate(f"no change / {model}", MODELS[model], 0.0, trials=800, seed=101, statistic=statistic)
    assert r.bad <= 0.03  # alpha = 0.01
    assert r.good >= 0.90


@pytest.mark.parametrize("model", ["gaussian", "bimodal", "outliers_3x"])
def test_no_change_with_history_is_rarely_called_bad(model: str) -> None:
    r = simulate(f"no change / {model}", MODELS[model], 0.0, trials=400, seed=102, with_history=True)
    assert r.bad <= 0.03
    assert r.good >= 0.90


@pytest.mark.parametrize("model", SD_2PCT)
def test_two_sigma_effect_is_called_bad(model: str) -> None:
    # per-sample noise sd 2 %, effect 4 % = 2 sd, minimum change 2 %
    r = simulate(f"2 sd (4 %) / {model}", MODELS[model], 0.04, trials=400, seed=103)
    assert r.bad >= 0.95


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("statistic", BLOCK_STATISTICS)
def test_five_percent_is_called_bad(model: str, statistic: str) -> None:
    r = simulate(f"5 % / {model}", MODELS[model], 0.05, trials=400, seed=104, statistic=statistic)
    assert r.bad >= 0.97


@pytest.mark.parametrize("model", list(MODELS))
def test_minimum_change_is_rarely_called_good(model: str) -> None:
    # exactly the alternative hypothesis: calling it GOOD is the beta error
    r = simulate(f"= min change (2 %) / {model}", MODELS[model], 0.02, trials=500, seed=105)
    assert r.good <= 0.03  # beta = 0.01
    assert r.bad >= 0.90


@pytest.mark.parametrize("model", list(MODELS))
def test_sub_threshold_effect_is_rarely_called_bad(model: str) -> None:
    r = simulate(f"0.5 % / {model}", MODELS[model], 0.005, trials=600, seed=106)
    assert r.bad <= 0.05


@pytest.mark.parametrize("model", list(MODELS))
def test_an_improvement_is_never_called_bad(model: str) -> None:
    r = simulate(f"5 % faster / {model}", MODELS[model], -0.05, trials=200, seed=107)
    assert r.bad == 0.0
    assert r.good >= 0.97


# Noisier benchmarks: 5 % per sample, so that one round's shift is about as noisy as the
# minimum change and the test needs many rounds; the error rates must still hold.
NOISY: dict[str, Noise] = {"gaussian_5pct": gaussian(0.05), "student_t3_5pct": student_t(0.05)}


@pytest.mark.parametrize("model", list(NOISY))
def test_noisy_benchmark_error_rates(model: str) -> None:
    null = simulate(f"no change / {model}", NOISY[model], 0.0, trials=400, seed=108)
    assert null.bad <= 0.03
    at_delta = simulate(f"= min change (2 %) / {model}", NOISY[model], 0.02, trials=400, seed=109)
    assert at_delta.good <= 0.03
    two_sd = simulate(f"2 sd (10 %) / {model}", NOISY[model], 0.10, trials=200, seed=110)
    assert two_sd.bad >= 0.95


def test_higher_is_better_benchmarks() -> None:
    """Throughput: a drop is a regression, a gain is not."""
    noise, higher = lognormal(), Direction.HIGHER
    drop = simulate("throughput -5 %", noise, 0.05, trials=200, seed=111, direction=higher)
    assert drop.bad >= 0.97
    gain = simulate("throughput +5 %", noise, -0.05, trials=200, seed=112, direction=higher)
    assert gain.bad == 0.0 and gain.good >= 0.97
    same = simulate("throughput unchanged", noise, 0.0, trials=400, seed=113, direction=higher)
    assert same.bad <= 0.03 and same.good >= 0.90


def test_intermittent_regression_needs_block_statistic_all() -> None:
    """The documented trade-off: a slowdown that hits only some repetitions (40 % of them, by
    10 %) is looked past by the faster half and found by comparing whole blocks."""
    clean = lognormal(0.01)
    stalls = bimodal(frac=0.4, slow=1.10, sd=0.01)
    half = simulate("intermittent 10 % on 40 %", clean, 0.0, trials=200, seed=114, cand_noise=stalls)
    assert half.bad <= 0.10
    whole = simulate("intermittent 10 % on 40 %", clean, 0.0, trials=200, seed=114, statistic="all", cand_noise=stalls)
    assert whole.bad >= 0.90


# --- oriented_logs and block_shift ------------------------------------------------------------


def test_oriented_logs_make_larger_worse() -> None:
    samples = [1.0, 2.0, 4.0]
    assert np.allclose(oriented_logs(samples, Direction.LOWER), np.log(samples))
    assert np.allclose(oriented_logs(samples, Direction.HIGHER), -np.log(samples))


def test_faster_half_keeps_the_better_half_and_at_least_two() -> None:
    assert faster_half(np.array([5.0, 1.0, 4.0, 2.0, 3.0, 6.0])).tolist() == [1.0, 2.0, 3.0]
    assert faster_half(np.array([5.0, 1.0, 4.0, 2.0, 3.0])).tolist() == [1.0, 2.0, 3.0]  # odd: the middle too
    assert faster_half(np.array([3.0, 1.0, 2.0])).tolist() == [1.0, 2.0]
    assert faster_half(np.array([2.0, 1.0])).tolist() == [1.0, 2.0]
    assert faster_half(np.array([7.0])).tolist() == [7.0]


@pytest.mark.parametrize("statistic", BLOCK_STATISTICS)
def test_block_shift_of_a_pure_shift_is_exact(statistic: str) -> None:
    rng = np.random.default_rng(1)
    ref = rng.normal(0.0, 0.02, REPS)
    assert block_shift(ref, ref + 0.05, statistic) == pytest.approx(0.05, abs=1e-12)
    assert block_shift(ref, ref - 0.03, statistic) == pytest.approx(-0.03, abs=1e-12)
    assert block_shift(ref, ref, statistic) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("statistic", BLOCK_STATISTICS)
def test_block_shift_is_candidate_minus_reference(statistic: str) -> None:
    a, b = np.array([0.0, 0.1, 0.2, 0.3]), np.array([1.0, 1.1, 1.2, 1.3])
    assert block_shift(a, b, statistic) == pytest.approx(1.0)
    assert block_shift(b, a, statistic) == pytest.approx(-1.0)


def test_block_shift_statistics_differ_as_documented() -> None:
    ref = np.zeros(REPS)

    def stalled(k: int) -> np.ndarray:  # k of the 10 repetitions 50 % slower
        return np.log(np.array([1.0] * (REPS - k) + [1.5] * k))

    assert block_shift(ref, stalled(4)) == block_shift(ref, stalled(4), "faster_half") == 0.0  # the default
    assert block_shift(ref, stalled(4), "all") == 0.0  # 60 of 100 pairs are 0: the median too
    # more than half stalled: whole blocks see it, the faster half (5 values, 1 stalled) does not
    assert block_shift(ref, stalled(6), "faster_half") == 0.0
    assert block_shift(ref, stalled(6), "all") == pytest.approx(math.log(1.5))
    # most of the faster half stalled too: both see it
    assert block_shift(ref, stalled(8), "faster_half") == pytest.approx(math.log(1.5))
    assert block_shift(ref, stalled(8), "all") == pytest.approx(math.log(1.5))


@pytest.mark.parametrize("statistic", BLOCK_STATISTICS)
def test_block_shift_shrugs_off_a_minority_of_outliers(statistic: str) -> None:
    rng = np.random.default_rng(2)
    moved = []
    for _ in range(200):
        ref = rng.normal(0.0, 0.02, REPS)
        cand = rng.normal(0.04, 0.02, REPS)
        slow = rng.choice(REPS, size=3, replace=False)  # 3 of 10 samples interfered with
        spoiled, wild = cand.copy(), cand.copy()
        spoiled[slow] += math.log(3.0)  # 3x slower
        wild[slow] += math.log(1000.0)  # 1000x slower
        clean_shift = block_shift(ref, cand, statistic)
        move = block_shift(ref, spoiled, statistic) - clean_shift
        # a mean-based shift would move by 0.3 * log(3) = 0.33; this one moves by a fraction of the
        # sample noise (sd 0.02), and how far the outliers lie does not matter at all
        assert 0.0 <= move < 0.05
        assert block_shift(ref, wild, statistic) == pytest.approx(clean_shift + move)
        moved.append(move)
    print(f"\n[block_shift] {statistic}: 3 outliers in 10 move it by {np.median(moved):.4f} (median)")
    assert float(np.median(moved)) < 0.02
    # one outlier in ten moves it less still
    for ref in rng.normal(0.0, 0.02, (50, REPS)):
        cand = ref.copy()
        cand[0] += math.log(3.0)
        assert block_shift(ref, cand, statistic) == pytest.approx(0.0, abs=0.02)


def test_faster_half_ignores_interference_on_the_candidate() -> None:
    rng = np.random.default_rng(8)
    for _ in range(100):
        ref = rng.normal(0.0, 0.01, REPS)
        cand = ref + 0.02
        hit = cand.copy()
        hit[np.argsort(cand)[-4:]] += 0.3  # the 4 slowest repetitions slowed further
        assert block_shift(ref, hit) == pytest.approx(0.02)
        assert block_shift(ref, hit, "all") > 0.02


# --- pooled_sigma ----------------------------------------------------------------------------


@pytest.mark.parametrize("sets", [[], [[]], [[0.1]], [[0.1], [0.2], [0.3]], [[], [5.0]]])
def test_pooled_sigma_is_infinite_without_two_values_in_a_set(sets: list[list[float]]) -> None:
    assert pooled_sigma(sets) == math.inf


def test_pooled_sigma_is_an_upper_bound_on_the_sample_sd() -> None:
    rng = np.random.default_rng(3)
    for n in (2, 3, 5, 10, 19):  # below 20 residuals nothing is winsorized
        for _ in range(20):
            x = rng.normal(0.0, 0.01, n)
            sd = float(np.std(x, ddof=1))
            got = pooled_sigma([x])
            assert got >= sd
            # exactly the 80 % upper confidence bound of a normal sd
            dof = n - 1
            assert got == pytest.approx(max(sd * math.sqrt(dof / sps.chi2.ppf(SIGMA_UPPER_QUANTILE, dof)), SIGMA_FLOOR))


def test_pooled_sigma_shrugs_off_one_wild_round_among_many() -> None:
    rng = np.random.default_rng(5)
    history = [rng.normal(0.0, 0.006, 10) for _ in range(12)]
    clean = pooled_sigma(history)
    wild = [*history[:-1], np.append(history[-1][:-1], 0.25)]  # one shift 40x the typical one
    assert pooled_sigma(wild) < 2 * clean
    assert float(np.std(np.concatenate(wild), ddof=1)) > 4 * clean  # the plain sd would not


def test_pooled_sigma_covers_the_true_sd_about_80_percent_of_the_time() -> None:
    rng = np.random.default_rng(4)
    trials = 2000
    single = sum(pooled_sigma([rng.normal(0.0, 0.01, 8)]) >= 0.01 for _ in range(trials)) / trials
    # three sets with different means: each is centred on its own mean before pooling
    pooled = (
        sum(
            pooled_sigma([rng.normal(mu, 0.01, n) for mu, n in ((0.0, 3), (0.5, 4), (-2.0, 5))]) >= 0.01
            for _ in range(trials)
        )
        / trials
    )
    print(f"\n[pooled_sigma] coverage of the true sd: single set {single:.3f}, three sets {pooled:.3f}")
    assert 0.75 <= single <= 0.85
    assert 0.75 <= pooled <= 0.85


def test_pooled_sigma_ignores_set_means_and_uses_small_sets() -> None:
    a, b = [0.01, 0.03, 0.02, 0.05], [0.0, -0.02, 0.01]
    assert pooled_sigma([a, b]) == pytest.approx(pooled_sigma([a, [v + 7.0 for v in b]]))
    assert pooled_sigma([a, [1.0]]) == pooled_sigma([a])  # a 1-value set adds no degrees of freedom
    assert pooled_sigma([a, b]) != pooled_sigma([a])


def test_pooled_sigma_floor() -> None:
    assert pooled_sigma([[0.5, 0.5, 0.5]]) == SIGMA_FLOOR
    assert pooled_sigma([[0.5, 0.5]], floor=0.25) == 0.25


# --- sprt ------------------------------------------------------------------------------------

DELTA = min_change_shift(2.0)


def test_config_thresholds() -> None:
    c = SprtConfig()
    assert (c.alpha, c.beta) == (0.001, 0.01)
    assert c.upper == pytest.approx(math.log(0.99 / 0.001))
    assert c.lower == pytest.approx(math.log(0.01 / 0.999))


def test_sprt_waits_for_min_rounds() -> None:
    config = SprtConfig()
    sigma = DELTA / 2
    for n in range(1, config.min_rounds):
        bad = sprt([3 * DELTA] * n, DELTA, sigma, config)
        good = sprt([-DELTA] * n, DELTA, sigma, config)
        assert bad.verdict is None and good.verdict is None
        assert bad.rounds == n
    assert bad.llr > config.upper and good.llr < config.lower  # it would have decided already
    n = config.min_rounds
    assert sprt([3 * DELTA] * n, DELTA, sigma, config).verdict is Verdict.BAD
    assert sprt([-DELTA] * n, DELTA, sigma, config).verdict is Verdict.GOOD
    assert sprt([0.0] * n, DELTA, sigma, config).verdict is Verdict.GOOD


def test_sprt_min_rounds_is_configurable() -> None:
    diffs = [3 * DELTA] * 7
    assert sprt(diffs, DELTA, DELTA, SprtConfig(min_rounds=8)).verdict is None
    assert sprt(diffs, DELTA, DELTA, SprtConfig(min_rounds=7)).verdict is Verdict.BAD


def test_open_sprt_on_the_fence_is_inconclusive_exactly_at_max_rounds() -> None:
    config = SprtConfig(truncate=False)  # Wald's open test: the rule before truncation
    sigma = DELTA
    for n in range(1, config.max_rounds):
        d = sprt([DELTA / 2] * n, DELTA, sigma, config)
        assert d.verdict is None and d.llr == pytest.approx(0.0, abs=1e-9)
    d = sprt([DELTA / 2] * config.max_rounds, DELTA, sigma, config)
    assert d.verdict is Verdict.INCONCLUSIVE
    assert d.rounds == config.max_rounds
    assert sprt([DELTA / 2] * 12, DELTA, sigma, SprtConfig(max_rounds=12, truncate=False)).verdict is Verdict.INCONCLUSIVE


def test_truncated_sprt_decides_on_the_fence_at_the_truncation_point() -> None:
    config = SprtConfig()
    sigma = DELTA / 2
    cut = truncation_rounds(sigma, DELTA, config)
    assert config.min_rounds < cut < config.max_rounds
    for n in range(1, cut):
        assert sprt([DELTA / 2] * n, DELTA, sigma, config).verdict is None
    # the fixed-sample rule's critical value is delta z_a / (z_a + z_b) = 0.57 delta at the defaults
    d = sprt([0.6 * DELTA] * cut, DELTA, sigma, config)
    assert (d.verdict, d.rule, d.rounds) == (Verdict.BAD, DecisionRule.TRUNCATION, cut)
    d = sprt([DELTA / 2] * cut, DELTA, sigma, config)
    assert (d.verdict, d.rule) == (Verdict.GOOD, DecisionRule.TRUNCATION)
    # too noisy for the truncation point to fit under the cap: inconclusive at the cap
    big = DELTA * 3
    assert truncation_rounds(big, DELTA, config) > config.max_rounds
    d = sprt([DELTA / 2] * config.max_rounds, DELTA, big, config)
    assert (d.verdict, d.rule) == (Verdict.INCONCLUSIVE, DecisionRule.CAP)


def test_resolvable_change_is_the_smallest_delta_whose_truncation_fits_under_the_cap() -> None:
    config = SprtConfig()
    for sigma in (0.004, 0.02, 0.05):
        edge = resolvable_change(sigma, config)
        assert truncation_rounds(sigma, edge * 1.01, config) <= config.max_rounds
        assert truncation_rounds(sigma, edge * 0.99, config) > config.max_rounds
    assert resolvable_change(0.02, SprtConfig(max_rounds=240)) == pytest.approx(resolvable_change(0.02, config) / 2)
    assert resolvable_change(math.inf, config) == math.inf


def test_size_check_holds_a_bad_verdict_until_the_size_is_settled() -> None:
    config = SprtConfig().confirming()
    sigma = DELTA / 2
    # a clear 2-delta step: bad, and P(step >= delta) near 1 at once
    d = sprt([2 * DELTA] * 5, DELTA, sigma, config)  # a confirmation keeps 5 rounds
    assert d.verdict is Verdict.BAD and d.size_p > 0.95
    # a step of exactly 0.8 delta: bad against 0, but its size stays unsettled for a while
    assert sprt([0.8 * DELTA] * 6, DELTA, sigma, config).verdict is None
    cut = truncation_rounds(sigma, DELTA, config)
    d = sprt([0.8 * DELTA] * cut, DELTA, sigma, config)
    # a smaller step, decided at the truncation point: not worse by the minimum change
    assert d.verdict is Verdict.GOOD and d.smaller and d.size_p < 0.5


def test_size_posterior_is_a_flat_prior_on_a_positive_effect() -> None:
    assert size_posterior([1.0] * 4, 1.0, 1.0) == pytest.approx(0.5 / sps.norm.cdf(2.0))
    assert size_posterior([], 1.0, 1.0) != size_posterior([], 1.0, 1.0)  # nan
    assert size_posterior([-5.0] * 100, 1.0, 1.0) == pytest.approx(0.0, abs=1e-12)


def test_sprt_without_a_finite_sigma_keeps_measuring() -> None:
    assert sprt([], DELTA, 0.01, SprtConfig()).verdict is None
    d = sprt([1.0] * 10, DELTA, math.inf, SprtConfig())
    assert d.verdict is None and d.llr == 0.0


def test_sprt_llr_is_walds_normal_llr() -> None:
    rng = np.random.default_rng(5)
    sigma = 0.01
    diffs = rng.normal(0.01, sigma, 6)  # well inside the clipping range
    expected = float(np.sum(sps.norm.logpdf(diffs, DELTA, sigma) - sps.norm.logpdf(diffs, 0.0, sigma)))
    assert sprt(diffs, DELTA, sigma, SprtConfig()).llr == pytest.approx(expected)


def test_one_wild_round_cannot_decide_alone() -> None:
    config = SprtConfig()
    sigma = DELTA
    quiet = [0.0] * (config.min_rounds - 1)
    d = sprt([*quiet, 1000 * DELTA], DELTA, sigma, config)
    assert d.verdict is not Verdict.BAD
    # the wild round counts as delta + 3 sigma at most
    cap = DELTA / sigma**2 * (sum(quiet) + DELTA + 3 * sigma - config.min_rounds * DELTA / 2)
    assert d.llr == pytest.approx(cap)
    d = sprt([*[DELTA] * (config.min_rounds - 1), -1000 * DELTA], DELTA, sigma, config)
    assert d.verdict is not Verdict.GOOD


# --- shift_estimate --------------------------------------------------------------------------


def test_shift_estimate_of_nothing() -> None:
    e = shift_estimate([])
    assert e.n == 0 and math.isnan(e.shift) and math.isnan(e.low) and math.isnan(e.high)


def test_shift_estimate_of_a_constant() -> None:
    e = shift_estimate([0.03] * 12)
    assert (e.shift, e.low, e.high, e.n) == pytest.approx((0.03, 0.03, 0.03, 12))


def test_shift_estimate_resists_an_outlier() -> None:
    rng = np.random.default_rng(6)
    d = list(rng.normal(0.02, 0.005, 15))
    clean = shift_estimate(d)
    d[0] = 5.0
    spoiled = shift_estimate(d)
    assert abs(spoiled.shift - clean.shift) < 0.005
    assert spoiled.high < 0.1


@pytest.mark.parametrize("dist", ["normal", "student_t3"])
def test_shift_estimate_ci_covers_the_true_shift(dist: str) -> None:
    rng = np.random.default_rng(7)
    trials, true, covered, widths = 1000, 0.03, 0, []
    for _ in range(trials):
        n = int(rng.integers(10, 21))
        noise = rng.normal(0.0, 0.01, n) if dist == "normal" else 0.01 * rng.standard_t(3, n)
        e = shift_estimate(true + noise)
        assert e.low <= e.shift <= e.high and e.n == n
        covered += e.low <= true <= e.high
        widths.append(e.high - e.low)
    coverage = covered / trials
    print(f"\n[shift_estimate] {dist}: 95 % CI coverage {coverage:.3f}, median width {np.median(widths):.4f}")
    assert 0.90 <= coverage <= 0.99


# --- to_pct and min_change_shift -------------------------------------------------------------


def test_to_pct_lower_is_better() -> None:
    assert to_pct(math.log(1.05), Direction.LOWER) == pytest.approx(5.0)
    assert to_pct(math.log(0.8), Direction.LOWER) == pytest.approx(-20.0)
    assert to_pct(0.0, Direction.LOWER) == 0.0


def test_to_pct_higher_is_better() -> None:
    # a worse (positive) oriented shift is a fall of the measured value itself
    assert to_pct(math.log(1.05), Direction.HIGHER) == pytest.approx((1 / 1.05 - 1) * 100)
    assert to_pct(math.log(1.05), Direction.HIGHER) < 0
    assert to_pct(-math.log(1.25), Direction.HIGHER) == pytest.approx(25.0)
    assert to_pct(0.0, Direction.HIGHER) == 0.0


@pytest.mark.parametrize("statistic", BLOCK_STATISTICS)
def test_to_pct_round_trips_measured_ratios(statistic: str) -> None:
    ref = np.array([2.0, 2.0, 2.0, 2.0])
    cand = ref * 1.25  # the measured value is 25 % higher
    for direction in Direction:
        shift = block_shift(oriented_logs(ref, direction), oriented_logs(cand, direction), statistic)
        assert to_pct(shift, direction) == pytest.approx(25.0)


def test_min_change_shift() -> None:
    assert min_change_shift(2.0) == pytest.approx(math.log(1.02))
    assert to_pct(min_change_shift(2.0), Direction.LOWER) == pytest.approx(2.0)
    assert min_change_shift(10.0) > min_change_shift(2.0) > 0


def test_size_log_odds_is_finite_at_certainty():
    from attrib.core.stats import size_log_odds

    assert size_log_odds(1.0) == 50.0 and size_log_odds(0.0) == -50.0
    assert size_log_odds(1.0 - 1e-17) == 50.0  # rounds to 1.0: the daemon crashed here
    assert abs(size_log_odds(0.5)) < 1e-12 and size_log_odds(0.9) == pytest.approx(math.log(9.0))
    assert math.isnan(size_log_odds(math.nan))
