"""Bisect real regressions with `attrib bisect` (defaults) and then `git bisect run`, in one run.

    .venv/bin/python benchmarks/real/run.py [--case NAME]... [--mirrors /work/.mirror]
        [--work /tmp/attrib-real] [--out benchmarks/real/results] [--only attrib|git]

For each case of cases.py: a bare shared clone of the fetched mirror (nothing is copied; the
mirror is only read), a recipe (the case's build, its workload, command runner, attrib's
defaults for everything else), then

1. `attrib bisect --repo SRC --good G --bad B --recipe R` with no other option, in a fresh work
   dir (so every build is a real one);
2. `git bisect run bisect_step.py`: good and bad are built and timed first (5 runs x 10
   repetitions, median), the threshold is their geometric mean, and each step builds, times the
   same way and compares.

Writes OUT/<case>.json (both tools' outcomes, builds, samples, wall time, /proc/loadavg before,
between and after) and prints one line per tool. Needs the trees fetched (the fetch tool writes
MIRRORS/<owner>+<name>/repo); a missing one is skipped with one line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import CASES, Case, by_name  # noqa: E402

HERE = Path(__file__).resolve().parent
GB_RUNS, GB_REPS = 5, 10  # what a git bisect user's script times: a few runs of the workload


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def sh(argv: list[str], cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=check)


CLOCKS = {"cpu": "-DBENCH_CLOCK=CLOCK_PROCESS_CPUTIME_ID", "wall": "-DBENCH_CLOCK=CLOCK_MONOTONIC"}


def build_commands(case: Case, clock: str) -> list[str]:
    bench = str(HERE / "workloads" / case.workload)
    return [c.replace("{bench}", bench).replace("{clock}", CLOCKS[clock]) for c in case.build]


def recipe_text(case: Case, clock: str) -> str:
    build = ", ".join(json.dumps(c) for c in build_commands(case, clock))
    command = ", ".join(json.dumps(a) for a in case.command)
    return (
        "schema = 1\n"
        f'name = "real-{case.name}-{clock}"\n'
        f"description = {json.dumps(case.source)}\n\n"
        "[build]\n"
        f"commands = [{build}]\n"
        'env = { SOURCE_DATE_EPOCH = "0" }\n'
        'artifacts = ["attrib-bench"]\n\n'
        "[[benchmark]]\n"
        'name = "workload"\n'
        'runner = "command"\n'
        f"command = [{command}]\n"
        'unit = "ms"\n'
    )


def attrib_exe() -> str:
    local = Path(sys.executable).parent / "attrib"
    return str(local) if local.exists() else "attrib"


def run_attrib(
    case: Case, clock: str, src: Path, root: Path, recipe_toml: str | None = None, extra: tuple[str, ...] = ()
) -> dict:
    work = root / "attrib-work"
    shutil.rmtree(work, ignore_errors=True)
    recipe = root / "recipe.toml"
    recipe.write_text(recipe_toml or recipe_text(case, clock))
    out_json, out_md = root / "attrib.json", root / "attrib.md"
    argv = [
        attrib_exe(),
        "bisect",
        "--repo",
        str(src),
        "--good",
        case.good,
        "--bad",
        case.bad,
        "--recipe",
        str(recipe),
        "--workdir",
        str(work),
        "--json",
        str(out_json),
        "--report",
        str(out_md),
        *extra,
    ]
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True)
    wall = time.monotonic() - t0
    (root / "attrib.log").write_text(proc.stdout + proc.stderr)
    res: dict = {"exit": proc.returncode, "wall_s": round(wall, 1), "argv": argv[1:]}
    if not out_json.exists():
        res["error"] = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return res
    doc = json.loads(out_json.read_text())
    named = [c["commit"] for c in doc.get("culprits", [])]
    res.update(
        status=doc["status"],
        named=named,
        right=bool(named) and set(case.culprits) <= set(named),
        innocent=[c for c in named if c not in case.culprits and c not in case.also_named],
        builds=doc.get("builds"),
        builds_fresh=doc.get("builds_fresh"),
        build_failures=len(doc.get("build_failures", [])),
        samples=doc.get("samples"),
        range_commits=doc.get("range_commits"),
        total_change_pct=doc.get("total_change_pct"),
        total_ci_pct=doc.get("total_ci_pct"),
        culprits=[
            {
                k: c.get(k)
                for k in (
                    "commit",
                    "subject",
                    "change_pct",
                    "ci_pct",
                    "posterior",
                    "range_posterior",
                    "via_merge",
                    "confirmed",
                    "ambiguous_with",
                )
            }
            for c in doc.get("culprits", [])
        ],
        same_binary=len(doc.get("same_artifact", {})),
        samples_saved_estimate=doc.get("samples_saved_estimate"),
        smaller_steps=doc.get("smaller_steps", []),
        unresolved=doc.get("unresolved", []),
        notes=doc.get("notes", []),
        phase_times_s=doc.get("phase_times_s"),
        comparisons=len(doc.get("comparisons", [])),
        preflight=next(
            (
                {k: c.get(k) for k in ("verdict", "rounds", "sigma", "change_pct", "ci_pct")}
                for c in doc.get("comparisons", [])
                if c.get("purpose") == "preflight"
            ),
            None,
        ),
    )
    return res


def run_git_bisect(case: Case, clock: str, src: Path, root: Path) -> dict:
    tree = root / "gb"
    shutil.rmtree(tree, ignore_errors=True)
    sh(["git", "clone", "--quiet", "--shared", "--no-checkout", str(src), str(tree)])
    log = root / "gb-steps.jsonl"
    log.unlink(missing_ok=True)
    cfg = {
        "build": build_commands(case, clock),
        "command": list(case.command),
        "reps": GB_REPS,
        "runs": GB_RUNS,
        "threshold": None,
        "direction": "lower",
        "log": str(log),
    }
    cfg_path = root / "gb-config.json"
    step = [sys.executable, str(HERE / "bisect_step.py"), str(cfg_path)]
    env = {**os.environ, "SOURCE_DATE_EPOCH": "0"}
    t0 = time.monotonic()
    ends = {}
    for role, rev in (("good", case.good), ("bad", case.bad)):
        cfg_path.write_text(json.dumps(cfg))
        sh(["git", "checkout", "--quiet", "--detach", rev], cwd=tree)
        out = subprocess.run([*step, "--measure"], cwd=tree, capture_output=True, text=True, env=env)
        ends[role] = json.loads(out.stdout) if out.stdout.strip() else {"value": None, "why": out.stderr[-300:]}
    g, b = ends["good"]["value"], ends["bad"]["value"]
    res: dict = {"good_ms": g, "bad_ms": b}
    if g is None or b is None:
        res["error"] = f"good or bad did not build/run: {ends}"
        return res
    cfg["threshold"] = math.sqrt(g * b)
    cfg_path.write_text(json.dumps(cfg))
    sh(["git", "bisect", "start", case.bad, case.good], cwd=tree)
    proc = subprocess.run(["git", "bisect", "run", *step], cwd=tree, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    (root / "gb.log").write_text(proc.stdout + proc.stderr)
    first_bad = None
    for line in proc.stdout.splitlines():
        if line.endswith(" is the first bad commit"):
            first_bad = line.split()[0]
    steps = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    sh(["git", "bisect", "reset", "--quiet"], cwd=tree, check=False)
    res.update(
        threshold_ms=cfg["threshold"],
        change_pct=100 * (b / g - 1),
        named=[first_bad] if first_bad else [],
        right=first_bad in case.culprits,
        innocent=[first_bad]
        if first_bad and first_bad not in case.culprits and first_bad not in case.also_named
        else [],
        builds=2 + len(steps),
        skips=sum(s["verdict"] == "skip" for s in steps),
        samples=sum(s["samples"] for s in steps) + 2 * GB_RUNS * GB_REPS,
        wall_s=round(wall, 1),
        steps=steps,
        exit=proc.returncode,
    )
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", action="append", help="a case of cases.py (repeatable; default all)")
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/attrib-real"))
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--only", choices=("attrib", "git"), default=None)
    ap.add_argument("--no-futility", action="store_true", help="attrib runs every test to its cap (issue 34's before)")
    ap.add_argument(
        "--clock", choices=tuple(CLOCKS), default="cpu", help="what the workload times (default: its CPU time)"
    )
    args = ap.parse_args()
    cases = [by_name(n) for n in args.case] if args.case else list(CASES)
    out = args.out / args.clock
    out.mkdir(parents=True, exist_ok=True)
    for case in cases:
        mirror = args.mirrors / case.mirror / "repo"
        if not (mirror / "HEAD").exists():
            print(f"{case.name}: skipped: no mirror at {mirror} (fetch github:{case.mirror.replace('+', '/')})")
            continue
        root = args.work / f"{case.name}-{args.clock}"
        root.mkdir(parents=True, exist_ok=True)
        src = root / "src.git"
        if not src.exists():
            sh(["git", "clone", "--quiet", "--bare", "--shared", str(mirror), str(src)])
        rec: dict = {
            "case": case.name,
            "source": case.source,
            "claim": case.claim,
            "good": case.good,
            "bad": case.bad,
            "culprits": list(case.culprits),
            "also_named": list(case.also_named),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": {"cpus": os.cpu_count(), "cc": sh(["cc", "--version"]).stdout.splitlines()[0]},
            "clock": args.clock,
            "recipe": recipe_text(case, args.clock),
            "loadavg": {"start": loadavg()},
        }
        if args.only in (None, "attrib"):
            rec["attrib"] = run_attrib(case, args.clock, src, root, extra=("--no-futility",) if args.no_futility else ())
            rec["loadavg"]["after_attrib"] = loadavg()
            a = rec["attrib"]
            print(
                f"{case.name} [{args.clock}]: attrib {a.get('status', a.get('error'))} named {[c[:10] for c in a.get('named', [])]} right={a.get('right')}"
                f" builds {a.get('builds')} samples {a.get('samples')} wall {a['wall_s']} s",
                flush=True,
            )
        if args.only in (None, "git"):
            rec["git_bisect"] = run_git_bisect(case, args.clock, src, root)
            rec["loadavg"]["end"] = loadavg()
            gb = rec["git_bisect"]
            print(
                f"{case.name} [{args.clock}]: git bisect named {[c[:10] for c in gb.get('named', [])]} right={gb.get('right')}"
                f" builds {gb.get('builds')} samples {gb.get('samples')} wall {gb.get('wall_s')} s"
                f" (good {gb.get('good_ms')} bad {gb.get('bad_ms')} ms) {gb.get('error', '')}",
                flush=True,
            )
        path = out / f"{case.name}.json"
        if path.exists() and args.only:
            # one tool re-run: keep the other tool's figures from the earlier run
            old = json.loads(path.read_text())
            other = "git_bisect" if args.only == "attrib" else "attrib"
            if other in old:
                rec[other] = old[other]
                rec["loadavg"] = {**old.get("loadavg", {}), **rec["loadavg"]}
        path.write_text(json.dumps(rec, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
