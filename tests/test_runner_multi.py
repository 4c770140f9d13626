"""One process per round for the members of a group that one binary measures (issue 29 item 1,
runners/multi.py): a real Google Benchmark binary (Debian's libbenchmark) and the NVBench
stand-in of tests/fixtures/nvbench (no GPU here), through the real local executor, counted."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import run_cli
from gbench_tree import BUILD, gbench_missing, make_gbench_tree
from nvbench_tree import make_nvbench_tree, stage

from attrib.evaluate.executors import ProcessResult
from attrib.evaluate.executors.local import LocalExecutor
from attrib.evaluate.gpu.isolated import KernelSlot
from attrib.evaluate.runners import NO_SUCH_BENCHMARK, RunResult
from attrib.evaluate.runners.cupy import CupyRunner
from attrib.evaluate.runners.gbench import GbenchRunner
from attrib.evaluate.runners.multi import GbenchProcess, NvbenchProcess, one_process, process_key, split_entries
from attrib.evaluate.runners.nvbench import NvbenchRunner
from attrib.evaluate.shared import SharedRuns
from attrib.job.members import member_runs
from attrib.recipe import BenchmarkSpec, parse_recipe

NO_GBENCH = pytest.mark.skipif(bool(gbench_missing()), reason=gbench_missing() or "-")


class Counting(LocalExecutor):
    """The real local executor, keeping each benchmark process's argv and output."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[list[str], ProcessResult]] = []

    def run(self, checkout: Path, argv: Sequence[str], timeout_s: float) -> ProcessResult:
        res = super().run(checkout, argv, timeout_s)
        self.calls.append((list(argv), res))
        return res

    def measured(self) -> list[list[str]]:
        """The argv of every run that measured (not the binary's list of names)."""
        return [argv for argv, _ in self.calls if "--benchmark_list_tests=true" not in argv]


GBENCH_RECIPE = """schema = 1
name = "multi"
[build]
commands = ["true"]
{tables}
"""
GBENCH_TABLE = """
[[benchmark]]
name = "{name}"
runner = "gbench"
command = ["./bench_mix"]
reps = {reps}
unit = "{unit}"
timeout_s = {timeout}
[benchmark.gbench]
filter = "{filter}"
time = "{time}"
"""


def _gbench(tmp_path: Path, *members: dict[str, object]) -> tuple[BenchmarkSpec, ...]:
    tables = "".join(
        GBENCH_TABLE.format(**{"reps": 4, "unit": "us", "timeout": 60, "time": "cpu_time", **m}) for m in members
    )
    return parse_recipe(tomllib.loads(GBENCH_RECIPE.format(tables=tables)), tmp_path / "r.toml").benchmarks


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    tree = make_gbench_tree(tmp_path_factory.mktemp("gb") / "repo", commits=1, culprit_at=99)
    if not gbench_missing():
        subprocess.run(["sh", "-c", BUILD], cwd=tree.path, check=True)
    return tree.path


MIX = {"name": "mix", "filter": "^BM_Mix/"}
SMALL = {"name": "small", "filter": "^BM_MixSmall/", "unit": "ns", "time": "real_time", "timeout": 30}


def _alone(doc: dict, run_name: str) -> str:
    """The JSON a run of one benchmark alone prints: its rows only (found by name, not regex)."""
    return json.dumps({**doc, "benchmarks": [r for r in doc["benchmarks"] if r["run_name"] == run_name]})


