"""Issue 31: what a bisection's builds cost with and without the compiler cache, side by side.

    .venv/bin/python benchmarks/real/build_cost.py [--case zlibng-1935] [--variant none --variant ccache]
        [--mirrors /work/.mirror] [--work /tmp/attrib-build-cost] [--clock cpu]

For each variant, in one run on the same tree: `attrib bisect` with the case's recipe (run.py's,
nothing else changed) plus the variant's [build] keys, in a fresh work dir (so every build is
real; a variant with a cache starts with an empty cache in that work dir, warmed only by the
bisection's own builds). Prints and writes OUT/<case>.json: the culprit named, builds, the
build phase's wall time (phase_times_s.build: every build of the run, the checks of the
culprit's ends without the cache included), what the cache served, and whether every commit
built by both variants got the same artifact digest.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import by_name  # noqa: E402
from run import CLOCKS, loadavg, recipe_text, run_attrib, sh  # noqa: E402

HERE = Path(__file__).resolve().parent
VARIANTS = {
    "none": "",
    "ccache": 'cache = "ccache"\n',
    "ccache-nocheck": 'cache = "ccache"\ncache_check = false\n',
    "sccache": 'cache = "sccache"\n',
    "incremental": 'incremental = true\nbuild_dir = "build"\n',
    "incremental-nocheck": 'incremental = true\nbuild_dir = "build"\ncache_check = false\n',
    "both": 'cache = "ccache"\nincremental = true\nbuild_dir = "build"\n',
    "both-nocheck": 'cache = "ccache"\nincremental = true\nbuild_dir = "build"\ncache_check = false\n',
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="zlibng-1935")
    ap.add_argument("--variant", action="append", choices=tuple(VARIANTS))
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="plant.py's --out for a planted case")
    ap.add_argument("--work", type=Path, default=Path("/tmp/attrib-build-cost"))
    ap.add_argument("--out", type=Path, default=HERE / "results" / "build-cost")
    ap.add_argument("--clock", choices=tuple(CLOCKS), default="cpu")
    args = ap.parse_args()
    case = by_name(args.case)
    mirror = args.mirrors / case.mirror / "repo"
    root = args.work / case.name
    root.mkdir(parents=True, exist_ok=True)
    src = root / "src.git"
    if not src.exists():
        sh(["git", "clone", "--quiet", "--bare", "--shared", str(mirror), str(src)])
    rec: dict = {"case": case.name, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "variants": {}}
    base = recipe_text(case, args.clock)
    for variant in args.variant or ["none", "ccache"]:
        vroot = root / variant
        vroot.mkdir(parents=True, exist_ok=True)
        text = base.replace("[build]\n", "[build]\n" + VARIANTS[variant], 1)
        start_load = loadavg()
        res = _run(case, text, src, vroot)
        res["loadavg"] = f"{start_load} / {loadavg()}"
        rec["variants"][variant] = res
        print(
            f"{case.name} [{variant}]: {res.get('status')} named {[c[:10] for c in res.get('named', [])]}"
            f" builds {res.get('builds')} build wall {res.get('build_s')} s (end check {res.get('build_check_s')} s) served {res.get('cache_hits')}"
            f" compiled {res.get('cache_misses')} total wall {res.get('wall_s')} s load {res['loadavg']}",
            flush=True,
        )
    arts = [v.get("artifacts", {}) for v in rec["variants"].values()]
    shared = set.intersection(*(set(a) for a in arts)) if arts else set()
    rec["same_digests"] = {
        "commits_built_by_all": len(shared),
        "equal": all(len({a[s] for a in arts}) == 1 for s in shared),
    }
    print(
        f"{case.name}: commits built by every variant {len(shared)}, same artifact digests: {rec['same_digests']['equal']}"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{case.name}.json").write_text(json.dumps(rec, indent=1) + "\n")
    return 0


def _run(case, text: str, src: Path, root: Path) -> dict:
    res = run_attrib(case, "cpu", src, root, text)
    doc = json.loads((root / "attrib.json").read_text()) if (root / "attrib.json").exists() else {}
    builds = [c["build"] for c in doc.get("commits", []) if c.get("build")]
    res["build_s"] = (doc.get("phase_times_s") or {}).get("build")
    res["build_check_s"] = (doc.get("phase_times_s") or {}).get("build_check")
    res["cache_hits"] = sum(b.get("cache", {}).get("hits", 0) for b in builds)
    res["cache_misses"] = sum(b.get("cache", {}).get("misses", 0) for b in builds)
    res["artifacts"] = doc.get("artifacts", {})
    res["how"] = [b.get("how", "clean") for b in builds]
    res["notes"] = [n["kind"] for n in doc.get("notes", [])]
    return res


if __name__ == "__main__":
    sys.exit(main())
