"""The nvbench runner through the local executor on NVBench's recorded output
(tests/fixtures/nvbench/README.md: no GPU run was made), and one bisection through the CLI."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import bisect_cli
from nvbench_tree import RECIPE, make_nvbench_tree, stage

from attrib.evaluate.executors.local import LocalExecutor
from attrib.evaluate.runners.nvbench import THROTTLED, NvbenchRunner, axis_option, select, stopping_options
from attrib.formats import Measurement, parse_nvbench
from attrib.recipe import NvbenchSpec, NvbenchStopping, parse_recipe

FIXTURE = Path(__file__).parent / "fixtures" / "nvbench" / "axes_ref.json"
# A "benchmark" that writes axes_ref.json as is to the path after --json/--jsonbin.
EMIT = """import shutil, sys
out = sys.argv[sys.argv.index("--jsonbin" if "--jsonbin" in sys.argv else "--json") + 1]
shutil.copy("axes_ref.json", out)
"""


def _runner(tmp_path: Path, command: list[str] | None = None, **nvbench: object) -> NvbenchRunner:
    data = tomllib.loads(RECIPE)
    bench = data["benchmark"][0]
    if command is not None:
        bench["command"] = command
    bench["nvbench"].update(nvbench)
    return NvbenchRunner(LocalExecutor(), parse_recipe(data, tmp_path / "r.toml").benchmarks[0])


def _recorded_mean_ms(benchmark: str, state: str) -> float:
    doc = json.loads(FIXTURE.read_text())
    st = next(s for b in doc["benchmarks"] if b["name"] == benchmark for s in b["states"] if s["name"] == state)
    return 1e3 * float(next(x for x in st["summaries"] if x["tag"] == "nv/cold/time/gpu/mean")["data"][0]["value"])


def test_argv_names_benchmark_axes_output_and_block_size(tmp_path):
    runner = _runner(tmp_path)
    assert runner.argv("o.json") == [
        sys.executable, "fake_nvbench.py", "-b", "copy_sweep_grid_shape",
        "-a", "BlockSize[pow2]=8", "-a", "NumBlocks[pow2]=10", "--jsonbin", "o.json",
        "--stopping-criterion", "sample-count", "--min-samples", "20", "--target-samples", "20",
    ]  # fmt: skip
    assert axis_option("T", "F32") == "T=F32" and axis_option("Duration", "0.0001") == "Duration=0.0001"
    assert stopping_options(NvbenchStopping.STDREL, 7) == ["--stopping-criterion", "stdrel", "--min-samples", "7"]
    assert stopping_options(NvbenchStopping.COMMAND, 7) == []


def test_jsonbin_samples_are_the_block_in_the_recipe_unit_and_files_are_removed(tmp_path):
    checkout = stage(tmp_path / "c", scale=2.0)
    res = _runner(tmp_path).run(checkout)
    assert res.ok, res.error
    assert len(res.samples) == 20  # sample-count with target = reps: one block of reps samples
    mean = _recorded_mean_ms("copy_sweep_grid_shape", "Device=0 BlockSize=2^8 NumBlocks=2^10")
    # Drawn around 2x the recorded mean with its 0.5 % noise: every sample within 10 % of it.
    assert all(abs(s / (2 * mean) - 1) < 0.1 for s in res.samples), (mean, res.samples)
    assert res.excluded == ()
    assert sorted(p.name for p in checkout.iterdir()) == ["axes_ref.json", "fake_nvbench.py", "scale.txt"]


def test_summary_only_gives_one_sample_per_run(tmp_path):
    checkout = stage(tmp_path / "c")
    res = _runner(tmp_path, jsonbin=False).run(checkout)
    assert res.ok, res.error
    assert len(res.samples) == 1
    mean = _recorded_mean_ms("copy_sweep_grid_shape", "Device=0 BlockSize=2^8 NumBlocks=2^10")
    assert abs(res.samples[0] / mean - 1) < 0.05


def test_throttled_trials_are_excluded_samples_as_nvbench_logs_them(tmp_path):
    checkout = stage(tmp_path / "c")
    (checkout / "throttle.txt").write_text("3\n")
    res = _runner(tmp_path).run(checkout)
    assert res.ok and res.excluded == (THROTTLED,) * 3


def test_skipped_state_is_a_failed_run_with_nvbench_reason(tmp_path):
    checkout = stage(tmp_path / "c")
    res = _runner(tmp_path, benchmark="copy_type_conversion_sweep", axes={"In": "I8", "Out": "I8"}).run(checkout)
    assert res.error == (
        "NVBench skipped state 'Device=0 In=I8 Out=I8' of 'copy_type_conversion_sweep': "
        "Not a conversion: InputType == OutputType."
    )


def test_a_state_on_two_devices_is_ambiguous_until_the_command_picks_one(tmp_path):
    checkout = stage(tmp_path / "c")
    res = _runner(tmp_path, benchmark="copy_type_sweep", axes={"T": "F32"}).run(checkout)
    assert res.error == (
        "2 states of 'copy_type_sweep' match T=F32 (Device=0 T=F32, Device=1 T=F32): "
        "name more axes, or one device with -d in the command"
    )
    one = _runner(
        tmp_path, [sys.executable, "fake_nvbench.py", "-d", "1"], benchmark="copy_type_sweep", axes={"T": "F32"}
    )
    res = one.run(checkout)
    assert res.ok, res.error
    assert one.context["device_name"] == "Quadro GP100"


def test_selection_lists_the_states_seen_and_reads_pow2_either_way():
    found = parse_nvbench(FIXTURE.read_text(), "axes_ref.json")
    miss = select(found, NvbenchSpec("copy_sweep_grid_shape", {"BlockSize": "2^7"}))
    assert miss == (
        "no state of 'copy_sweep_grid_shape' has BlockSize=2^7 (states seen: Device=0 BlockSize=2^6 NumBlocks=2^6, "
        "Device=0 BlockSize=2^8 NumBlocks=2^6, Device=0 BlockSize=2^10 NumBlocks=2^6, Device=0 BlockSize=2^8 NumBlocks=2^10)"
    )
    hit = select(found, NvbenchSpec("copy_sweep_grid_shape", {"BlockSize": "256", "NumBlocks": "1024"}))
    assert isinstance(hit, Measurement) and hit.state == {"BlockSize": "2^8", "NumBlocks": "2^10"}
    assert select(found, NvbenchSpec("copy", {})) == (
        "NVBench's output has no state of benchmark 'copy' "
        "(benchmarks seen: copy_sweep_grid_shape, copy_type_sweep, copy_type_conversion_sweep)"
    )


def test_a_state_with_no_accepted_sample_is_a_failed_run(tmp_path):
    checkout = stage(tmp_path / "c")
    # What measure_cold.cu writes when throttling discarded every trial: sample_size 0 and
    # the walltime, no times. The fake's recorded state is edited to that shape.
    doc = json.loads((checkout / "axes_ref.json").read_text())
    state = doc["benchmarks"][0]["states"][3]
    state["summaries"] = [s for s in state["summaries"] if s["tag"] in ("nv/cold/sample_size", "nv/cold/walltime")]
    state["summaries"][0]["data"][0]["value"] = "0"
    (checkout / "axes_ref.json").write_text(json.dumps(doc))
    emit = checkout / "emit.py"
    emit.write_text(EMIT)
    res = _runner(tmp_path, [sys.executable, "emit.py"]).run(checkout)
    assert res.error == (
        "state 'Device=0 BlockSize=2^8 NumBlocks=2^10' of 'copy_sweep_grid_shape': NVBench accepted no sample "
        "(every trial discarded, e.g. throttled, before its timeout)"
    )


def test_nvbench_refusing_an_option_is_a_failed_run_with_its_message(tmp_path):
    checkout = stage(tmp_path / "c")
    res = _runner(tmp_path, benchmark="no_such_bench").run(checkout)
    assert res.error == "exit 1: Error: No benchmark named 'no_such_bench'."


@pytest.mark.slow
def test_nvbench_output_drives_a_bisection_to_its_culprit(tmp_path):
    tree = make_nvbench_tree(tmp_path / "repo")
    res, result = bisect_cli(tmp_path, tree, RECIPE)
    assert result["status"] == "culprit_found"
    assert [c["commit"] for c in result["culprits"]] == [tree.culprit]
    assert 8 < result["culprits"][0]["change_pct"] < 16  # the tree scales the times by 1.12
    assert result["unit"] == "ms"


def test_adaptive_blocks_set_nvbenchs_sample_count_and_see_what_the_samples_cost(tmp_path):
    checkout = stage(tmp_path / "c")
    runner = _runner(tmp_path)
    sized = runner.with_reps(7)
    assert sized is not None and sized.argv("o.json")[-4:] == ["--min-samples", "7", "--target-samples", "7"]
    res = sized.run(checkout)
    assert res.ok, res.error
    assert len(res.samples) == 7
    # the samples are GPU times in the recipe's unit (ms): their sum in seconds is what they cost
    assert res.sample_s is not None and abs(res.sample_s - sum(res.samples) / 1e3) < 1e-12
    assert res.sample_s < res.duration_s  # the rest of the run (start-up, warm-up) is overhead
    # NVBench's own stopping criteria, or one summary sample per run: nothing for attrib to size
    assert _runner(tmp_path, stopping="stdrel").with_reps(7) is None
    assert _runner(tmp_path, jsonbin=False).with_reps(7) is None
    assert _runner(tmp_path, jsonbin=False).run(checkout).sample_s is None
