"""The gbench runner: run a Google Benchmark binary of the built checkout with
`--benchmark_format=json --benchmark_repetitions={reps} --benchmark_filter=<filter>` and take
each repetition of the one selected benchmark as one sample (in the recipe's time unit).

The filter must select exactly one benchmark; when it selects none, the binary is asked for
its list (`--benchmark_list_tests`) so the failed run can say which names exist, and the
error starts with NO_SUCH_BENCHMARK: at a reference that is bad input (exit 2). Aggregate
rows are never samples; a benchmark that reports `error_occurred` is a failed run with its
message. Every failure is that commit's failed run: the bisection goes on (the search turns
a commit whose runs keep failing into a skip)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from attrib.errors import FormatError
from attrib.evaluate.executors import Executor
from attrib.evaluate.runners import NO_SUCH_BENCHMARK, RunResult
from attrib.evaluate.runners.command import process_failure
from attrib.evaluate.runners.units import convert, first_nonpositive
from attrib.formats import parse_gbench
from attrib.recipe import BenchmarkSpec, GbenchSpec

MAX_NAMES_SHOWN = 12  # names listed in a "matched no/several benchmarks" error


class GbenchRunner:
    def __init__(self, executor: Executor, spec: BenchmarkSpec) -> None:
        assert spec.gbench is not None
        self.executor = executor
        self.spec = spec
        self.gbench: GbenchSpec = spec.gbench

    def argv(self, selection: str | None = None) -> list[str]:
        """`selection`: another --benchmark_filter (one process for several members)."""
        return [
            *self.spec.argv(),
            "--benchmark_format=json",
            f"--benchmark_repetitions={self.spec.reps}",
            f"--benchmark_filter={self.gbench.filter if selection is None else selection}",
        ]

    def run(self, checkout: Path) -> RunResult:
        argv = self.argv()
        res = self.executor.run(checkout, argv, self.spec.timeout_s)
        if failure := process_failure(res, self.spec.timeout_s):
            return RunResult((), failure, res.duration_s)
        return self.result(res.stdout, argv[0], res.duration_s, lambda: self.listed(checkout))

    def result(
        self,
        stdout: str,
        program: str,
        duration_s: float,
        listed: Callable[[], list[str]],
        shared: re.Pattern[str] | None = None,
    ) -> RunResult:
        """This benchmark's run read from a finished process's JSON (its own, or one run for
        several members, runners/multi.py): the rows its filter selects. `listed`: the binary's
        own names, asked only when the filter selects none. `shared`: the filter as Python reads
        it, which splits the rows of a process run for several members; alone (None), the
        binary applied the filter itself and every row is selected."""
        if not stdout.strip():
            # libbenchmark prints no JSON at all when the filter matches nothing (and exits 0).
            return RunResult((), f"{NO_SUCH_BENCHMARK}{self._matched('no benchmark', listed())}", duration_s)
        try:
            parsed = parse_gbench(stdout, f"{program} stdout", self.gbench.time)
        except FormatError as exc:
            return RunResult((), str(exc), duration_s)
        found = [m for m in parsed if shared is None or shared.search(m.benchmark) is not None]
        if len(found) != 1:
            if found:
                return RunResult(
                    (), self._matched(f"{len(found)} benchmarks", [m.benchmark for m in found]), duration_s
                )
            return RunResult((), f"{NO_SUCH_BENCHMARK}{self._matched('no benchmark', listed())}", duration_s)
        m = found[0]
        if m.error:
            return RunResult((), f"benchmark '{m.benchmark}' reported error_occurred: {m.error}", duration_s)
        if m.skipped:
            return RunResult((), f"benchmark '{m.benchmark}' skipped itself: {m.skipped}", duration_s)
        samples = convert(m.samples, m.unit, self.spec.unit)
        if isinstance(samples, str):
            return RunResult((), f"benchmark '{m.benchmark}': {samples}", duration_s)
        if (bad := first_nonpositive(samples)) is not None:
            return RunResult(
                (), f"benchmark '{m.benchmark}': {self.gbench.time} {bad!r} is not a positive time", duration_s
            )
        return RunResult(samples, "", duration_s, sample_s=m.sample_s)

    def _matched(self, how: str, names: list[str]) -> str:
        return f"filter {self.gbench.filter!r} matched {how}; it must match exactly one (names seen: {_names(names)})"

    def with_reps(self, reps: int) -> GbenchRunner:
        """--benchmark_repetitions is attrib's to choose; each repetition's cost is in the JSON
        (iterations x real time), the rest of a run (start-up, the library's iteration-count
        search) is its overhead."""
        return GbenchRunner(self.executor, replace(self.spec, reps=reps))

    def listed(self, checkout: Path) -> list[str]:
        """The binary's own list of benchmark names (one per line), for the error message."""
        res = self.executor.run(checkout, [*self.spec.argv(), "--benchmark_list_tests=true"], self.spec.timeout_s)
        return [ln.strip() for ln in res.stdout.splitlines() if ln.strip()] if res.ok else []


def _names(names: list[str]) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:MAX_NAMES_SHOWN])
    return shown + (f", ... ({len(names) - MAX_NAMES_SHOWN} more)" if len(names) > MAX_NAMES_SHOWN else "")
