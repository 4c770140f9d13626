"""End to end: real git repositories, a real C benchmark compiled with cc, the real CLI.

Each scenario plants known culprits with attrib.demo and checks that `attrib bisect` names
exactly those commits, with the exit code scripts rely on, within the build budget.
"""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest
from conftest import assert_nothing_rebuilt, run_cli, spec

from attrib.demo import DEMO_RECIPE
from attrib.result import RESULT_SCHEMA

pytestmark = pytest.mark.slow


def _budget(n_commits: int) -> int:
    return math.ceil(math.log2(n_commits)) + 4


def _culprits(res) -> list[str]:
    return [c["commit"] for c in res.result["culprits"]]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


# The two tests that hold the search to issue 19's build bound draw their samples from a stated
# distribution (the demo program's `stated_noise_pct`: log-normal, 3 %, about this machine's
# paired noise) instead of timing a loop: timed, a loaded machine's noisy spells made the search
# build once or twice more in 1 run of 30, a verdict that depended on the load (issue 42). The
# trees, builds, CLI and search are as real as ever; the timed program is tested by the others.
STATED = 3.0


def test_one_culprit(make_tree, bisect, tmp_path):
    tree = make_tree(spec(commits=48, culprits=((29, 10),), broken=(10, 13), stated_noise_pct=STATED))
    before = (_git(tree.path, "status", "--porcelain"), _git(tree.path, "rev-parse", "HEAD"))
    res = bisect(tree)
    assert res.code == 0, res.stderr
    r = res.result
    assert r["schema"] == RESULT_SCHEMA and r["status"] == "culprit_found"
    assert _culprits(res) == tree.culprits
    culprit = r["culprits"][0]
    assert len(culprit["commit"]) == 40 and culprit["ambiguous_with"] == []
    assert culprit["confirmed"] is True
    assert 5.0 < culprit["change_pct"] < 15.0
    lo, hi = culprit["ci_pct"]
    assert lo < culprit["change_pct"] < hi
    assert r["builds"] <= _budget(48)
    assert r["samples"] == sum(c["samples"] for c in r["commits"])
    verdicts = {c["commit"]: c["verdict"] for c in r["commits"]}
    assert verdicts[tree.good] == "good" and verdicts[tree.bad] == "bad"
    assert verdicts[tree.culprits[0]] == "bad"
    # The user's repository is untouched: same HEAD, clean tree, no worktrees registered in it.
    assert (_git(tree.path, "status", "--porcelain"), _git(tree.path, "rev-parse", "HEAD")) == before
    assert not (tree.path / ".git" / "worktrees").exists()
    assert _git(tree.path, "worktree", "list").count("\n") == 1
    report = (tmp_path / "report.md").read_text()
    assert "Culprit found" in report and tree.culprits[0] in report
    assert "## Tested commits" in report and "attrib bisect --repo" in report
    assert "culprit: " + tree.culprits[0] in res.stdout


def test_two_culprits_each_with_its_share(make_tree, bisect):
    tree = make_tree(spec(commits=60, culprits=((17, 10), (44, 12)), broken=None))
    res = bisect(tree)
    assert res.code == 0, res.stderr
    assert _culprits(res) == tree.culprits
    shares = [c["share"] for c in res.result["culprits"]]
    assert all(0.2 < s < 0.8 for s in shares), shares
    changes = [c["change_pct"] for c in res.result["culprits"]]
    assert all(5.0 < c < 16.0 for c in changes), changes


def test_no_regression_is_not_reproduced(make_tree, bisect, tmp_path):
    tree = make_tree(spec(commits=40, culprits=(), broken=(5, 8)))
    res = bisect(tree)
    assert res.code == 10, res.stderr
    assert res.result["status"] == "not_reproduced"
    assert res.result["culprits"] == []
    assert res.result["builds"] == 2  # good and bad only: nothing to search
    assert "Not reproduced" in (tmp_path / "report.md").read_text()


