"""Runners measure one built checkout and return samples. Only the `Runner` protocol leaks out.

What a runner may do beyond `run` is declared, each ability a protocol of its own, and asked
with isinstance, never found by name: `SizedRunner` takes another number of samples per run
(adaptive blocks, `resized`); `ArtifactRunner` says by content what it runs of a checkout
beyond the build's artifacts (the cupy runner's compiled module, for evaluate/twins.py);
`EvidenceRunner` knows things about the builds it measured that the samples do not say (the
static kernel diff of a culprit, the GPU it timed on), read once after the bisection by
`evidence_of`; `ClosingRunner` holds a process between runs (the cupy runner's GPU worker),
released by `closed`. A runner without an ability is asked for none of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

# The start of a failed run's error when the checkout lacks the benchmark the recipe names. One
# commit without it is that commit's failed run; both references without it is bad input
# (segment/preflight.check_references: exit 2, not a failed measurement).
NO_SUCH_BENCHMARK = "no such benchmark: "


def names_no_benchmark(error: str) -> bool:
    return error.startswith(NO_SUCH_BENCHMARK)


@dataclass(frozen=True)
class RunResult:
    samples: tuple[float, ...]
    error: str  # empty when the run is usable
    duration_s: float
    excluded: tuple[str, ...] = ()  # one reason per sample the runner flagged as disturbed
    node: str = ""  # the machine it ran on, when the executor tells (slurm); "" on this host
    sample_s: float | None = None  # wall seconds its samples account for; None: not known (not times)

    @property
    def ok(self) -> bool:
        return not self.error


class Runner(Protocol):
    def run(self, checkout: Path) -> RunResult: ...


@runtime_checkable
class SizedRunner(Runner, Protocol):
    """A runner that can take another number of samples per run (adaptive blocks)."""

    def with_reps(self, reps: int) -> Runner | None: ...


def resized(runner: Runner, reps: int) -> Runner | None:
    """`runner` taking `reps` samples per run; None when it cannot (a command without {reps},
    NVBench's own stopping criteria, a runner that is no `SizedRunner`)."""
    return runner.with_reps(reps) if isinstance(runner, SizedRunner) else None


@runtime_checkable
class ArtifactRunner(Runner, Protocol):
    """A runner that runs something of the checkout the build's artifacts do not name."""

    def artifact(self, checkout: Path) -> str | None:
        """What it runs of `checkout`, by content (a digest); None: not known."""
        ...


@dataclass(frozen=True)
class Step:
    """A culprit's step as built: the checkout it was confirmed against and its own."""

    commit: str  # the culprit
    before: Path
    after: Path


@dataclass(frozen=True)
class StaticDiff:
    """Static kernel metrics across one step: only those that changed, as (before, after);
    empty when nothing changed. `unavailable` says why there is no diff at all."""

    changed: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    unavailable: str = ""


@dataclass(frozen=True)
class RunnerEvidence:
    """What a runner adds to the result: static diffs by culprit commit, and the GPU."""

    static_diffs: Mapping[str, StaticDiff] = field(default_factory=dict)
    gpu: Mapping[str, Any] = field(default_factory=dict)  # the GPU the samples came from; {} if none


@runtime_checkable
class EvidenceRunner(Runner, Protocol):
    def evidence(self, steps: Sequence[Step]) -> RunnerEvidence: ...


@runtime_checkable
class ClosingRunner(Runner, Protocol):
    """A runner that holds a process of its own between runs (the cupy runner's GPU worker)."""

    def close(self) -> None: ...


def closed(runner: Runner) -> None:
    """Release what `runner` holds; a runner that is no `ClosingRunner` holds nothing."""
    if isinstance(runner, ClosingRunner):
        runner.close()


def evidence_of(runner: Runner, steps: Sequence[Step]) -> RunnerEvidence:
    """The runner's evidence for `steps`; a runner that is no `EvidenceRunner` adds nothing."""
    return runner.evidence(steps) if isinstance(runner, EvidenceRunner) else RunnerEvidence()
