"""History families with environment changes (issue 41): is it the code or the machine?

    .venv/bin/python benchmarks/env_history.py --histories 5 --seed 1

Each history is one nightly upload of 24 kernels over the 41 commits of a real git tree
(benchmarks/daemon_groups.py's), noise 1 % (log space), sent to the daemon's nightly code in
this process (attrib.daemon.nightly.Nightly.receive: real SQLite, real git, the real detector,
decisions and filing to a dir: sink; no worker runs, so every queued job can be counted).
An environment change is a value of `env.compiler` or `env.driver` that changes from one night
on (the upgrade night U, drawn per history in 12..18); a code change is a commit C (in 26..32)
that slows 5 of the kernels (drawn) by 5 %.

Families:
  toolkit +6 %, re-run       every kernel 6 % slower from U on; the night of the upgrade re-ran
                             commit U-1 (no commit landed): the environment's evidence; and a code change
  toolkit +3 %, re-run       the same with a 3 % step (3 sigma)
  toolkit +6 %, no re-run    the upgrade lands with commit U: the code may explain it (bisected;
                             its preflight is the controlled comparison, not run here)
  driver and code together   the driver changes at C, moving nothing; commit C slows 5 kernels;
                             the re-run of C-1 in the new driver stays at the old level
  toolkit +6 % and code together  every kernel 6 % slower from C on, and commit C slows 5 by 5 %
                             more; the re-run of C-1 shows the 6 % only
  driver moves nothing       a driver change with a re-run night and no step anywhere

Per family (summed over the histories): env series = series whose level the environment moved;
detected = of those, change points at (U-1, U]; attributed = flagged `environment`; bisected =
environment-moved series in a job; issues = environment issues filed; code series = the planted
code change's series; code job exact = histories whose code change became one job with exactly
its 5 kernels; code blamed on env = code-moved series flagged `environment` (must be 0).
Figures are printed (and, with --out, written); nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from daemon_groups import KERNELS, _tree  # noqa: E402

from attrib.daemon.config import Settings  # noqa: E402
from attrib.daemon.nightly import Nightly  # noqa: E402
from attrib.daemon.store import Store  # noqa: E402
from attrib.history.projects import SERIES_NAME, HistoryConfig, MapRule, ProjectConfig  # noqa: E402
from attrib.history.store import FlagState  # noqa: E402

NOISE = 0.01
SECRET = "env-history-benchmark-secret-0123456789"


@dataclass(frozen=True)
class Family:
    name: str
    key: str  # the environment key that changes
    env_step: float  # factor the new environment applies to every kernel (1.0: none)
    rerun: bool  # the upgrade night re-ran the last commit before it
    together: bool = False  # the environment changes at the code change's commit, not at U
    code: bool = True  # a code change slows 5 kernels


FAMILIES = (
    Family("toolkit +6 %, re-run", "compiler", 1.06, True),
    Family("toolkit +3 %, re-run", "compiler", 1.03, True),
    Family("toolkit +6 %, no re-run", "compiler", 1.06, False),
    Family("driver and code together", "driver", 1.0, True, together=True),
    Family("toolkit +6 % and code together", "compiler", 1.06, True, together=True),
    Family("driver moves nothing", "driver", 1.0, True, code=False),
)
VALUES = {"compiler": ("nvcc 12.4.131", "nvcc 12.6.85"), "driver": ("550.54.15", "560.35.03")}


def history_csv(fam: Family, line: list[str], rng: random.Random) -> tuple[str, int, int, list[int]]:
    """The upload, the night the environment changes, the code commit and its kernels."""
    code_at = rng.randint(26, 32)
    slowed = sorted(rng.sample(range(KERNELS), 5)) if fam.code else []
    env_at = code_at if fam.together else rng.randint(12, 18)
    nights = [(i, i >= env_at) for i in range(len(line))]
    if fam.rerun:
        nights.insert(env_at, (env_at - 1, True))  # no commit that night: the last one measured again
    old, new = VALUES[fam.key]
    rows = [f"commit,benchmark,value,unit,direction,timestamp,gpu,env.{fam.key}"]
    for k in range(KERNELS):
        base = rng.uniform(1.0, 5.0)
        for day, (i, upgraded) in enumerate(nights):
            level = base * (fam.env_step if upgraded else 1.0) * (1.05 if k in slowed and i >= code_at else 1.0)
            value = level * math.exp(rng.gauss(0, NOISE))
            rows.append(f"{line[i]},k{k:02d},{value:.6f},ms,lower,{1_780_000_000 + day * 86_400},H100,{new if upgraded else old}")
    return "\n".join(rows) + "\n", env_at, code_at, slowed


def run_history(fam: Family, seed: int, index: int, repo: Path, recipe: Path, line: list[str], root: Path) -> dict[str, int]:
    rng = random.Random(f"{seed}/{fam.name}/{index}")
    text, env_at, code_at, slowed = history_csv(fam, line, rng)
    state = root / f"state-{FAMILIES.index(fam)}-{index}"
    project = ProjectConfig(name="kernels", repo=str(repo), map=(MapRule("k*", recipe.name, SERIES_NAME),), file_issue="dir:kernels")
    settings = Settings(state=state, secret=SECRET, recipes_dir=recipe.parent, workers=0, history=HistoryConfig(projects={"kernels": project}))
    store = Store(settings.db_path, max_queue=settings.max_queue)
    nightly = Nightly(store, settings)
    answer = nightly.receive(json.dumps({"project": "kernels", "files": [{"name": "n.csv", "content": text}]}).encode())
    flags = {(f["benchmark"], line.index(f["before"]), line.index(f["after"])): f for f in answer["flags"]}
    moved_by_env = [f"k{k:02d}" for k in range(KERNELS)] if fam.env_step != 1.0 else []
    code_names = [f"k{k:02d}" for k in slowed]
    at_env = {b: f for (b, good, bad), f in flags.items() if good < env_at <= bad and not (fam.together and b in code_names)}
    moved_by_env = [b for b in moved_by_env if not (fam.together and b in code_names)]  # those the code moved too: code series
    at_code = {b: f for (b, good, bad), f in flags.items() if good < code_at <= bad and b in code_names}
    jobs = store.jobs(limit=1000)
    members = store.members([j.id for j in jobs])
    code_jobs = [j for j in jobs if line.index(j.good) < code_at <= line.index(j.bad)]
    exact = len(code_jobs) == 1 and sorted(members.get(code_jobs[0].id, [code_jobs[0].benchmark])) == code_names
    filed = list((state / "filed" / "kernels").glob("*/report.md"))
    nightly.history.close()
    return {
        "env series": len(moved_by_env),
        "detected": len([b for b in moved_by_env if b in at_env]),
        "attributed": len([b for b in moved_by_env if at_env.get(b, {}).get("flag") == FlagState.ENVIRONMENT.value]),
        "bisected": len([b for b in moved_by_env if at_env.get(b, {}).get("job") is not None]),
        "issues": len(filed),
        "code series": len(code_names),
        "code job exact": int(exact) if code_names else 0,
        "code blamed on env": len([f for f in at_code.values() if f["flag"] == FlagState.ENVIRONMENT.value]),
        "jobs": len(jobs),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--histories", type=int, default=5, help="histories per family")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="write the table there too")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="attrib-env-history-"))
    repo, recipe = _tree(root)
    from attrib.history.order import GitLine

    line = GitLine(repo, "main").line()
    started = time.monotonic()
    keys = ("env series", "detected", "attributed", "bisected", "issues", "code series", "code job exact", "code blamed on env", "jobs")
    lines = ["| family | histories | " + " | ".join(keys) + " |", "|---|---|" + "---|" * len(keys)]
    for fam in FAMILIES:
        total = dict.fromkeys(keys, 0)
        for i in range(args.histories):
            for k, v in run_history(fam, args.seed, i, repo, recipe, line, root).items():
                total[k] += v
        lines.append(f"| {fam.name} | {args.histories} | " + " | ".join(str(total[k]) for k in keys) + " |")
    table = "\n".join(lines)
    head = (f"Command: `.venv/bin/python benchmarks/env_history.py --histories {args.histories} --seed {args.seed}`;"
            f" {KERNELS} kernels x {len(line)} commits per history, noise {NOISE * 100:.0f} %; wall {time.monotonic() - started:.0f} s")  # fmt: skip
    print(head + "\n\n" + table)
    if args.out:
        args.out.write_text(head + "\n\n" + table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
