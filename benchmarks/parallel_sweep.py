"""Rounds needed with K parallel probes (attrib --jobs K), on simulated single-culprit histories.

    .venv/bin/python benchmarks/parallel_sweep.py [--trials 30] [--seed 1]

A round is one measurement pass (the reference and every undecided candidate once); with K
probes per search step the bisection needs fewer rounds in sequence, at the price of more
builds and samples. Prints one row per K; `sweep()` is also called by benchmarks/scenarios.py.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

from attrib.core.stats import TestConfig
from attrib.simulation import NoiseModel, linear_history, run_simulated

KS = (1, 2, 4, 8)


def sweep(trials: int, seed: int, ks: tuple[int, ...] = KS) -> list[dict[str, float]]:
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(trials):
        n = int(rng.integers(60, 200))
        cases.append((n, int(rng.integers(1, n + 1)), float(rng.choice([3.0, 5.0, 8.0])), int(rng.integers(1 << 30))))
    rows = []
    for k in ks:
        rounds, builds, samples, correct = [], [], [], 0
        for n, at, effect, s in cases:
            hist = linear_history(n, {at: effect})
            out = run_simulated(hist, NoiseModel("gaussian", sigma=0.01), s, TestConfig(), probes=k)
            correct += list(out.culprits) == hist.culprits and out.status == "culprit_found"
            rounds.append(out.outcome.rounds)  # type: ignore[attr-defined]
            builds.append(out.builds)
            samples.append(out.samples)
        rows.append(
            {
                "k": k,
                "accuracy": correct / len(cases),
                "rounds": statistics.mean(rounds),
                "builds": statistics.mean(builds),
                "samples": statistics.mean(samples),
            }
        )
    return rows


def table(rows: list[dict[str, float]], trials: int) -> str:
    base = rows[0]["rounds"]
    lines = [
        f"Single culprit, N = 60..200, effects 3-8 %, gaussian 1 % noise, {trials} trials per K.",
        "",
        "| K (--jobs) | exact accuracy | rounds (mean) | rounds vs K=1 | builds | samples |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['k']} | {r['accuracy']:.3f} | {r['rounds']:.1f} | {r['rounds'] / base:.2f}x | "
            f"{r['builds']:.1f} | {r['samples']:.0f} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(table(sweep(args.trials, args.seed), args.trials))
    return 0


if __name__ == "__main__":
    sys.exit(main())
