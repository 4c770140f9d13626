"""Where a bisection's samples go, by purpose: the preflight, the search's own blocks, the
confirmations, the remaining-change tests and the extensions, summed over seeded simulated
histories (attrib.simulation) with one step of a stated size. Pure measurement: it runs the
real driver on SimRunner and reads each Comparison's `samples`; the search's blocks are the
rest of what the runner drew.

    .venv/bin/python benchmarks/sample_budget.py                       # N = 100, 2 % step, min 1 %
    .venv/bin/python benchmarks/sample_budget.py --step 1 --min 1       # a step of exactly the minimum
    options: --trials T, --n N, --step PCT, --min PCT, --sigma PCT (per sample), --method M,
             --second PCT (a second step, e.g. 0.75 of the minimum, placed at random)
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attrib.simulation import NoiseModel, linear_history, run_simulated  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--step", type=float, default=2.0, help="the planted step, percent")
    ap.add_argument("--second", type=float, default=0.0, help="a second planted step, percent (0: none)")
    ap.add_argument("--min", type=float, default=1.0, help="min_change_pct")
    ap.add_argument("--sigma", type=float, default=3.16, help="per-sample noise, percent (log sd)")
    ap.add_argument("--method", default="posterior")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    total: Counter[str] = Counter()
    exact = builds = 0
    rng = np.random.default_rng(args.seed)
    for t in range(args.trials):
        at = int(rng.integers(1, args.n + 1))
        steps = {at: args.step}
        if args.second:
            other = int(rng.choice([p for p in range(1, args.n + 1) if p != at]))
            steps[other] = args.second
        hist = linear_history(args.n, steps, frozenset())
        noise = NoiseModel("gaussian", sigma=args.sigma / 100)
        out = run_simulated(hist, noise, args.seed * 1000 + t, min_change_pct=args.min, method=args.method)
        spent: Counter[str] = Counter()
        for comp in out.outcome.comparisons:
            spent[str(comp.purpose)] += comp.samples
        spent["search blocks"] = out.samples - sum(spent.values())
        total.update(spent)
        exact += out.status == "culprit_found" and set(out.culprits) == set(hist.culprits[:1])
        builds += out.builds
        print(f"trial {t}: N={args.n} step at {at}: {out.status} {len(out.culprits)} named, "
              f"{out.samples} samples ({dict(spent)}), {out.builds} builds", flush=True)  # fmt: skip
    print(f"\nper trial ({args.trials} trials, method {args.method}): "
          + ", ".join(f"{k} {v / args.trials:.0f}" for k, v in total.most_common())  # fmt: skip
          + f"; total {sum(total.values()) / args.trials:.0f}; exact {exact}/{args.trials}; "
          f"builds {builds / args.trials:.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
