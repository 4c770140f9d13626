"""Adaptive blocks: the samples per run chosen from the first runs (core/blocks.py), on runs
drawn from stated within-run and between-run spreads, and through the real engine on simulated
histories whose runs cost a stated start-up plus a stated time per sample."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from attrib.bisection import bisection
from attrib.codec import decode, encode
from attrib.core.blocks import (
    MAX_REPS_FACTOR,
    MIN_REPS,
    MIN_SAVING,
    BlockChoice,
    BlockReason,
    Run,
    choose_reps,
    time_to_decide,
)
from attrib.core.model import BlockStatistic, SearchMethod, Status
from attrib.core.stats import TestConfig
from attrib.recipe import BenchmarkSpec
from attrib.report.sentences import blocks_text
from attrib.simulation import NoiseModel, SimBuilder, SimRunner, linear_history


def runs(within: float, between: float, reps: int, overhead: float, per_sample: float, n: int = 8, seed: int = 1) -> list[Run]:
    rng = np.random.default_rng(seed)
    out = []
    for commit in ("a", "b"):
        for _ in range(n):
            logs = rng.normal(0.0, within, reps) + rng.normal(0.0, between)
            out.append(Run(commit, tuple(logs), overhead + reps * per_sample, reps * per_sample))
    return out


def test_spread_between_runs_and_a_cheap_start_ask_for_shorter_runs():
    # 2 % between runs, 0.5 % per sample, 10 ms to start, 50 ms per sample: r* = sqrt(v1 c0 / (b^2 c1)) < 1
    choice = choose_reps(runs(0.005, 0.02, 20, 0.01, 0.05), 20, BlockStatistic.ALL)
    assert choice.reason is BlockReason.CHOSEN and choice.reps < 20
    assert choice.saving >= MIN_SAVING


def test_spread_inside_runs_and_a_costly_start_ask_for_longer_runs():
    # nothing between runs, 3 % per sample, 2 s to start a run, 1 ms per sample: one long run
    choice = choose_reps(runs(0.03, 0.0, 10, 2.0, 0.001), 10, BlockStatistic.FASTER_HALF)
    assert choice.reason is BlockReason.CHOSEN and choice.reps > 10
    assert choice.within == pytest.approx(0.03, rel=0.35)


def test_the_chosen_size_is_the_least_predicted_time_and_the_estimates_are_the_stated_spreads():
    within, between, c0, c1 = 0.02, 0.005, 2.0, 0.01
    choice = choose_reps(runs(within, between, 10, c0, c1, n=40), 10, BlockStatistic.ALL)
    assert choice.reason is BlockReason.CHOSEN
    assert choice.within == pytest.approx(within, rel=0.2)
    assert choice.between == pytest.approx(between, rel=0.5)
    assert choice.overhead_s == pytest.approx(c0) and choice.per_sample_s == pytest.approx(c1)
    assert choice.within is not None and choice.between is not None
    v1, b2 = choice.within**2, choice.between**2
    hi = 10 * MAX_REPS_FACTOR
    best = min(range(MIN_REPS, hi + 1), key=lambda r: time_to_decide(r, v1, b2, c0, c1))
    assert abs(choice.reps - best) <= 1
    ideal = math.sqrt(within**2 * c0 / (between**2 * c1))  # 57 with the true spreads: capped
    assert min(hi, ideal / 2) <= choice.reps <= min(hi, ideal * 2), (choice.reps, ideal)


def test_a_size_close_to_the_best_is_kept():
    # r* with the true spreads is 10, the recipe's own size: no change for a predicted sliver
    choice = choose_reps(runs(0.02, 0.02, 10, 1.0, 0.01, n=30), 10, BlockStatistic.ALL)
    assert choice.reason is BlockReason.CLOSE and choice.reps == 10


def test_without_times_or_runs_or_a_resizable_runner_the_size_stays_and_says_why():
    timed = runs(0.01, 0.02, 10, 0.1, 0.01)
    untimed = [Run(r.commit, r.logs, r.duration_s, None) for r in timed]
    assert choose_reps(untimed, 10, BlockStatistic.ALL).reason is BlockReason.NO_COST
    assert choose_reps(timed[:2], 10, BlockStatistic.ALL).reason is BlockReason.TOO_FEW_RUNS
    assert choose_reps(timed, 10, BlockStatistic.ALL, adjustable=False).reason is BlockReason.FIXED
    for reason in BlockReason:  # every reason has words, naming the size it kept or chose
        text = blocks_text(BlockChoice(10, 4 if reason is BlockReason.CHOSEN else 10, reason, 0.01, 0.02, 0.1, 0.01, 0.4))
        assert text.startswith("samples per run:") and ("4 instead of 10" in text) == (reason is BlockReason.CHOSEN)


def test_a_choice_survives_the_result_codec():
    choice = choose_reps(runs(0.005, 0.02, 20, 0.01, 0.05), 20, BlockStatistic.ALL)
    assert decode(BlockChoice, json.loads(json.dumps(encode(choice)))) == choice


BENCH = BenchmarkSpec(name="sim", runner="command", command=("sim", "{reps}"), reps=10, min_change_pct=2.0)


def _bisect(noise: NoiseModel, overhead: float, per_sample: float, seed: int = 5):
    hist = linear_history(32, {20: 4.0})
    runner = SimRunner(hist, noise, seed, reps=10, run_overhead_s=overhead, sample_s=per_sample)
    engine = bisection(hist, SimBuilder(hist), runner, BENCH, TestConfig(), seed, method=SearchMethod.POSTERIOR)
    return hist, runner, engine.run(hist.good, hist.bad)


def test_the_engine_takes_shorter_runs_when_the_spread_is_between_them_and_still_finds_the_culprit():
    noise = NoiseModel("gaussian", sigma=0.002, between=0.01)
    hist, runner, out = _bisect(noise, overhead=0.005, per_sample=0.05)
    assert out.blocks is not None and out.blocks.reason is BlockReason.CHOSEN
    assert out.blocks.reps < 10 and runner.reps == out.blocks.reps
    assert out.status is Status.CULPRIT_FOUND and [c.commit for c in out.culprits] == hist.culprits


def test_the_engine_takes_longer_runs_when_the_spread_is_inside_them_and_still_finds_the_culprit():
    noise = NoiseModel("gaussian", sigma=0.03)
    hist, runner, out = _bisect(noise, overhead=1.0, per_sample=0.001)
    assert out.blocks is not None and out.blocks.reason is BlockReason.CHOSEN and out.blocks.reps > 10
    assert out.status is Status.CULPRIT_FOUND and [c.commit for c in out.culprits] == hist.culprits
    # every block the posterior compared after the choice has the chosen size
    sizes = {r for rec in out.commits.values() for r in rec.block_reps}
    assert out.blocks.reps in sizes


def test_a_runner_that_cannot_change_its_size_keeps_it():
    noise = NoiseModel("gaussian", sigma=0.002, between=0.01)
    hist, runner, out = _bisect(noise, overhead=0.0, per_sample=0.0)  # SimRunner without costs: not resizable
    assert out.blocks is not None and out.blocks.reason is BlockReason.FIXED and runner.reps == 10


def test_the_report_says_a_changed_size_and_keeps_quiet_about_a_kept_one(tmp_path):
    from sim_results import simulated_result

    from attrib.report.markdown import render

    result = simulated_result("culprit", tmp_path)
    chosen = BlockChoice(10, 4, BlockReason.CHOSEN, 0.002, 0.01, 0.005, 0.05, 0.55)
    text = render(replace(result, blocks=chosen))
    assert "samples per run: 4 instead of 10" in text and "about 55% less time to a decision predicted" in text
    assert "10 samples per run (then 4, chosen)" in text
    assert "samples per run:" not in render(replace(result, blocks=replace(chosen, reps=10, reason=BlockReason.FIXED)))


def test_a_recipe_that_pins_its_size_keeps_it(tmp_path):
    from attrib.errors import ConfigError
    from attrib.recipe import load_recipe

    text = (
        'schema = 1\nname = "r"\n[build]\ncommands = ["make"]\n'
        '[[benchmark]]\nname = "b"\nrunner = "command"\ncommand = ["./b", "{reps}"]\nadapt_reps = false\n'
    )
    path = tmp_path / "r.toml"
    path.write_text(text)
    bench = load_recipe(path).benchmarks[0]
    assert bench.adapt_reps is False and BENCH.adapt_reps is True  # the default adapts
    path.write_text(text.replace("adapt_reps = false", 'adapt_reps = "no"'))
    with pytest.raises(ConfigError, match="adapt_reps"):
        load_recipe(path)
    hist = linear_history(32, {20: 4.0})
    noise = NoiseModel("gaussian", sigma=0.002, between=0.01)  # would go to 4 (the test above)
    runner = SimRunner(hist, noise, 5, reps=10, run_overhead_s=0.005, sample_s=0.05)
    pinned = replace(BENCH, adapt_reps=False)
    out = bisection(hist, SimBuilder(hist), runner, pinned, TestConfig(), 5, method=SearchMethod.POSTERIOR).run(hist.good, hist.bad)
    assert out.blocks is not None and out.blocks.reason is BlockReason.PINNED and runner.reps == 10
