"""Runners measure one built checkout and return samples. Only the `Runner` protocol leaks out.

A runner may also know things about the builds it measured that the samples do not say (the
static kernel diff of a culprit, the GPU it timed on): it offers them through the optional
`evidence` method (see `EvidenceRunner`), read once after the bisection by `evidence_of`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

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


class SizedRunner(Runner, Protocol):
    """A runner that can take another number of samples per run (adaptive blocks)."""

    def with_reps(self, reps: int) -> Runner | None: ...


def resized(runner: Runner, reps: int) -> Runner | None:
    """`runner` taking `reps` samples per run; None when it cannot (a command without {reps},
    NVBench's own stopping criteria, a runner without the optional method)."""
    method = getattr(runner, "with_reps", None)
    if method is None:
        return None
    sized: Runner | None = method(reps)
    return sized


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


class EvidenceRunner(Runner, Protocol):
    def evidence(self, steps: Sequence[Step]) -> RunnerEvidence: ...


def evidence_of(runner: Runner, steps: Sequence[Step]) -> RunnerEvidence:
    """The runner's evidence for `steps`; a runner without the optional method adds nothing."""
    method = getattr(runner, "evidence", None)
    if method is None:
        return RunnerEvidence()
    evidence: RunnerEvidence = method(steps)
    return evidence
