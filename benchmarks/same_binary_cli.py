"""Same binary, same data on the real CLI (issue 39, point 4): samples of `attrib bisect` with
`[build] artifacts = ["bench"]` against the same tree and seed without artifacts.

    .venv/bin/python benchmarks/same_binary_cli.py --seeds 1 2 3 [--commits 40] [--out PATH]

The tree is the demo's (attrib.demo.generate_tree: a C loop compiled with cc, CPU-timed), with
no broken stretch and one +10 % culprit near the middle; churn commits change only comments,
so the compiled `bench` is byte-identical from good up to the culprit's parent and from the
culprit on. The recipe is recipes/demo-cpu.toml, once as shipped and once with the artifact
declared. Each seed builds a fresh tree and runs both bisections one after the other
(`--seed` passed to the CLI too), each in its own work dir, so neither reuses the other's builds.
Prints per seed the samples, the blocks' sizes and whether the culprit was named, then the
median ratio and the ratio of the totals.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from attrib.demo import DEMO_RECIPE, TreeSpec, generate_tree
from attrib.result import BisectResult, load_result

ARTIFACTS_LINE = 'artifacts = ["bench"]\n'


def recipe_text(artifacts: bool) -> str:
    """The demo's recipe, with the built binary declared as what the benchmark runs or not."""
    if not artifacts:
        return DEMO_RECIPE
    head, sep, rest = DEMO_RECIPE.partition("[build]\n")
    if not sep:
        raise SystemExit("recipes/demo-cpu.toml has no [build] table: this script must follow it")
    return head + sep + ARTIFACTS_LINE + rest


def bisect(repo: Path, recipe: Path, good: str, bad: str, workdir: Path, seed: int, out: Path) -> BisectResult:
    argv = [sys.executable, "-m", "attrib", "bisect", "--repo", str(repo), "--good", good, "--bad", bad,
            "--recipe", str(recipe), "--workdir", str(workdir), "--json", str(out), "--seed", str(seed)]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode not in (0, 10, 11):
        raise SystemExit(f"attrib bisect exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    result = load_result(out)
    assert isinstance(result, BisectResult)
    return result


def block_sizes(result: BisectResult) -> str:
    """The samples per run the bisection chose after its preflight (and the preflight's)."""
    if result.blocks is None:
        return "-"
    return f"{result.blocks.reps_before} -> {result.blocks.reps}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--commits", type=int, default=40)
    ap.add_argument("--work-base", type=int, default=200_000)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    lines = [
        f"`benchmarks/same_binary_cli.py --seeds {' '.join(map(str, args.seeds))} --commits {args.commits}` "
        f"(demo tree, one +10 % culprit, work_base {args.work_base}, the real CLI, local executor)",
        "",
        "| seed | culprit | with artifacts: samples (block sizes), named | without | ratio |",
        "|---|---|---|---|---:|",
    ]
    ratios: list[float] = []
    totals = [0, 0]
    for seed in args.seeds:
        with tempfile.TemporaryDirectory(prefix="attrib-same-binary-") as tmp:
            root = Path(tmp)
            at = args.commits // 2 - 1 + seed % 3
            spec = TreeSpec(commits=args.commits, culprits=((at, 10),), broken=None, work_base=args.work_base, seed=seed, gpu_culprit=False)
            tree = generate_tree(root / "tree", spec)
            row: list[tuple[int, str, bool]] = []
            for artifacts in (True, False):
                recipe = root / f"recipe-{artifacts}.toml"
                recipe.write_text(recipe_text(artifacts))
                result = bisect(tree.path, recipe, tree.good, tree.bad, root / f"work-{artifacts}", seed, root / f"{artifacts}.json")
                named = [c.commit for c in result.culprits] == tree.culprits
                row.append((result.samples, block_sizes(result), named))
            (sa, ba, na), (sn, bn, nn) = row
            ratios.append(sa / max(1, sn))
            totals[0] += sa
            totals[1] += sn
            lines.append(
                f"| {seed} | {at} | {sa} ({ba}), {'yes' if na else 'no'} | {sn} ({bn}), {'yes' if nn else 'no'} | {ratios[-1]:.2f}x |"
            )
            print(lines[-1], flush=True)
    lines += ["", f"artifacts / none, samples: median {statistics.median(ratios):.2f}x, totals {totals[0] / max(1, totals[1]):.2f}x"]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
