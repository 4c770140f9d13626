"""attrib's own overhead per candidate: everything but the build and the benchmark run.

    .venv/bin/python benchmarks/overhead.py [--trials 20]

Runs the real engine (attrib.simulation.run_simulated) on simulated histories of 200 commits
whose builds and runs cost (almost) nothing, and reads the evaluation's phase clock
(Outcome.times): `decide` is every second spent in comparisons outside the runner, i.e. the
statistics, the search and the bookkeeping. Target (issue 12): under 1 s per candidate.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from attrib.simulation import NoiseModel, linear_history, run_simulated

TARGET_S = 1.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    args = ap.parse_args()
    per_candidate, per_comparison, walls = [], [], []
    for seed in range(args.trials):
        hist = linear_history(200, {int(37 + seed * 7) % 190 + 5: 3.0}, binary_changes={5, 60, 120})
        start = time.perf_counter()
        out = run_simulated(hist, NoiseModel("gaussian", sigma=0.01), seed, min_change_pct=1.5)
        walls.append(time.perf_counter() - start)
        t = out.outcome.times
        candidates = max(1, out.builds)
        per_candidate.append((t.decide_s + (walls[-1] - t.build_s - t.measure_s - t.decide_s)) / candidates)
        per_comparison.append(t.overhead_per_comparison())
    worst = max(per_candidate)
    print(
        f"attrib overhead per candidate: mean {np.mean(per_candidate) * 1000:.1f} ms, max {worst * 1000:.1f} ms "
        f"(per measured comparison: mean {np.mean(per_comparison) * 1000:.1f} ms); {args.trials} bisections of 200 "
        f"commits, mean wall {np.mean(walls):.2f} s; target < {TARGET_S:g} s: {'met' if worst < TARGET_S else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
