"""The nvbench runner: run an NVBench executable (C++) or a cuda-bench Python script from the
built checkout for one benchmark and one state, and hand the statistics its per-sample GPU
times (NVBench `--jsonbin`), or with `jsonbin = false` the state's mean GPU time as one
sample per run (`--json`, its noise in NVBench's summary).

The argv is the recipe's command plus `-b <benchmark>`, one `-a` per recipe axis (`2^k`
becomes `Name[pow2]=k`, NVBench's own axis syntax), the output option, and the stopping
options of `stopping` (docs/recipes.md: attrib's rounds decide; NVBench's samples size one
block). The JSON goes to a uniquely named file in the checkout, which every executor shares
with attrib (docker mounts it at /src), and is removed with its sample sidecars after the run.

What NVBench reports stays NVBench's: a skipped state is a failed run with NVBench's skip
reason; trials NVBench discarded as throttled (its markdown log) are counted as excluded
samples, by reason, in the result; a state with no accepted sample is a failed run."""

from __future__ import annotations

import re
import shutil
import uuid
from dataclasses import replace
from pathlib import Path

from attrib.errors import FormatError
from attrib.evaluate.executors import Executor
from attrib.evaluate.runners import RunResult
from attrib.evaluate.runners.command import process_failure
from attrib.evaluate.runners.units import convert, first_nonpositive
from attrib.formats import Measurement, nvbench_throttle_discards, parse_nvbench
from attrib.recipe import TIME_UNITS, BenchmarkSpec, NvbenchSpec, NvbenchStopping

THROTTLED = "throttled: trial discarded by NVBench"  # the excluded-sample reason in results
MAX_STATES_SHOWN = 8
_POW2 = re.compile(r"2\^(\d+)")


def axis_option(name: str, value: str) -> str:
    """The `-a` argument selecting one value (docs/cli_help_axis.md in NVBench)."""
    if m := _POW2.fullmatch(value):
        return f"{name}[pow2]={m[1]}"
    return f"{name}={value}"


def stopping_options(stopping: NvbenchStopping, reps: int) -> list[str]:
    n = str(reps)
    if stopping is NvbenchStopping.SAMPLE_COUNT:
        return ["--stopping-criterion", stopping.value, "--min-samples", n, "--target-samples", n]
    if stopping in (NvbenchStopping.STDREL, NvbenchStopping.ENTROPY):
        return ["--stopping-criterion", stopping.value, "--min-samples", n]
    return []  # COMMAND: the recipe's own argv says how NVBench stops


def select(found: list[Measurement], nv: NvbenchSpec) -> Measurement | str:
    """The one state the recipe names, or why there is not exactly one."""
    same = [m for m in found if m.benchmark == nv.benchmark]
    if not same:
        names = ", ".join(dict.fromkeys(m.benchmark for m in found)) or "none"
        return f"NVBench's output has no state of benchmark '{nv.benchmark}' (benchmarks seen: {names})"
    hits = [m for m in same if all(_axis_matches(m.state.get(k), v) for k, v in nv.axes.items())]
    wanted = " ".join(f"{k}={v}" for k, v in nv.axes.items()) or "(no axes)"
    if len(hits) == 1:
        return hits[0]
    seen = [m.context.get("nvbench_state", m.state_label()) for m in (hits or same)]
    shown = ", ".join(seen[:MAX_STATES_SHOWN]) + (
        f", ... ({len(seen) - MAX_STATES_SHOWN} more)" if len(seen) > MAX_STATES_SHOWN else ""
    )
    if not hits:
        return f"no state of '{nv.benchmark}' has {wanted} (states seen: {shown})"
    return f"{len(hits)} states of '{nv.benchmark}' match {wanted} ({shown}): name more axes, or one device with -d in the command"


def _axis_matches(shown: str | None, wanted: str) -> bool:
    if shown is None:
        return False
    if shown == wanted:
        return True
    # "2^24" in NVBench's output and 16777216 in the recipe (or the other way) are one value.
    values = [2 ** int(m[1]) if (m := _POW2.fullmatch(x)) else x for x in (shown, wanted)]
    return str(values[0]) == str(values[1])


def output_name() -> str:
    """A uniquely named JSON file in the checkout, which every executor shares with attrib."""
    return f"attrib-nvbench-{uuid.uuid4().hex[:12]}.json"


def remove_output(checkout: Path, output: str) -> None:
    (checkout / output).unlink(missing_ok=True)
    for suffix in ("-bin", "-freqs-bin"):  # json_printer.cu's sidecar directories
        shutil.rmtree(checkout / (output + suffix), ignore_errors=True)


