"""Executors run a build command or a benchmark for one checkout: on the host (local) or, later,
in a container. The rest of attrib only sees the `Executor` protocol."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class ProcessResult:
    returncode: int | None  # None when killed for its timeout
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float

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


EXECUTORS = ("local",)


def make_executor(name: str) -> Executor:
    from ..errors import InputError

    if name == "local":
        from .local import LocalExecutor

        return LocalExecutor()
    raise InputError(f"--executor {name!r}: expected one of: {', '.join(EXECUTORS)}")
