"""Issue 31: builds run by a bisection when CI published prebuilt binaries for every other commit.

    .venv/bin/python benchmarks/prebuilt_builds.py [--trials 3] [--commits 64] [--work /tmp/attrib-prebuilt]
        [--source dir|github]

Per trial: a demo tree (attrib.demo, seed = trial, one 10 % culprit at a position drawn from the
seed), bisected by the real CLI twice in fresh work dirs: without `prebuilt`, and with
`prebuilt` pointing at a directory holding an archive (and its sha256) of `bench` for every
other commit of the range (`--source github`: a GitHub Actions artifact, a zip of `bench`, of a
successful run for every other commit, served by the strict loopback GitHub of the tests,
tests/fake_github_actions.py, and read through [build.prebuilt_github]; `--parity odd`, the default: the commits at odd positions after
good, which a bisection of 2^k commits never takes as a midpoint until its last steps; `even`
are the midpoints, a flattering case), made beforehand by the real builder from the same recipe. Counts
the builds run: compilations, i.e. fresh builds not unpacked, plus the clean builds of the
culprit's ends that the check makes (their logs, `*-uncached.log`). Prints one line per trial
and the totals; writes OUT.json.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import random
import subprocess
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_github_actions import TOKEN, FakeActions, recipe_table, serving, zip_of  # noqa: E402

from attrib.demo import DEMO_RECIPE, TreeSpec, generate_tree
from attrib.evaluate.builds import CheckoutBuilder
from attrib.evaluate.executors.local import LocalExecutor
from attrib.gitrepo import GitRepo, Mirror
from attrib.recipe import BuildSpec
from attrib.workdir import WorkDir

TOKEN_ENV = "ATTRIB_BENCH_GITHUB_TOKEN"


def recipe(extra: str) -> str:
    return DEMO_RECIPE.replace("[build]\n", '[build]\nartifacts = ["bench"]\n' + extra, 1)


def publish(tree_path: Path, shas: list[str], store: Path, work: Path, github: FakeActions | None) -> None:
    """Each of `shas` built by the real builder; its `bench` published in `store` as a tar.gz and
    its sha256, or, with `github`, as a successful run's artifact `bench-<sha>` (a zip)."""
    wd = WorkDir(work.resolve())
    builder = CheckoutBuilder(
        wd, Mirror(wd.mirror, GitRepo(tree_path)), LocalExecutor(),
        BuildSpec(commands=("make bench",), env={"CFLAGS": "-O2"}, timeout_s=120, artifacts=("bench",)),
    )  # fmt: skip
    repo = GitRepo(tree_path)
    store.mkdir(parents=True, exist_ok=True)
    for sha in shas:
        rec = builder.build(repo.info(sha))
        if not rec.ok:
            continue
        if github is not None:
            github.publish(sha, zip_of({"bench": (Path(rec.checkout) / "bench").read_bytes()}), f"bench-{sha}")
            continue
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.add(Path(rec.checkout) / "bench", arcname="bench")
        data = buf.getvalue()
        (store / f"{sha}.tar.gz").write_bytes(data)
        (store / f"{sha}.tar.gz.sha256").write_text(hashlib.sha256(data).hexdigest() + "\n")


def bisect(tree, text: str, root: Path) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    (root / "r.toml").write_text(text)
    out = root / "result.json"
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "attrib", "bisect", "--repo", str(tree.path), "--good", tree.good, "--bad", tree.bad,
         "--recipe", str(root / "r.toml"), "--workdir", str(root / "work"), "--json", str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    if not out.exists():
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    doc = json.loads(out.read_text())
    builds = [c["build"] for c in doc["commits"] if c["build"] and not c["build"]["cached"]]
    checks = len(list((root / "work" / "logs").glob("*-uncached.log")))
    return {
        "culprits": [c["commit"] for c in doc["culprits"]],
        "prebuilt": sum(b.get("how") == "prebuilt" for b in builds),
        "compiled": sum(b.get("how") != "prebuilt" for b in builds),
        "checks": checks,
        "builds_run": sum(b.get("how") != "prebuilt" for b in builds) + checks,
        "samples": doc["samples"],
        "wall_s": round(time.monotonic() - t0, 1),
        "notes": [n["kind"] for n in doc["notes"]],
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--commits", type=int, default=64)
    ap.add_argument("--work", type=Path, default=Path("/tmp/attrib-prebuilt"))
    ap.add_argument("--out", type=Path, default=Path("/tmp/attrib-prebuilt/prebuilt_builds.json"))
    ap.add_argument(
        "--parity", choices=("even", "odd"), default="odd",
        help="which every other commit has an archive: odd ones are never a bisection's midpoint of a 2^k range",
    )  # fmt: skip
    ap.add_argument("--source", choices=("dir", "github"), default="dir", help="where the prebuilt binaries are published")
    args = ap.parse_args()
    os.environ[TOKEN_ENV] = TOKEN  # the bisections' subprocesses read it
    with serving() if args.source == "github" else contextlib.nullcontext() as github:
        return run(args, github)


def run(args: argparse.Namespace, github: FakeActions | None) -> int:
    rows = []
    for trial in range(1, args.trials + 1):
        at = random.Random(trial).randrange(8, args.commits - 8)
        root = args.work / f"trial-{trial}"
        tree = generate_tree(
            root / "repo",
            TreeSpec(
                commits=args.commits,
                culprits=((at, 10),),
                broken=None,
                seed=trial,
                gpu_culprit=False,
                work_base=1_000_000,
            ),
        )
        chain = [tree.good, *GitRepo(tree.path).first_parent_chain(tree.good, tree.bad)]
        publish(tree.path, chain[0 if args.parity == "even" else 1 :: 2], root / "store", root / "publish", github)
        plain = bisect(tree, recipe(""), root / "plain")
        key = recipe_table(github.api_url, TOKEN_ENV) if github else f'prebuilt = "{root / "store"}/{{sha}}.tar.gz"\n'
        asked = len(github.seen) if github else 0
        pre = bisect(tree, recipe(key), root / "prebuilt")
        row = {"trial": trial, "source": args.source, "culprit": tree.culprits, "plain": plain, "prebuilt": pre}
        if github is not None:
            row["github_requests"] = len(github.seen) - asked  # the bisection's, API and storage
        rows.append(row)
        print(
            f"trial {trial}: culprit at {at}; plain: right={plain.get('culprits') == tree.culprits} builds run {plain.get('builds_run')};"
            f" prebuilt every other commit: right={pre.get('culprits') == tree.culprits} builds run {pre.get('builds_run')}"
            f" ({pre.get('compiled')} compiled + {pre.get('checks')} end checks; {pre.get('prebuilt')} unpacked)"
            + (f"; {row['github_requests']} requests to GitHub" if github else ""),
            flush=True,
        )
    plain_total = sum(r["plain"].get("builds_run", 0) for r in rows)
    pre_total = sum(r["prebuilt"].get("builds_run", 0) for r in rows)
    print(f"builds run: {plain_total} -> {pre_total} ({100 * (1 - pre_total / max(plain_total, 1)):.0f} % fewer)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
