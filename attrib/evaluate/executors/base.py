"""What every executor shares: the `Executor` protocol, what one process returned, and the closed
set of executor kinds. The implementations (local.py, docker.py, slurm.py) import this module,
and executors/__init__ imports them to make one: keeping the protocol here keeps that a chain,
not a circle."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol


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
