"""The one small protocol between the search and the evaluation stage, and what the driver and
its segment searches share while they run.

`Evidence` is everything the search may ask of the evaluation stage: build, one more block (or
one shared round of blocks of several commits), the levels measured so far, a comparison in
shared rounds, a verdict a byte-identical commit settles, and, at the end, the account of
what was measured. evaluate/evaluation.Evaluation is its implementation; the search never
reaches past it (no runner, builder or clock of its own).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from attrib.core.blocks import BlockChoice
from attrib.core.model import BuildRecord, CommitInfo, Note, Phase, Purpose, Step, Verdict
from attrib.core.stats import TestConfig
from attrib.evaluate.evaluation import Account, CommitRecord, Comparison, PhaseTimes
from attrib.events import Events
from attrib.outcome import Found
from attrib.recipe import BenchmarkSpec


class Evidence(Protocol):
    """What the search asks the evaluation stage for."""

    @property
    def out_of_time(self) -> bool: ...

    @property
    def times(self) -> PhaseTimes: ...

    @property
    def comparisons(self) -> Sequence[Comparison]: ...

    def record(self, sha: str, info: CommitInfo | None = None) -> CommitRecord: ...
    def build(self, sha: str) -> BuildRecord: ...
    def stand_in(self, sha: str) -> str: ...
    def block(self, sha: str) -> bool: ...
    def blocks(self, shas: Sequence[str]) -> list[bool]: ...
    def note_traps(self, a: str, b: str) -> None: ...
    def same_artifact(self, candidate: str, reference: str, purpose: Purpose, verdict: Verdict, twin: str) -> Comparison: ...
    def levels(self, sha: str) -> tuple[list[float], list[int]]: ...
    def compare(
        self,
        candidates: Sequence[str],
        reference: str,
        purpose: Purpose,
        config: TestConfig | None = None,
        *,
        resume: Mapping[str, Sequence[float]] | None = None,
        alongside: Sequence[str] = (),
    ) -> list[Comparison]: ...
    def account(self, drift_of: Sequence[str]) -> Account: ...
    def adapt_blocks(self) -> BlockChoice: ...


class SegmentSearch(Protocol):
    """Finds the change in `chain` (oldest first) against `reference`, which is good-like."""

    def search(self, chain: list[str], reference: str) -> Found: ...


@dataclass
class Scope:
    """The evaluation stage, the test settings and progress, and what the search has found."""

    evidence: Evidence
    bench: BenchmarkSpec
    config: TestConfig
    events: Events
    probes: int = 1
    prebuilt: frozenset[str] = frozenset()  # commits whose binary CI published ([build] prebuilt): cheaper to build
    verdicts: dict[str, tuple[str, Verdict]] = field(default_factory=dict)  # sha -> (reference, verdict)
    notes: list[Note] = field(default_factory=list)

    def compare(
        self,
        candidates: Sequence[str],
        reference: str,
        purpose: Purpose,
        config: TestConfig | None = None,
        placed_against: str | None = None,
        resume: Mapping[str, Sequence[float]] | None = None,
        alongside: Sequence[str] = (),
    ) -> list[Comparison]:
        """Comparisons in shared rounds; the verdicts that place a commit are kept against the
        segment's reference (`placed_against`, when `reference` is its byte-identical stand-in).
        `alongside`: run in every round too, outside the tests (Evaluation.compare)."""
        comps = self.evidence.compare(candidates, reference, purpose, config, resume=resume, alongside=alongside)
        if purpose.places_commit:
            for comp in comps:
                self.verdicts[comp.candidate] = (placed_against or reference, comp.verdict)
        return comps

    def compare_one(
        self,
        candidate: str,
        reference: str,
        purpose: Purpose,
        config: TestConfig | None = None,
        alongside: Sequence[str] = (),
    ) -> Comparison:
        return self.compare([candidate], reference, purpose, config, alongside=alongside)[0]

    def phase(self, step: Step, commits: Sequence[str] = (), count: int = 0) -> None:
        """A progress event, with the time spent so far and per comparison for its ETA."""
        t = self.evidence.times
        spent = t.build_s + t.measure_s + t.decide_s
        per = spent / t.comparisons if t.comparisons else None
        self.events.phase(Phase(step, tuple(commits), count, elapsed_s=spent, per_comparison_s=per))

    def note(self, note: Note) -> None:
        self.notes.append(note)
