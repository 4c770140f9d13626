"""Indifference-zone sweep: rounds and verdicts of one comparison at true effects 0..2 delta.

    .venv/bin/python benchmarks/indifference.py [--trials 2000] [--seed 1]

Each trial runs one comparison the way evaluate/evaluation.py does (10-sample blocks of
gaussian noise, sigma 1 % per sample, a faster-half Hodges-Lehmann shift per round, the
pooled sigma of a history of earlier comparisons, `core.sequential.decide` after every round) with
the minimum change delta = 1 %, at a true effect of 0, delta/4, delta/2, 3 delta/4, delta
and 2 delta. "before" is the rule attrib used until issue 12 (Wald's open SPRT, 5..60 rounds,
no size check); "after" is today's default as the search runs it (truncated SPRT, 3 (2 with
known noise)..60 rounds, every 'bad' sized). Prints a markdown table for docs/statistics.md.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from attrib.core.model import Verdict
from attrib.core.sequential import decide
from attrib.core.stats import TestConfig, block_shift, min_change_shift

SIGMA = 0.01
REPS = 10
EFFECTS = (("0", 0.0), ("δ/4", 0.25), ("δ/2", 0.5), ("3δ/4", 0.75), ("δ", 1.0), ("3δ/2", 1.5), ("2δ", 2.0))
RULES = {
    "before": TestConfig(min_rounds=5, known_min_rounds=5, truncate=False),
    "after": TestConfig(size_check=True),
}


def one(rng: np.random.Generator, effect: float, delta: float, config: TestConfig, history) -> tuple[Verdict, int]:
    diffs: list[float] = []
    while True:
        ref = rng.normal(0.0, SIGMA, REPS)
        cand = rng.normal(effect, SIGMA, REPS)
        diffs.append(block_shift(ref, cand))
        d = decide(diffs, history, delta, config)
        if d.verdict is not None:
            return d.verdict, len(diffs)


def sweep(trials: int, seed: int) -> list[tuple[str, str, float, float, int, float, float]]:
    delta = min_change_shift(1.0)
    rng = np.random.default_rng(seed)
    # A bisection's earlier comparisons: 6 sets of 5 paired shifts at no change.
    history = [[block_shift(rng.normal(0, SIGMA, REPS), rng.normal(0, SIGMA, REPS)) for _ in range(5)] for _ in range(6)]
    rows = []
    for rule, config in RULES.items():
        for label, frac in EFFECTS:
            results = [one(rng, frac * delta, delta, config, history) for _ in range(trials)]
            rounds = np.array([n for _, n in results])
            bad = sum(v is Verdict.BAD for v, _ in results) / trials
            inconclusive = sum(v is Verdict.INCONCLUSIVE for v, _ in results) / trials
            rows.append(
                (rule, label, float(rounds.mean()), float(np.percentile(rounds, 95)), int(rounds.max()), bad, inconclusive)
            )
    return rows


def table(rows) -> str:
    out = [
        "| rule | true effect | rounds mean | rounds p95 | rounds max | P(bad) | P(inconclusive) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for rule, label, mean, p95, mx, bad, inc in rows:
        out.append(f"| {rule} | {label} | {mean:.1f} | {p95:.0f} | {mx} | {bad:.3f} | {inc:.3f} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.trials < 1 or not math.isfinite(args.trials):
        print("--trials: expected a positive integer", file=sys.stderr)
        return 2
    print(table(sweep(args.trials, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
