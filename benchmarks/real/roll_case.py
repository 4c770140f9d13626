"""A real regression behind a real dependency roll: a superproject of ours pins zlib-ng as a git
submodule and rolls it across zlib-ng#1935's range (0456bce1..a31e6dde, 54 first-parent
commits, culprit 322753f named by zlib-ng's developers). `attrib bisect` of the superproject,
then in the same run `git bisect run` of it (with `git submodule update --init` in each step,
as a person bisecting a superproject would), both with benchmarks/real's workload and
threshold script. attrib should name the roll and, inside it, 322753f; git bisect, which walks
the superproject's commits only, can name the roll at best.

    .venv/bin/python benchmarks/real/roll_case.py [--mirrors /work/.mirror] [--work /tmp/attrib-roll]

Writes benchmarks/real/results/roll/zlibng-1935-roll.json (and prints it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import by_name  # noqa: E402
from run import loadavg, run_attrib, run_git_bisect  # noqa: E402

HERE = Path(__file__).resolve().parent
SUB = "third_party/zlib-ng"
N_SUPER, ROLL_AT = 7, 4  # the superproject's commits; the one that rolls the pin


def git(repo: Path, *args: str) -> str:
    ident = ["-c", "user.name=Kernel Dev", "-c", "user.email=dev@example.com", "-c", "protocol.file.allow=always"]
    return subprocess.run(["git", *ident, *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def superproject(root: Path, url: str, good: str, bad: str) -> list[str]:
    """Our kernel tree: commit 0 pins zlib-ng at `good`, commit ROLL_AT rolls it to `bad` (the
    pin alone, as a roll commit does), the others change our own files."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    commits = []
    for i in range(N_SUPER):
        (root / "NOTES").write_text(f"kernel revision {i}\n")
        if i == 0:
            git(root, "config", "-f", ".gitmodules", f"submodule.{SUB}.path", SUB)
            git(root, "config", "-f", ".gitmodules", f"submodule.{SUB}.url", url)
            git(root, "add", ".gitmodules", "NOTES")
        if i in (0, ROLL_AT):
            git(root, "update-index", "--add", "--cacheinfo", f"160000,{good if i == 0 else bad},{SUB}")
            if i == ROLL_AT:
                git(root, "checkout", "-q", "--", "NOTES")  # the roll changes the pin only
        else:
            git(root, "add", "NOTES")
        git(root, "commit", "-q", "-m", f"roll {SUB}" if i == ROLL_AT else f"kernel change {i}")
        commits.append(git(root, "rev-parse", "HEAD"))
    return commits


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/attrib-roll"))
    ap.add_argument("--out", type=Path, default=HERE / "results" / "roll")
    ap.add_argument("--clock", default="cpu", choices=("cpu", "wall"))
    args = ap.parse_args()
    case = by_name("zlibng-1935")
    url = f"file://{(args.mirrors / case.mirror / 'repo').resolve()}"
    args.work.mkdir(parents=True, exist_ok=True)
    commits = superproject(args.work / "kernel", url, case.good, case.bad)
    roll = commits[ROLL_AT]
    # the same build, from the submodule's directory; git bisect has to update the submodule itself
    build = tuple(c.replace("cmake -S . ", f"cmake -S {SUB} ") for c in case.build)
    attrib_case = replace(case, good=commits[0], bad=commits[-1], culprits=(roll,), also_named=(), build=build)
    git_case = replace(attrib_case, build=("git -c protocol.file.allow=always submodule update --init -q", *build))
    rec: dict = {"case": "zlibng-1935-roll", "superproject": commits, "roll": roll, "dependency_culprit": case.culprits[0]}
    rec["loadavg_start"] = loadavg()
    attrib_res = run_attrib(attrib_case, args.clock, args.work / "kernel", args.work)
    doc = json.loads((args.work / "attrib.json").read_text()) if (args.work / "attrib.json").exists() else {}
    chain = []
    culprit = (doc.get("culprits") or [None])[0]
    while culprit is not None:
        chain.append({k: culprit.get(k) for k in ("commit", "subject", "change_pct", "ci_pct", "posterior")})
        inner = next((r for r in culprit.get("rolls", ()) if r["culprits"]), None)
        if inner is not None:
            chain[-1]["roll"] = {k: inner[k] for k in ("path", "old", "new", "range_commits", "status", "builds", "samples")}
        culprit = inner["culprits"][0] if inner else None
    attrib_res["chain"] = chain
    attrib_res["names_dependency_culprit"] = len(chain) > 1 and chain[-1]["commit"] == case.culprits[0]
    rec["attrib"] = attrib_res
    rec["loadavg_between"] = loadavg()
    rec["git_bisect"] = run_git_bisect(git_case, args.clock, args.work / "kernel", args.work)
    rec["loadavg_end"] = loadavg()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "zlibng-1935-roll.json").write_text(json.dumps(rec, indent=1))
    print(json.dumps({k: rec[k] for k in ("roll", "dependency_culprit")}, indent=1))
    print("attrib:", attrib_res.get("status"), [c["commit"][:10] for c in chain], "builds_fresh", attrib_res.get("builds_fresh"),
          "samples", attrib_res.get("samples"), "wall", attrib_res.get("wall_s"))  # fmt: skip
    gb = rec["git_bisect"]
    print("git bisect:", gb.get("named"), "right (the roll):", gb.get("right"), "builds", gb.get("builds"), "wall", gb.get("wall_s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
