"""The command runner: run an argv in the built checkout, every stdout line that is a number
is one sample. A non-zero exit, a timeout or no samples at all is a failed run. Samples must be
positive and finite, because attrib compares ratios (docs/recipes.md)."""

from __future__ import annotations

import math
import re
from pathlib import Path

from attrib.evaluate.executors import Executor
from attrib.evaluate.runners import RunResult
from attrib.recipe import BenchmarkSpec

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


class CommandRunner:
    def __init__(self, executor: Executor, spec: BenchmarkSpec) -> None:
        self.executor = executor
        self.spec = spec

    def run(self, checkout: Path) -> RunResult:
        res = self.executor.run(checkout, self.spec.argv(), self.spec.timeout_s)
        if res.timed_out:
            return RunResult((), f"timed out after {self.spec.timeout_s:g} s", res.duration_s, node=res.node)
        if res.returncode != 0:
            tail = res.stderr.strip()[-ERROR_TAIL_CHARS:]
            if res.returncode is None:  # it never ran to an exit (slurm: its job was lost): stderr says why
                why = tail or "did not run"
            else:
                why = f"exit {res.returncode}: {tail}" if tail else f"exit {res.returncode}"
            return RunResult((), why, res.duration_s, node=res.node)
        samples, excluded, error = parse_samples(res.stdout)
        return RunResult(tuple(samples) if not error else (), error, res.duration_s, tuple(excluded), res.node)
