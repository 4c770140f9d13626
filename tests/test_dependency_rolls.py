"""Descent into a roll: a culprit that moves a submodule's pin is bisected inside the
dependency (the superproject at the roll's parent, the dependency at each candidate), through
the real CLI on trees with real submodules (tests/dependency_tree.py): the commit inside is
named with the roll as its context, recursively, for the one of two rolled dependencies that
matters, with an honest range around a build failure; a backward or unrelated roll is named
as the roll, saying why. Build counts are bounded by ceil(log2 N_super) + ceil(log2 N_dep) + 6."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import run_cli
from dependency_tree import BENCH_SH, Repo, chain_of, family, recipe_text

from attrib.core.model import RollRelation, Status
from attrib.report.markdown import title
from attrib.result import BisectResult, load_result


def _bisect(tmp_path: Path, fam) -> dict:
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(recipe_text() + fam.recipe_extra)
    out, report = tmp_path / "result.json", tmp_path / "report.md"
    res = run_cli(
        "bisect", "--repo", fam.kernel.path, "--good", fam.good, "--bad", fam.bad, "--recipe", recipe,
        "--workdir", tmp_path / "work", "--json", out, "--report", report,
    )  # fmt: skip
    assert res.code == 0, res.stdout + res.stderr
    result = json.loads(out.read_text())
    assert run_cli("report", out).code == 0  # the result reads back through its schema
    return result


def _budget(fam) -> int:
    """ceil(log2 N_super) + ceil(log2 N_dep) + 6, with a ceil(log2 N_dep) for each level of
    dependency the chain goes through (a nested submodule: two)."""
    return math.ceil(math.log2(fam.n_super)) + (len(fam.chain) - 1) * math.ceil(math.log2(fam.n_dep)) + 6


@pytest.mark.parametrize("name", ["roll", "two-rolled", "nested", "pin-file"])
def test_the_commit_inside_the_roll_is_named(tmp_path: Path, name: str):
    fam = family(name, tmp_path / "trees")
    result = _bisect(tmp_path, fam)
    assert result["status"] == "culprit_found"
    assert len(result["culprits"]) == 1
    shas, rolls = chain_of(result["culprits"][0])
    assert shas == list(fam.chain)
    assert all(r["relation"] == "forward" and r["status"] == "culprit_found" for r in rolls)
    assert result["builds_fresh"] <= _budget(fam)
    report = (tmp_path / "report.md").read_text()
    assert f"inside the roll of `{rolls[0]['path']}`" in report
    assert all(r["reproduce"].startswith("attrib bisect") for r in rolls)
    # the typed result reads the chain back, and a tracker's title names the dependency's commit
    typed = load_result(tmp_path / "result.json")
    inner = typed.culprits[0].rolls[0]
    assert inner.relation is RollRelation.FORWARD and inner.culprits[0].commit == fam.chain[1]
    assert f"from {fam.chain[-1][:10]}" in title(typed, typed.culprits[0])
    assert f"rolled by {fam.chain[0][:10]}" in title(typed, typed.culprits[0])


def test_of_two_dependencies_rolled_at_once_only_the_one_that_matters_names_a_commit(tmp_path: Path):
    fam = family("two-rolled", tmp_path / "trees")
    result = _bisect(tmp_path, fam)
    rolls = {r["path"]: r for r in result["culprits"][0]["rolls"]}
    assert set(rolls) == {"third_party/compiler", "third_party/docs"}
    assert rolls["third_party/docs"]["status"] == "not_reproduced" and not rolls["third_party/docs"]["culprits"]
    assert [c["commit"] for c in rolls["third_party/compiler"]["culprits"]] == [fam.chain[1]]


def test_a_build_failure_inside_the_roll_is_an_honest_range(tmp_path: Path):
    """As at the top: the step is named with the untestable commit before it it may also be."""
    fam = family("broken-inside", tmp_path / "trees")
    result = _bisect(tmp_path, fam)
    shas, rolls = chain_of(result["culprits"][0])
    inside = rolls[0]
    assert shas == list(fam.chain)
    assert inside["culprits"][0]["ambiguous_with"] == list(fam.ambiguous)
    assert [f["commit"] for f in inside["build_failures"]] == list(fam.ambiguous)
    assert "not a cost: broken" in inside["build_failures"][0]["log_tail"]
    assert "or one of 1 untestable before it" in (tmp_path / "report.md").read_text()
    assert result["builds_fresh"] <= _budget(fam)


@pytest.mark.parametrize("name", ["backwards", "unrelated"])
def test_a_roll_that_is_not_forward_is_named_as_the_roll_with_why(tmp_path: Path, name: str):
    fam = family(name, tmp_path / "trees")
    result = _bisect(tmp_path, fam)
    assert result["status"] == "culprit_found"
    (culprit,) = result["culprits"]
    assert culprit["commit"] == fam.chain[0]
    (roll,) = culprit["rolls"]
    assert roll["relation"] == fam.relation and roll["status"] is None and not roll["culprits"]
    assert {"backward": "ancestor of the old", "unrelated": "no common history"}[fam.relation] in roll["why"]
    assert roll["why"] in (tmp_path / "report.md").read_text()


def test_same_binary_verdicts_and_search_paths_hold_with_submodules(tmp_path: Path):
    """`artifacts`: the kernel's churn gives byte-identical binaries, settled without samples;
    `[search] paths`: only the commits touching the submodule are candidates. The descent still
    names the compiler's commit (paths name the superproject's files, not the dependency's)."""
    fam = family("roll", tmp_path / "trees")
    recipe = tmp_path / "recipe.toml"
    text = recipe_text().replace("[build]\n", '[build]\nartifacts = ["out/cost"]\n')
    recipe.write_text(text)
    out = tmp_path / "result.json"
    argv = ["bisect", "--repo", fam.kernel.path, "--good", fam.good, "--bad", fam.bad, "--recipe", recipe,
            "--workdir", tmp_path / "work", "--json", out]  # fmt: skip
    assert run_cli(*argv).code == 0
    result = json.loads(out.read_text())
    assert chain_of(result["culprits"][0])[0] == list(fam.chain)
    assert result["same_artifact"]  # churn commits: the binary of a commit already measured
    recipe.write_text(text + '\n[search]\npaths = ["third_party/"]\n')
    assert run_cli(*argv).code == 0
    result = json.loads(out.read_text())
    assert chain_of(result["culprits"][0])[0] == list(fam.chain)
    assert set(result["untouched"]) == set(fam.kernel.commits[1:]) - {fam.chain[0]}


