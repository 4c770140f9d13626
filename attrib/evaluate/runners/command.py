"""The command runner: run an argv in the built checkout, every stdout line that is a number
is one sample. A non-zero exit, a timeout or no samples at all is a failed run. Samples must be
positive and finite, because attrib compares ratios (docs/recipes.md)."""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path

from attrib.evaluate.executors import Executor, ProcessResult
from attrib.evaluate.runners import RunResult
from attrib.recipe import TIME_UNITS, BenchmarkSpec

ERROR_TAIL_CHARS = 300


# "<number> disturbed" or "<number> disturbed: <reason>": a sample the benchmark itself flags
# (a throttled clock, a preempted repetition); it is excluded and counted by reason.
_DISTURBED = re.compile(r"^\s*(\S+)\s+disturbed(?::\s*(.*\S))?\s*$")


def parse_samples(stdout: str) -> tuple[list[float], list[str], str]:
    """(samples, excluded reasons, error). Lines that are not numbers are ignored, as the
    recipe contract says; a number followed by `disturbed[: reason]` is excluded and counted."""
    samples: list[float] = []
    excluded: list[str] = []
    for line in stdout.splitlines():
        flagged = _DISTURBED.match(line)
        if flagged and _number(flagged.group(1)) is not None:
            excluded.append(flagged.group(2) or "flagged by the benchmark")
            continue
        value = _number(line.strip())
        if value is None:
            continue
        if not math.isfinite(value) or value <= 0:
            return samples, excluded, f"sample {line.strip()!r} is not a positive finite number"
        samples.append(value)
    if not samples:
        why = f"all {len(excluded)} samples were flagged disturbed" if excluded else "no stdout line parses as a number"
        return samples, excluded, f"printed no usable samples ({why})"
    return samples, excluded, ""


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def process_failure(res: ProcessResult, timeout_s: float) -> str:
    """Why a benchmark process is a failed run before its output is read ("" when it is not):
    a timeout, or a non-zero exit with the end of its stderr. Shared by every runner that
    runs a benchmark through an executor."""
    if res.timed_out:
        return f"timed out after {timeout_s:g} s"
    if res.returncode is None:  # never started: the executor says why
        return " ".join(res.stderr.split()) or "did not start"
    if res.returncode != 0:
        tail = " ".join(res.stderr.strip()[-ERROR_TAIL_CHARS:].splitlines())
        return f"exit {res.returncode}: {tail}" if tail else f"exit {res.returncode}"
    return ""


def split_named(stdout: str, names: tuple[str, ...]) -> dict[str, str]:
    """A `name value` command's output as one plain output per name: each line whose first
    word is one of `names` gives its rest to that name; other lines are ignored."""
    lines: dict[str, list[str]] = {name: [] for name in names}
    for line in stdout.splitlines():
        head, _, rest = line.strip().partition(" ")
        if head in lines:
            lines[head].append(rest)
    return {name: "\n".join(rows) for name, rows in lines.items()}


class CommandRunner:
    def __init__(self, executor: Executor, spec: BenchmarkSpec) -> None:
        self.executor = executor
        self.spec = spec

    def run(self, checkout: Path) -> RunResult:
        if self.spec.names:  # a member of a `name value` command measured alone: its own lines
            return self.run_all(checkout)[self.spec.names[0]]
        res = self.executor.run(checkout, self.spec.argv(), self.spec.timeout_s)
        return self._result(res, res.stdout)

    def run_all(self, checkout: Path, names: Collection[str] | None = None) -> dict[str, RunResult]:
        """One run of a command that prints `name value` lines (`names` in the recipe): a result
        per name, each read as a plain command's output (evaluate/shared.py's MultiRunner). The
        command prints every name it has: `names` (those still measuring) cannot limit it."""
        res = self.executor.run(checkout, self.spec.argv(), self.spec.timeout_s)
        return {name: self._result(res, out) for name, out in split_named(res.stdout, self.spec.names).items()}

    def _result(self, res: ProcessResult, stdout: str) -> RunResult:
        if failure := process_failure(res, self.spec.timeout_s):
            return RunResult((), failure, res.duration_s, node=res.node)
        samples, excluded, error = parse_samples(stdout)
        if error:
            return RunResult((), error, res.duration_s, tuple(excluded), res.node)
        # A command's samples in a time unit are the times of its own repetitions.
        factor = TIME_UNITS.get(self.spec.unit)
        sample_s = sum(samples) * factor if factor is not None else None
        return RunResult(tuple(samples), "", res.duration_s, tuple(excluded), res.node, sample_s)

    def with_reps(self, reps: int) -> CommandRunner | None:
        """Only a command that takes `{reps}` can be asked for another number of samples."""
        if not any("{reps}" in part for part in self.spec.command):
            return None
        return CommandRunner(self.executor, replace(self.spec, reps=reps))
