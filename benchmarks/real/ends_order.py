"""Issue 31: the range's two ends with a compiler cache, built together (as the preflight builds
them with `--probes 2`) or the good end first, so that the bad end is served by it.

    .venv/bin/python benchmarks/real/ends_order.py [--case zlibng-1935] [--trials 2] [--work /tmp/attrib-ends-order]

Each trial builds both ends with ccache in a fresh work dir (an empty cache) through the real
Builds at build_width 2, once one after the other and once together (build_all), in
alternating order; prints the wall time of both ends and what the cache served.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import by_name  # noqa: E402
from run import build_commands, loadavg, sh  # noqa: E402

from attrib.evaluate.accounts import Ledger  # noqa: E402
from attrib.evaluate.builds import CheckoutBuilder  # noqa: E402
from attrib.evaluate.executors.local import LocalExecutor  # noqa: E402
from attrib.evaluate.twins import Builds  # noqa: E402
from attrib.events import NullEvents  # noqa: E402
from attrib.gitrepo import GitRepo, Mirror  # noqa: E402
from attrib.recipe import BuildSpec, CompilerCache  # noqa: E402
from attrib.workdir import WorkDir  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="zlibng-1935")
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--work", type=Path, default=Path("/tmp/attrib-ends-order"))
    args = ap.parse_args()
    case = by_name(args.case)
    src = args.work / "src.git"
    if not src.exists():  # a clone of our own: the mirror belongs to another user
        sh(["git", "clone", "--quiet", "--bare", "--shared", str(args.mirrors / case.mirror / "repo"), str(src)])
    repo = GitRepo(src)
    spec = BuildSpec(
        commands=tuple(build_commands(case, "cpu")), env={"SOURCE_DATE_EPOCH": "0"}, artifacts=("attrib-bench",),
        cache=CompilerCache.CCACHE,
    )  # fmt: skip
    print(f"{case.name}: good {case.good[:10]} and bad {case.bad[:10]} with ccache, build width 2; load {loadavg()}")
    for trial in range(args.trials):
        order = ("first-alone", "together") if trial % 2 == 0 else ("together", "first-alone")
        for how in order:
            root = (args.work / f"{how}-{trial}").resolve()
            shutil.rmtree(root, ignore_errors=True)
            wd = WorkDir(root)
            builder = CheckoutBuilder(wd, Mirror(wd.mirror, repo), LocalExecutor(), spec)
            builds = Builds(builder, Ledger(repo, NullEvents()), NullEvents(), time.monotonic, lambda: None, build_width=2)
            start = time.monotonic()
            if how == "first-alone":
                builds.build(case.good)
                builds.build(case.bad)
            else:
                builds.build_all([case.good, case.bad])
            wall = time.monotonic() - start
            recs = [builds.ledger.tally(s).build for s in (case.good, case.bad)]
            served = " ".join(f"{r.cache.hits}/{r.cache.hits + r.cache.misses}" for r in recs)
            print(f"  trial {trial} {how}: {wall:.1f} s wall; served good, bad {served}; ok {all(r.ok for r in recs)}", flush=True)
    print(f"load {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
