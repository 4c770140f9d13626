"""What the members of a group share at the edge: one build per commit, one process per round.

A group bisection (attrib/group_bisection.py) gives each member its own evaluation (its own
tests, records and verdicts, as a bisection of it alone has them), and these two adapters
make the members' evaluations share what costs the machine time:

* `SharedBuilder`: each commit is built once for the whole group (the work dir's cache keeps
  builds across bisections anyway; this keeps them across the members of one).
* `SharedRuns`: a runner whose one process measures several benchmarks (`MultiRunner`: a
  command printing `name value` lines, or one Google Benchmark or NVBench binary asked for
  several members' benchmarks, evaluate/runners/multi.py) runs once per round for all its
  members; each member measures through its view of it (`SharedRuns.view`). The group's
  driver opens a *phase* (`next_phase`) before every step it takes for all members at once (the
  preflight, a round of the search, a confirmation); inside it, each member's i-th round of a
  checkout is served by one process run, the first member that asks runs it and the others
  read their lines of its output. So the members of one comparison get the same pairs (the
  i-th round of good and of bad ran back to back, once), each member uses each run at most
  once, and a member that needs more rounds than the others runs the extra ones itself.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Protocol

from attrib.core.model import BuildRecord, CommitInfo
from attrib.evaluate.runners import Runner, RunResult


class MultiRunner(Protocol):
    """One process, several benchmarks: each run's result per benchmark name. `names`: the
    members still measuring, which a runner that can select (gbench, NVBench) limits the run
    to; None: all. A runner may return more (a command prints every name it has)."""

    def run_all(self, checkout: Path, names: Collection[str] | None = None) -> Mapping[str, RunResult]: ...


class _Builds(Protocol):
    def build(self, commit: CommitInfo) -> BuildRecord: ...


class SharedBuilder:
    """Builds each commit once for every member's evaluation."""

    def __init__(self, builder: _Builds) -> None:
        self.builder = builder
        self._done: dict[str, BuildRecord] = {}

    def build(self, commit: CommitInfo) -> BuildRecord:
        if commit.sha not in self._done:
            self._done[commit.sha] = self.builder.build(commit)
        return self._done[commit.sha]


class SharedRuns:
    """One run of a multi-benchmark process per round and checkout serves every member (above)."""

    def __init__(
        self, runner: MultiRunner, round_context: Callable[[], AbstractContextManager[object]] | None = None
    ) -> None:
        self.runner = runner
        self.outer = round_context or nullcontext  # the executor's round (slurm: one allocation)
        self.phase = 0
        self.runs = 0  # processes run: what the machine spent
        self._round: dict[str, int] = {}  # per member: its rounds in this phase
        self._cache: dict[tuple[int, str], Mapping[str, RunResult]] = {}
        # Who a run measures (a runner that can select, gbench and NVBench, runs only those):
        # the members the group's step measures when it says (`next_phase(measuring)`: a
        # decided member, or one the step has nothing to ask of, costs the process nothing);
        # every member until a step first says (the preflight); after that, in a step that
        # does not say (each member's rest, one after another), the member that asks.
        self._members: set[str] = set()
        self._measuring: set[str] | None = None
        self._told = False

    def next_phase(self, measuring: Collection[str] | None = None) -> None:
        """A new step of the group: the members' rounds count from the start again.
        `measuring`: the members this step measures, when the step knows (the group search)."""
        self.phase += 1
        self._round.clear()
        self._cache.clear()
        self._measuring = None if measuring is None else set(measuring)
        self._told = self._told or measuring is not None

    def round_context(self, name: str) -> Callable[[], AbstractContextManager[object]]:
        """What the member's evaluation enters around each of its rounds."""

        @contextmanager
        def entered() -> Iterator[object]:
            self._round[name] = self._round.get(name, 0) + 1
            with self.outer() as inner:
                yield inner

        return entered

    def view(self, name: str) -> Runner:
        """The runner one member's evaluation measures with."""
        self._members.add(name)
        return _MemberRunner(self, name)

    def run(self, name: str, checkout: Path) -> RunResult:
        key = (self._round.get(name, 0), str(checkout))
        if name not in self._cache.get(key, {}):
            told = self._measuring if self._measuring is not None else (set() if self._told else self._members)
            self._cache[key] = {**self._cache.get(key, {}), **self.runner.run_all(checkout, told | {name})}
            self.runs += 1
        outputs = self._cache[key]
        if name in outputs:
            return outputs[name]
        failed = next((r for r in outputs.values() if not r.ok), None)
        why = failed.error if failed is not None else f"the run printed no line for '{name}'"
        duration = max((r.duration_s for r in outputs.values()), default=0.0)
        return RunResult((), why, duration)


class _MemberRunner:
    def __init__(self, shared: SharedRuns, name: str) -> None:
        self.shared = shared
        self.name = name

    def run(self, checkout: Path) -> RunResult:
        return self.shared.run(self.name, checkout)
