"""Issue 31: the end check (a culprit's two ends built again clean) one after the other or together.

    .venv/bin/python benchmarks/real/ends_check.py [--case zlibng-1935] [--variant ccache --variant incremental]
        [--trials 2] [--repo /tmp/attrib-build-cost2/zlibng-1935/src.git] [--work /tmp/attrib-ends-check]

Per variant, a fresh work dir builds the culprit's grandparent, then its parent and the culprit
(so that both ends are served by the cache or built in an incremental tree: the builds the end
check doubts). Then, per trial, the kept clean digests are removed and the two ends checked with
CheckoutBuilder.differ_from_clean at width 1 (one after the other, as before s37) and width 2
(together, as job.py does at --probes 2), the two interleaved and their order alternating. Prints
the check's wall time (first check build's start to the last one's end), each check build's
start and end, and whether either end differed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_replay import VARIANTS  # noqa: E402
from cases import by_name  # noqa: E402
from run import build_commands, loadavg  # noqa: E402

from attrib.evaluate.builds import CheckoutBuilder  # noqa: E402
from attrib.evaluate.executors.local import LocalExecutor  # noqa: E402
from attrib.gitrepo import GitRepo, Mirror  # noqa: E402
from attrib.recipe import BuildSpec  # noqa: E402
from attrib.workdir import WorkDir  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="zlibng-1935")
    ap.add_argument("--variant", action="append", choices=("ccache", "incremental", "both"))
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--repo", type=Path, default=Path("/tmp/attrib-build-cost2/zlibng-1935/src.git"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/attrib-ends-check"))
    ap.add_argument("--out", type=Path, default=Path("/tmp/attrib-ends-check/ends_check.json"))
    args = ap.parse_args()
    case = by_name(args.case)
    repo = GitRepo(args.repo)
    culprit = repo.info(case.culprits[0])
    parent = repo.info(culprit.parents[0])
    grandparent = repo.info(parent.parents[0])
    names = args.variant or ["ccache", "incremental"]
    rows: dict[str, list[dict]] = {n: [] for n in names}
    ends = {}
    for name in names:
        wd = WorkDir((args.work / name).resolve())
        spec = BuildSpec(
            commands=tuple(build_commands(case, "cpu")), env={"SOURCE_DATE_EPOCH": "0"}, artifacts=("attrib-bench",),
            **VARIANTS[name],
        )  # fmt: skip
        builder = CheckoutBuilder(wd, Mirror(wd.mirror, repo), LocalExecutor(), spec)
        recs = [builder.build(c) for c in (grandparent, parent, culprit)]
        print(f"{name}: built {[f'{r.how.value} {r.cache.hits}/{r.cache.misses} {r.duration_s:.1f} s' for r in recs]}", flush=True)
        ends[name] = (builder, [(parent, recs[1]), (culprit, recs[2])])
    print(f"{case.name}: ends {parent.short} and {culprit.short}; load {loadavg()}", flush=True)
    for trial in range(args.trials):
        for name in names:
            builder, pair = ends[name]
            for width in (1, 2) if trial % 2 == 0 else (2, 1):
                for _, rec in pair:
                    builder.workdir.build_record(f"{rec.key}-uncached").unlink(missing_ok=True)
                load = loadavg()
                differs, wall = builder.differ_from_clean(pair, width)
                kept = [json.loads(builder.workdir.build_record(f"{r.key}-uncached").read_text()) for _, r in pair]
                t0 = min(k["started"] for k in kept)
                spans = [(round(k["started"] - t0, 1), round(k["finished"] - t0, 1)) for k in kept]
                row = {"trial": trial, "width": width, "wall_s": round(wall, 1), "spans": spans, "differs": differs, "load": load}
                rows[name].append(row)
                print(f"  trial {trial} {name} width {width}: {wall:.1f} s (ends at {spans}); differs {differs}; load {load}", flush=True)
    print(f"load {loadavg()}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"case": args.case, "ends": [parent.sha, culprit.sha], "variants": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
