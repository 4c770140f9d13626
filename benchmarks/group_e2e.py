"""End-to-end group bisection (issue 29): a real git tree of 24 kernels, two culprits, the real CLI.

    .venv/bin/python benchmarks/group_e2e.py [--seed 1] [--commits 64] [--build-seconds 0] [--out PATH]

The tree (attrib.demo.generate_group_tree, in a temporary directory): `kernels.json` holds each
of 24 kernels' cost, and `bench.py` prints, per run, 10 `name value` lines for each kernel: its
cost times exp(noise), the noise Gaussian with sd 1 % in log space (the size the issue's tree
had), drawn fresh in every process. Commit A multiplies 16 kernels' costs by 1.05, commit B 3
others' by 1.04; every other commit touches a notes file. The recipe has one `command`
benchmark whose `names` are the 24 kernels, min_change_pct 2. Its build is `python3 -m
py_compile bench.py` (well under a second); `--build-seconds S` adds `sleep S` to it, so each
build takes about S s more of real wall time (idle time, no CPU), as a slow build would
(issue 39's tree had 3 s builds).

Then, with the real CLI (`python -m attrib bisect`, local executor): the 19 regressed kernels in
one `attrib bisect` (19 `--benchmark`s) in its own work dir, and the same 19 bisected one after
another, sharing a second work dir: each of those reuses the builds the earlier ones made (none
of the group's). Prints both wall times, the builds run (fresh) and the result JSON's phase
seconds (build, measure, decide; the rest of the wall is process start, git and writing), and
whether each culprit is named with exactly its members (from the result JSON's `members`).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from attrib.core.model import Status
from attrib.demo import generate_group_tree
from attrib.result import BisectResult, load_result

KERNELS = 24
NOISE = 0.01


def make_tree(
    root: Path, commits: int, seed: int, build_seconds: float = 0.0
) -> tuple[Path, Path, str, str, dict[str, set[str]]]:
    """The tree, its recipe, good, bad, and the truth: culprit sha -> the kernels it slowed."""
    rng = random.Random(seed)
    order = rng.sample(range(KERNELS), KERNELS)
    at_a, at_b = sorted(rng.sample(range(3, commits - 2), 2))
    tree = generate_group_tree(
        root / "tree", KERNELS, commits, ((at_a, tuple(order[:16]), 1.05), (at_b, tuple(order[16:19]), 1.04)),
        noise=NOISE, seed=seed, build_seconds=build_seconds,
    )  # fmt: skip
    return tree.path, tree.recipe, tree.good, tree.bad, {sha: set(ks) for sha, ks in tree.culprits.items()}


def bisect(repo: Path, recipe: Path, good: str, bad: str, workdir: Path, members: list[str], out: Path) -> tuple[float, int]:
    argv = [sys.executable, "-m", "attrib", "bisect", "--repo", str(repo), "--good", good, "--bad", bad,
            "--recipe", str(recipe), "--workdir", str(workdir), "--json", str(out)]  # fmt: skip
    for m in members:
        argv += ["--benchmark", m]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode not in (0, 10, 11):
        raise SystemExit(f"attrib bisect exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return time.perf_counter() - t0, proc.returncode


def typed(path: Path) -> BisectResult:
    result = load_result(path)
    assert isinstance(result, BisectResult)
    return result


def spent(path: Path) -> tuple[int, float, float, float]:
    """Fresh builds and the build, measure and decide seconds the result JSON records."""
    r = typed(path)
    t = r.phase_times_s
    return r.builds_fresh, t.build, t.measure, t.decide


def named(path: Path) -> dict[str, set[str]]:
    """culprit sha -> the members whose own outcome named it (a result of any schema, read typed)."""
    result = typed(path)
    out: dict[str, set[str]] = {}
    for m in result.members:
        if m.status is not Status.CULPRIT_FOUND:
            continue
        for c in m.culprits:
            out.setdefault(c.commit, set()).add(m.benchmark)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--commits", type=int, default=64)
    ap.add_argument("--build-seconds", type=float, default=0.0, help="each build also sleeps this long (default 0)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="attrib-group-e2e-") as tmp:
        root = Path(tmp)
        repo, recipe, good, bad, truth = make_tree(root, args.commits, args.seed, args.build_seconds)
        members = sorted(set().union(*truth.values()))
        group_s, rc = bisect(repo, recipe, good, bad, root / "work-group", members, root / "group.json")
        found = named(root / "group.json")
        group_spent = spent(root / "group.json")
        seq_s = 0.0
        seq_found: dict[str, set[str]] = {}
        each: list[tuple[int, float, float, float]] = []
        for m in members:
            s, _ = bisect(repo, recipe, good, bad, root / "work-seq", [m], root / f"{m}.json")
            seq_s += s
            each.append(spent(root / f"{m}.json"))
            for sha, who in named(root / f"{m}.json").items():
                seq_found.setdefault(sha, set()).update(who)
    seq_spent = (sum(e[0] for e in each), sum(e[1] for e in each), sum(e[2] for e in each), sum(e[3] for e in each))
    build = f"py_compile + sleep {args.build_seconds:g} s" if args.build_seconds > 0 else "py_compile only"
    lines = [
        f"`benchmarks/group_e2e.py --seed {args.seed} --commits {args.commits} --build-seconds {args.build_seconds:g}` "
        f"({KERNELS} kernels, noise {NOISE:.0%} per sample, steps +5 % on 16 and +4 % on 3, min change 2 %; build: "
        f"{build}; the real CLI, local executor; the group in its own work dir, the 19 one after another sharing "
        "another, each reusing the builds of those before it)",
        "",
        "| run | wall s | builds run | build s | measure s | decide s | each culprit named with exactly its members |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    runs = (
        ("the 19 in one `attrib bisect`", group_s, found, group_spent),
        ("the 19 one after another (summed)", seq_s, seq_found, seq_spent),
    )
    for label, secs, got, (fresh, b_s, m_s, d_s) in runs:
        per = "; ".join(
            f"{sha[:8]} ({len(want)} members): {'yes' if got.get(sha) == want else f'no (named for {len(got.get(sha, set()))}, {len(got.get(sha, set()) & want)} of them its own)'}"
            for sha, want in truth.items()
        )
        extra = sorted(set(got) - set(truth))
        per += f"; other commits named: {len(extra)}" if extra else ""
        lines.append(f"| {label} | {secs:.0f} | {fresh} | {b_s:.0f} | {m_s:.0f} | {d_s:.0f} | {per} |")
    lines.append("")
    lines.append(f"group / one after another: {group_s / seq_s:.2f}x the wall time (target <= 0.5x); group exit {rc}")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
