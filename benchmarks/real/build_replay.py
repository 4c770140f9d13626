"""Issue 31: the builds of one real bisection replayed under each build setting, interleaved (and, with --shift, the next night).

    .venv/bin/python benchmarks/real/build_replay.py --from /tmp/attrib-build-cost2/zlibng-1935/none
        [--case zlibng-1935] [--variant none --variant ccache ...] [--work /tmp/attrib-build-replay]
    .venv/bin/python benchmarks/real/build_replay.py --from computed --case abseil-planted
        [--mirrors /tmp/attrib-planted] [--dry-run] ...

On a shared machine whose load moves by a factor of two within minutes, two bisections run one
after the other compare the load more than the builds (build_cost.py measured it). This takes
the commits a bisection built, in the order it built them (its work dir's build logs, by time),
and builds that sequence again under every variant, each in its own fresh work dir, commit by
commit with the variants interleaved (their order reversed at every commit), so that each
commit's builds ran within a minute of each other. Per variant: the builds' wall time
(BuildRecord.duration_s), the CPU time of the build processes, what the compiler cache served,
how each was built; with `cache_check` (on unless the variant turns it off) the culprit's two
ends built again clean, as attrib does after a bisection, are timed and added (unless
--no-end-check: then not measured); and whether every artifact digest equals the clean one.
--no-warm-up drops the uncounted first build (for a tree whose builds take minutes, where the
disk's first reads are a small part of one). --shift K: then, in the same work dirs (the
compiler cache, the incremental trees, the build records and checked digests the first
bisection left: the daemon's next night), the builds of a bisection of the range moved K
first-parent commits later along --tip, computed (its two ends, then a binary search's midpoints
to the known culprit); a build the first night already made is served from its record (0 s).
The end check runs its two builds together (width 2, attrib's at --probes 2). --configure-once:
the case's first command (CMake's configure) runs only where the build directory has no
CMakeCache.txt yet, as a recipe for incremental trees should say it (`cmake --build` runs it
again itself when a CMakeLists.txt or a module changed): some trees rewrite generated headers at
every configure (libgit2's git2_features.h), and a moved tree then recompiles everything. Every
variant gets the same commands; a fresh checkout always configures. --configure-prefix TEXT:
the first command prefixed with TEXT, in every variant (`GIT_DIR=/nonexistent` keeps libgit2's
configure from writing the commit id into a header every source includes).

--from computed: no bisection run is needed; the order is `bisected_order` at shift 0 over the
case's own range (cases.py: good, bad, the known culprit; the tree read from --mirrors, a bare
clone of it made in --work): the two ends, then a binary search's midpoints to the culprit,
which is the order attrib's bisection built on zlibng-1935 (7 of 7 commits, the same order; on
libgit2-planted 7 of its 8, in its order: between 30 and 33 it also built 2c68841, the 32nd). For
a tree whose bisection would itself take an hour of builds. --dry-run prints the order (and
--shift's) and builds nothing.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import Case, by_name  # noqa: E402
from run import build_commands, loadavg, sh  # noqa: E402

from attrib.evaluate.builds import CheckoutBuilder  # noqa: E402
from attrib.evaluate.executors.local import LocalExecutor  # noqa: E402
from attrib.gitrepo import GitRepo, Mirror  # noqa: E402
from attrib.recipe import BuildSpec, CompilerCache  # noqa: E402
from attrib.workdir import WorkDir  # noqa: E402

VARIANTS: dict[str, dict] = {
    "none": {},
    "ccache": {"cache": CompilerCache.CCACHE},
    "ccache-nocheck": {"cache": CompilerCache.CCACHE, "cache_check": False},
    "incremental": {"incremental": True, "build_dir": "build"},
    "incremental-nocheck": {"incremental": True, "build_dir": "build", "cache_check": False},
    "both": {"cache": CompilerCache.CCACHE, "incremental": True, "build_dir": "build"},
    "both-nocheck": {"cache": CompilerCache.CCACHE, "incremental": True, "build_dir": "build", "cache_check": False},
}


CHECK_WIDTH = 2  # the end check's builds at once: attrib's at --probes 2 (job.py), the build width used here


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bisected_order(repo: GitRepo, good: str, tip: str, shift: int, length: int, culprit: str) -> list[str]:
    """The builds of a bisection of the range `good`..`good+length` moved `shift` first-parent
    commits later on `tip`'s line (both ends real commits): its two ends, then the midpoints a
    binary search takes to the known culprit (the search's verdicts: at or after it is bad)."""
    line = [good, *repo.first_parent_chain(good, tip)]
    lo, hi, at = shift, shift + length, line.index(culprit)
    if not lo < at <= hi:
        raise SystemExit(f"--shift {shift}: the culprit {culprit[:10]} is not in the moved range")
    order = [line[lo], line[hi]]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        order.append(line[mid])
        lo, hi = (lo, mid) if mid >= at else (mid, hi)
    return order


def replay(
    order: list[str], repo: GitRepo, builders: dict[str, CheckoutBuilder], ends: list[str], no_end_check: bool
) -> dict:
    """`order` built under every variant, interleaved (their order reversed at every commit),
    then each variant's end check; rows per variant."""
    names = list(builders)
    rows: dict[str, dict] = {
        n: {"wall_s": 0.0, "cpu_s": 0.0, "hits": 0, "misses": 0, "how": [], "kept": 0, "artifacts": {}} for n in names
    }
    for i, sha in enumerate(order):
        info = repo.info(sha)
        for name in names if i % 2 == 0 else reversed(names):
            cpu = children_cpu()
            rec = builders[name].build(info)
            row = rows[name]
            row["kept"] += rec.cached  # built before in this work dir (an earlier bisection): no build
            wall = 0.0 if rec.cached else rec.duration_s
            row["wall_s"] += wall
            row["cpu_s"] += children_cpu() - cpu
            row["hits"] += 0 if rec.cached else rec.cache.hits
            row["misses"] += 0 if rec.cached else rec.cache.misses
            row["how"].append("kept" if rec.cached else rec.how.value)
            row["artifacts"][sha] = rec.artifact
            print(
                f"  {sha[:8]} {name}: {wall:.1f} s {row['how'][-1]} {rec.cache.hits}/{rec.cache.misses} ok={rec.ok}",
                flush=True,
            )
    for name in names:  # what attrib does after the bisection: the culprit's ends built again clean, together
        row, builder = rows[name], builders[name]
        row["check_s"] = 0.0
        if not no_end_check:
            cpu = children_cpu()
            pairs = [(repo.info(sha), builder.build(repo.info(sha))) for sha in ends]
            differs, row["check_s"] = builder.differ_from_clean(pairs, CHECK_WIDTH)
            row["cpu_s"] += children_cpu() - cpu
            row["check_differs"] = any(differs.values())
    clean = rows.get("none", {}).get("artifacts", {})
    for name in names:
        row = rows[name]
        row["total_s"] = round(row["wall_s"] + row["check_s"], 1)
        row["same_digests_as_none"] = bool(clean) and all(row["artifacts"][s] == clean[s] for s in order)
        base = rows["none"]["total_s"] if "none" in rows else None
        ratio = f" = {row['total_s'] / base:.2f}x none" if base else ""
        builds = f" = {row['wall_s'] / rows['none']['wall_s']:.2f}x none's" if base else ""
        print(
            f"{name}: build wall {row['wall_s']:.1f} s{builds} + end check {row['check_s']:.1f} s = {row['total_s']} s{ratio};"
            f" cpu {row['cpu_s']:.1f} s; served {row['hits']} compiled {row['misses']}; how {row['how']};"
            f" same digests {row['same_digests_as_none']}",
            flush=True,
        )
    return rows


def recorded_order(source: Path) -> tuple[list[str], str, GitRepo]:
    """The commits a bisection built, in the order it built them (its work dir's build logs, by
    time), the culprit it named, and the repository it read."""
    doc = json.loads((source / "attrib.json").read_text())
    by_log = {Path(c["build"]["log"]).name: c["commit"] for c in doc["commits"] if c["build"]}
    logs = sorted((source / "attrib-work" / "logs").glob("*.log"), key=lambda p: p.stat().st_mtime)
    return [by_log[p.name] for p in logs if p.name in by_log], doc["culprits"][0]["commit"], GitRepo(Path(doc["repo"]))


def computed_order(case: Case, mirrors: Path, work: Path) -> tuple[list[str], str, GitRepo]:
    """The builds a bisection of the case's own range makes, computed (bisected_order at shift
    0), the known culprit, and a bare clone of the mirror (the mirror itself is only read)."""
    src = work / "src.git"
    if not src.exists():
        work.mkdir(parents=True, exist_ok=True)
        sh(["git", "clone", "--quiet", "--bare", "--shared", str(mirrors / case.mirror / "repo"), str(src)])
    repo = GitRepo(src)
    good, bad, culprit = (repo.resolve(c) for c in (case.good, case.bad, case.culprits[0]))
    return bisected_order(repo, good, bad, 0, len(repo.first_parent_chain(good, bad)), culprit), culprit, repo


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--from", dest="source", required=True,
        help="a build_cost.py variant dir (attrib.json, attrib-work), or `computed`: the case's range, bisected_order at shift 0",
    )  # fmt: skip
    ap.add_argument("--case", default="zlibng-1935")
    ap.add_argument(
        "--mirrors",
        type=Path,
        default=Path("/work/.mirror"),
        help="with --from computed: plant.py's --out for a planted case",
    )
    ap.add_argument("--dry-run", action="store_true", help="print the order(s) and build nothing")
    ap.add_argument("--variant", action="append", choices=tuple(VARIANTS))
    ap.add_argument("--work", type=Path, default=Path("/tmp/attrib-build-replay"))
    ap.add_argument("--out", type=Path, default=Path("/tmp/attrib-build-replay/replay.json"))
    ap.add_argument(
        "--no-warm-up", action="store_true", help="no uncounted first build (a tree whose builds take minutes)"
    )
    ap.add_argument(
        "--no-end-check",
        action="store_true",
        help="the culprit's ends are not built again clean: the check is not measured",
    )
    ap.add_argument(
        "--shift", type=int, default=None,
        help="then the next night: a bisection of the range moved SHIFT first-parent commits later, in the same work dirs",
    )  # fmt: skip
    ap.add_argument("--tip", default="develop", help="the branch whose first-parent line --shift moves along")
    ap.add_argument(
        "--configure-once", action="store_true",
        help="the case's first command (configure) only where build/CMakeCache.txt is missing",
    )  # fmt: skip
    ap.add_argument(
        "--configure-prefix", default="", help="put before the case's first command (configure), every variant"
    )
    args = ap.parse_args()
    case = by_name(args.case)
    if args.source == "computed":
        order, culprit, repo = computed_order(case, args.mirrors, args.work.resolve())
    else:
        order, culprit, repo = recorded_order(Path(args.source))
    ends = [repo.info(culprit).parents[0], culprit]
    if args.dry_run:
        print(f"{args.case}: {len(order)} builds: {' '.join(order)}")
        if args.shift is not None:
            length = len(repo.first_parent_chain(order[0], order[1]))
            following = bisected_order(repo, order[0], repo.resolve(args.tip), args.shift, length, culprit)
            print(f"next night, moved {args.shift}: {' '.join(following)}")
        return 0
    names = args.variant or list(VARIANTS)
    commands = build_commands(case, "cpu")
    if args.configure_prefix:
        commands = [f"{args.configure_prefix} {commands[0]}", *commands[1:]]
    if args.configure_once:
        commands = [f"test -f build/CMakeCache.txt || {commands[0]}", *commands[1:]]
    builders = {}
    for name in names:
        wd = WorkDir((args.work / name).resolve())
        spec = BuildSpec(
            commands=tuple(commands),
            env={"SOURCE_DATE_EPOCH": "0"},
            artifacts=("attrib-bench",),
            **VARIANTS[name],
        )
        builders[name] = CheckoutBuilder(wd, Mirror(wd.mirror, repo), LocalExecutor(), spec)
    # one build not counted, in a work dir of its own: the first build of a run also pays for
    # reading the compiler and the sources from disk, which would weigh on whichever variant is first
    if not args.no_warm_up:
        warm = WorkDir((args.work / "warm-up").resolve())
        plain = BuildSpec(commands=tuple(build_commands(case, "cpu")))
        CheckoutBuilder(warm, Mirror(warm.mirror, repo), LocalExecutor(), plain).build(repo.info(order[0]))
    nights = []
    print(
        f"replaying {len(order)} builds of {args.case} ({', '.join(c[:8] for c in order)}); load {loadavg()}",
        flush=True,
    )
    nights.append(
        {"order": order, "load_start": loadavg(), "variants": replay(order, repo, builders, ends, args.no_end_check)}
    )
    nights[-1]["load_end"] = loadavg()
    if args.shift is not None:
        # the daemon's next night: the same work dirs (compiler cache, incremental trees, builds)
        # and a range moved a few commits, whose bisection builds mostly commits not built before
        following = bisected_order(
            repo,
            order[0],
            repo.resolve(args.tip),
            args.shift,
            len(repo.first_parent_chain(order[0], order[1])),
            culprit,
        )
        print(
            f"next night, the range moved {args.shift} commits: {', '.join(c[:8] for c in following)}; load {loadavg()}",
            flush=True,
        )
        nights.append(
            {
                "order": following,
                "shift": args.shift,
                "load_start": loadavg(),
                "variants": replay(following, repo, builders, ends, args.no_end_check),
            }
        )
        nights[-1]["load_end"] = loadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "case": args.case,
                "from": str(args.source),
                "configure_once": args.configure_once,
                "configure_prefix": args.configure_prefix,
                "order": order,
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "load_end": loadavg(),
                "variants": nights[0]["variants"],
                "nights": nights,
            },
            indent=1,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