GROUP_BUILD_SH = """#!/bin/sh
# Two kernels, each as slow as its own cost file of the compiler says.
set -e
mkdir -p out
for k in a b; do
  c=$(cat third_party/compiler/cost_$k.txt)
  case "$c" in ''|*[!0-9]*) echo "cost_$k.txt: not a cost: $c" >&2; exit 1;; esac
  echo "$c" > out/cost_$k
done
"""

GROUP_BENCH_SH = BENCH_SH.replace("out/cost", "out/cost_$2")

GROUP_RECIPE = """schema = 1
name = "kernels"

[build]
commands = ["sh build.sh"]
timeout_s = 120
"""

GROUP_MEMBER = """
[[benchmark]]
name = "kernel_{k}"
runner = "command"
command = ["sh", "bench.sh", "{{reps}}", "{k}"]
unit = "ms"
direction = "lower"
timeout_s = 60
reps = 10
min_change_pct = 3.0
"""


def test_each_member_of_a_group_descends_into_the_roll_to_its_own_commit(tmp_path: Path):
    """A group run (two benchmarks, `--benchmark kernel_a --benchmark kernel_b`): one kernel
    commit rolls the compiler across 16 commits, and inside it kernel_a is slowed by compiler
    commit 5, kernel_b by commit 11. Both members name the roll, and each descends into it to
    its own compiler commit."""
    n_super, roll, n_dep, at = 12, 7, 16, {"a": 5, "b": 11}
    compiler = Repo.init(tmp_path / "trees" / "compiler")
    for i in range(n_dep):
        costs = {f"cost_{k}.txt": f"{106 if i >= step else 100}\n" for k, step in at.items()}
        compiler.commit(f"compiler change {i}", costs)
    kernels = Repo.init(tmp_path / "trees" / "kernel")
    pin = "third_party/compiler"
    for i in range(n_super):
        files = {"build.sh": GROUP_BUILD_SH, "bench.sh": GROUP_BENCH_SH, "noise": "1.0\n"} if i == 0 else {}
        links = {pin: (compiler, compiler.commits[0 if i == 0 else -1])} if i in (0, roll) else {}
        kernels.commit("roll the compiler" if i == roll else f"kernel change {i}", {**files, **({} if links and i else {"README": f"{i}\n"})}, links)
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(GROUP_RECIPE + GROUP_MEMBER.format(k="a") + GROUP_MEMBER.format(k="b"))
    out = tmp_path / "result.json"
    res = run_cli(
        "bisect", "--repo", kernels.path, "--good", kernels.commits[0], "--bad", kernels.commits[-1], "--recipe", recipe,
        "--benchmark", "kernel_a", "--benchmark", "kernel_b", "--workdir", tmp_path / "work", "--json", out,
        "--report", tmp_path / "report.md",
    )  # fmt: skip
    assert res.code == 0, res.stdout + res.stderr
    result = load_result(out)
    assert isinstance(result, BisectResult) and result.status is Status.CULPRIT_FOUND
    (culprit,) = result.culprits  # the group's: the roll, moving both
    assert culprit.commit == kernels.commits[roll] and sorted(m.benchmark for m in culprit.members) == ["kernel_a", "kernel_b"]
    for member in result.members:
        k = member.benchmark.removeprefix("kernel_")
        (own,) = member.culprits
        assert own.commit == kernels.commits[roll], member.benchmark
        (inside,) = own.rolls
        assert (inside.path, inside.relation, inside.status) == (pin, RollRelation.FORWARD, Status.CULPRIT_FOUND)
        assert [c.commit for c in inside.culprits] == [compiler.commits[at[k]]], member.benchmark
    assert run_cli("report", out).code == 0
    report = (tmp_path / "report.md").read_text()
    assert f"inside the roll of `{pin}`" in report
    assert all(f"`{compiler.commits[i][:10]}`" in report for i in at.values())  # each member's own chain