@NO_GBENCH
def test_gbench_members_share_one_process_per_round_and_read_their_rows_as_alone(built, tmp_path):
    mix, small = _gbench(tmp_path, MIX, SMALL)
    assert process_key(mix) == process_key(small)  # timeouts differ: the process takes their sum
    executor = Counting()
    runs = SharedRuns(one_process(executor, (mix, small)))
    views = {name: runs.view(name) for name in ("mix", "small")}  # as job.py makes them, before any run
    results = []
    for _ in range(3):  # three rounds of one checkout, each member asking in turn
        round_results = {}
        for name in ("mix", "small"):
            with runs.round_context(name)():
                round_results[name] = views[name].run(built)
        results.append(round_results)
    assert runs.runs == 3 and len(executor.calls) == 3  # one process per round serves both
    argv, res = executor.calls[0]
    assert argv[-1] == "--benchmark_filter=(^BM_Mix/)|(^BM_MixSmall/)"
    assert all(r["mix"].ok and r["small"].ok for r in results), results
    assert [len(r["mix"].samples) for r in results] == [4, 4, 4]
    # each member's samples are what its own runner reads from a run of it alone: the same
    # rows, its own time field (cpu / real) and unit (us / ns)
    doc = json.loads(res.stdout)
    for spec, run_name in ((mix, "BM_Mix/iterations:40"), (small, "BM_MixSmall/iterations:100")):
        solo = GbenchRunner(executor, spec).result(_alone(doc, run_name), "./bench_mix", res.duration_s, lambda: [])
        assert solo.ok and results[0][spec.name] == solo
    rows = [
        r for r in doc["benchmarks"] if r["run_name"] == "BM_MixSmall/iterations:100" and r["run_type"] == "iteration"
    ]
    assert results[0]["small"].samples == tuple(r["real_time"] for r in rows)  # ns as the JSON says
    # and a real run of the member alone reads the same rows of its own process the same way:
    # its own filter, as many samples, its time field and unit. Not a ratio of two timings: how
    # far apart two real runs land depends on the machine's load (6.7x seen on a busy machine),
    # and timings belong in benchmarks/.
    alone = GbenchRunner(executor, small).run(built)
    argv, res = executor.calls[-1]
    assert argv[-1] == "--benchmark_filter=^BM_MixSmall/"
    alone_rows = [
        r
        for r in json.loads(res.stdout)["benchmarks"]
        if r["run_name"] == "BM_MixSmall/iterations:100" and r["run_type"] == "iteration"
    ]
    assert alone_rows and all(r["time_unit"] == rows[0]["time_unit"] for r in alone_rows)
    assert alone.ok and len(alone.samples) == len(results[0]["small"].samples) == 4
    assert alone.samples == tuple(r["real_time"] for r in alone_rows)


@NO_GBENCH
def test_a_run_measures_only_the_members_the_groups_step_measures(built, tmp_path):
    """The preflight measures every member; a step of the group search says whom it measures
    (a decided member, or one the step asks nothing of, costs the process nothing); a step
    that does not say (each member's rest, one after another) measures the member that asks."""
    mix, small = _gbench(tmp_path, MIX, SMALL)
    executor = Counting()
    runs = SharedRuns(one_process(executor, (mix, small)))
    views = {name: runs.view(name) for name in ("mix", "small")}

    def round_of(*names: str) -> None:
        for name in names:
            with runs.round_context(name)():
                assert views[name].run(built).ok

    runs.next_phase()  # the preflight
    round_of("mix", "small")
    runs.next_phase({"mix"})  # small is decided: the search measures mix alone
    round_of("mix")
    runs.next_phase({"mix", "small"})  # a confirmation both join
    round_of("mix", "small")
    runs.next_phase()  # the rest, member by member
    round_of("small")
    filters = [argv[-1].removeprefix("--benchmark_filter=") for argv in executor.measured()]
    both = "(^BM_Mix/)|(^BM_MixSmall/)"
    assert filters == [both, "(^BM_Mix/)", both, "(^BM_MixSmall/)"]
    assert runs.runs == 4


@NO_GBENCH
def test_a_gbench_member_missing_or_failing_is_its_own_failed_run(built, tmp_path):
    mix, copy, fails = _gbench(
        tmp_path, MIX, {"name": "copy", "filter": "^BM_Copy/"}, {"name": "fails", "filter": "^BM_Fails$"}
    )
    executor = Counting()
    got = GbenchProcess(executor, (mix, copy, fails)).run_all(built)
    assert got["mix"].ok and len(got["mix"].samples) == 4
    # the same line as a run of it alone
    assert got["copy"].error == GbenchRunner(LocalExecutor(), copy).run(built).error
    assert got["copy"].error.startswith(NO_SUCH_BENCHMARK + "filter '^BM_Copy/' matched no benchmark")
    assert got["fails"].error == "benchmark 'BM_Fails' reported error_occurred: input file missing"
    assert len(executor.measured()) == 1


@NO_GBENCH
def test_a_gbench_process_that_fails_as_a_whole_runs_each_member_alone_on_that_checkout(built, tmp_path):
    mix, small = _gbench(tmp_path, MIX, SMALL)
    executor = Counting()
    process = GbenchProcess(executor, (mix, small))
    got = process.run_all(tmp_path)  # no binary in this checkout: the process cannot start
    assert got["mix"].error == got["small"].error == "cannot start ./bench_mix: No such file or directory"
    assert len(executor.calls) == 3  # the shared try, then each alone
    process.run_all(tmp_path)
    assert len(executor.calls) == 5  # from then on alone there
    process.run_all(built)
    assert len(executor.calls) == 6  # another checkout still shares


