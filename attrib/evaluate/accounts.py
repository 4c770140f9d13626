"""The evaluation's accounts: what it measured of each commit, the comparisons it decided, the
rounds it ran and the time each phase took; frozen records (evaluate/records.py) out.

Every other part of the stage writes here through `Ledger`'s methods; only snapshots leave.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from attrib.core.blocks import BlockChoice
from attrib.core.model import ArtifactNote, BuildRecord, CommitInfo, Decided, DecisionRule, Direction
from attrib.core.stats import level_drift, to_pct
from attrib.evaluate.records import Account, CommitRecord, Comparison, Drift, PhaseTimes
from attrib.events import Events


class CommitSource(Protocol):
    """Where commit metadata comes from (the git repository, or a simulated history)."""

    def info(self, sha: str) -> CommitInfo: ...


@dataclass
class Tally:
    """The evaluation's own accumulator for one commit; only snapshots of it leave."""

    info: CommitInfo
    build: BuildRecord | None = None
    samples: list[float] = field(default_factory=list)
    blocks: list[float] = field(default_factory=list)
    block_reps: list[int] = field(default_factory=list)
    block_rounds: list[int] = field(default_factory=list)
    failed_runs: list[str] = field(default_factory=list)
    excluded: Counter[str] = field(default_factory=Counter)
    nodes: list[str] = field(default_factory=list)
    artifact: str | None = None

    def snapshot(self) -> CommitRecord:
        return CommitRecord(
            self.info, self.build, tuple(self.samples), tuple(self.blocks), tuple(self.block_rounds),
            tuple(self.block_reps), tuple(self.failed_runs), dict(self.excluded), tuple(self.nodes), self.artifact,
        )  # fmt: skip


class Ledger:
    """Per commit a `Tally`, and the comparisons, rounds, phase times and artifact notes of one
    evaluation."""

    def __init__(self, commits: CommitSource, events: Events) -> None:
        self.commits = commits
        self.events = events
        self.tallies: dict[str, Tally] = {}
        self.comparisons: list[Comparison] = []
        self.rounds = 0  # measurement rounds, in sequence: what parallel probing shortens
        self.times = PhaseTimes()
        self.artifact_notes: list[ArtifactNote] = []

    def tally(self, sha: str, info: CommitInfo | None = None) -> Tally:
        if sha not in self.tallies:
            self.tallies[sha] = Tally(info or self.commits.info(sha))
        return self.tallies[sha]

    def record(self, sha: str, info: CommitInfo | None = None) -> CommitRecord:
        """What was measured of `sha` so far (registering it, with `info` if given)."""
        return self.tally(sha, info).snapshot()

    @property
    def records(self) -> dict[str, CommitRecord]:
        return {sha: t.snapshot() for sha, t in self.tallies.items()}

    def keep(self, comp: Comparison) -> Comparison:
        """A decided comparison: kept, and told to the progress handler."""
        self.comparisons.append(comp)
        twin = self.tally(comp.same_artifact_as).info.short if comp.same_artifact_as else None
        decided = Decided(len(comp.diffs), comp.llr, comp.rule, comp.smaller, comp.size_p, comp.reason, twin)
        self.events.verdict(self.tally(comp.candidate).info, self.tally(comp.reference).info, comp.verdict, decided)
        return comp

    def levels(self, sha: str, reps: int) -> tuple[list[float], list[int]]:
        """`sha`'s block levels of `reps` samples per run and, per block, the round it ran in."""
        rec = self.tallies.get(sha)
        if rec is None:
            return [], []
        keep = [i for i, r in enumerate(rec.block_reps) if r == reps]
        return [rec.blocks[i] for i in keep], [rec.block_rounds[i] for i in keep]

    def samples_saved(self) -> int:
        """Samples the zero-sample (same artifact) verdicts did not draw, at the mean cost of a
        measured comparison of this bisection: an estimate, labelled as one in the report."""
        measured = [c.samples for c in self.comparisons if c.samples and c.rule is not DecisionRule.BUDGET]
        shortcuts = sum(1 for c in self.comparisons if c.same_artifact_as)
        return round(shortcuts * sum(measured) / len(measured)) if measured and shortcuts else 0

    def drift(self, shas: Sequence[str], reps: int, direction: Direction) -> tuple[Drift, ...]:
        """Each commit's level of its last blocks against its first ones (blocks of one size:
        another size's blocks sit at another bias)."""
        out = []
        for sha in dict.fromkeys(shas):
            blocks = self.levels(sha, reps)[0]
            shift = level_drift(blocks)
            if shift is not None:
                out.append(Drift(sha, len(blocks), to_pct(shift, direction)))
        return tuple(out)

    def account(self, drift: tuple[Drift, ...], out_of_time: bool, blocks: BlockChoice | None) -> Account:
        """Everything measured so far, for the outcome."""
        return Account(
            comparisons=tuple(self.comparisons),
            commits=self.records,
            drift=drift,
            rounds=self.rounds,
            artifact_notes=tuple(self.artifact_notes),
            samples_saved=self.samples_saved(),
            times=replace(self.times),  # a snapshot: the ledger goes on adding to its own
            out_of_time=out_of_time,
            blocks=blocks,
        )