class NvbenchRunner:
    def __init__(self, executor: Executor, spec: BenchmarkSpec) -> None:
        assert spec.nvbench is not None
        self.executor = executor
        self.spec = spec
        self.nv: NvbenchSpec = spec.nvbench
        self.context: dict[str, str] = {}  # the last measured state's device and NVBench facts

    def argv(self, output: str) -> list[str]:
        return [
            *self.spec.argv(),
            "-b",
            self.nv.benchmark,
            *self._axes(),
            *self.output_option(output),
            *self.stopping(),
        ]

    def selection(self) -> list[str]:
        """`-b` with this benchmark's own options: NVBench applies the axis and stopping options
        that follow a `-b` to that benchmark (docs/cli_help.md), so one run may hold several."""
        return ["-b", self.nv.benchmark, *self._axes(), *self.stopping()]

    def _axes(self) -> list[str]:
        return [a for k, v in self.nv.axes.items() for a in ("-a", axis_option(k, v))]

    def stopping(self) -> list[str]:
        return stopping_options(self.nv.stopping, self.spec.reps)

    def output_option(self, output: str) -> list[str]:
        return ["--jsonbin" if self.nv.jsonbin else "--json", output]

    def run(self, checkout: Path) -> RunResult:
        output = output_name()
        try:
            return self._run(checkout, output)
        finally:
            remove_output(checkout, output)

    def _run(self, checkout: Path, output: str) -> RunResult:
        argv = self.argv(output)
        res = self.executor.run(checkout, argv, self.spec.timeout_s)
        if failure := process_failure(res, self.spec.timeout_s):
            return RunResult((), failure, res.duration_s)
        path = checkout / output
        if not path.is_file():
            return RunResult((), self.no_output(argv[0], output), res.duration_s)
        return self.result(path.read_text(errors="replace"), output, res.stdout, res.duration_s, checkout)

    def no_output(self, program: str, output: str) -> str:
        option = "--jsonbin" if self.nv.jsonbin else "--json"
        why = f"NVBench writes it for {option}; a cuda-bench script must pass sys.argv to cuda.bench.run_all_benchmarks"
        return f"{program} exited 0 but wrote no {output} ({why})"

    def result(self, text: str, output: str, log: str, duration_s: float, checkout: Path) -> RunResult:
        """This benchmark's state read from a finished run's JSON `text` (its own run, or its
        part of one run for several members, runners/multi.py) and markdown `log`."""
        try:
            found = parse_nvbench(text, output, base_dir=checkout)
        except FormatError as exc:
            return RunResult((), str(exc), duration_s)
        chosen = select(found, self.nv)
        if isinstance(chosen, str):
            return RunResult((), chosen, duration_s)
        state = chosen.context.get("nvbench_state", chosen.state_label())
        self.context = dict(chosen.context)
        discarded = nvbench_throttle_discards(log).get((chosen.benchmark, state), 0)
        excluded = (THROTTLED,) * discarded
        if chosen.skipped:
            return RunResult(
                (),
                f"NVBench skipped state '{state}' of '{chosen.benchmark}': {chosen.skipped}",
                duration_s,
                excluded,
            )
        if chosen.error:
            return RunResult((), f"state '{state}' of '{chosen.benchmark}': {chosen.error}", duration_s, excluded)
        samples = convert(chosen.samples or (chosen.value,), chosen.unit, self.spec.unit)
        assert not isinstance(samples, str)  # NVBench times are seconds; the recipe unit is checked on load
        if (bad := first_nonpositive(samples)) is not None:
            return RunResult(
                (),
                f"state '{state}' of '{chosen.benchmark}': sample {bad!r} is not a positive time",
                duration_s,
                excluded,
            )
        # per-sample GPU times are what the samples cost of the run's wall time; the rest of it
        # (process start, CUDA context, NVBench's warm-up) is the run's overhead: adaptive blocks
        # weigh the two. One summary sample per run says nothing of the run's own spread.
        sample_s = sum(samples) * TIME_UNITS[self.spec.unit] if self.nv.jsonbin and chosen.samples else None
        return RunResult(samples, "", duration_s, excluded, sample_s=sample_s)

    def with_reps(self, reps: int) -> NvbenchRunner | None:
        """NVBench taking `reps` samples per run (adaptive blocks): only where attrib sets the
        count (`stopping = "sample-count"`) and reads each sample (`jsonbin`); with "stdrel",
        "entropy" or the command's own options NVBench decides when to stop."""
        if self.nv.stopping is not NvbenchStopping.SAMPLE_COUNT or not self.nv.jsonbin:
            return None
        return NvbenchRunner(self.executor, replace(self.spec, reps=reps))