def test_settings_one_process_cannot_hold_make_a_member_run_alone(tmp_path):
    mix, small = _gbench(tmp_path, MIX, {**SMALL, "reps": 6})
    assert process_key(mix) != process_key(small)  # one --benchmark_repetitions per process
    (negative,) = _gbench(tmp_path, {"name": "neg", "filter": "-BM_Fails"})
    assert process_key(negative) is None
    assert process_key(replace(mix, config=(("gpu", "H100"),))) != process_key(mix)  # another machine class
    assert GbenchProcess(LocalExecutor(), _gbench(tmp_path, MIX, SMALL)).timeout_s(["mix", "small"]) == 90


# --- NVBench -------------------------------------------------------------------------------

NV_RECIPE = """schema = 1
name = "nv"
[build]
commands = ["true"]
{tables}
"""
NV_TABLE = f"""
[[benchmark]]
name = "{{name}}"
runner = "nvbench"
command = ["{sys.executable}", "fake_nvbench.py"]
reps = {{reps}}
[benchmark.nvbench]
benchmark = "{{benchmark}}"
axes = {{{{ {{axes}} }}}}
"""
NV_MEMBERS = (
    {"name": "grid", "benchmark": "copy_sweep_grid_shape", "axes": 'BlockSize = "2^8", NumBlocks = "2^10"'},
    {"name": "grid_small", "benchmark": "copy_sweep_grid_shape", "axes": 'BlockSize = "2^6", NumBlocks = "2^6"'},
    {"name": "u8", "benchmark": "copy_type_sweep", "axes": 'T = "U8"'},
)


def _nvbench(tmp_path: Path, *members: dict[str, object]) -> tuple[BenchmarkSpec, ...]:
    tables = "".join(NV_TABLE.format(**{"reps": 12, **m}) for m in members)
    return parse_recipe(tomllib.loads(NV_RECIPE.format(tables=tables)), tmp_path / "r.toml").benchmarks


def test_nvbench_members_share_one_process_and_get_exactly_their_samples_alone(tmp_path):
    checkout = stage(tmp_path / "co", scale=1.5)
    (checkout / "seed.txt").write_text("7\n")  # the stand-in's draws repeat per state
    specs = _nvbench(tmp_path, *NV_MEMBERS)
    assert len({process_key(b) for b in specs}) == 1
    executor = Counting()
    runs = SharedRuns(one_process(executor, specs))
    views = {b.name: runs.view(b.name) for b in specs}
    got = {}
    for b in specs:
        with runs.round_context(b.name)():
            got[b.name] = views[b.name].run(checkout)
    assert runs.runs == 1 and len(executor.calls) == 1
    argv = executor.calls[0][0]
    assert argv.count("-b") == 3 and argv.count("--min-samples") == 3  # each -b with its own options
    for b in specs:
        alone = NvbenchRunner(LocalExecutor(), b).run(checkout)  # a real run of it alone
        assert alone.ok and got[b.name] == replace(alone, duration_s=got[b.name].duration_s), b.name
        assert len(alone.samples) == 12
    assert sorted(p.name for p in checkout.iterdir()) == ["axes_ref.json", "fake_nvbench.py", "scale.txt", "seed.txt"]


def test_nvbench_refusing_one_members_benchmark_costs_only_that_member(tmp_path):
    checkout = stage(tmp_path / "co")
    (checkout / "seed.txt").write_text("7\n")
    specs = _nvbench(tmp_path, NV_MEMBERS[0], {"name": "gone", "benchmark": "copy_removed", "axes": ""}, NV_MEMBERS[2])
    executor = Counting()
    process = NvbenchProcess(executor, specs)
    got = process.run_all(checkout)
    # NVBench refuses an unknown -b for the whole run: each member then runs alone there
    assert len(executor.calls) == 1 + 3
    assert got["grid"].ok and got["u8"].ok
    assert got["gone"].error == NvbenchRunner(LocalExecutor(), specs[1]).run(checkout).error
    assert got["gone"].error == "exit 1: Error: No benchmark named 'copy_removed'."


