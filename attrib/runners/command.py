"""The command runner: run an argv in the built checkout, every stdout line that is a number
is one sample. A non-zero exit, a timeout or no samples at all is a failed run. Samples must be
positive and finite, because attrib compares ratios (docs/recipes.md)."""

from __future__ import annotations

import math
from pathlib import Path

from ..executors import Executor
from ..recipe import BenchmarkSpec
from . import RunResult

ERROR_TAIL_CHARS = 300


def parse_samples(stdout: str) -> tuple[list[float], str]:
    """(samples, error). Lines that are not numbers are ignored, as the recipe contract says."""
    samples: list[float] = []
    for line in stdout.splitlines():
        try:
            value = float(line.strip())
        except ValueError:
            continue
        if not math.isfinite(value) or value <= 0:
            return samples, f"sample {line.strip()!r} is not a positive finite number"
        samples.append(value)
    if not samples:
        return samples, "printed no samples (no stdout line parses as a number)"
    return samples, ""


class CommandRunner:
    def __init__(self, executor: Executor, spec: BenchmarkSpec) -> None:
        self.executor = executor
        self.spec = spec

    def run(self, checkout: Path) -> RunResult:
        res = self.executor.run(checkout, self.spec.argv(), self.spec.timeout_s)
        if res.timed_out:
            return RunResult((), f"timed out after {self.spec.timeout_s:g} s", res.duration_s)
        if res.returncode != 0:
            tail = res.stderr.strip()[-ERROR_TAIL_CHARS:]
            return RunResult((), f"exit {res.returncode}: {tail}" if tail else f"exit {res.returncode}", res.duration_s)
        samples, error = parse_samples(res.stdout)
        return RunResult(tuple(samples) if not error else (), error, res.duration_s)
