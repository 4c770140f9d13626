"""Shared fixtures: real git repositories with a real C benchmark, and the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from attrib.demo import DEMO_RECIPE, GeneratedTree, TreeSpec, generate_tree

# Property tests draw the same examples on every run ("ci", the default), so a landing run
# cannot fail on a draw no earlier run saw; HYPOTHESIS_PROFILE=explore draws fresh ones (run
# it when changing core/detect.py, core/search.py or the daemon's input checks).
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# About 1 ms per repetition: small enough for a quick suite, long against timer resolution.
TEST_WORK = 1_000_000


@dataclass
class CliRun:
    code: int
    stdout: str
    stderr: str
    result: dict[str, Any] | None


def run_cli(*args: str | Path, cwd: Path | None = None, timeout: float = 600) -> CliRun:
    proc = subprocess.run(
        [sys.executable, "-m", "attrib", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )
    return CliRun(proc.returncode, proc.stdout, proc.stderr, None)


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` for a test's own tree; its stdout, stripped."""
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@dataclass(frozen=True)
class OneCulpritTree:
    """A test tree with one planted culprit between good and bad."""

    path: Path
    good: str
    bad: str
    culprit: str


def bisect_cli(tmp_path: Path, tree: Any, recipe_text: str, recipe_name: str = "recipe.toml") -> tuple[CliRun, dict[str, Any]]:
    """`attrib bisect` of a generated tree (good..bad) with a recipe written from text, through the
    real CLI; asserts it exits 0 and returns the run and its result JSON."""
    recipe = tmp_path / recipe_name
    recipe.write_text(recipe_text)
    out = tmp_path / "result.json"
    res = run_cli(
        "bisect", "--repo", tree.path, "--good", tree.good, "--bad", tree.bad, "--recipe", recipe,
        "--workdir", tmp_path / "work", "--json", out, "--report", tmp_path / "report.md",
    )  # fmt: skip
    assert res.code == 0, res.stdout + res.stderr
    return res, json.loads(out.read_text())


@pytest.fixture
def make_tree(tmp_path: Path):
    def make(spec: TreeSpec, name: str = "repo") -> GeneratedTree:
        return generate_tree(tmp_path / name, spec)

    return make


@pytest.fixture
def demo_recipe(tmp_path: Path) -> Path:
    path = tmp_path / "demo-cpu.toml"
    path.write_text(DEMO_RECIPE)
    return path


@pytest.fixture
def bisect(tmp_path: Path, demo_recipe: Path):
    """Run `attrib bisect` on a tree; returns the CLI run with the parsed --json result."""

    def run(tree: GeneratedTree, *extra: str | Path, recipe: Path | None = None, workdir: Path | None = None) -> CliRun:
        out = tmp_path / "result.json"
        out.unlink(missing_ok=True)
        res = run_cli(
            "bisect",
            "--repo", tree.path,
            "--good", tree.good,
            "--bad", tree.bad,
            "--recipe", recipe or demo_recipe,
            "--workdir", workdir or tmp_path / "work",
            "--json", out,
            "--report", tmp_path / "report.md",
            *extra,
        )  # fmt: skip
        if out.exists():
            res.result = json.loads(out.read_text())
        return res

    return run


def assert_nothing_rebuilt(first: dict[str, Any], second: dict[str, Any]) -> None:
    """A second bisection of the same tree builds nothing the first built; a fresh build is a
    commit the first never met (both time a real program, so the second search may probe
    another commit)."""
    built = {c["commit"] for c in first["commits"] if c["build"]}
    again = [c for c in second["commits"] if c["build"]]
    assert all(c["build"]["cached"] for c in again if c["commit"] in built)
    assert second["builds_fresh"] == sum(c["commit"] not in built for c in again)
    assert second["builds_cached"] == sum(c["commit"] in built for c in again) > 0


def spec(**kw: Any) -> TreeSpec:
    kw.setdefault("work_base", TEST_WORK)
    return TreeSpec(**kw)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `gpu` skip, with the reason, where no GPU is usable through CuPy."""
    gpu_items = [i for i in items if i.get_closest_marker("gpu")]
    if not gpu_items:
        return
    from attrib.evaluate.gpu.device import probe

    why = probe()
    if why:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {why}"))


def interruptible() -> None:
    """A Popen preexec_fn: Ctrl-C does its default in the child, as at a terminal. A test run
    started in the background of a non-interactive shell (`pytest &`) ignores SIGINT, a child
    inherits that (POSIX), and attrib then rightly ignores the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="session")
def engine():
    """The real Docker engine, with the attrib/cpu image `attrib images build` makes: skipped
    without them on a developer machine, failed in CI (CI=true), where .ci/run provides both."""
    docker = pytest.importorskip("docker")
    from attrib.errors import InputError
    from attrib.evaluate.executors.docker import connect
    from attrib.evaluate.images import CPU_IMAGE

    try:
        client = connect()
        client.images.get(CPU_IMAGE)
    except (InputError, docker.errors.ImageNotFound) as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must provide a docker engine and {CPU_IMAGE}: {exc}")
        pytest.skip(f"no docker engine or no {CPU_IMAGE} here: {exc}")
    return client
