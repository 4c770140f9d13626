"""Block sizing: the samples per run, chosen once from the preflight's first rounds.

With the posterior method the evaluation keeps the preflight's first runs and, PLAN_AFTER_ROUNDS
into it, asks core/blocks.py for the samples per run that reach a decision in the least wall
time; the runner takes that size from then on (`runners.resized`). Blocks of another size stay
in the records but are no longer compared with these (their block statistic has another bias
and spread), and comparisons before the change pool no noise into later ones. One comparison
may still run at the size before: a confirmation that resumes a pair decided at that size (a
preflight that decided before the size was chosen), whose rounds must be at its size to join
them (`spans`, `runner_at`).
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
        self._running, self._at = runner, self.reps  # what runs now, at what size (runner_at)
        self._first_runs: list[Run] = []

    def recorded(self) -> BlockChoice | None:
        """The choice for the result: a bisection that adapts but whose search never needed a
        block of its own (every commit it asked was a twin of one measured) never chose, and
        says so, unless the size could not have changed anyway."""
        if self.choice is not None or not self.adapting:
            return self.choice
        if not self.bench.adapt_reps:
            return BlockChoice(self.reps, self.reps, BlockReason.PINNED)
        if resized(self.runner, self.reps) is None:
            return BlockChoice(self.reps, self.reps, BlockReason.FIXED)
        return BlockChoice(self.reps, self.reps, BlockReason.UNNEEDED)

    def spans(self, comparisons: int) -> list[tuple[int, int, int]]:
        """The comparisons at each block size, the current size first: (start, stop, samples
        per run) over the first `comparisons` comparisons."""
        out = [(self.resized_at, comparisons, self.reps)]
        if self.resized_at and self.choice is not None and self.choice.reason is BlockReason.CHOSEN:
            out.append((0, self.resized_at, self.choice.reps_before))
        return out

    def runner_at(self, reps: int | None) -> tuple[Runner, int]:
        """The runner taking `reps` samples per run (None: the current size), and that size.
        Resized again on every change of size, back included: a runner may resize itself in
        place (the simulation's does, so that its counts stay whole)."""
        want = self.reps if reps is None else reps
        if want != self._at:
            runner = resized(self.runner, want)
            assert runner is not None, "a size other than the current one exists only where the runner was resized"
            self._running, self._at = runner, want
        return self._running, want

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
            self._running, self._at = runner, choice.reps
            self.resized_at = comparisons
        self.choice = choice
        self._first_runs = []
        return choice
