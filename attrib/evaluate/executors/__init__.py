"""Executors run a build command or a benchmark for one checkout: on the host (local), in a
container on a Docker engine (docker), or as jobs on a Slurm cluster (slurm). The rest of attrib
only sees the `Executor` protocol."""

from __future__ import annotations

from pathlib import Path

from attrib.evaluate.executors.base import (
    EXECUTORS,
    Executor,
    ExecutorKind,
    PlacingExecutor,
    ProcessResult,
    WatchedExecutor,
)  # fmt: skip
from attrib.recipe import BenchmarkSpec, BuildSpec, SlurmSpec

__all__ = [
    "EXECUTORS", "Executor", "ExecutorKind", "PlacingExecutor", "ProcessResult", "WatchedExecutor", "check_executor",
    "executor_kind", "make_executor",
]  # fmt: skip


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
    if build is not None:
        from attrib.evaluate.compiler_cache import require_tool

        require_tool(build, kind)
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

        return LocalExecutor(workdir, build.pass_env if build else ())
    from attrib.evaluate.compiler_cache import CONTAINER_DIR, default_dir
    from attrib.evaluate.executors.docker import DEFAULT_IMAGE, DockerExecutor, connect
    from attrib.evaluate.images import build_recipe_image
    from attrib.workdir import WorkDir

    spec = build or BuildSpec(commands=("true",))
    client = connect()
    image = spec.image or DEFAULT_IMAGE
    if spec.dockerfile:
        image = build_recipe_image(client, (recipe_dir or Path.cwd()) / spec.dockerfile)
    cache = default_dir(spec, WorkDir((workdir or Path.cwd()).resolve()).compiler_cache(spec.cache)) if spec.cache else None
    return DockerExecutor(
        image, network=spec.network, cpus=spec.cpus, memory=spec.memory, client=client, workdir=workdir,
        mounts={cache: CONTAINER_DIR} if cache else None, pass_env=spec.pass_env,
    )  # fmt: skip
