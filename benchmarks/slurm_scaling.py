"""The same bisection on the local executor and on Slurm, with --jobs 1, 2 and 4.

    SLURM_CONF=/tmp/attrib-slurm/slurm.conf .venv/bin/python benchmarks/slurm_scaling.py \
        [--commits 24] [--seed 0] [--jobs 1 2 4] [--write benchmarks/SLURM.md]

One generated tree (attrib.demo, one planted culprit), one seed, a fresh work dir per run (so
every run builds what it needs). Per run: whether the culprit was named, measurement rounds in
sequence, builds, wall time; for Slurm also attrib's overhead per job (build jobs: sbatch call
to the command's start, the command's end to attrib having the result; round allocations:
sbatch call to attrib seeing the job RUNNING; a run's step: srun's wall time minus the
command's own), and squeue/scontrol calls per minute. Needs a cluster (scripts/slurm-up).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from attrib.demo import DEMO_RECIPE, TreeSpec, generate_tree
from attrib.result import BisectResult, load_result

STEP_PCT = 50  # the planted culprit: +50 % work, large against this shared machine's noise
MIN_CHANGE_PCT = 10


def _median(xs: list[float | None]) -> float | None:
    known = [x for x in xs if x is not None]
    return round(statistics.median(known), 3) if known else None


def run_one(tree: Any, recipe: Path, work: Path, executor: str, jobs: int, seed: int) -> dict[str, Any]:
    out = work.parent / f"{work.name}.json"
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "attrib", "bisect", "--repo", str(tree.path), "--good", tree.good, "--bad", tree.bad,
         "--recipe", str(recipe), "--executor", executor, "--jobs", str(jobs), "--seed", str(seed),
         "--workdir", str(work), "--json", str(out)],
        capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    wall = time.monotonic() - start
    if not out.exists():
        return {"executor": executor, "jobs": jobs, "error": proc.stderr.strip()[-300:]}
    r = load_result(out)  # the typed result, as every reader of attrib's result takes it
    assert isinstance(r, BisectResult)
    row: dict[str, Any] = {
        "executor": executor,
        "jobs": jobs,
        "found": [c.commit for c in r.culprits] == tree.culprits,
        "status": r.status.value,
        "rounds": r.rounds,
        "builds": r.builds_fresh,
        "samples": r.samples,
        "wall_s": round(wall, 1),
    }
    ex = r.executor.slurm
    if ex is not None:
        builds, rounds = ex.build_jobs, [x for x in ex.rounds if x.job]
        row.update(
            jobs_submitted=ex.jobs_submitted,
            build_submit_to_start_s=_median([b.submit_to_start_s for b in builds]),
            build_end_to_result_s=_median([b.end_to_result_s for b in builds]),
            round_submit_to_running_s=_median([x.submit_to_start_s for x in rounds]),
            step_overhead_s=_median(list(ex.step_overhead_s)),
            squeue_calls=ex.calls.get("squeue", 0),
            scontrol_calls=ex.calls.get("scontrol", 0),
            polls_per_min=ex.polls_per_min,
            nodes=list(ex.nodes_used),
        )
    return row


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| executor | --jobs | culprit | rounds | builds | samples | wall s | jobs | build: submit→start s | build: end→result s | round: submit→running s | run: srun overhead s | squeue+scontrol / min |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['executor']} | {r['jobs']} | error: {r['error']} |" + " |" * 10)
            continue
        s = r.get
        lines.append(
            f"| {r['executor']} | {r['jobs']} | {'found' if r['found'] else r['status']} | {r['rounds']} | {r['builds']} "
            f"| {r['samples']} | {r['wall_s']} | {s('jobs_submitted', '-')} | {s('build_submit_to_start_s', '-')} "
            f"| {s('build_end_to_result_s', '-')} | {s('round_submit_to_running_s', '-')} | {s('step_overhead_s', '-')} "
            f"| {s('polls_per_min', '-')} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--executors", nargs="+", default=["local", "slurm"])
    ap.add_argument("--write", type=Path, help="also write the table and the raw rows (JSON) here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="attrib-slurm-bench-") as tmp:
        root = Path(tmp)
        at = args.commits * 2 // 3
        tree = generate_tree(root / "repo", TreeSpec(commits=args.commits, culprits=((at, STEP_PCT),), broken=(3, 5),
                                                     work_base=1_000_000, seed=args.seed))  # fmt: skip
        recipe = root / "recipe.toml"
        recipe.write_text(
            DEMO_RECIPE.replace("reps = 10", "reps = 20").replace("min_change_pct = 5.0", f"min_change_pct = {MIN_CHANGE_PCT}")
        )
        rows = []
        for executor in args.executors:
            for k in args.jobs:
                row = run_one(tree, recipe, root / f"work-{executor}-{k}", executor, k, args.seed)
                print(json.dumps(row), flush=True)
                rows.append(row)
    text = table(rows)
    print(text)
    if args.write:
        head = (
            f"`{' '.join(['benchmarks/slurm_scaling.py', *sys.argv[1:]])}` on {platform.node()} "
            f"({os.cpu_count()} CPUs), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; tree: {args.commits} "
            f"commits, culprit +{STEP_PCT} % at {args.commits * 2 // 3}, builds broken at 3-4, seed {args.seed}\n\n"
        )
        args.write.write_text(head + text + "\n\n```json\n" + "\n".join(json.dumps(r) for r in rows) + "\n```\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
