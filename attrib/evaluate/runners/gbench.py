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

    def argv(self) -> list[str]:
        return [
            *self.spec.argv(),
            "--benchmark_format=json",
            f"--benchmark_repetitions={self.spec.reps}",
            f"--benchmark_filter={self.gbench.filter}",
        ]

    def run(self, checkout: Path) -> RunResult:
        argv = self.argv()
        res = self.executor.run(checkout, argv, self.spec.timeout_s)
        if failure := process_failure(res, self.spec.timeout_s):
            return RunResult((), failure, res.duration_s)
        if not res.stdout.strip():
            # libbenchmark prints no JSON at all when the filter matches nothing (and exits 0).
            names = self._listed(checkout)
            return RunResult(
                (),
                f"{NO_SUCH_BENCHMARK}filter {self.gbench.filter!r} matched no benchmark; it must match exactly one (names seen: {_names(names)})",
                res.duration_s,
            )
        try:
            found = parse_gbench(res.stdout, f"{argv[0]} stdout", self.gbench.time)
        except FormatError as exc:
            return RunResult((), str(exc), res.duration_s)
        if len(found) != 1:
            names = [m.benchmark for m in found] or self._listed(checkout)
            how = f"{len(found)} benchmarks" if found else "no benchmark"
            return RunResult(
                (),
                f"{'' if found else NO_SUCH_BENCHMARK}filter {self.gbench.filter!r} matched {how}; it must match exactly one (names seen: {_names(names)})",
                res.duration_s,
            )
        m = found[0]
        if m.error:
            return RunResult((), f"benchmark '{m.benchmark}' reported error_occurred: {m.error}", res.duration_s)
        if m.skipped:
            return RunResult((), f"benchmark '{m.benchmark}' skipped itself: {m.skipped}", res.duration_s)
        samples = convert(m.samples, m.unit, self.spec.unit)
        if isinstance(samples, str):
            return RunResult((), f"benchmark '{m.benchmark}': {samples}", res.duration_s)
        if (bad := first_nonpositive(samples)) is not None:
            return RunResult(
                (), f"benchmark '{m.benchmark}': {self.gbench.time} {bad!r} is not a positive time", res.duration_s
            )
        return RunResult(samples, "", res.duration_s, sample_s=m.sample_s)

    def with_reps(self, reps: int) -> GbenchRunner:
        """--benchmark_repetitions is attrib's to choose; each repetition's cost is in the JSON
        (iterations x real time), the rest of a run (start-up, the library's iteration-count
        search) is its overhead."""
        return GbenchRunner(self.executor, replace(self.spec, reps=reps))

    def _listed(self, checkout: Path) -> list[str]:
        """The binary's own list of benchmark names (one per line), for the error message."""
        res = self.executor.run(checkout, [*self.spec.argv(), "--benchmark_list_tests=true"], self.spec.timeout_s)
        return [ln.strip() for ln in res.stdout.splitlines() if ln.strip()] if res.ok else []


def _names(names: list[str]) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:MAX_NAMES_SHOWN])
    return shown + (f", ... ({len(names) - MAX_NAMES_SHOWN} more)" if len(names) > MAX_NAMES_SHOWN else "")
