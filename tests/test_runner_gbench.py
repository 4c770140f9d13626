"""The gbench runner on a real Google Benchmark binary (Debian's libbenchmark-dev), through the
local executor; and a real C++ tree with a planted slowdown bisected end to end by the CLI."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest
from conftest import bisect_cli, run_cli
from gbench_tree import BUILD, RECIPE, gbench_missing, make_gbench_tree

from attrib.evaluate.executors.local import LocalExecutor
from attrib.evaluate.runners.gbench import GbenchRunner
from attrib.recipe import parse_recipe

pytestmark = pytest.mark.skipif(bool(gbench_missing()), reason=gbench_missing() or "-")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """One built checkout of the tree (the first commit), shared by the runner tests."""
    tree = make_gbench_tree(tmp_path_factory.mktemp("gb") / "repo", commits=1, culprit_at=99)
    subprocess.run(["sh", "-c", BUILD], cwd=tree.path, check=True)
    return tree.path


def _runner(tmp_path: Path, **gbench: str) -> GbenchRunner:
    data = tomllib.loads(RECIPE)
    data["benchmark"][0]["gbench"].update(gbench)
    return GbenchRunner(LocalExecutor(), parse_recipe(data, tmp_path / "r.toml").benchmarks[0])


def test_each_repetition_is_one_sample_in_the_recipe_unit(built, tmp_path):
    res = _runner(tmp_path).run(built)
    assert res.ok, res.error
    assert len(res.samples) == 5  # reps = 5: the aggregates (mean, median, stddev, cv) are not samples
    # ~40 000 dependent multiply-adds take tens of microseconds at least on any CPU; the JSON says ns.
    assert all(10 < s < 100_000 for s in res.samples), res.samples


def test_filter_matching_several_lists_them(built, tmp_path):
    res = _runner(tmp_path, filter="^BM_Mix").run(built)
    assert res.samples == ()
    assert res.error == (
        "filter '^BM_Mix' matched 2 benchmarks; it must match exactly one "
        "(names seen: BM_Mix/iterations:40, BM_MixSmall/iterations:100)"
    )


def test_filter_matching_nothing_lists_what_the_binary_has(built, tmp_path):
    res = _runner(tmp_path, filter="^BM_Copy").run(built)
    assert res.error == (
        "no such benchmark: filter '^BM_Copy' matched no benchmark; it must match exactly one "
        "(names seen: BM_Mix/iterations:40, BM_MixSmall/iterations:100, BM_Fails)"
    )


def test_a_filter_matching_nothing_at_the_references_is_bad_input_exit_2(tmp_path):
    """Issue 33: the real CLI on the real tree, with a filter no revision has: the references
    cannot be measured because the recipe is wrong, which is exit 2 (README), not exit 1."""
    tree = make_gbench_tree(tmp_path / "repo", commits=3, culprit_at=2)
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(RECIPE.replace('filter = "^BM_Mix/', 'filter = "^BM_Copy/'))
    assert 'filter = "^BM_Copy/' in recipe.read_text()
    res = run_cli(
        "bisect", "--repo", tree.path, "--good", tree.good, "--bad", tree.bad, "--recipe", recipe,
        "--workdir", tmp_path / "work", "--json", tmp_path / "result.json",
    )  # fmt: skip
    assert res.code == 2, res.stdout + res.stderr
    [line] = [ln for ln in res.stderr.splitlines() if ln.startswith("attrib: error")]
    assert "no such benchmark: filter '^BM_Copy/" in line and "names seen: BM_Mix" in line, line


def test_error_occurred_is_a_failed_run_with_its_message(built, tmp_path):
    res = _runner(tmp_path, filter="^BM_Fails$").run(built)
    assert res.error == "benchmark 'BM_Fails' reported error_occurred: input file missing"


def test_a_checkout_without_the_binary_is_a_failed_run(tmp_path):
    res = _runner(tmp_path).run(tmp_path)
    assert res.error == "cannot start ./bench_mix: No such file or directory"


@pytest.mark.slow
def test_a_google_benchmark_tree_is_bisected_to_its_culprit(tmp_path):
    tree = make_gbench_tree(tmp_path / "repo")
    res, result = bisect_cli(tmp_path, tree, RECIPE)
    assert result["status"] == "culprit_found"
    assert [c["commit"] for c in result["culprits"]] == [tree.culprit]
    culprit = result["culprits"][0]
    # WORK_ROUNDS grew by 40 %: the measured step is a slowdown of that order.
    assert 20 < culprit["change_pct"] < 60, culprit
    assert result["unit"] == "us"
    verdicts = {c["commit"]: c["verdict"] for c in result["commits"]}
    assert verdicts[tree.good] == "good" and verdicts[tree.bad] == "bad"


def test_a_run_reports_what_its_repetitions_cost_for_adaptive_blocks(built, tmp_path):
    # each repetition row carries iterations and the real time per iteration: their products
    # are the samples' wall time; the rest of the run (start-up, the iteration-count search)
    # is its overhead
    res = _runner(tmp_path).run(built)
    assert res.ok, res.error
    assert res.sample_s is not None and 0 < res.sample_s < res.duration_s
    sized = _runner(tmp_path).with_reps(3).run(built)
    assert len(sized.samples) == 3 and sized.sample_s is not None
