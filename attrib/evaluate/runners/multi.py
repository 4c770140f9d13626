"""Several benchmarks of one binary measured by one process: what the members of a group that
use the gbench or nvbench runner share (evaluate/shared.py hands each member its part of a
round's run, job/members.py forms the groups).

Members share a process when everything one process takes in common is the same
(`process_key`): the runner, the command, the samples per run, the configuration (under Slurm,
the machine class), and for NVBench the stopping rule and the output option. One process is
then asked for all of them: Google Benchmark with one `--benchmark_filter` that is the members'
filters joined by `|`, NVBench with one `-b` (and its own axes and stopping options) per member.
Its timeout is the sum of the members' own, the time they would have one after the other. A
run measures only the members still measuring (evaluate/shared.py says who): a decided
member's benchmark stops costing the process.

Each member's result is read from the shared output by the member's own runner
(`GbenchRunner.result`, `NvbenchRunner.result`): the same parsing, unit conversion and checks as
a run of it alone. Google Benchmark's rows are split by each member's filter (read by Python's
`re`, as `re.search`, which the recipe checked reads it; a negative filter, `-...`, runs alone);
NVBench writes one `benchmarks[]` entry per `-b`, in order, and each member reads its own.

A shared process that fails as a whole (a timeout, a non-zero exit, no output file, an output
that is not one JSON document: a benchmark that prints to stdout breaks Google Benchmark's) does
not say which member caused it, so from then on every member runs alone on that checkout, that
round included: a benchmark a commit lacks (NVBench refuses an unknown `-b`), a crash or a hang
is that member's failed run, never the others'.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Hashable, Sequence
from functools import cache
from pathlib import Path

from attrib.evaluate.executors import Executor
from attrib.evaluate.runners import Runner, RunResult
from attrib.evaluate.runners.command import process_failure
from attrib.evaluate.runners.gbench import GbenchRunner
from attrib.evaluate.runners.nvbench import NvbenchRunner, output_name, remove_output
from attrib.recipe import BenchmarkSpec, RunnerKind


def process_key(bench: BenchmarkSpec) -> Hashable | None:
    """What members must have in common to run in one process; None: this one runs alone."""
    if bench.gbench is not None and bench.runner is RunnerKind.GBENCH:
        if bench.gbench.filter.startswith("-"):  # a negative filter: `|` cannot join it
            return None
        return (bench.runner, bench.command, bench.reps, bench.config)
    if bench.nvbench is not None and bench.runner is RunnerKind.NVBENCH:
        nv = bench.nvbench
        return (bench.runner, bench.command, bench.reps, bench.config, nv.stopping, nv.jsonbin)
    return None


def one_process(executor: Executor, benches: Sequence[BenchmarkSpec]) -> GbenchProcess | NvbenchProcess:
    """The shared process of members with one `process_key`."""
    if benches[0].runner is RunnerKind.GBENCH:
        return GbenchProcess(executor, benches)
    return NvbenchProcess(executor, benches)


class _OneProcess:
    """A run of all members per call, and each member alone on a checkout whose shared run
    failed as a whole (above)."""

    def __init__(self, executor: Executor, benches: Sequence[BenchmarkSpec], members: Sequence[Runner]) -> None:
        self.executor = executor
        self.benches = tuple(benches)
        self.alone: set[Path] = set()  # checkouts whose shared run failed: members run alone there
        self._solo = {b.name: m for b, m in zip(benches, members, strict=True)}

    def run_all(self, checkout: Path, names: Collection[str] | None = None) -> dict[str, RunResult]:
        """One run for the members `names` (those still measuring; None: every member)."""
        wanted = [b.name for b in self.benches if names is None or b.name in names]
        if checkout.resolve() not in self.alone:
            shared = self._shared(checkout, wanted)
            if shared is not None:
                return shared
            self.alone.add(checkout.resolve())
        return {name: self._solo[name].run(checkout) for name in wanted}

    def _shared(self, checkout: Path, names: Sequence[str]) -> dict[str, RunResult] | None:
        raise NotImplementedError

    def timeout_s(self, names: Sequence[str]) -> float:
        """The members' own timeouts, one after the other."""
        return sum(b.timeout_s for b in self.benches if b.name in names)


