"""Adaptive blocks against the recipe's fixed samples per run, on simulated histories whose runs
cost a stated start-up plus a stated time per sample and whose noise has a stated spread inside
a run and between runs (issue 19, item 3).

Both arms run attrib's real engine with the posterior search on the same trials (same history,
same seed); the only difference is whether the runner may be resized. Wall time is the
simulated clock: the sum of every run's start-up and samples, what a real machine would spend
measuring (builds are left out: they are the same for both arms up to the search's path).

    python benchmarks/adaptive_blocks.py --trials 10 --out benchmarks/RESULTS-blocks.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scenarios import exact_match, rate, revision  # noqa: E402

from attrib.bisection import bisection  # noqa: E402
from attrib.core.model import SearchMethod  # noqa: E402
from attrib.core.stats import TestConfig  # noqa: E402
from attrib.recipe import BenchmarkSpec  # noqa: E402
from attrib.simulation import NoiseModel, SimBuilder, SimRunner, linear_history  # noqa: E402

REPS = 10  # the recipe's samples per run in every family


@dataclass(frozen=True)
class Family:
    name: str
    within: float  # per-sample sd inside a run (log)
    between: float  # sd of a run's own offset (log)
    overhead_s: float  # start-up of one run
    sample_s: float  # one sample
    why: str
    step_pct: float = 4.0  # the planted regression
    min_change_pct: float = 2.0


FAMILIES = (
    Family("between runs, cheap start", 0.002, 0.01, 0.005, 0.05, "placement/clock spread per process; samples cost more than starting"),
    Family("inside runs, costly start", 0.03, 0.0, 1.0, 0.001, "noisy samples of a quick kernel behind a 1 s start-up (loading, JIT)"),
    Family("balanced", 0.01, 0.003, 0.2, 0.02, "the recipe's 10 is about right: nothing should change"),
    Family("gbench saxpy (issue 19)", 0.05, 0.04, 0.5, 1.5, "the issue's Google Benchmark: 1.5 s a repetition, runs' medians over 16 %"),
    Family("gbench saxpy, 8 % minimum", 0.05, 0.04, 0.5, 1.5, "the same, asked for a change its noise can settle", 16.0, 8.0),
)


@dataclass(frozen=True)
class Record:
    family: str
    index: int
    arm: str
    exact: bool
    status: str
    wall_s: float
    samples: int
    runs: int
    reps: int


def run_one(args: tuple[Family, int, int, bool]) -> Record:
    family, index, seed, adaptive = args
    rng = np.random.default_rng([seed, index, len(family.name)])
    n = int(rng.integers(30, 129))
    at = int(rng.integers(2, n))
    hist = linear_history(n, {at: family.step_pct})
    noise = NoiseModel("gaussian", sigma=family.within, between=family.between)
    trial_seed = int(rng.integers(2**31))
    # Without a per-sample cost the simulated runner is not resizable: the fixed arm.
    runner = SimRunner(
        hist, noise, trial_seed, reps=REPS, run_overhead_s=family.overhead_s, sample_s=family.sample_s if adaptive else 0.0
    )
    bench = BenchmarkSpec(name="sim", runner="command", command=("sim", "{reps}"), reps=REPS, min_change_pct=family.min_change_pct)
    engine = bisection(hist, SimBuilder(hist), runner, bench, TestConfig(), trial_seed, method=SearchMethod.POSTERIOR)
    out = engine.run(hist.good, hist.bad)
    named = tuple(c.commit for c in out.culprits)
    ok = exact_match(named, tuple(c.ambiguous_with for c in out.culprits), set(hist.culprits))
    # the fixed arm's clock: its runs cost the same start-up and samples, it just cannot trade them
    wall = runner.wall_s if adaptive else runner.clock * family.overhead_s + runner.samples * family.sample_s
    return Record(family.name, index, "adaptive" if adaptive else "fixed", ok, out.status.value, wall, runner.samples, runner.clock, runner.reps)


def table(records: list[Record]) -> str:
    lines = [
        "| family | arm | exact % [95 % CI] | median wall s | total wall s | worst trial vs fixed | median samples | median runs | samples per run |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for fam in FAMILIES:
        fixed = {r.index: r for r in records if r.family == fam.name and r.arm == "fixed"}
        for arm in ("fixed", "adaptive"):
            rs = [r for r in records if r.family == fam.name and r.arm == arm]
            worst = max(r.wall_s / fixed[r.index].wall_s for r in rs)
            reps = sorted({r.reps for r in rs})
            shown = ", ".join(map(str, reps)) if len(reps) <= 3 else f"{reps[0]}..{reps[-1]}"
            lines.append(
                f"| {fam.name} | {arm} | {rate(sum(r.exact for r in rs), len(rs))} | {statistics.median(r.wall_s for r in rs):.1f} | "
                f"{sum(r.wall_s for r in rs):.0f} | {worst:.2f}x | {statistics.median(r.samples for r in rs):.0f} | {statistics.median(r.runs for r in rs):.0f} | {shown} |"
            )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    tasks = [(f, i, args.seed, adaptive) for f in FAMILIES for i in range(args.trials) for adaptive in (False, True)]
    start = time.monotonic()
    with ProcessPoolExecutor(args.workers) as pool:
        records = list(pool.map(run_one, tasks))
    took = time.monotonic() - start
    families = "\n".join(
        f"- **{f.name}**: {100 * f.within:g} % per sample inside a run, {100 * f.between:g} % between runs, "
        f"{f.overhead_s:g} s to start a run, {f.sample_s:g} s per sample; step {f.step_pct:g} %, minimum {f.min_change_pct:g} %: {f.why}"
        for f in FAMILIES
    )
    text = (
        "# Adaptive blocks: samples per run chosen from the first runs, against a fixed 10\n\n"
        f"`python benchmarks/adaptive_blocks.py --trials {args.trials} --seed {args.seed}` at {revision()}, "
        f"{args.trials} trials per family and arm, {took:.0f} s. Every trial: one step in 30-128 commits (4 % against a "
        "min_change_pct of 2 unless the family says otherwise), the posterior search; both arms see the same histories and seeds. "
        "Wall time is the simulated clock of the runs (start-up + samples), builds excluded.\n\n"
        f"{families}\n\n{table(records)}\n"
    )
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
