"""Descent into a roll, measured: each family of tests/dependency_tree.py (real git submodules
or a pin file, a benchmark whose cost is the compiler's with uniform noise of a known sd) is
bisected by `attrib bisect` through the CLI, and the chain it names is checked against the
planted one, with the builds it ran against ceil(log2 N_super) + ceil(log2 N_dep) + 6 (one
ceil(log2 N_dep) per dependency level the chain goes through: two for a nested submodule).

    .venv/bin/python benchmarks/dependency_rolls.py --seeds 3 --noise 1.0
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from dependency_tree import FAMILIES, Family, chain_of, family, recipe_text  # noqa: E402


def budget(fam: Family) -> int:
    levels = max(1, len(fam.chain) - 1)
    return math.ceil(math.log2(fam.n_super)) + levels * math.ceil(math.log2(fam.n_dep)) + 6


def verdict(fam: Family, result: dict) -> tuple[bool, str]:
    """(right, what it named) for one bisection's result."""
    if result["status"] != "culprit_found" or not result["culprits"]:
        return False, result["status"]
    shas, rolls = chain_of(result["culprits"][0])
    named = " -> ".join(s[:8] for s in shas)
    if fam.relation != "forward":
        roll = (result["culprits"][0]["rolls"] or [{}])[0]
        return shas == [fam.chain[0]] and roll.get("relation") == fam.relation, f"{named} ({roll.get('relation')})"
    inner = rolls[-1]["culprits"][0] if rolls and rolls[-1]["culprits"] else {}
    amb = tuple(inner.get("ambiguous_with", ()))
    return shas == list(fam.chain) and amb == fam.ambiguous, named + (f" (ambiguous with {len(amb)})" if amb else "")


def all_samples(doc: dict) -> int:
    """The samples of a result and of every search inside its rolls, recursively."""
    inner = sum(all_samples(r) for c in doc.get("culprits", ()) for r in c.get("rolls", ()))
    return doc.get("samples", 0) + inner


def trial(name: str, seed: int, noise: float, n_super: int, n_dep: int, root: Path) -> dict:
    fam = family(name, root / "trees", n_super=n_super, n_dep=n_dep, noise_pct=noise)
    recipe = root / "recipe.toml"
    recipe.write_text(recipe_text() + fam.recipe_extra)
    out = root / "result.json"
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "attrib", "bisect", "--repo", str(fam.kernel.path), "--good", fam.good, "--bad", fam.bad,
         "--recipe", str(recipe), "--workdir", str(root / "work"), "--json", str(out), "--seed", str(seed)],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    wall = time.monotonic() - start
    if not out.exists():
        return {"family": name, "seed": seed, "right": False, "named": f"exit {proc.returncode}: {proc.stderr[-300:]}",
                "builds": 0, "budget": budget(fam), "wall_s": wall}  # fmt: skip
    result = json.loads(out.read_text())
    right, named = verdict(fam, result)
    return {
        "family": name, "seed": seed, "right": right, "named": named, "builds": result["builds_fresh"],
        "budget": budget(fam), "samples": all_samples(result), "wall_s": round(wall, 1),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--noise", type=float, default=1.0, help="sd of the benchmark's noise, percent")
    ap.add_argument("--n-super", type=int, default=12)
    ap.add_argument("--n-dep", type=int, default=16)
    ap.add_argument("--families", nargs="*", default=list(FAMILIES))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    for name in args.families:
        for seed in range(1, args.seeds + 1):
            with tempfile.TemporaryDirectory(prefix="attrib-rolls-") as tmp:
                row = trial(name, seed, args.noise, args.n_super, args.n_dep, Path(tmp))
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| family | right | builds (max) | budget | samples, rolls included (median) | wall s (median) |\n|---|---:|---:|---:|---:|---:|")
    for name in args.families:
        rs = [r for r in rows if r["family"] == name]
        med = sorted(r.get("samples", 0) for r in rs)[len(rs) // 2]
        wall = sorted(r["wall_s"] for r in rs)[len(rs) // 2]
        print(f"| {name} | {sum(r['right'] for r in rs)}/{len(rs)} | {max(r['builds'] for r in rs)} | {rs[0]['budget']} | {med} | {wall} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
