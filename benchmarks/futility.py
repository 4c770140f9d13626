"""The futility rule (issue 34) against today's rule, every test run to its cap, in one run.

    .venv/bin/python benchmarks/futility.py --trials 30 --tests 400 --workers 1 --out FILE

Three tables, each side by side (`futility` = the default, `to the cap` = `[search] futility =
false`):
1. one test (core/sequential.decide, the zone of the posterior search: minimum 2 %, ignore_below
   1 %) at per-round noise 1x, 3x and 6x the minimum, after 40 earlier rounds of history: how
   often it says BAD, GOOD or undecided and in how many rounds, at steps of 0, ignore_below,
   the minimum and 2, 4, 8 times it. alpha is BAD at ignore_below, beta GOOD at the minimum,
   power BAD at the minimum;
2. "the real tree": 8 commits, a +0.7 % step (below ignore_below) at 2, a +17 % culprit at 4 and
   a +8.6 % one at 7, minimum 2 %, 4 samples a run, spread 8.5 % inside a run and 6.9 % between
   runs (per-round noise 12 %, 6x the minimum), the shape and noise of the tree issue 34
   measured; wall time = samples x 1.5 s, that tree's cost per sample;
3. every family of benchmarks/scenarios.py (the posterior search): exact, inconclusive, false
   culprits, samples, and the calibration of the culprits' posterior.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scenarios import FAMILIES, run_all, wilson  # noqa: E402

from attrib.core.sequential import decide  # noqa: E402
from attrib.core.stats import TestConfig, min_change_shift  # noqa: E402
from attrib.simulation import NoiseModel, linear_history, run_simulated  # noqa: E402

DELTA, IGNORE = min_change_shift(2.0), min_change_shift(1.0)
RULES = (("futility", True), ("to the cap", False))
TREE_STEPS = {2: 0.7, 4: 17.0, 7: 8.6}
TREE_NOISE = NoiseModel("gaussian", sigma=0.085, between=0.069)
TREE_REPS = 4
SECONDS_PER_SAMPLE = 1.5
PAIRS = (("attrib-posterior", "attrib-posterior-cap"), ("attrib", "attrib-cap"))  # (futility, to the cap)


def one_test(mu: float, sigma: float, futility: bool, seed: int) -> tuple[str, int]:
    rng = np.random.default_rng([seed, int(mu * 1e5), int(sigma * 1e5)])
    history = [list(rng.normal(0.0, sigma, 40))]
    config = TestConfig(ignore=IGNORE, futility=futility)
    diffs: list[float] = []
    while True:
        diffs.append(float(rng.normal(mu, sigma)))
        d = decide(diffs, history, DELTA, config)
        if d.verdict is not None:
            return d.verdict.value, len(diffs)


def tests_table(n: int) -> list[str]:
    lines = [
        "| per-round noise | step | rule | P(bad) | P(good) | P(undecided) | rounds mean | rounds max |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for noise in (1.0, 3.0, 6.0):
        for label, mu in (("0", 0.0), ("ignore_below", IGNORE), ("minimum", DELTA), ("2x", 2 * DELTA),
                          ("4x", 4 * DELTA), ("8x", 8 * DELTA)):  # fmt: skip
            for name, on in RULES:
                runs = [one_test(mu, noise * DELTA, on, s) for s in range(n)]
                v = Counter(r[0] for r in runs)
                rounds = [r[1] for r in runs]
                lines.append(
                    f"| {noise:g}x | {label} | {name} | {v['bad'] / n:.3f} | {v['good'] / n:.3f} | "
                    f"{v['inconclusive'] / n:.3f} | {np.mean(rounds):.1f} | {max(rounds)} |"
                )
    return lines


def tree_table(trials: int) -> list[str]:
    hist = linear_history(8, TREE_STEPS, small=frozenset({2}))
    truth = tuple(hist.culprits)
    rows, samples = [], {}
    for name, on in RULES:
        outs = [
            run_simulated(hist, TREE_NOISE, s, TestConfig(futility=on), min_change_pct=2.0, reps=TREE_REPS)
            for s in range(trials)
        ]
        named = Counter(o.culprits if o.status == "culprit_found" else ("inconclusive",) for o in outs)
        samples[name] = [o.samples for o in outs]
        mean = float(np.mean(samples[name]))
        rows.append(
            f"| {name} | {trials} | {sum(o.status == 'culprit_found' and o.culprits == truth for o in outs)} | "
            + "; ".join(f"{' '.join(k)}: {v}" for k, v in sorted(named.items()))
            + f" | {mean:.0f} | {mean * SECONDS_PER_SAMPLE / 60:.1f} |"
        )
    ratio = np.mean(samples["futility"]) / np.mean(samples["to the cap"])
    paired = np.median(np.array(samples["futility"]) / np.array(samples["to the cap"]))
    return [
        "| rule | trials | both culprits, nothing else | named (count) | samples, mean | wall at 1.5 s a sample, min |",
        "|---|---:|---:|---|---:|---:|",
        *rows,
        "",
        f"Wall time, futility / to the cap: {ratio:.2f}x of the mean (median of the per-seed ratios {paired:.2f}x); target <= 0.6x.",
    ]


def _posterior_rows(records, strategy):
    return [(p, c in r.truth) for r in records if r.strategy == strategy for c, p in zip(r.named, r.posteriors, strict=False)]


def families_table(records, new: str, old: str) -> list[str]:
    NEW, OLD = new, old  # noqa: N806
    lines = [
        "| family | trials | exact: futility / to the cap | inconclusive | false culprits (null) | samples mean | ratio |",
        "|---|---:|---|---|---|---|---:|",
    ]
    worse = []
    for f in FAMILIES:
        cell = {s: [r for r in records if r.family == f.name and r.strategy == s] for s in (NEW, OLD)}
        if not cell[NEW] or not cell[OLD]:
            continue
        n = len(cell[NEW])
        ex = [sum(r.exact for r in cell[s]) for s in (NEW, OLD)]
        inc = [sum(r.status == "inconclusive" for r in cell[s]) for s in (NEW, OLD)]
        false = [sum(r.false_culprit for r in cell[s]) for s in (NEW, OLD)] if not f.effects else None
        sm = [float(np.mean([r.samples for r in cell[s]])) for s in (NEW, OLD)]
        ratio = sm[0] / sm[1] if sm[1] else float("nan")
        if ex[0] < ex[1] or ratio > 1.0:
            worse.append(f"{f.name} (exact {ex[0]} vs {ex[1]}, samples {ratio:.2f}x)")
        lines.append(
            f"| {f.name} | {n} | {ex[0]} / {ex[1]} | {inc[0]} / {inc[1]} | "
            + (f"{false[0]} / {false[1]}" if false is not None else "n/a")
            + f" | {sm[0]:.0f} / {sm[1]:.0f} | {ratio:.2f} |"
        )
    at_min = {s: [r for r in records if r.strategy == s and r.family.startswith("at the minimum")] for s in (NEW, OLD)}
    lines += ["", "Power at the minimum (families 'at the minimum ...': the true culprit among those named):"]
    for s in (NEW, OLD):
        k = sum(set(r.truth) <= set(r.named) for r in at_min[s])
        lo, hi = wilson(k, len(at_min[s]))
        lines.append(f"- {s}: {k}/{len(at_min[s])} = {100 * k / max(1, len(at_min[s])):.1f} % [{100 * lo:.1f}, {100 * hi:.1f}]")
    lines += ["", "Calibration (culprits named with posterior >= p: named, true, fraction true):", ""]
    lines += ["| posterior >= | futility | to the cap |", "|---|---|---|"]
    for p in (0.5, 0.9, 0.99, 0.999):
        cells = []
        for s in (NEW, OLD):
            sel = [t for q, t in _posterior_rows(records, s) if q >= p]
            cells.append(f"{len(sel)} / {sum(sel)} / {sum(sel) / len(sel):.3f}" if sel else "-")
        lines.append(f"| {p:g} | {cells[0]} | {cells[1]} |")
    lines += ["", "Families less exact or dearer with futility: " + ("; ".join(worse) if worse else "none") + "."]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=30, help="trials per scenario family and of the real tree")
    ap.add_argument("--tests", type=int, default=400, help="single tests per cell of table 1")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--family", action="append", default=None, help="only these scenario families")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--sequential", action="store_true", help="the sequential search's families too")
    ap.add_argument("--part", action="append", choices=("tests", "tree", "families"), default=None,
                    help="only these tables (repeatable; default all)")  # fmt: skip
    args = ap.parse_args()
    start = time.monotonic()
    out = ["## Futility (issue 34): one test, the real tree's shape, every family; futility against to the cap", ""]
    out += [f"Command: `.venv/bin/python benchmarks/futility.py {' '.join(sys.argv[1:])}`", ""]
    parts = set(args.part or ("tests", "tree", "families"))
    if "tests" in parts:
        out += ["### One test", "", *tests_table(args.tests), ""]
    if "tree" in parts:
        out += ["### The real tree's shape and noise", "", *tree_table(args.trials), ""]
    families = [f for f in FAMILIES if not args.family or f.name in args.family]
    for new, old in PAIRS[: 2 if args.sequential else 1] if "families" in parts else ():
        records = run_all(families, {f.name: args.trials for f in families}, args.seed, (new, old), args.workers)
        out += [f"### Every family of benchmarks/scenarios.py: `{new}` against `{old}`", ""]
        out += [*families_table(records, new, old), ""]
    out += [f"Wall time of this run: {time.monotonic() - start:.0f} s, {args.workers} worker(s)."]
    text = "\n".join(out) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
