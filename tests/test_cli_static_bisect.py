"""`attrib bisect` on a static kernel metric, for real and without a GPU: NVRTC compiles the
fp32 GEMM against each commit's tuning header, and the commit whose occupancy hint makes the
kernel spill is named, deterministically. A commit whose header does not compile is skipped."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli

HEADER = "#define TM 8\n#define TN 8\n#define GEMM_MIN_BLOCKS {blocks}\n"
RECIPE = """\
schema = 1
name = "spills"

[build]
commands = ["true"]

[[benchmark]]
name = "sgemm-spills"
runner = "cupy"
min_change_pct = 5.0

[benchmark.cupy]
kernel = "gemm_fp32"
defines = { ATTRIB_TILE_HEADER = '"lib/tile.cuh"' }
include_dirs = ["include"]
metric = "spill_stores"
"""


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    env |= {"GIT_AUTHOR_NAME": "K", "GIT_AUTHOR_EMAIL": "k@example.com", "GIT_COMMITTER_NAME": "K", "GIT_COMMITTER_EMAIL": "k@example.com"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _tree(repo: Path) -> tuple[list[str], str]:
    (repo / "include" / "lib").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    header = repo / "include" / "lib" / "tile.cuh"
    shas, culprit = [], ""
    for i in range(12):
        if i == 3:
            header.write_text(HEADER.format(blocks=1) + "this is not C++\n")  # does not compile
        elif i == 7:
            header.write_text(HEADER.format(blocks=32))  # 32 registers per thread: the 8x8 tile spills
        elif i in (0, 4):
            header.write_text(HEADER.format(blocks=1))
        else:
            (repo / "NOTES.md").write_text(f"note {i}\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"change {i}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
        if i == 7:
            culprit = shas[-1]
    return shas, culprit


@pytest.mark.slow
def test_bisect_on_spill_stores_names_the_commit_that_made_the_kernel_spill(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shas, culprit = _tree(repo)
    recipe = tmp_path / "spills.toml"
    recipe.write_text(RECIPE)
    out = tmp_path / "result.json"
    run = run_cli(
        "bisect", "--repo", repo, "--good", shas[0], "--bad", shas[-1], "--recipe", recipe,
        "--workdir", tmp_path / "work", "--json", out, "--report", tmp_path / "report.md",
    )  # fmt: skip
    assert run.code == 0, run.stderr
    result = json.loads(out.read_text())
    assert [c["commit"] for c in result["culprits"]] == [culprit]
    diff = result["culprits"][0]["static_diff"]
    assert diff["spill_stores"][0] == 0 and diff["spill_stores"][1] > 0
    assert diff["registers"][1] <= 32 < diff["registers"][0]
    assert result["unit"] == "spill_stores + 1"
    report = (tmp_path / "report.md").read_text()
    assert "Static kernel diff" in report and "spill_stores" in report


GROUP_RECIPE = RECIPE + """
[[benchmark]]
name = "sgemm-registers"
runner = "cupy"
min_change_pct = 5.0

[benchmark.cupy]
kernel = "gemm_fp32"
defines = { ATTRIB_TILE_HEADER = '"lib/tile.cuh"' }
include_dirs = ["include"]
metric = "registers"
"""


@pytest.mark.slow
def test_a_group_of_static_metrics_files_the_largest_members_kernel_diff(tmp_path: Path) -> None:
    # Two members on the same kernel, each its own metric: the culprit makes it spill (worse)
    # with fewer registers (better, so that member did not regress); the group's culprit lists
    # the member it moved and carries the static kernel diff that member's own runner reported.
    repo = tmp_path / "repo"
    shas, culprit = _tree(repo)
    recipe = tmp_path / "spills.toml"
    recipe.write_text(GROUP_RECIPE)
    out = tmp_path / "result.json"
    run = run_cli(
        "bisect", "--repo", repo, "--good", shas[0], "--bad", shas[-1], "--recipe", recipe,
        "--benchmark", "sgemm-spills", "--benchmark", "sgemm-registers", "--workdir", tmp_path / "work", "--json", out,
        "--file-issue", f"dir:{tmp_path / 'filed'}",
    )  # fmt: skip
    assert run.code == 0, run.stderr
    result = json.loads(out.read_text())
    assert [m["benchmark"] for m in result["members"]] == ["sgemm-spills", "sgemm-registers"]
    (c,) = result["culprits"]
    assert c["commit"] == culprit and [m["benchmark"] for m in c["members"]] == ["sgemm-spills"]
    assert c["static_diff"]["spill_stores"][0] == 0 < c["static_diff"]["spill_stores"][1]
    assert c["static_diff"]["registers"][1] <= 32 < c["static_diff"]["registers"][0]
    assert [m["status"] for m in result["members"]] == ["culprit_found", "not_reproduced"]
    (issue,) = (tmp_path / "filed").glob("*/report.md")
    text = issue.read_text()
    assert "| spill_stores | 0 |" in text and "It moved 1 of 2 benchmarks" in text
