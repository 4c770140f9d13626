"""Builds and benchmark runs never see attrib's own environment (issue 40, point 1).

The daemon is given its tokens in its environment (GITHUB_TOKEN, GITLAB_TOKEN, ATTRIB_SECRET),
and a build runs the code of the commit under test. Each executor, the real one (local on this
host, a real Docker engine, the real two-node Slurm), runs a build command and a benchmark argv
that write `env` into the checkout, with the tokens set in attrib's environment: neither file
holds them; both hold the base allow-list (PATH), the recipe's [build] env (builds only) and the
names its [build] pass_env lists.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from attrib.evaluate.executors import make_executor
from attrib.evaluate.executors.base import BASE_ENV, command_environment
from attrib.recipe import BuildSpec

SECRETS = {"GITHUB_TOKEN": "ghp_secret0123456789", "GITLAB_TOKEN": "glpat-secret0123456789", "ATTRIB_SECRET": "attrib-secret-0123456789"}
DUMP = "env > build-env.txt"


@pytest.fixture
def secrets_in_parent(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ATTRIB_TEST_DECLARED", "passed-on-purpose")
    monkeypatch.setenv("ATTRIB_TEST_UNDECLARED", "left-behind")
    yield


def _env_file(path: Path) -> dict[str, str]:
    pairs = (line.partition("=") for line in path.read_text().splitlines() if "=" in line)
    return {k: v for k, _, v in pairs}


def _check(checkout: Path, host_path: bool) -> None:
    built, ran = _env_file(checkout / "build-env.txt"), _env_file(checkout / "run-env.txt")
    for seen in (built, ran):
        leaked = sorted(k for k, v in seen.items() if k in SECRETS or v in SECRETS.values())
        assert not leaked, f"attrib's secrets reached the command: {leaked}"
        assert "ATTRIB_TEST_UNDECLARED" not in seen
        assert seen.get("ATTRIB_TEST_DECLARED") == "passed-on-purpose"  # [build] pass_env
        assert seen.get("PATH")
        if host_path:
            assert seen["PATH"] == os.environ["PATH"]  # the base allow-list, from attrib's
    assert built.get("RECIPE_SET") == "from-the-recipe" and "RECIPE_SET" not in ran  # [build] env: builds only


def _exercise(kind: str, build: BuildSpec, workdir: Path, checkout: Path) -> None:
    executor = make_executor(kind, build, workdir, workdir)
    try:
        res = executor.shell(checkout, DUMP, dict(build.env), 120.0)
        assert res.ok, res
        res = executor.run(checkout, ["sh", "-c", "env > run-env.txt"], 120.0)
        assert res.ok, res
    finally:
        executor.close()


def _spec(**kw: object) -> BuildSpec:
    return BuildSpec(commands=(DUMP,), env={"RECIPE_SET": "from-the-recipe"}, pass_env=("ATTRIB_TEST_DECLARED",), **kw)  # type: ignore[arg-type]


def test_command_environment_is_the_allow_list_the_declared_names_and_env():
    parent = {"PATH": "/bin", "LC_ALL": "C", "HOME": "/h", "GITHUB_TOKEN": "t", "CC": "gcc", "OTHER": "x"}
    assert command_environment(("CC", "ABSENT"), {"X": "1"}, parent=parent) == {"PATH": "/bin", "LC_ALL": "C", "HOME": "/h", "CC": "gcc", "X": "1"}
    assert command_environment(("CC",), base=False, parent=parent) == {"CC": "gcc"}
    assert "GITHUB_TOKEN" not in BASE_ENV and "PATH" in BASE_ENV


def test_local_builds_and_runs_get_no_secret(secrets_in_parent, tmp_path: Path):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    _exercise("local", _spec(), tmp_path, checkout)
    _check(checkout, host_path=True)


@pytest.mark.slow
def test_docker_builds_and_runs_get_no_secret(engine, secrets_in_parent, tmp_path: Path):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    _exercise("docker", _spec(image="attrib/cpu:latest"), tmp_path, checkout)
    _check(checkout, host_path=False)


@pytest.mark.slow
def test_slurm_builds_and_runs_get_no_secret(secrets_in_parent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from test_slurm import _conf, why_no_slurm

    if why := why_no_slurm():
        pytest.skip(f"needs a Slurm cluster: {why}")
    monkeypatch.setenv("SLURM_CONF", str(_conf()))
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    _exercise("slurm", _spec(), tmp_path.resolve(), checkout.resolve())
    _check(checkout, host_path=True)