def test_a_skipped_state_is_that_members_failed_run_in_a_shared_process(tmp_path):
    checkout = stage(tmp_path / "co")
    skipped = {"name": "same", "benchmark": "copy_type_conversion_sweep", "axes": 'In = "I8", Out = "I8"'}
    specs = _nvbench(tmp_path, NV_MEMBERS[0], skipped)
    executor = Counting()
    got = NvbenchProcess(executor, specs).run_all(checkout)
    assert len(executor.calls) == 1 and got["grid"].ok
    assert got["same"].error == (
        "NVBench skipped state 'Device=0 In=I8 Out=I8' of 'copy_type_conversion_sweep': "
        "Not a conversion: InputType == OutputType."
    )


def test_entries_that_do_not_line_up_with_the_selections_go_by_name():
    doc = {"meta": {}, "benchmarks": [{"name": "a", "states": []}, {"name": "b", "states": []}]}
    text = json.dumps(doc)
    assert [json.loads(p)["benchmarks"] for p in split_entries(text, ["a", "b"])] == [
        [{"name": "a", "states": []}],
        [{"name": "b", "states": []}],
    ]
    assert [len(json.loads(p)["benchmarks"]) for p in split_entries(text, ["b", "c"])] == [1, 0]
    assert split_entries("not json", ["a", "b"]) == ["not json", "not json"]