class GbenchProcess(_OneProcess):
    """Google Benchmark: one filter for every member, the JSON rows split by each one's."""

    def __init__(self, executor: Executor, benches: Sequence[BenchmarkSpec]) -> None:
        self.readers = [GbenchRunner(executor, b) for b in benches]  # each member's: alone, and its rows of a shared run
        super().__init__(executor, benches, self.readers)
        self.rows = {r.spec.name: re.compile(r.gbench.filter) for r in self.readers}  # the recipe checked it reads

    def argv(self, names: Sequence[str]) -> list[str]:
        return self.readers[0].argv("|".join(f"({r.gbench.filter})" for r in self._reading(names)))

    def _reading(self, names: Sequence[str]) -> list[GbenchRunner]:
        return [r for r in self.readers if r.spec.name in names]

    def _shared(self, checkout: Path, names: Sequence[str]) -> dict[str, RunResult] | None:
        argv, timeout_s = self.argv(names), self.timeout_s(names)
        res = self.executor.run(checkout, argv, timeout_s)
        if process_failure(res, timeout_s) or not _one_document(res.stdout):
            return None
        listed = cache(lambda: self.readers[0].listed(checkout))  # asked once, and only if a filter selects none
        return {
            r.spec.name: r.result(res.stdout, argv[0], res.duration_s, listed, self.rows[r.spec.name])
            for r in self._reading(names)
        }


class NvbenchProcess(_OneProcess):
    """NVBench: one `-b` per member, each member's state read from its own `benchmarks[]` entry."""

    def __init__(self, executor: Executor, benches: Sequence[BenchmarkSpec]) -> None:
        self.readers = [NvbenchRunner(executor, b) for b in benches]  # each member's: alone, and its entry of a shared run
        super().__init__(executor, benches, self.readers)

    def argv(self, output: str, names: Sequence[str]) -> list[str]:
        selections = [part for r in self._reading(names) for part in r.selection()]
        return [*self.benches[0].argv(), *selections, *self.readers[0].output_option(output)]

    def _reading(self, names: Sequence[str]) -> list[NvbenchRunner]:
        return [r for r in self.readers if r.spec.name in names]

    def _shared(self, checkout: Path, names: Sequence[str]) -> dict[str, RunResult] | None:
        output, readers = output_name(), self._reading(names)
        try:
            argv, timeout_s = self.argv(output, names), self.timeout_s(names)
            res = self.executor.run(checkout, argv, timeout_s)
            path = checkout / output
            if process_failure(res, timeout_s) or not path.is_file():
                return None
            text = path.read_text(errors="replace")
            if not _one_document(text):
                return None
            parts = split_entries(text, [r.nv.benchmark for r in readers])
            return {
                r.spec.name: r.result(part, output, res.stdout, res.duration_s, checkout)
                for r, part in zip(readers, parts, strict=True)
            }
        finally:
            remove_output(checkout, output)


def _one_document(text: str) -> bool:
    """Whether a shared run's output is one JSON object: anything else (a member's stray print,
    a truncated file) is the whole run's failure, not each member's."""
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def split_entries(text: str, benchmarks: Sequence[str]) -> list[str]:
    """Each member's NVBench JSON: the document with only the `benchmarks[]` entry of its `-b`
    (NVBench writes one per `-b`, in order). When the entries do not line up with the `-b`s
    (a count or a name that differs), each member gets the entries of its benchmark's name,
    and its own selection says what is wrong; a document that is not JSON goes to every member
    as it is (its parser says why)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return [text] * len(benchmarks)
    entries = doc.get("benchmarks") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        return [text] * len(benchmarks)
    if [e.get("name") for e in entries] == list(benchmarks):
        return [json.dumps({**doc, "benchmarks": [e]}) for e in entries]
    return [json.dumps({**doc, "benchmarks": [e for e in entries if e.get("name") == b]}) for b in benchmarks]
