"""End-to-end scenario check: real trees, real builds, real timing, attrib's own bisection.

    .venv/bin/python benchmarks/e2e_scenarios.py [--seed 1] [--quick] [--out benchmarks/E2E.md]

Generates repositories with attrib.demo (lengths 40-200, effects 4-10 %, build breaks, two
culprits, no regression, bimodal interference noise, merges), bisects each with the local
executor in-process, and prints per scenario whether exactly the planted culprits were named
(or not_reproduced where nothing was planted), the builds against ceil(log2 N) + 4, samples
and wall time. Writes the table to --out with the command, seed and date.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from attrib.core.model import Status
from attrib.core.stats import TestConfig
from attrib.demo import DEMO_RECIPE, TreeSpec, generate_tree
from attrib.job import plan, run_bisect

WORK = 1_000_000  # about 1-2 ms per repetition


@dataclass(frozen=True)
class Scenario:
    name: str
    spec: TreeSpec


def scenarios(seed: int, quick: bool) -> list[Scenario]:
    rng = random.Random(seed)

    def pos(n: int) -> int:
        return rng.randrange(3, n - 2)

    out: list[Scenario] = []
    for n in (40, 90, 200) if not quick else (40,):
        eff = rng.choice((4, 6, 8, 10))
        out.append(Scenario(f"single n={n} +{eff}%", TreeSpec(commits=n, culprits=((pos(n), eff),), broken=None, work_base=WORK, seed=rng.randrange(1 << 30))))
    n = 120
    c = pos(n)
    out.append(Scenario(f"break before culprit n={n}", TreeSpec(commits=n, culprits=((c, 8),), broken=(max(1, c - 3), c), work_base=WORK, seed=1)))
    c = rng.randrange(60, 110)
    out.append(Scenario(f"break elsewhere n={n}", TreeSpec(commits=n, culprits=((c, 5),), broken=(20, 40), work_base=WORK, seed=2)))
    a, b = sorted(rng.sample(range(5, 75), 2))
    out.append(Scenario("two culprits n=80 +6%,+7%", TreeSpec(commits=80, culprits=((a, 6), (b, 7)), broken=None, work_base=WORK, seed=3)))
    out.append(Scenario("no regression n=100", TreeSpec(commits=100, culprits=(), broken=(30, 33), work_base=WORK, seed=4)))
    out.append(Scenario("no regression, bimodal n=60", TreeSpec(commits=60, culprits=(), broken=None, interfere_pct=25, work_base=WORK, seed=5)))
    out.append(Scenario("bimodal n=60 +5%", TreeSpec(commits=60, culprits=((pos(60), 5),), broken=None, interfere_pct=25, interfere_extra_pct=30, work_base=WORK, seed=6)))
    out.append(Scenario("merge, culprit inside n=50", TreeSpec(commits=50, culprits=(), broken=None, merge_at=30, side_commits=6, side_culprit=(4, 8), work_base=WORK, seed=7)))
    if not quick:
        a, b = sorted(rng.sample(range(5, 190), 2))
        out.append(Scenario("two culprits n=200 +4%,+10% + break", TreeSpec(commits=200, culprits=((a, 4), (b, 10)), broken=(min(a, b) + 1, min(a, b) + 4) if b - a > 6 else None, work_base=WORK, seed=8)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--no-futility", action="store_true", help="run every test to its cap (the rule before issue 34)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="attrib-e2e-") as tmp:
        root = Path(tmp)
        recipe = root / "demo.toml"
        # The scenarios plant 4-10 % steps and measure them at the default 2 % minimum change,
        # as every run of this table did; the shipped demo recipe asks for 5 % (shared machines).
        assert "min_change_pct = 5.0" in DEMO_RECIPE
        recipe.write_text(DEMO_RECIPE.replace("min_change_pct = 5.0", "min_change_pct = 2.0"))
        for i, sc in enumerate(scenarios(args.seed, args.quick)):
            tree = generate_tree(root / f"repo{i}", sc.spec)
            start = time.monotonic()
            p = plan(tree.path, tree.good, tree.bad, recipe, [], "local", root / f"work{i}")
            result = run_bisect(p, TestConfig(futility=not args.no_futility), args.seed, None)
            wall = time.monotonic() - start
            named = [c.commit for c in result.culprits]
            if tree.culprits:
                ok = result.status is Status.CULPRIT_FOUND and named == tree.culprits
            else:
                ok = result.status is Status.NOT_REPRODUCED and not named
            n = len(tree.culprits) or 1
            budget = n * (math.ceil(math.log2(result.range_commits)) + 4)
            rows.append((sc.name, ok, result.status.value, result.builds, budget, result.samples, wall))
            mark = "ok " if ok else "WRONG"
            print(f"{mark} {sc.name:38s} {result.status.value:15s} builds {result.builds:3d}/{budget:3d} samples {result.samples:5d} {wall:6.1f}s", flush=True)
    correct = sum(r[1] for r in rows)
    lines = [
        "# End-to-end scenarios (real trees, real builds, real timing)",
        "",
        f"Command: `.venv/bin/python benchmarks/e2e_scenarios.py --seed {args.seed}{' --quick' if args.quick else ''}"
        f"{' --no-futility' if args.no_futility else ''}`; "
        f"date {date.today().isoformat()}; {correct}/{len(rows)} correct.",
        "",
        "| scenario | correct | status | builds | budget | samples | wall s |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {r[0]} | {'yes' if r[1] else 'NO'} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {r[6]:.1f} |" for r in rows]
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(f"{correct}/{len(rows)} correct")
    return 0 if correct == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
