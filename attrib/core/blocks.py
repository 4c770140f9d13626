"""How many samples one benchmark run should take (adaptive blocks): pure.

One run is one block: its level is the recipe's block statistic of its samples. The variance
of a block level has two parts, the spread inside a run, which more samples per run average
away, and the spread between runs (a process's placement, clocks, caches), which they do not:

    Var(level | r samples) = between^2 + v1 / r

and one run costs `overhead + r * per_sample` seconds (start-up, loading, warm-up, then the
samples). A decision needs a number of blocks proportional to Var(level), so the time to a
decision is proportional to T(r) = (between^2 + v1 / r) * (overhead + r * per_sample), least at
r* = sqrt(v1 * overhead / (between^2 * per_sample)): where the spread is between runs, more and
shorter runs decide sooner; where it is inside runs, longer ones do (pyperf's and NVBench's
split of runs and samples is this trade).

Estimated from the first runs (the preflight's), per commit:
  - v1: each run's samples split in two interleaved halves; the two halves' statistics differ
    by a variance of 2 * v1 / (r / 2) = 4 v1 / r (deterministic, and the statistic's own);
  - between^2: the pooled variance of a commit's block levels, at its 80 % upper confidence
    bound, minus v1 / r (at least 0);
  - overhead and per_sample: a run's wall time less the time its samples account for (only
    when the samples are times), and those samples' mean.
The size changes only when the predicted saving is at least MIN_SAVING: the estimates come from
a handful of runs, and flipping the size on their noise would cost more than it saves.

A run can also fail (a crash, a timeout): `hopeless` says when a commit's runs fail too often
for it to be tested at all (a skip), for the comparisons' rounds and the posterior search alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from scipy.special import chdtri

from attrib.core.model import BlockStatistic
from attrib.core.stats import block_level

MIN_SAVING = 0.2  # predicted fraction of the time to a decision: below it the size stays
MIN_REPS = 4  # the faster half of fewer samples is one or two samples
MAX_REPS_FACTOR = 5  # at most this many times the recipe's reps: a choice from four rounds is a guess
MAX_REPS = 1000
MIN_RUNS = 3  # per commit, before its spread between runs says anything
MIN_DOF = 6  # pooled degrees of freedom of the between-run spread (two commits of 4 runs): with
# 4, one trial in five of a spread all inside runs read "nothing between runs" and went longest
BETWEEN_UPPER_QUANTILE = 0.9  # chi-square tail: the between-run spread used is its 90 % upper bound
PLAN_AFTER_ROUNDS = 4  # the preflight's paired rounds before the size is chosen (2 x 3 dof)
# A preflight that decided sooner: its commits are measured up to this many runs before the choice.


class BlockReason(StrEnum):
    """Why the block size is what it is (the result and the report say it)."""

    CHOSEN = "chosen"  # changed: the predicted time to a decision is at least MIN_SAVING shorter
    CLOSE = "close"  # the recipe's size is within MIN_SAVING of the best predicted
    NO_COST = "no_cost"  # the samples are not times: what a run costs outside them is unknown
    FIXED = "fixed"  # the runner cannot change its samples per run (a command without {reps}, ...)
    PINNED = "pinned"  # the recipe pins it (adapt_reps = false)
    TOO_FEW_RUNS = "too_few_runs"  # not enough runs yet to tell the spreads apart
    UNNEEDED = "unneeded"  # never chosen: every commit the search asked was a twin of one measured


@dataclass(frozen=True)
class Run:
    """One measured run: its oriented log samples, its wall time and the seconds its samples
    account for (None when the samples are not times)."""

    commit: str
    logs: tuple[float, ...]
    duration_s: float
    sample_s: float | None


@dataclass(frozen=True)
class BlockChoice:
    reps_before: int
    reps: int
    reason: BlockReason
    within: float | None = None  # sqrt(v1): one sample's spread inside a run, log units
    between: float | None = None  # the spread of run levels more samples would not remove (80 % upper bound)
    overhead_s: float | None = None  # a run's wall time outside its samples
    per_sample_s: float | None = None
    saving: float = 0.0  # predicted fraction of the time to a decision saved by `reps`


def time_to_decide(reps: int, v1: float, between2: float, overhead_s: float, per_sample_s: float) -> float:
    """T(r), up to a constant: block-level variance times the cost of one block."""
    return (between2 + v1 / reps) * (overhead_s + reps * per_sample_s)


def _spreads(runs: Sequence[Run], statistic: BlockStatistic) -> tuple[float, float, int] | None:
    """(v1, between^2, dof) from runs of equal size, or None when there are too few."""
    halves: list[float] = []
    levels: dict[str, list[float]] = {}
    r = len(runs[0].logs)
    for run in runs:
        arr = np.asarray(run.logs, dtype=float)
        if arr.size >= MIN_REPS:
            halves.append(block_level(arr[0::2], statistic) - block_level(arr[1::2], statistic))
        levels.setdefault(run.commit, []).append(block_level(arr, statistic))
    groups = [np.asarray(v) for v in levels.values() if len(v) >= MIN_RUNS]
    dof = sum(g.size - 1 for g in groups)
    if not halves or dof < MIN_DOF:
        return None
    v1 = float(np.mean(np.square(halves))) * r / 4.0
    pooled = float(sum(np.sum((g - g.mean()) ** 2) for g in groups)) / dof
    # at its BETWEEN_UPPER_QUANTILE upper bound: from a handful of runs the plain estimate is
    # often 0, which would send every run to the longest size on the noise of four rounds
    upper = pooled * dof / float(chdtri(dof, BETWEEN_UPPER_QUANTILE))
    return v1, max(0.0, upper - v1 / r), dof


def choose_reps(runs: Sequence[Run], reps: int, statistic: BlockStatistic, adjustable: bool = True) -> BlockChoice:
    """The samples per run that reach a decision in the least wall time, from `runs` measured
    with `reps` samples each (runs of another size are left out)."""
    if not adjustable:
        return BlockChoice(reps, reps, BlockReason.FIXED)
    same = [r for r in runs if len(r.logs) == reps]
    spreads = _spreads(same, statistic) if same else None
    if spreads is None:
        return BlockChoice(reps, reps, BlockReason.TOO_FEW_RUNS)
    v1, between2, _ = spreads
    timed = [r for r in same if r.sample_s is not None]
    if not timed:
        return BlockChoice(reps, reps, BlockReason.NO_COST, math.sqrt(v1), math.sqrt(between2))
    per_sample = float(np.median([r.sample_s / len(r.logs) for r in timed if r.sample_s is not None]))
    overhead = float(np.median([max(0.0, r.duration_s - (r.sample_s or 0.0)) for r in timed]))
    spread = (math.sqrt(v1), math.sqrt(between2), overhead, per_sample)
    if per_sample <= 0.0:
        return BlockChoice(reps, reps, BlockReason.NO_COST, *spread)
    hi = min(MAX_REPS, max(MIN_REPS, reps * MAX_REPS_FACTOR))
    if between2 <= 0.0:
        best = hi  # nothing between runs: one long run is the cheapest
    else:
        ideal = math.sqrt(v1 * overhead / (between2 * per_sample))
        candidates = {min(hi, max(MIN_REPS, n)) for n in (math.floor(ideal), math.ceil(ideal))}
        best = min(candidates, key=lambda n: time_to_decide(n, v1, between2, overhead, per_sample))
    now = time_to_decide(reps, v1, between2, overhead, per_sample)
    then = time_to_decide(best, v1, between2, overhead, per_sample)
    saving = 1.0 - then / now if now > 0 else 0.0
    if best == reps or saving < MIN_SAVING:
        return BlockChoice(reps, reps, BlockReason.CLOSE, *spread, saving=max(0.0, saving))
    return BlockChoice(reps, best, BlockReason.CHOSEN, *spread, saving=saving)


MAX_FAILED_RUNS = 3  # failed runs of one commit before it may be untestable (see hopeless)


def hopeless(failed: int, ok: int) -> bool:
    """Whether a commit whose runs failed `failed` times and succeeded `ok` times is untestable
    (a skip): a rare crash is noise; a commit whose runs fail as often as they succeed is broken."""
    return failed >= MAX_FAILED_RUNS and failed > ok