def test_a_group_of_nvbench_members_runs_one_process_per_round_through_the_cli(tmp_path):
    """The real CLI: two members of one NVBench binary bisected as a group; every process it
    started is logged, and they are fewer than the runs the members' results count."""
    tree = make_nvbench_tree(tmp_path / "repo", commits=8, culprit_at=5)
    log = tmp_path / "processes.log"
    command = f'["sh", "-c", "echo run >> {log}; exec {sys.executable} fake_nvbench.py \\"$@\\"", "sh"]'
    tables = "".join(
        NV_TABLE.format(reps=20, **m).replace(f'["{sys.executable}", "fake_nvbench.py"]', command)
        for m in NV_MEMBERS[:2]
    )
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        NV_RECIPE.format(tables=tables).replace('commands = ["true"]', 'commands = ["test -f axes_ref.json"]')
    )
    out = tmp_path / "out.json"
    res = run_cli(
        "bisect", "--repo", tree.path, "--good", tree.good, "--bad", tree.bad, "--recipe", recipe,
        "--workdir", tmp_path / "work", "--json", out, "--benchmark", "grid", "--benchmark", "grid_small",
    )  # fmt: skip
    assert res.code == 0, res.stderr[-2000:]
    doc = json.loads(out.read_text())
    members = {m["benchmark"]: m for m in doc["members"]}
    assert all([c["commit"] for c in m["culprits"]] == [tree.culprit] for m in members.values()), members
    processes = len(log.read_text().splitlines())
    # every run takes the recipe's 20 samples (a shared process has one size: no adaptive blocks)
    assert all(c["samples"] % 20 == 0 for m in members.values() for c in m["commits"])
    runs = {name: sum(c["samples"] for c in m["commits"]) // 20 for name, m in members.items()}
    assert max(runs.values()) <= processes < sum(runs.values()), (processes, runs)


# --- which members a group bisection joins (job/members.py) --------------------------------

CUPY_TABLE = """
[[benchmark]]
name = "{name}"
runner = "cupy"
[benchmark.cupy]
kernel = "{kernel}"
metric = "{metric}"
"""


class _NotMade:
    """The runner of the job's first benchmark, open before the members are made: a shared
    member never uses it."""

    def run(self, checkout: Path) -> RunResult:
        raise AssertionError("the first benchmark is shared: its own runner is not used")


def test_a_group_joins_the_members_one_process_can_measure_and_no_others(tmp_path):
    gb = "".join(
        GBENCH_TABLE.format(**{"reps": 4, "unit": "us", "timeout": 60, "time": "cpu_time", **m})
        for m in (MIX, SMALL, {"name": "six", "filter": "^BM_Fails$", "reps": 6})
    )
    nv = "".join(NV_TABLE.format(reps=12, **m) for m in NV_MEMBERS[:2])
    cu = "".join(
        CUPY_TABLE.format(name=n, kernel=k, metric=m)
        for n, k, m in (("copy", "copy", "time"), ("reduce", "reduce", "time"), ("regs", "copy", "registers"))
    )
    recipe = parse_recipe(tomllib.loads(GBENCH_RECIPE.format(tables=gb + nv + cu)), tmp_path / "r.toml")
    runs = member_runs(recipe.benchmarks, recipe, LocalExecutor(), (recipe.benchmarks[0], _NotMade()), lambda r: r)
    members, next_phase = runs.runs, runs.next_phase
    runner = {m.benchmark: run.runner for m, run in members.items()}
    shared = {name: getattr(r, "shared", None) for name, r in runner.items()}
    assert shared["mix"] is shared["small"] and isinstance(shared["mix"].runner, GbenchProcess)
    assert isinstance(runner["six"], GbenchRunner)  # other reps: a process of its own
    assert shared["grid"] is shared["grid_small"] and isinstance(shared["grid"].runner, NvbenchProcess)
    assert shared["mix"] is not shared["grid"]
    copy, reduce, regs = runner["copy"], runner["reduce"], runner["regs"]
    assert isinstance(copy, CupyRunner) and isinstance(copy.kernels, KernelSlot)
    assert isinstance(reduce, CupyRunner) and isinstance(reduce.kernels, KernelSlot)
    assert copy.kernels.worker is reduce.kernels.worker and (copy.kernels.kernel, reduce.kernels.kernel) == (0, 1)
    assert isinstance(regs, CupyRunner) and not isinstance(regs.kernels, KernelSlot)  # a static metric: no worker
    next_phase(None)
    assert shared["mix"].phase == shared["grid"].phase == 1


@NO_GBENCH
def test_a_member_that_breaks_the_shared_json_costs_only_itself(built, tmp_path):
    """A benchmark that prints to stdout breaks Google Benchmark's JSON for the whole shared run;
    it used to fail every member of it (each one's parser read the broken document). Now the
    run fails as a whole and each member runs alone there: only the one that prints fails."""
    checkout = tmp_path / "noisy"
    checkout.mkdir()
    shutil.copy2(built / "bench_mix", checkout / "bench_mix")
    # the stand-in for a benchmark body with a stray printf: BM_MixSmall's runs print a line
    (checkout / "bench_noisy").write_text(
        '#!/bin/sh\n./bench_mix "$@"; rc=$?\ncase "$*" in *MixSmall*) echo "debug: tile 7";; esac\nexit $rc\n'
    )
    (checkout / "bench_noisy").chmod(0o755)
    mix, small = (replace(b, command=("./bench_noisy",)) for b in _gbench(tmp_path, MIX, SMALL))
    executor = Counting()
    got = GbenchProcess(executor, (mix, small)).run_all(checkout)
    assert got["mix"].ok and len(got["mix"].samples) == 4, got["mix"].error
    assert not got["small"].ok and got["small"].error == GbenchRunner(LocalExecutor(), small).run(checkout).error
    assert len(executor.measured()) == 3  # the shared try, then each alone


NOISY_NVBENCH = """import subprocess, sys
rc = subprocess.run([sys.executable, "fake_nvbench.py", *sys.argv[1:]]).returncode
if "copy_type_sweep" in sys.argv:  # this member's benchmark leaves the file cut short
    out = sys.argv[sys.argv.index("--jsonbin" if "--jsonbin" in sys.argv else "--json") + 1]
    text = open(out).read()
    open(out, "w").write(text[: len(text) // 2])
sys.exit(rc)
"""


def test_an_nvbench_output_that_is_not_one_document_runs_each_member_alone(tmp_path):
    """A shared run's JSON that does not parse went to every member's parser as it was, and
    failed them all; now it is the run's failure as a whole, and each member runs alone."""
    checkout = stage(tmp_path / "co")
    (checkout / "seed.txt").write_text("7\n")
    (checkout / "noisy_nvbench.py").write_text(NOISY_NVBENCH)
    specs = tuple(replace(b, command=(sys.executable, "noisy_nvbench.py")) for b in _nvbench(tmp_path, *NV_MEMBERS))
    executor = Counting()
    got = NvbenchProcess(executor, specs).run_all(checkout)
    assert len(executor.calls) == 1 + 3  # the shared try, then each alone
    assert got["grid"].ok and got["grid_small"].ok, (got["grid"].error, got["grid_small"].error)
    alone = NvbenchRunner(LocalExecutor(), specs[2]).run(checkout).error  # names its own output file
    assert not got["u8"].ok and got["u8"].error.split(": ", 1)[1] == alone.split(": ", 1)[1]
    assert "not JSON" in alone
