"""`attrib bisect` with several benchmarks (issue 29): a real git tree whose one command prints
`name value` lines for six kernels, two culprits, the real CLI and local executor."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from attrib.demo import generate_group_tree


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    # k00..k02 +6 % at commit 5, k03 +5 % at commit 13, k04 and k05 flat; 1 % noise per sample
    return generate_group_tree(
        tmp_path_factory.mktemp("group") / "suite", 6, 18, ((5, (0, 1, 2), 1.06), (13, (3,), 1.05)), seed=3
    )


def _bisect(tree, tmp_path, *benchmarks: str):
    flags = [x for b in benchmarks for x in ("--benchmark", b)]
    return run_cli(
        "bisect", "--repo", tree.path, "--good", tree.good, "--bad", tree.bad, "--recipe", tree.recipe,
        "--workdir", tmp_path / "work", "--json", tmp_path / "out.json", *flags,
    )  # fmt: skip


def test_a_group_names_each_culprit_with_exactly_its_members(tree, tmp_path):
    res = _bisect(tree, tmp_path, "k0[0-3]", "k05")
    assert res.code == 0, res.stderr[-2000:]
    doc = json.loads((tmp_path / "out.json").read_text())
    members = {m["benchmark"]: m for m in doc["members"]}
    assert list(members) == ["k00", "k01", "k02", "k03", "k05"]  # the order asked, globs expanded
    named: dict[str, set[str]] = {}
    for name, m in members.items():
        for c in m["culprits"]:
            named.setdefault(c["commit"], set()).add(name)
    assert named == {sha: set(ks) for sha, ks in tree.culprits.items()}
    assert members["k05"]["status"] == "not_reproduced"
    # every commit built once for the group, whatever its members measured
    assert doc["builds"] <= 2 * (5 + 4)


def test_an_unknown_member_is_one_line_naming_the_known_ones(tree, tmp_path):
    res = _bisect(tree, tmp_path, "k00", "gemm_*")
    assert res.code == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "gemm_*" in lines[0] and "k00, k01, k02, k03, k04, k05" in lines[0], res.stderr
    assert not (tmp_path / "work").exists()


def test_build_seconds_adds_a_sleep_to_the_build_and_nothing_else(tmp_path):
    from attrib.recipe import load_recipe

    plan = ((5, (0,), 1.06),)
    plain = generate_group_tree(tmp_path / "plain", 3, 8, plan, seed=3)
    slow = generate_group_tree(tmp_path / "slow", 3, 8, plan, seed=3, build_seconds=3)
    assert load_recipe(plain.recipe).build.commands == ("python3 -m py_compile bench.py",)
    assert load_recipe(slow.recipe).build.commands == ("python3 -m py_compile bench.py", "sleep 3")
    # the same history: only the recipe beside the tree differs
    assert (plain.good, plain.bad, plain.culprits) == (slow.good, slow.bad, slow.culprits)
    with pytest.raises(ValueError, match="build_seconds"):
        generate_group_tree(tmp_path / "bad", 3, 8, plan, build_seconds=-1)
