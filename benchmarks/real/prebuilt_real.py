"""Issue 31 on a real tree: builds run by a bisection when CI published prebuilt binaries for
every other commit of the range.

    .venv/bin/python benchmarks/real/prebuilt_real.py [--case zlibng-1935] [--parity odd]
        [--mirrors /work/.mirror] [--work /tmp/attrib-prebuilt-real] [--publish-cache ccache]

1. Publish: every other commit of the case's first-parent range (`--parity odd`: the 1st, 3rd, ...
   after good, which a bisection of 2^k commits never takes as a midpoint until its last steps;
   `even`: good, the 2nd, ...) built by attrib's real builder from the case's recipe (run.py's),
   its `attrib-bench` written as `<sha>.tar.gz` with `<sha>.tar.gz.sha256`, as a nightly CI would
   leave them. `--publish-cache ccache` makes them through the compiler cache to save this
   machine's time; that is sound for a tree whose binaries embed no path (zlib-ng: the same
   digests with and without it, REAL.md), and the end check would say otherwise (a
   `cache_mismatch` note: it builds the prebuilt culprit's ends again clean and compares).
2. Bisect twice with the real CLI, fresh work dirs, one after the other: the recipe as it is,
   and with `prebuilt = "<store>/{sha}.tar.gz"`.
3. Count the builds run: compilations (fresh builds not unpacked) plus the end check's clean
   builds (their logs, `*-uncached.log`), the culprit, the build phase's wall time, and whether
   the commits both runs have a binary of got the same digest.

Writes OUT.json and prints one line per bisection and the totals.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tarfile
import time
import tomllib
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import by_name  # noqa: E402
from run import loadavg, recipe_text, run_attrib, sh  # noqa: E402

from attrib.evaluate.builds import CheckoutBuilder  # noqa: E402
from attrib.evaluate.executors.local import LocalExecutor  # noqa: E402
from attrib.gitrepo import GitRepo, Mirror  # noqa: E402
from attrib.recipe import CompilerCache, parse_recipe  # noqa: E402
from attrib.workdir import WorkDir  # noqa: E402


def publish(src: Path, recipe: str, shas: list[str], store: Path, work: Path, cache: str | None) -> dict[str, str]:
    """Each of `shas` built by the real builder, its artifacts published in `store`; returns
    each published commit's artifact digest (as the builder hashed it)."""
    spec = parse_recipe(tomllib.loads(recipe), work / "r.toml").build
    if cache:
        spec = replace(spec, cache=CompilerCache(cache))
    wd = WorkDir(work.resolve())
    wd.root.mkdir(parents=True, exist_ok=True)
    repo = GitRepo(src)
    builder = CheckoutBuilder(wd, Mirror(wd.mirror, repo), LocalExecutor(wd.root), spec)
    store.mkdir(parents=True, exist_ok=True)
    digests = {}
    for i, sha in enumerate(shas):
        if (store / f"{sha}.tar.gz").exists():
            continue
        rec = builder.build(repo.info(sha))
        print(f"publish {i + 1}/{len(shas)} {sha[:10]}: {'ok' if rec.ok else rec.reason} in {rec.duration_s:.1f} s", flush=True)
        if not rec.ok:
            continue
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for name in spec.artifacts:
                tar.add(Path(rec.checkout) / name, arcname=name)
        data = buf.getvalue()
        (store / f"{sha}.tar.gz").write_bytes(data)
        (store / f"{sha}.tar.gz.sha256").write_text(hashlib.sha256(data).hexdigest() + "\n")
        digests[sha] = rec.artifact
        sh(["rm", "-rf", rec.checkout])  # only the archive is kept, as CI would
    return digests


def counted(root: Path, res: dict) -> dict:
    doc = json.loads((root / "attrib.json").read_text()) if (root / "attrib.json").exists() else {}
    builds = [c["build"] for c in doc.get("commits", []) if c.get("build") and not c["build"].get("cached")]
    checks = len(list((root / "attrib-work" / "logs").glob("*-uncached.log")))
    compiled = sum(b.get("how") != "prebuilt" for b in builds)
    return {
        "status": res.get("status"),
        "named": res.get("named"),
        "right": res.get("right"),
        "samples": res.get("samples"),
        "compiled": compiled,
        "prebuilt": sum(b.get("how") == "prebuilt" for b in builds),
        "checks": checks,
        "builds_run": compiled + checks,
        "build_s": (doc.get("phase_times_s") or {}).get("build"),
        "build_check_s": (doc.get("phase_times_s") or {}).get("build_check"),
        "wall_s": res.get("wall_s"),
        "artifacts": doc.get("artifacts", {}),
        "notes": [n["kind"] for n in doc.get("notes", [])],
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="zlibng-1935")
    ap.add_argument("--parity", choices=("even", "odd"), default="odd")
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/attrib-prebuilt-real"))
    ap.add_argument("--publish-cache", choices=("ccache",), default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    case = by_name(args.case)
    root = args.work / case.name
    root.mkdir(parents=True, exist_ok=True)
    src = root / "src.git"
    if not src.exists():
        sh(["git", "clone", "--quiet", "--bare", "--shared", str(args.mirrors / case.mirror / "repo"), str(src)])
    chain = [case.good, *GitRepo(src).first_parent_chain(case.good, case.bad)]
    text = recipe_text(case, "cpu")
    store = root / f"store-{args.parity}"
    chosen = chain[0 if args.parity == "even" else 1 :: 2]
    t0 = time.monotonic()
    published = publish(src, text, chosen, store, root / f"publish-{args.parity}", args.publish_cache)
    print(f"published {len(chosen)} of {len(chain)} commits in {time.monotonic() - t0:.0f} s", flush=True)
    rec: dict = {"case": case.name, "parity": args.parity, "commits": len(chain), "archives": len(chosen),
                 "publish_cache": args.publish_cache, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}  # fmt: skip
    rows = {}
    for name, extra in (("plain", ""), ("prebuilt", f'prebuilt = "{store}/{{sha}}.tar.gz"\n')):
        vroot = root / f"{name}-{args.parity}"
        vroot.mkdir(parents=True, exist_ok=True)
        load = loadavg()
        res = run_attrib(case, "cpu", src, vroot, text.replace("[build]\n", "[build]\n" + extra, 1))
        rows[name] = {**counted(vroot, res), "loadavg": f"{load} / {loadavg()}"}
        r = rows[name]
        print(
            f"{case.name} [{name}]: {r['status']} named {[c[:10] for c in r['named'] or []]} builds run {r['builds_run']}"
            f" ({r['compiled']} compiled + {r['checks']} end checks; {r['prebuilt']} unpacked) build wall {r['build_s']} s"
            f" (end check {r['build_check_s']} s) notes {r['notes']} load {r['loadavg']}",
            flush=True,
        )
    rec["rows"] = rows
    a, b = rows["plain"]["artifacts"], rows["prebuilt"]["artifacts"]
    both = set(a) & set(b)
    rec["same_digests"] = {"commits_in_both": len(both), "equal": all(a[s] == b[s] for s in both)}
    rec["published_equal_plain"] = all(a[s] == d for s, d in published.items() if s in a)
    before, after = rows["plain"]["builds_run"], rows["prebuilt"]["builds_run"]
    print(
        f"builds run: {before} -> {after} ({100 * (1 - after / max(before, 1)):.0f} % fewer); same digests where both"
        f" have one ({len(both)}): {rec['same_digests']['equal']}; archives equal to plain's builds: {rec['published_equal_plain']}"
    )
    out = args.out or root / f"prebuilt_real-{args.parity}.json"
    out.write_text(json.dumps(rec, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