def test_build_break_next_to_culprit_is_reported_as_ambiguous(make_tree, bisect):
    # Commits 20..23 do not build and the culprit is 24: which of them started it is unknowable.
    tree = make_tree(spec(commits=40, culprits=((24, 10),), broken=(20, 24)))
    res = bisect(tree)
    assert res.code == 0, res.stderr
    culprit = res.result["culprits"][0]
    assert culprit["commit"] == tree.culprits[0]
    assert set(culprit["ambiguous_with"]) <= set(tree.broken)
    assert culprit["ambiguous_with"], "the skipped commits before the culprit must be named"
    skipped = [c for c in res.result["commits"] if c["verdict"] == "skip"]
    assert skipped and all(c["commit"] in tree.broken for c in skipped)
    failures = res.result["build_failures"]
    assert failures and all("does not compile" in f["log_tail"] or "error" in f["log_tail"] for f in failures)


def test_build_break_away_from_culprit_is_skipped(make_tree, bisect):
    tree = make_tree(spec(commits=64, culprits=((45, 10),), broken=(30, 35), stated_noise_pct=STATED))
    res = bisect(tree)
    assert res.code == 0, res.stderr
    assert _culprits(res) == tree.culprits
    assert res.result["culprits"][0]["ambiguous_with"] == []
    assert any(c["verdict"] == "skip" for c in res.result["commits"])
    assert res.result["builds"] <= _budget(64)


def test_culprit_inside_a_merge_is_named(make_tree, bisect):
    tree = make_tree(spec(commits=40, culprits=(), broken=None, merge_at=25, side_commits=5, side_culprit=(3, 10)))
    res = bisect(tree)
    assert res.code == 0, res.stderr
    assert _culprits(res) == tree.culprits
    assert res.result["culprits"][0]["via_merge"] == tree.merge


def test_bimodal_interference_noise(make_tree, bisect):
    # A quarter of the repetitions do 30 % more work: the classic "another job on the box" shape.
    tree = make_tree(spec(commits=50, culprits=((33, 10),), broken=None, interfere_pct=25, interfere_extra_pct=30))
    res = bisect(tree)
    assert res.code == 0, res.stderr
    assert _culprits(res) == tree.culprits


def test_second_run_rebuilds_nothing(make_tree, bisect, tmp_path):
    tree = make_tree(spec(commits=32, culprits=((20, 10),), broken=(8, 10)))
    first = bisect(tree)
    assert first.code == 0, first.stderr
    assert first.result["builds_fresh"] == first.result["builds"] > 0
    second = bisect(tree)
    assert second.code == 0, second.stderr
    # Nothing the first run built is built again. (Not "no fresh build at all": the runs time a
    # real program, and on a loaded machine the second search may probe a commit the first did
    # not; a commit first met there is a fresh build, and the only one.)
    assert_nothing_rebuilt(first.result, second.result)
    assert _culprits(second) == _culprits(first) == tree.culprits


def test_build_timeout_is_a_skip_and_a_failing_benchmark_too(make_tree, tmp_path, bisect):
    tree = make_tree(spec(commits=40, culprits=((26, 10),), broken=(18, 22)))
    # The broken stretch hangs (sleep 60) instead of failing: a timeout of 10 s, not less, since a
    # healthy build of one C file took several seconds on a loaded CI machine. Commit 25's benchmark crashes.
    crash_subject = _git(tree.path, "log", "--format=%s", "-1", f"{tree.culprits[0]}~1").strip()
    recipe = tmp_path / "hang.toml"
    recipe.write_text(
        f"""
schema = 1
name = "hang"
[build]
commands = ["if grep -q 'does not compile' util.c; then sleep 60; fi", "make bench"]
timeout_s = 10
[[benchmark]]
name = "loop"
runner = "command"
command = ["sh", "-c", "git log -1 --format=%s | grep -qF '{crash_subject}' && exit 3; exec ./bench {{reps}}"]
"""
    )
    res = bisect(tree, recipe=recipe)
    assert res.code == 0, res.stderr
    assert _culprits(res) == tree.culprits
    reasons = [f["reason"] for f in res.result["build_failures"]]
    assert reasons and all("timed out" in r for r in reasons)
    # The crashing parent is a skip, so the culprit is ambiguous with it, never a wrong pick.
    parent = _git(tree.path, "rev-parse", f"{tree.culprits[0]}~1").strip()
    rows = {c["commit"]: c for c in res.result["commits"]}
    if parent in rows:
        assert rows[parent]["verdict"] == "skip"
        assert rows[parent]["failed_runs"]
        assert parent in res.result["culprits"][0]["ambiguous_with"]


