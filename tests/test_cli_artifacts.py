"""End to end, issue 12: builds and samples spent only where they decide something.

Real git trees from attrib.demo (most commits there are docs, comments or build-file comments:
their compiled `bench` is byte-identical to their parent's), real builds with cc, the real CLI.
"""

from __future__ import annotations

import pytest
from conftest import spec

from attrib.demo import DEMO_RECIPE

pytestmark = pytest.mark.slow


def _recipe(tmp_path, build_extra: str = "", top_extra: str = "", name: str = "r.toml"):
    text = DEMO_RECIPE.replace("[build]\n", "[build]\n" + build_extra, 1) + top_extra
    path = tmp_path / name
    path.write_text(text)
    return path


def _measured(result) -> dict[str, int]:
    return {c["commit"]: c["samples"] for c in result["commits"] if c["samples"]}


def test_only_changed_binaries_are_measured_and_the_culprits_are_exact(make_tree, bisect, tmp_path):
    tree = make_tree(spec(commits=40, culprits=((13, 10), (29, 10)), broken=None))
    with_art = bisect(tree, recipe=_recipe(tmp_path, 'artifacts = ["bench"]\n'), workdir=tmp_path / "w1")
    assert with_art.code == 0, with_art.stderr
    r = with_art.result
    assert [c["commit"] for c in r["culprits"]] == tree.culprits
    assert all(c["confirmed"] and c["size_p"] >= 0.5 for c in r["culprits"])
    arts = r["artifacts"]
    # The tree has three distinct binaries (before, between and after the two culprits).
    assert len(set(arts.values())) == 3
    # No comparison of two byte-identical builds drew a sample, and every one of them was
    # settled by the same-artifact rule.
    for comp in r["comparisons"]:
        if arts.get(comp["candidate"]) == arts.get(comp["reference"]):
            assert comp["samples"] == 0 and comp["rule"] == "same_artifact", comp
    # Each binary is measured in at most one commit besides the two references.
    measured = _measured(r)
    others = [sha for sha in measured if sha not in (tree.good, tree.bad)]
    assert len({arts[s] for s in others}) == len(others), (others, arts)
    assert r["same_artifact"] and r["samples_saved_estimate"] > 0
    # The same bisection without artifacts: same answer, more commits measured. (Not "more
    # samples": the posterior search's samples follow the machine's noise in each run, and on a
    # loaded machine one run's reference can draw twice another's; what the same-artifact
    # rule saves is measuring the byte-identical commits at all.)
    without = bisect(tree, workdir=tmp_path / "w2")
    assert without.code == 0, without.stderr
    assert [c["commit"] for c in without.result["culprits"]] == tree.culprits
    assert len(measured) < len(_measured(without.result)), (measured, _measured(without.result))
    report = (tmp_path / "report.md").read_text()
    assert "same binary as" not in report  # the last report is the run without artifacts


def test_same_binary_lines_in_the_report(make_tree, bisect, tmp_path):
    tree = make_tree(spec(commits=16, culprits=((9, 10),), broken=None))
    res = bisect(tree, recipe=_recipe(tmp_path, 'artifacts = ["bench"]\n'))
    assert res.code == 0, res.stderr
    report = (tmp_path / "report.md").read_text()
    assert "same binary as" in report and "samples saved" in report


def test_artifacts_differing_only_by_a_timestamp_are_reported(make_tree, bisect, tmp_path):
    tree = make_tree(spec(commits=12, culprits=((7, 10),), broken=None))
    stamp = 'commands = ["make bench", "date -u +%Y-%m-%dT%H:%M:%S.%N > version.txt"]\n'
    recipe_text = DEMO_RECIPE.replace('commands = ["make bench"]\n', stamp + 'artifacts = ["bench", "version.txt"]\n')
    recipe = tmp_path / "stamp.toml"
    recipe.write_text(recipe_text)
    res = bisect(tree, recipe=recipe)
    assert res.code == 0, res.stderr
    r = res.result
    assert [c["commit"] for c in r["culprits"]] == tree.culprits
    # Every build stamps its own time: no two artifacts are equal, so nothing is shortcut...
    assert not r["same_artifact"]
    # ...but attrib says why, instead of silently measuring byte-different builds of one program.
    notes = r["artifact_notes"]
    assert notes and all(n["traps"] == ["timestamp"] for n in notes)
    assert "timestamp" in (tmp_path / "report.md").read_text()


def test_search_paths_skip_commits_that_touch_none(make_tree, bisect, tmp_path):
    tree = make_tree(spec(commits=24, culprits=((15, 10),), broken=None))
    recipe = _recipe(tmp_path, top_extra='\n[search]\npaths = ["params.h", "bench.c"]\n')
    res = bisect(tree, recipe=recipe)
    assert res.code == 0, res.stderr
    r = res.result
    assert [c["commit"] for c in r["culprits"]] == tree.culprits
    untouched = set(r["untouched"])
    assert len(untouched) >= 20  # every churn commit: docs, util.c, Makefile
    built = {c["commit"] for c in r["commits"] if c["build"] is not None}
    assert built & untouched <= {tree.bad}  # bad is the given reference: always built
    assert r["builds"] == 3  # good, bad and the one commit that touches params.h


def test_a_half_minimum_step_before_a_real_culprit_is_not_named(make_tree, bisect, tmp_path):
    # +1 % of work at commit 6 (a fifth of the recipe's 5 % minimum), +10 % at commit 14.
    tree = make_tree(spec(commits=20, culprits=((6, 1), (14, 10)), broken=None))
    res = bisect(tree, recipe=_recipe(tmp_path, 'artifacts = ["bench"]\n'))
    assert res.code == 0, res.stderr
    r = res.result
    assert [c["commit"] for c in r["culprits"]] == [tree.culprits[1]]
    for step in r["smaller_steps"]:  # if the small step was confirmed at all, it is reported apart
        assert step["commit"] == tree.culprits[0] and step["size_p"] < 0.5
