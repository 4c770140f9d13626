"""Test trees whose "benchmark" is tests/fixtures/nvbench/fake_nvbench.py: NVBench's recorded
JSON (axes_ref.json, from NVBench's repository) replayed with every time scaled per commit.
Nothing here ran on a GPU (tests/fixtures/nvbench/README.md)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from conftest import OneCulpritTree, git

FIXTURES = Path(__file__).parent / "fixtures" / "nvbench"

RECIPE = f"""schema = 1
name = "nvbench-tree"

[build]
commands = ["test -f axes_ref.json"]

[[benchmark]]
name = "grid"
runner = "nvbench"
command = ["{sys.executable}", "fake_nvbench.py"]
reps = 20

[benchmark.nvbench]
benchmark = "copy_sweep_grid_shape"
axes = {{ BlockSize = "2^8", NumBlocks = "2^10" }}
"""


def stage(path: Path, scale: float = 1.0) -> Path:
    """A directory holding the fake NVBench benchmark and its recorded states."""
    path.mkdir(parents=True, exist_ok=True)
    for name in ("fake_nvbench.py", "axes_ref.json"):
        shutil.copy(FIXTURES / name, path / name)
    (path / "scale.txt").write_text(f"{scale}\n")
    return path


def make_nvbench_tree(
    path: Path, commits: int = 8, culprit_at: int = 5, step: float = 1.12, broken: tuple[int, int] | None = None
) -> OneCulpritTree:
    """`broken=(lo, hi)`: commits lo..hi-1 record NVBench JSON of file version 2.0.0, which
    no reader knows (their benchmark output is malformed); commit hi restores it."""
    stage(path)
    recorded = (path / "axes_ref.json").read_text()
    unknown = json.loads(recorded)
    unknown["meta"]["version"]["json"].update(major=2, string="2.0.0")
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "test")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "copy kernels and their NVBench benchmarks")
    good = git(path, "rev-parse", "HEAD")
    culprit = ""
    for i in range(1, commits + 1):
        if i == culprit_at:
            (path / "scale.txt").write_text(f"{step}\n")
        else:
            (path / f"note{i}.md").write_text(f"note {i}\n")
        if broken and broken[0] <= i < broken[1]:
            (path / "axes_ref.json").write_text(json.dumps(unknown, indent=2) + "\n")
        elif broken and i == broken[1]:
            (path / "axes_ref.json").write_text(recorded)
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "copy: wider loads" if i == culprit_at else f"docs: note {i}")
        if i == culprit_at:
            culprit = git(path, "rev-parse", "HEAD")
    return OneCulpritTree(path, good, git(path, "rev-parse", "HEAD"), culprit)