def test_report_rerenders_from_json(make_tree, bisect, tmp_path):
    tree = make_tree(spec(commits=20, culprits=((12, 10),), broken=None))
    res = bisect(tree)
    assert res.code == 0, res.stderr
    again = run_cli("report", tmp_path / "result.json", "--out", tmp_path / "again.md")
    assert again.code == 0, again.stderr
    # Identical, except that each report links the plot written next to it (when matplotlib is there).
    original = (tmp_path / "report.md").read_text()
    rerendered = (tmp_path / "again.md").read_text()
    assert rerendered.replace("(again.png)", "(report.png)") == original
    assert ("(report.png)" in original) == (tmp_path / "report.png").exists() == (tmp_path / "again.png").exists()


def test_compare_reproduces_the_culprit_step(make_tree, bisect, tmp_path):
    tree = make_tree(spec(commits=16, culprits=((9, 10),), broken=None))
    res = bisect(tree)
    assert res.code == 0, res.stderr
    cmd = res.result["culprits"][0]["reproduce"].split()
    assert cmd[:2] == ["attrib", "compare"]
    again = run_cli(*cmd[1:], "--workdir", tmp_path / "work")
    assert again.code == 0, again.stderr
    assert again.stdout.startswith("bad:")
    # Two builds of the same code: "not worse" needs more rounds than "worse by 10 %" does.
    same = run_cli(*cmd[1:-2], "--workdir", tmp_path / "work", "--max-rounds", "80", tree.good, f"{tree.culprits[0]}~1")
    assert same.code == 10, same.stdout + same.stderr


def test_verify_revert_recovers_and_a_conflict_is_skipped(make_tree, bisect, tmp_path):
    # Both culprits edit the same line of params.h: reverting the first on top of bad conflicts,
    # reverting the second applies and must take its slowdown away.
    tree = make_tree(spec(commits=40, culprits=((12, 10), (29, 12)), broken=None))
    res = bisect(tree, "--verify", "revert")
    assert res.code == 0, res.stderr
    assert _culprits(res) == tree.culprits
    first, second = res.result["culprits"]
    assert first["revert"]["status"] == "conflict"
    assert second["revert"]["status"] == "recovered"
    assert second["revert"]["bad_vs_reverted_pct"] > 3.0
    report = (tmp_path / "report.md").read_text()
    assert "revert check: the regression goes away" in report and "skipped: the revert conflicts" in report
    assert second["posterior"] > 0.9
    # The revert commit lives in attrib's mirror, never in the user's repository.
    assert _git(tree.path, "for-each-ref", "refs/attrib") == ""
    assert _git(tree.path, "status", "--porcelain") == ""


def test_samples_flagged_disturbed_are_excluded_and_counted(make_tree, bisect, tmp_path):
    tree = make_tree(spec(commits=20, culprits=((11, 10),), broken=None))
    recipe = tmp_path / "flag.toml"
    recipe.write_text(
        DEMO_RECIPE.replace(
            'command = ["./bench", "{reps}"]',
            'command = ["sh", "-c", "./bench {reps}; echo 0.5 disturbed: sm clock throttled; echo 9 disturbed"]',
        )
    )
    res = bisect(tree, recipe=recipe)
    assert res.code == 0, res.stderr
    assert _culprits(res) == tree.culprits
    excluded = res.result["excluded_samples"]
    # every run flags one sample; adaptive blocks may have made runs longer than the recipe's 10
    # samples (they did under load: 118 "runs" of 10 counted against 30 flagged), so the runs
    # are at least the samples over the longest run
    blocks = res.result.get("blocks") or {}
    per_run = max(10, blocks.get("reps_before") or 10, blocks.get("reps") or 10)
    runs = sum(c["samples"] for c in res.result["commits"]) // per_run
    assert excluded["sm clock throttled"] >= runs > 0
    assert excluded["flagged by the benchmark"] == excluded["sm clock throttled"]
    assert "excluded samples" in (tmp_path / "report.md").read_text()
