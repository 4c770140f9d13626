"""Block sizing: the samples per run, chosen once from the preflight's first rounds.

With the posterior method the evaluation keeps the preflight's first runs and, PLAN_AFTER_ROUNDS
into it, asks core/blocks.py for the samples per run that reach a decision in the least wall
time; the runner takes that size from then on (`runners.resized`). Blocks of another size stay
in the records but are no longer compared with these (their block statistic has another bias
and spread), and comparisons before the change pool no noise into later ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from attrib.core.blocks import PLAN_AFTER_ROUNDS, BlockChoice, BlockReason, Run, choose_reps
from attrib.evaluate.runners import Runner, RunResult, resized
from attrib.recipe import BenchmarkSpec


class BlockSizing:
    """The runner and its samples per run now, and the runs the choice is made from."""

    def __init__(self, runner: Runner, bench: BenchmarkSpec, adapting: bool) -> None:
        self.runner = runner
        self.bench = bench
        self.reps = bench.reps
        self.adapting = adapting  # choose the size after the preflight's first rounds
        self.choice: BlockChoice | None = None
        self.resized_at = 0  # comparisons before the size changed: their noise is not pooled
        self._first_runs: list[Run] = []

    def observe(self, sha: str, logs: np.ndarray, result: RunResult) -> None:
        """A usable run: kept while the size is still to be chosen."""
        if self.adapting and self.choice is None:
            self._first_runs.append(Run(sha, tuple(float(x) for x in logs), result.duration_s, result.sample_s))

    def due(self, rounds: int) -> bool:
        """Whether the size is to be chosen now, `rounds` into the preflight."""
        return self.adapting and self.choice is None and rounds >= PLAN_AFTER_ROUNDS

    def choose(self, one_more_block: Callable[[str], object], comparisons: int) -> BlockChoice:
        """Once, from the runs so far (the preflight's): the samples per run that reach a
        decision in the least wall time. `one_more_block` runs a commit once more (a preflight
        that decided sooner gives its commits the runs the choice needs); `comparisons`: how
        many were decided before a change of size."""
        if self.choice is not None:
            return self.choice
        if not self.bench.adapt_reps:
            self.choice = BlockChoice(self.reps, self.reps, BlockReason.PINNED)
            return self.choice
        sized = resized(self.runner, self.reps)
        if sized is not None:
            counts = Counter(run.commit for run in self._first_runs)
            for sha, runs in counts.items():
                for _ in range(PLAN_AFTER_ROUNDS - runs):
                    one_more_block(sha)
        choice = choose_reps(self._first_runs, self.reps, self.bench.block_statistic, adjustable=sized is not None)
        if choice.reason is BlockReason.CHOSEN:
            runner = resized(self.runner, choice.reps)
            assert runner is not None
            self.runner, self.reps = runner, choice.reps
            self.resized_at = comparisons
        self.choice = choice
        self._first_runs = []
        return choice
