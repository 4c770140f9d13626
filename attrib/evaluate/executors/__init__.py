"""Executors run a build command or a benchmark for one checkout: on the host (local), in a
container on a Docker engine (docker), or as jobs on a Slurm cluster (slurm). The rest of attrib
only sees the `Executor` protocol."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from attrib.recipe import BenchmarkSpec, BuildSpec, SlurmSpec


@dataclass(frozen=True)
class ProcessResult:
    returncode: int | None  # None when killed for its timeout
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float
    node: str = ""  # where it ran, when the executor can tell (slurm: the node's name)

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0


class Executor(Protocol):
    name: str

    def identity(self) -> str:
        """What, besides the tree and the recipe, decides a build's output (goes into cache keys)."""
        ...

    def shell(self, checkout: Path, command: str, env: Mapping[str, str], timeout_s: float) -> ProcessResult:
        """Run one build command with `sh -c` in the checkout."""
        ...

    def run(self, checkout: Path, argv: Sequence[str], timeout_s: float) -> ProcessResult:
        """Run a benchmark argv (no shell) in the checkout."""
        ...

    def round(self) -> AbstractContextManager[object]:
        """One measurement round: every `run()` inside lands on the same machine, so that the
        pairing of a round's runs cancels that machine's drift (slurm: one allocation on one
        node; local and docker: a null context, they only have one machine)."""
        ...

    def describe(self) -> dict[str, object]:
        """What a result should record about where it ran (image digest, GPUs...)."""
        ...

    def close(self) -> None:
        """Release what the executor holds (containers); safe to call more than once."""
        ...


class ExecutorKind(StrEnum):
    LOCAL = "local"
    DOCKER = "docker"
    SLURM = "slurm"


EXECUTORS = tuple(ExecutorKind)


def executor_kind(name: str) -> ExecutorKind:
    from attrib.errors import InputError

    try:
        return ExecutorKind(name)
    except ValueError:
        raise InputError(f"--executor {name!r}: expected one of: {', '.join(EXECUTORS)}") from None


def check_executor(name: str, build: BuildSpec | None = None, recipe_dir: Path | None = None) -> ExecutorKind:
    """What `make_executor` will need, checked without creating anything: planning calls this,
    so an unreachable engine or a missing image is reported before any work dir exists."""
    from attrib.errors import InputError

    kind = executor_kind(name)
    if kind is ExecutorKind.DOCKER:
        from attrib.evaluate.executors.docker import DEFAULT_IMAGE, connect, require_image

        spec = build or BuildSpec(commands=("true",))
        client = connect()
        if spec.dockerfile:
            dockerfile = (recipe_dir or Path.cwd()) / spec.dockerfile
            if not dockerfile.is_file():
                raise InputError(f"{dockerfile}: Dockerfile named by build.dockerfile not found")
        else:
            require_image(client, spec.image or DEFAULT_IMAGE)
    if kind is ExecutorKind.SLURM:
        from attrib.evaluate.executors.slurm_cli import SlurmCli

        SlurmCli().require_controller()
    return kind


def make_executor(
    name: str,
    build: BuildSpec | None = None,
    recipe_dir: Path | None = None,
    workdir: Path | None = None,
    *,
    slurm: SlurmSpec | None = None,
    bench: BenchmarkSpec | None = None,
    run_id: str | None = None,
) -> Executor:
    """The executor `name`, set up for the recipe's [build] section (docker: image, limits)
    and [slurm] table (slurm; `run_id` names its jobs, so a restarted daemon finds them).
    This creates things (a recipe's image is built here; slurm's shared-dir check writes a
    token under the work dir): call it inside a run, not a plan."""
    kind = executor_kind(name)
    if kind is ExecutorKind.SLURM:
        from attrib.evaluate.executors.slurm import SlurmExecutor

        return SlurmExecutor(
            slurm or SlurmSpec(), build or BuildSpec(commands=("true",)), (workdir or Path.cwd()).resolve(),
            bench=bench, run_id=run_id,
        )  # fmt: skip
    if kind is ExecutorKind.LOCAL:
        from attrib.evaluate.executors.local import LocalExecutor

        return LocalExecutor()
    from attrib.evaluate.executors.docker import DEFAULT_IMAGE, DockerExecutor, connect
    from attrib.evaluate.images import build_recipe_image

    spec = build or BuildSpec(commands=("true",))
    client = connect()
    image = spec.image or DEFAULT_IMAGE
    if spec.dockerfile:
        image = build_recipe_image(client, (recipe_dir or Path.cwd()) / spec.dockerfile)
    return DockerExecutor(image, network=spec.network, cpus=spec.cpus, memory=spec.memory, client=client, workdir=workdir)
