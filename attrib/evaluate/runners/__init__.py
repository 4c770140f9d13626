"""Runners measure one built checkout and return samples. Only the `Runner` protocol leaks out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class RunResult:
    samples: tuple[float, ...]
    error: str  # empty when the run is usable
    duration_s: float
    excluded: tuple[str, ...] = ()  # one reason per sample the runner flagged as disturbed
    node: str = ""  # the machine it ran on, when the executor tells (slurm); "" on this host

    @property
    def ok(self) -> bool:
        return not self.error


class Runner(Protocol):
    def run(self, checkout: Path) -> RunResult: ...
