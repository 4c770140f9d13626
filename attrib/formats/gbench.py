"""Google Benchmark's JSON (`--benchmark_format=json`), as src/json_reporter.cc writes it.

Layout: {"context": {...}, "benchmarks": [row, ...]}. A row is one repetition
(`run_type` "iteration", with `repetition_index`) or an aggregate over the repetitions
(`run_type` "aggregate": mean, median, stddev, cv, or a user statistic); rows of one benchmark
share `run_name`. Aggregates are never samples: the median gives `value`, the cv `noise`.
`context.json_schema_version` is 1 since libbenchmark 1.8.4 and absent before (Debian
bookworm ships 1.7.1); any other version is refused. A row with `error_occurred` (SkipWithError)
makes the measurement failed with its `error_message`; `skipped` (SkipWithMessage, 1.8+) makes
it skipped with its `skip_message`.
"""

from __future__ import annotations

import math
import statistics
from enum import StrEnum
from typing import Any

from attrib.errors import FormatError
from attrib.formats.fields import Reader, load_json
from attrib.formats.model import Measurement

SCHEMA_VERSIONS = (1,)  # context.json_schema_version values this reader knows
WHAT = "Google Benchmark JSON (--benchmark_format=json)"
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}  # GetTimeUnitString in benchmark's reporter, in seconds
_CONTEXT_KEYS = (
    "host_name", "executable", "num_cpus", "mhz_per_cpu", "cpu_scaling_enabled",
    "aslr_enabled", "library_version", "library_build_type", "json_schema_version", "date",
)  # fmt: skip


class GbenchTime(StrEnum):
    """Which of a row's two times is the measured value."""

    REAL = "real_time"  # wall clock: what a user waits for (and a GPU's work shows up in)
    CPU = "cpu_time"  # this process's CPU time


class RunType(StrEnum):
    ITERATION = "iteration"
    AGGREGATE = "aggregate"


def parse_gbench(text: str, source: str, time: GbenchTime = GbenchTime.REAL) -> list[Measurement]:
    """One Measurement per benchmark (`run_name`), in the order the file lists them."""
    root = Reader(source, "", "", load_json(text, source, WHAT))
    ctx = root.child("context")
    if ctx.has("json_schema_version"):
        version = ctx.raw("json_schema_version")
        if version not in SCHEMA_VERSIONS or type(version) is not int:
            raise ctx.fail(
                "json_schema_version",
                f"is {version!r}; this reader knows version 1 (and the unversioned layout before libbenchmark 1.8.4)",
            )
    context = {k: _str(ctx.raw(k)) for k in _CONTEXT_KEYS if ctx.has(k)}
    # `--benchmark_context=env.compiler=nvcc-12.6` puts a key of the caller's in the context:
    # the environment it ran in (docs/history.md); only text and numbers, as the tool writes them
    context |= {k: _str(v) for k, v in ctx.node.items() if k.startswith("env.") and isinstance(v, str | int | float)}
    groups: dict[str, _Group] = {}
    for i, node in enumerate(root.list("benchmarks")):
        row = root.item("benchmarks", i, node)
        name = row.str("run_name", allow_empty=False) if row.has("run_name") else row.str("name", allow_empty=False)
        row = root.item("benchmarks", i, node, benchmark=name)
        kind = row.str("run_type")
        if kind not in tuple(RunType):
            raise row.fail("run_type", f'is {kind!r}; expected "iteration" or "aggregate"')
        groups.setdefault(name, _Group(name)).add(row, RunType(kind), time)
    return [g.measurement(source, time, context) for g in groups.values()]


class _Group:
    """The rows of one benchmark, checked as they come."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.samples: list[float] = []
        self.unit = ""
        self.error = ""
        self.skipped = ""
        self.median: float | None = None
        self.cv: float | None = None
        self.cost_s: float | None = 0.0  # iterations x real time per repetition, summed; None: a row lacks it

    def add(self, row: Reader, kind: RunType, time: GbenchTime) -> None:
        if row.has("error_occurred") and row.bool("error_occurred"):
            self.error = self.error or (row.str("error_message") if row.has("error_message") else "error_occurred")
            return
        if row.has("skipped") and row.bool("skipped"):
            self.skipped = self.skipped or (row.str("skip_message") if row.has("skip_message") else "skipped")
            return
        if kind is RunType.AGGREGATE:
            self._aggregate(row, time)
            return
        row.int("repetition_index")
        unit = row.str("time_unit")
        if unit not in TIME_UNITS:
            raise row.fail("time_unit", f"is {unit!r}; expected one of {', '.join(TIME_UNITS)}")
        if self.unit and unit != self.unit:
            raise row.fail("time_unit", f"is {unit!r} where earlier repetitions said {self.unit!r}")
        self.unit = unit
        value = row.number(time.value)
        if value < 0:
            raise row.fail(time.value, f"is {value!r}; expected a time >= 0")
        self.samples.append(value)
        # what the repetition cost in wall time (each reports its per-iteration time): adaptive
        # blocks weigh it against the run's start-up
        if self.cost_s is not None and row.has("iterations") and row.has(GbenchTime.REAL.value):
            self.cost_s += row.number("iterations") * row.number(GbenchTime.REAL.value) * TIME_UNITS[unit]
        else:
            self.cost_s = None

    def _aggregate(self, row: Reader, time: GbenchTime) -> None:
        name = row.str("aggregate_name")
        if name not in ("median", "cv") or not row.has(time.value):
            return  # mean, stddev, user statistics and big-O fits carry nothing we use
        value = row.number(time.value)
        if name == "median":
            self.median = value
        else:
            self.cv = value  # aggregate_unit "percentage": a fraction, as stddev / mean

    def measurement(self, source: str, time: GbenchTime, context: dict[str, str]) -> Measurement:
        if self.error or self.skipped:
            return Measurement(self.name, {}, math.nan, self.unit, (), None, self.skipped, self.error, context)
        if not self.samples:
            raise FormatError(
                source, self.name, "run_type", 'only aggregate rows; expected at least one "iteration" row'
            )
        value = self.median if self.median is not None else statistics.median(self.samples)
        return Measurement(
            self.name, {}, value, self.unit, tuple(self.samples), self.cv, "", "", context, sample_s=self.cost_s
        )


def _str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
