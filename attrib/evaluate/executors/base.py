"""What every executor shares: the `Executor` protocol, what one process returned, the closed
set of executor kinds, and the typed description each kind gives of where it ran (the result
records it as it is: result/types.ExecutorInfo). The implementations (local.py, docker.py, slurm.py) import this module,
and executors/__init__ imports them to make one: keeping the protocol here keeps that a chain,
not a circle."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from attrib.recipe import SlurmClass


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

    def describe(self) -> ExecutorDescription:
        """What a result should record about where it ran (image digest, GPUs, nodes...)."""
        ...

    def close(self) -> None:
        """Release what the executor holds (containers); safe to call more than once."""
        ...


# What an executor may do beyond the protocol, each ability declared and asked with isinstance
# (as runners' are: runners/__init__.py), never found by name.


@runtime_checkable
class PlacingExecutor(Executor, Protocol):
    """An executor with machines of several classes (slurm: [slurm.classes])."""

    def placed(self, cls: SlurmClass | None) -> Executor:
        """This executor with its rounds and runs on machines of class `cls`."""
        ...


@runtime_checkable
class WatchedExecutor(Executor, Protocol):
    """An executor whose waits can be ended from outside (slurm: jobs queued for minutes)."""

    def watch(self, should_stop: Callable[[], str | None]) -> None:
        """Poll `should_stop` while waiting; a reason it returns ends the wait."""
        ...


# --- the environment a build command or a benchmark run gets ---------------------------------
# Never attrib's own: the daemon is given its tokens in its environment (GITHUB_TOKEN,
# GITLAB_TOKEN, ATTRIB_SECRET), and a build runs code from the commit under test. A build or run
# gets these names from attrib's environment (where programs, libraries, home and temporary
# files are, the locale), then the names the recipe lists in [build] pass_env, then [build] env's
# values (docs/recipes.md: "The build's environment"). Docker takes none of BASE_ENV from the
# host: the image has its own.
BASE_ENV = ("PATH", "LD_LIBRARY_PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM", "CUDA_VISIBLE_DEVICES")
BASE_ENV_PREFIXES = ("LC_",)  # the locale's categories: LC_ALL, LC_CTYPE, ...


def command_environment(
    pass_env: Sequence[str] = (), env: Mapping[str, str] | None = None, *, base: bool = True, parent: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The whole environment of a build command or benchmark run: BASE_ENV's names found in
    `parent` (attrib's environment) when `base`, the recipe's `pass_env` names found there,
    then `env` over them. Nothing else of attrib's environment reaches the command."""
    parent = os.environ if parent is None else parent
    out = {k: v for k, v in parent.items() if base and (k in BASE_ENV or k.startswith(BASE_ENV_PREFIXES))}
    out |= {k: parent[k] for k in pass_env if k in parent}
    return out | dict(env or {})


class ExecutorKind(StrEnum):
    LOCAL = "local"
    DOCKER = "docker"
    SLURM = "slurm"


EXECUTORS = tuple(ExecutorKind)


# --- what each executor records about where it ran -------------------------------------------
# Field names are the result document's keys (docs/result-schema.md: `executor`, one flat object
# beside `name`); every field has a default, so a document of an older attrib that lacked one
# still reads.


@dataclass(frozen=True)
class LocalDescription:
    host: str = ""


@dataclass(frozen=True)
class DockerDescription:
    image: str | None = None
    image_id: str | None = None
    digests: tuple[str, ...] = ()
    gpus: bool | None = None


@dataclass(frozen=True)
class SlurmRound:
    """One measurement round's allocation: where its runs went, and what was lost."""

    round: int
    job: int | None = None
    node: str = ""
    runs: int = 0
    fault: str = ""  # why the allocation ended under the round, if it did
    lost: tuple[str, ...] = ()  # allocations lost before a run started (retried)
    submit_to_start_s: float | None = None
    machine_class: str = ""  # "gpu=H100": the [slurm.classes] entry its allocation was placed by


@dataclass(frozen=True)
class SlurmBuildJob:
    job: int
    name: str
    node: str = ""
    state: str = ""
    reason: str = ""
    submit_to_start_s: float | None = None
    end_to_result_s: float | None = None


@dataclass(frozen=True)
class SlurmDescription:
    run_id: str = ""
    partition: str = ""
    container_image: str | None = None
    nodes_available: tuple[str, ...] = ()
    nodes_used: tuple[str, ...] = ()
    jobs_submitted: int = 0
    orphans_cancelled: int = 0
    calls: Mapping[str, int] = field(default_factory=dict)  # Slurm commands run, by name
    polls_per_min: float = 0.0
    rounds: tuple[SlurmRound, ...] = ()
    build_jobs: tuple[SlurmBuildJob, ...] = ()
    step_overhead_s: tuple[float, ...] = ()


ExecutorDescription = LocalDescription | DockerDescription | SlurmDescription
DESCRIPTIONS: Mapping[ExecutorKind, type[ExecutorDescription]] = {
    ExecutorKind.LOCAL: LocalDescription,
    ExecutorKind.DOCKER: DockerDescription,
    ExecutorKind.SLURM: SlurmDescription,
}
