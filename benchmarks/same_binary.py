"""Same binary, same data (issue 39, point 4): samples of a bisection with `[build] artifacts`
declared on a tree whose binary changes only at the culprit, against the same tree, noise and
seed with no artifacts declared, by attrib's real search and evaluation on simulated histories.

    .venv/bin/python benchmarks/same_binary.py --trials 20 --seed 1

Each trial plants one step of `--step` % (min_change_pct 2) at a random position of a linear
history of `--n` commits, per-sample noise `--sigma` % (log space, gaussian). With artifacts
every commit before the culprit is byte-identical to good and every one from it on to bad: the
search places them from their twins' blocks, and the confirmation of culprit^ against culprit
is the preflight's pair of binaries again. Prints per trial the samples of both and the ratio,
then the median ratio, the ratio of the totals, and how many of each named exactly the culprit.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import zlib

import numpy as np

from attrib.simulation import NoiseModel, linear_history, run_simulated


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--step", type=float, default=4.0, help="the planted step, percent")
    ap.add_argument("--sigma", type=float, default=1.0, help="per-sample noise, percent (log sd)")
    args = ap.parse_args(argv)
    noise = NoiseModel("gaussian", sigma=args.sigma / 100)
    ratios: list[float] = []
    totals = [0, 0]
    exact = [0, 0]
    for trial in range(args.trials):
        rng = np.random.default_rng(zlib.crc32(f"{args.seed}/same-binary/{trial}".encode()))
        at = int(rng.integers(2, args.n))
        seed = int(rng.integers(0, 2**31))
        want = [f"c{at:03d}"]
        art = run_simulated(linear_history(args.n, {at: args.step}, binary_changes=set()), noise, seed)
        plain = run_simulated(linear_history(args.n, {at: args.step}), noise, seed)
        ratios.append(art.samples / plain.samples)
        totals[0] += art.samples
        totals[1] += plain.samples
        exact[0] += list(art.culprits) == want
        exact[1] += list(plain.culprits) == want
        print(f"trial {trial}: culprit at {at}: artifacts {art.samples} samples, none {plain.samples}: {ratios[-1]:.2f}x")
    print(
        f"\n{args.trials} trials, n={args.n}, step {args.step} %, sigma {args.sigma} %: artifacts / none, samples: "
        f"median {statistics.median(ratios):.2f}x, totals {totals[0] / totals[1]:.2f}x; "
        f"exact {exact[0]}/{args.trials} with artifacts, {exact[1]}/{args.trials} without"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
