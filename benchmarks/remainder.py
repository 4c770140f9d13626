"""A stop that never costs a culprit (issue 39, point 2): this tree against another, in one run.

    nice -n 10 .venv/bin/python benchmarks/remainder.py --old /tmp/attrib-old --trials 20 \
        --family-trials 10 --out FILE

`--old DIR` is a source tree of attrib (e.g. `git archive <rev> | tar -x -C DIR`); each side runs
in a subprocess of its own with PYTHONPATH set to its tree, on the same seeds, and the tables put
the two side by side:
0. one remaining-change test (this tree only: core/sequential.decide and core/remainder.py), the zone
   1 % / 2 %, per-round noise 6x and 7x the minimum, after 40 rounds of history, its prior the
   decomposition of a simulated preflight (8 rounds of the whole +27 %) less a confirmation (15
   rounds of +17 %), at steps 0, ignore_below, the minimum, +4.3 % and +8.6 %: P(BAD), P(GOOD),
   P(undecided) and rounds under three rules: `flat` (today: a flat prior, stopped for futility,
   cap 60), `decomposition` (this tree's: the prior, never curtailed while its mean is at least
   the minimum, extended to 120 at the cap then) and `uncurtailed` (no futility, extended to 120
   whenever undecided at the cap: what no stop gives up). Power given up = uncurtailed - rule;
1. "the lrzip shape": 8 commits, a +0.7 % step (below ignore_below) at 2, a +17 % culprit at 4 and
   a +8.6 % one at 7, minimum 2 %, 4 samples a run, at two noises: per-sample 13 % (10.1 % inside a
   run, 8.2 % between runs, the issue's figure) and 10.9 % (8.5 % and 6.9 %, per-round 12 %: the
   real tree's measured noise, benchmarks/futility.py's). Exact: exactly the two culprits named,
   with status culprit_found, or with culprit_found or partial (which names its culprits and
   says what they leave undecided);
2. every family of benchmarks/scenarios.py with the posterior search (`attrib-posterior`):
   exact, inconclusive, partial, false culprits, samples, and the calibration of the posteriors.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from before_after import _exact_by_contract  # noqa: E402

TREE_STEPS = {2: 0.7, 4: 17.0, 7: 8.6}
NOISES = {"13 %": (0.101, 0.082), "10.9 % (per-round 12 %)": (0.085, 0.069)}


def worker(trials: int, family_trials: int, seed: int, families: list[str] | None, strategy: str) -> None:
    """Runs in the subprocess: one JSON record a line, from whichever attrib PYTHONPATH names."""
    sys.path.insert(0, str(HERE))
    from scenarios import FAMILIES, run_all

    from attrib.core.stats import TestConfig
    from attrib.simulation import NoiseModel, linear_history, run_simulated

    hist = linear_history(8, TREE_STEPS, small=frozenset({2}))
    for label, (within, between) in NOISES.items():
        for s in range(trials):
            o = run_simulated(hist, NoiseModel("gaussian", within, between=between), s, TestConfig(), 2.0, reps=4)
            print(json.dumps({"table": "tree", "noise": label, "seed": s, "status": o.status,
                              "culprits": list(o.culprits), "truth": list(hist.culprits), "samples": o.samples}), flush=True)  # fmt: skip
    chosen = [f for f in FAMILIES if families is None or f.name in families]
    if family_trials > 0:
        for r in run_all(chosen, {f.name: family_trials for f in chosen}, seed, (strategy,), 1):
            print(json.dumps({"table": "family", "family": r.family, "index": r.index, "status": r.status,
                              "exact": r.exact, "false": r.false_culprit, "samples": r.samples,
                              "named": list(r.named), "truth": list(r.truth), "zone": list(r.zone),
                              "posteriors": list(r.posteriors)}), flush=True)  # fmt: skip


RULES = ("flat", "decomposition", "uncurtailed")


def one_test(mu: float, sigma: float, rule: str, seed: int, whole: float = math.log(1.27)) -> tuple[str, int]:
    """One remaining-change test at step `mu` under `rule` (see the module doc)."""
    from attrib.core.model import DecisionRule
    from attrib.core.remainder import curtailing, still_unexplained, unexplained
    from attrib.core.sequential import decide
    from attrib.core.stats import TestConfig, min_change_shift

    delta, ignore = min_change_shift(2.0), min_change_shift(1.0)
    rng = np.random.default_rng([seed, int(mu * 1e5), int(sigma * 1e5)])
    history = [list(rng.normal(0.0, sigma, 40))]
    pre, conf = rng.normal(whole - math.log(1.086) + mu, sigma, 8), rng.normal(math.log(1.17), sigma, 15)
    base = TestConfig(ignore=ignore, futility=rule != "uncurtailed")
    config = curtailing(base, unexplained(pre, [conf])) if rule == "decomposition" else base
    diffs: list[float] = []
    while True:
        diffs.append(float(rng.normal(mu, sigma)))
        d = decide(diffs, history, delta, config)
        if d.verdict is None:
            continue
        extend = rule == "uncurtailed" or (rule == "decomposition" and still_unexplained(config, diffs, d.sigma, delta))
        if d.rule is DecisionRule.CAP and extend and config.max_rounds == base.max_rounds:
            config = config.extended()
            continue
        return d.verdict.value, len(diffs)


def tests_table(n: int) -> list[str]:
    from attrib.core.stats import min_change_shift

    delta, ignore = min_change_shift(2.0), min_change_shift(1.0)
    lines = ["| per-round noise | step | rule | P(bad) | P(good) | P(undecided) | rounds mean | rounds max |",
             "|---|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for noise in (6.0, 7.0):
        for label, mu in (("0", 0.0), ("ignore_below", ignore), ("minimum", delta), ("+4.3 %", math.log(1.043)),
                          ("+8.6 %", math.log(1.086))):  # fmt: skip
            for rule in RULES:
                runs = [one_test(mu, noise * delta, rule, s) for s in range(n)]
                v = Counter(r[0] for r in runs)
                rounds = [r[1] for r in runs]
                lines.append(f"| {noise:g}x | {label} | {rule} | {v['bad'] / n:.3f} | {v['good'] / n:.3f} | "
                             f"{v['inconclusive'] / n:.3f} | {np.mean(rounds):.1f} | {max(rounds)} |")  # fmt: skip
    return lines


def side(tree: Path, args: argparse.Namespace) -> list[dict]:
    cmd = [sys.executable, __file__, "--worker", "--trials", str(args.trials), "--family-trials", str(args.family_trials),
           "--seed", str(args.seed), "--strategy", args.strategy,
           *sum((["--family", f] for f in args.family or []), [])]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd=tree).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def tree_rows(recs: dict[str, list[dict]]) -> list[str]:
    lines = ["| per-sample noise | tree | trials | exact, culprit_found | exact, culprit_found or partial | statuses | samples median | mean |",
             "|---|---|---:|---:|---:|---|---:|---:|"]  # fmt: skip
    for noise in NOISES:
        for name, rs in recs.items():
            sel = [r for r in rs if r["table"] == "tree" and r["noise"] == noise]
            if not sel:
                continue
            both = [r["culprits"] == r["truth"] and r["status"] in ("culprit_found", "partial") for r in sel]
            exact = sum(b and r["status"] == "culprit_found" for b, r in zip(both, sel, strict=True))
            st = Counter(r["status"] for r in sel)
            sm = [r["samples"] for r in sel]
            lines.append(f"| {noise} | {name} | {len(sel)} | {exact} | {sum(both)} | "
                         + ", ".join(f"{k} {v}" for k, v in sorted(st.items()))
                         + f" | {statistics.median(sm):.0f} | {statistics.mean(sm):.0f} |")  # fmt: skip
    return lines


def family_rows(recs: dict[str, list[dict]]) -> list[str]:
    (old_name, old), (new_name, new) = recs.items()
    lines = [f"| family | trials | exact {old_name} / {new_name} | exact by the contract | inconclusive | partial | false culprits | samples mean | ratio |",
             "|---|---:|---|---|---|---|---|---|---:|"]  # fmt: skip
    fams = list(dict.fromkeys(r["family"] for r in old if r["table"] == "family"))
    worse = []
    for f in fams:
        a = [r for r in old if r["table"] == "family" and r["family"] == f]
        b = [r for r in new if r["table"] == "family" and r["family"] == f]
        ex = [sum(r["exact"] for r in x) for x in (a, b)]
        # a planted step strictly inside the zone may be named beside the truth (the contract)
        contract = [sum(_exact_by_contract(SimpleNamespace(**r)) for r in x) for x in (a, b)]
        inc = [sum(r["status"] == "inconclusive" for r in x) for x in (a, b)]
        par = [sum(r["status"] == "partial" for r in x) for x in (a, b)]
        fal = [sum(r["false"] for r in x) for x in (a, b)]
        sm = [statistics.mean(r["samples"] for r in x) for x in (a, b)]
        ratio = sm[1] / sm[0] if sm[0] else float("nan")
        if ex[1] < ex[0] or contract[1] < contract[0] or ratio > 1.0:
            worse.append(f"{f} (exact {ex[1]} vs {ex[0]}, by the contract {contract[1]} vs {contract[0]}, samples {ratio:.2f}x)")
        lines.append(f"| {f} | {len(a)} | {ex[0]} / {ex[1]} | {contract[0]} / {contract[1]} | {inc[0]} / {inc[1]} | {par[0]} / {par[1]} | "
                     f"{fal[0]} / {fal[1]} | {sm[0]:.0f} / {sm[1]:.0f} | {ratio:.2f} |")  # fmt: skip
    lines += ["", "Calibration (culprits named with posterior >= p: named / true):", "",
              f"| posterior >= | {old_name} | {new_name} |", "|---|---|---|"]  # fmt: skip
    for p in (0.5, 0.9, 0.99):
        cells = []
        for rs in (old, new):
            sel = [c in r["truth"] for r in rs if r["table"] == "family" for c, q in zip(r["named"], r["posteriors"], strict=False) if q >= p]  # fmt: skip
            cells.append(f"{len(sel)} / {sum(sel)}")
        lines.append(f"| {p:g} | {cells[0]} | {cells[1]} |")
    lines += ["", f"Families less exact or dearer in {new_name}: " + ("; ".join(worse) if worse else "none") + "."]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, required="--worker" not in sys.argv, help="the other source tree (today's)")
    ap.add_argument("--trials", type=int, default=20, help="trials of the lrzip shape, per noise")
    ap.add_argument("--family-trials", type=int, default=10, help="trials per scenario family (0: none)")
    ap.add_argument("--tests", type=int, default=400, help="single tests per cell of table 0 (0: none)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--family", action="append", default=None)
    ap.add_argument("--strategy", default="attrib-posterior", help="scenarios.py's strategy for the families (attrib: the sequential search)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.trials, args.family_trials, args.seed, args.family, args.strategy)
        return 0
    start = time.monotonic()
    out = [f"Command: `nice -n 10 .venv/bin/python benchmarks/remainder.py {' '.join(sys.argv[1:])}`", ""]
    if args.tests > 0:
        out += ["### One remaining-change test: the power each rule gives up", "", *tests_table(args.tests), ""]
    recs = {"today": side(args.old.resolve(), args), "this tree": side(HERE.parent, args)}
    out += ["### The lrzip shape", "", *tree_rows(recs), ""]
    if args.family_trials > 0:
        out += [f"### Every family of benchmarks/scenarios.py ({args.strategy})", "", *family_rows(recs), ""]
    out += [f"Wall time: {time.monotonic() - start:.0f} s, one process a side, one after the other."]
    text = "\n".join(out) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
