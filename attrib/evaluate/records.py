"""What the evaluation stage hands out: frozen records of what it measured and decided.

The search, the outcome and the result read these and nothing else of the stage, so they
import this module, not the machinery that fills it (evaluation.py and its parts).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from attrib.core.blocks import BlockChoice
from attrib.core.model import ArtifactNote, BuildRecord, CommitInfo, DecisionRule, Purpose, Verdict
from attrib.core.stats import Estimate, size_log_odds


@dataclass(frozen=True)
class Comparison:
    """One sequential test of a candidate against a reference."""

    candidate: str
    reference: str
    purpose: Purpose
    verdict: Verdict
    diffs: tuple[float, ...]  # per-round oriented log shifts, candidate - reference
    llr: float
    sigma: float
    estimate: Estimate
    reason: str = ""  # why it is a skip
    rule: DecisionRule | None = None  # which rule decided (core/stats.py)
    size_p: float = math.nan  # confirmations: P(step >= the minimum change | its shifts)
    same_artifact_as: str | None = None  # decided with zero samples: identical artifacts to this commit
    samples: int = 0  # samples drawn for it (candidate and reference, in its rounds)
    smaller: bool = False  # worse, but below the minimum change (verdict GOOD)

    @property
    def evidence(self) -> float:
        """Log-odds that the candidate is worse by the minimum change: the size check's when
        it ran (composite alternative), else the SPRT's LLR."""
        lo = size_log_odds(self.size_p)
        return self.llr if lo != lo else lo


@dataclass
class PhaseTimes:
    """Wall seconds per phase: what the budget is spent on, and attrib's own share (decide)."""

    build_s: float = 0.0
    build_check_s: float = 0.0  # of build_s: the culprits' ends built again clean (job/end_check.py)
    measure_s: float = 0.0  # inside the runner: the benchmark itself
    decide_s: float = 0.0  # everything else in comparisons: attrib's overhead
    comparisons: int = 0  # measured comparisons (zero-sample ones excluded)

    def overhead_per_comparison(self) -> float:
        return self.decide_s / self.comparisons if self.comparisons else 0.0


@dataclass(frozen=True)
class CommitRecord:
    """What was measured of one commit, as of when it was asked for: a frozen snapshot (the
    evaluation keeps accumulating in its own `accounts.Tally`)."""

    info: CommitInfo
    build: BuildRecord | None = None
    samples: tuple[float, ...] = ()
    blocks: tuple[float, ...] = ()  # per run: oriented log level, in time order
    block_rounds: tuple[int, ...] = ()  # per block: the round it ran in (blocks of one round ran back to back)
    block_reps: tuple[int, ...] = ()  # per block: the samples per run it was asked for
    failed_runs: tuple[str, ...] = ()
    excluded: Mapping[str, int] = field(default_factory=dict)  # samples the runner flagged, by reason
    nodes: tuple[str, ...] = ()  # per usable run, the node it ran on (slurm; "" here)
    artifact: str | None = None  # content digest of what its benchmark runs; None: not known (yet)


@dataclass(frozen=True)
class Drift:
    commit: str
    blocks: int
    change_pct: float  # level of its last blocks against its first ones


@dataclass(frozen=True)
class Account:
    """What an evaluation measured and spent, as the outcome of a search reports it."""

    comparisons: tuple[Comparison, ...]
    commits: dict[str, CommitRecord]
    drift: tuple[Drift, ...]
    rounds: int  # measurement rounds, in sequence: what parallel probing shortens
    artifact_notes: tuple[ArtifactNote, ...]
    samples_saved: int  # estimate: samples the same-artifact verdicts did not draw
    times: PhaseTimes
    out_of_time: bool
    blocks: BlockChoice | None = None  # the adaptive block size, when the search asked for one
