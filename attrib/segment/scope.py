"""The one small protocol between the search and the evaluation stage, and what the driver and
its segment searches share while they run.

`Evidence` is everything the search may ask of the evaluation stage: the test configuration,
a build, one shared round of blocks, the levels measured so far, a comparison in shared rounds,
what byte-identical artifacts settle, and, at the end, the account of what was measured.
evaluate/evaluation.Evaluation is its implementation; the search never reaches past it (no
runner, builder or clock of its own). `Scope` is the rest the searches share: the evidence,
progress, and what they found (each placed commit's verdict, the notes), which only its
methods change, and the decomposition of the whole change into the steps located so far
(`unexplained`, `curtailing`: core/remainder.py), which the remaining-change test and every
confirmation read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Protocol

from attrib.core import futility, remainder
from attrib.core.blocks import BlockChoice
from attrib.core.model import BuildRecord, CommitInfo, Note, NoteKind, Phase, Purpose, Step, Verdict
from attrib.core.stats import TRUNCATION_FACTOR, TestConfig, critical_z, min_change_shift
from attrib.evaluate.records import Account, CommitRecord, Comparison, PhaseTimes
from attrib.events import Events
from attrib.outcome import Found
from attrib.recipe import BenchmarkSpec

MAX_CONFIRM_RETRIES = 2  # times a confirmation that disagrees may send a segment's search on


class Evidence(Protocol):
    """What the search asks the evaluation stage for."""

    @property
    def config(self) -> TestConfig: ...  # every comparison's default (evaluation.shaped)

    @property
    def out_of_time(self) -> bool: ...

    @property
    def times(self) -> PhaseTimes: ...

    def build(self, sha: str, info: CommitInfo | None = None) -> BuildRecord: ...
    def record(self, sha: str) -> CommitRecord: ...  # what was measured of it so far
    def blocks(self, shas: Sequence[str]) -> list[bool]: ...
    def levels(self, sha: str) -> tuple[list[float], list[int]]: ...
    def adapt_blocks(self) -> BlockChoice: ...
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
    def stand_in(self, sha: str) -> str: ...
    def same_artifact(self, candidate: str, reference: str, purpose: Purpose, verdict: Verdict, twin: str) -> Comparison: ...
    def note_traps(self, a: str, b: str) -> None: ...
    def account(self, drift_of: Sequence[str]) -> Account: ...


class SegmentSearch(Protocol):
    """Finds the change in `chain` (oldest first) against `reference`, which is good-like."""

    def search(self, chain: list[str], reference: str) -> Found: ...


class Scope:
    """The evaluation stage, the benchmark and progress, and what the search has found."""

    def __init__(
        self, evidence: Evidence, bench: BenchmarkSpec, events: Events, probes: int = 1, prebuilt: frozenset[str] = frozenset()
    ) -> None:
        self.evidence = evidence
        self.bench = bench
        self.events = events
        self.probes = probes
        self.prebuilt = prebuilt  # commits whose binary CI published ([build] prebuilt): cheaper to build
        self._verdicts: dict[str, tuple[str, Verdict]] = {}  # sha -> (reference, verdict)
        self._notes: list[Note] = []
        self._whole: tuple[float, ...] | None = None  # the preflight's paired shifts: the whole change
        self._shares: list[tuple[float, ...]] = []  # each located step's confirmation's shifts

    @property
    def config(self) -> TestConfig:
        return self.evidence.config

    @property
    def verdicts(self) -> Mapping[str, tuple[str, Verdict]]:
        """Each placed commit's verdict, against the reference of the segment that placed it."""
        return MappingProxyType(self._verdicts)

    @property
    def notes(self) -> tuple[Note, ...]:
        return tuple(self._notes)

    def place(self, sha: str, reference: str, verdict: Verdict) -> None:
        self._verdicts[sha] = (reference, verdict)

    def placed(self, comps: Sequence[Comparison], reference: str) -> list[Comparison]:
        """Comparisons that place their candidates (probes, retests, extensions: Purpose
        .places_commit), each kept against the segment's `reference`, which the comparisons may
        have measured through its byte-identical stand-in."""
        for comp in comps:
            if comp.purpose.places_commit:
                self.place(comp.candidate, reference, comp.verdict)
        return list(comps)

    def whole_change(self, comp: Comparison) -> None:
        """The whole change, as the preflight measured it: what the steps found are read against."""
        self._whole = comp.diffs

    def located(self, confirmation: Comparison) -> None:
        """A step found (a culprit's, or a smaller step's), by its confirmation: its share. A
        confirmation of the preflight's own pair of binaries resumed the preflight's rounds
        (evaluate/rounds.py: same binary, same data); the remainder reads independent sets, so
        its share is its own rounds beyond them."""
        diffs, whole = confirmation.diffs, self._whole or ()
        if whole and diffs[: len(whole)] == whole:
            diffs = diffs[len(whole) :]
        self._shares.append(diffs)

    @property
    def delta(self) -> float:
        """The recipe's minimum change, as a log shift."""
        return min_change_shift(self.bench.min_change_pct)

    @property
    def found_any(self) -> bool:
        return bool(self._shares)

    def unexplained(self) -> remainder.Unexplained | None:
        """The whole change less the steps located so far (None before the preflight)."""
        return None if self._whole is None else remainder.unexplained(self._whole, self._shares)

    def curtailing(self, config: TestConfig) -> TestConfig:
        """`config` for a test whose outcome changes what the report names (the remaining-change
        test, a confirmation): the futility rule's predictive starts from the unexplained change,
        and stops nothing while it puts the step at the minimum (core/remainder.curtailing)."""
        return remainder.curtailing(config, self.unexplained())

    def note(self, note: Note) -> None:
        self._notes.append(note)

    def say_noise(self, comp: Comparison) -> None:
        """When this test's noise leaves a test that finds no change only the cap (the zone's
        test, on its width, with the posterior method), say so once, as a progress line and in
        the report: the first test that shows it, the preflight or one stopped for futility."""
        if not self.config.truncate or any(n.kind is NoteKind.TOO_NOISY for n in self._notes):
            return
        c, delta = self.config, min_change_shift(self.bench.min_change_pct)
        advice = futility.noise_advice(
            comp.sigma, delta, c.ignore, c.max_rounds, critical_z(c), TRUNCATION_FACTOR, self.bench.min_change_pct
        )
        if advice is not None:
            self.events.phase(Phase(Step.TOO_NOISY, noise=advice))
            self.note(Note(NoteKind.TOO_NOISY, noise=advice))

    def phase(self, step: Step, commits: Sequence[str] = (), count: int = 0) -> None:
        """A progress event, with the time spent so far and per comparison for its ETA."""
        t = self.evidence.times
        spent = t.build_s + t.measure_s + t.decide_s
        per = spent / t.comparisons if t.comparisons else None
        self.events.phase(Phase(step, tuple(commits), count, elapsed_s=spent, per_comparison_s=per))
