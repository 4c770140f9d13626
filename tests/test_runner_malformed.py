"""Every malformed tool output tried gives one clear line and a failed run, never samples;
and in a bisection a commit whose output is malformed is a skip, never a verdict.

The outputs are the real fixtures (tests/fixtures/*/README.md) with one thing broken each,
emitted by a stand-in "benchmark" through the real local executor and the real runners."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import bisect_cli, run_cli
from nvbench_tree import RECIPE as NVBENCH_RECIPE
from nvbench_tree import make_nvbench_tree

from attrib.evaluate.executors.local import LocalExecutor
from attrib.evaluate.runners.gbench import GbenchRunner
from attrib.evaluate.runners.nvbench import NvbenchRunner
from attrib.recipe import parse_recipe

FIXTURES = Path(__file__).parent / "fixtures"
GBENCH_TEXT = (FIXTURES / "gbench" / "bm_copy_libbenchmark-1.7.1.json").read_text()
NVBENCH_TEXT = (FIXTURES / "nvbench" / "axes_ref.json").read_text()

# Prints payload.txt whatever the options (gbench writes its JSON on stdout).
GBENCH_EMIT = "import sys; sys.stdout.write(open('payload.txt').read())\n"
# Writes payload.json to the --json/--jsonbin path, with its sample files renamed to match.
NVBENCH_EMIT = """import os, shutil, sys
out = sys.argv[sys.argv.index("--jsonbin" if "--jsonbin" in sys.argv else "--json") + 1]
open(out, "w").write(open("payload.json").read().replace("PAYLOAD.json-bin", os.path.basename(out) + "-bin"))
if os.path.isdir("payload-bin"):
    shutil.copytree("payload-bin", out + "-bin")
"""

GBENCH_RECIPE = f"""schema = 1
name = "g"
[build]
commands = ["true"]
[[benchmark]]
name = "copy"
runner = "gbench"
command = ["{sys.executable}", "emit.py"]
reps = 3
[benchmark.gbench]
filter = "^BM_Copy/1024$"
"""


def _gb(edit: Callable[[dict], object]) -> str:
    doc = json.loads(GBENCH_TEXT)
    edit(doc)
    return json.dumps(doc, indent=2)


def _only_copy_1024(doc: dict) -> None:
    doc["benchmarks"] = [b for b in doc["benchmarks"] if b["run_name"] == "BM_Copy/1024"]


def _first(doc: dict) -> dict:
    _only_copy_1024(doc)
    return doc["benchmarks"][0]


GBENCH_CASES: dict[str, tuple[str, str]] = {
    "plain-text": ("BM_Copy/1024   115 ns   15.1 ns   953524\n", "not JSON (Expecting value at line 1 column 1)"),
    "truncated": (GBENCH_TEXT[: len(GBENCH_TEXT) // 2], "not JSON ("),
    "a-list": ("[]\n", "top level is a JSON list; expected Google Benchmark JSON"),
    "no-context": (_gb(lambda d: d.pop("context")), "field 'context': missing"),
    "no-benchmarks": (_gb(lambda d: d.pop("benchmarks")), "field 'benchmarks': missing"),
    "benchmarks-an-object": (_gb(lambda d: d.update(benchmarks={})), "field 'benchmarks': expected a list, got {}"),
    "schema-version-2": (_gb(lambda d: d["context"].update(json_schema_version=2)), "field 'context.json_schema_version': is 2"),
    "no-run-type": (_gb(lambda d: _first(d).pop("run_type")), "benchmark 'BM_Copy/1024': field 'benchmarks[0].run_type': missing"),
    "unknown-run-type": (_gb(lambda d: _first(d).update(run_type="warmup")), "field 'benchmarks[0].run_type': is 'warmup'"),
    "time-a-string": (_gb(lambda d: _first(d).update(real_time="115 ns")), "field 'benchmarks[0].real_time': expected a finite number, got \"115 ns\""),
    "time-nan": (_gb(_only_copy_1024).replace('"real_time": 115.', '"real_time": NaN, "x": 115.', 1), "field 'benchmarks[0].real_time': expected a finite number, got nan"),
    "time-negative": (_gb(lambda d: _first(d).update(real_time=-1.0)), "field 'benchmarks[0].real_time': is -1.0; expected a time >= 0"),
    "time-zero": (_gb(lambda d: (_only_copy_1024(d), [b.update(real_time=0.0) for b in d["benchmarks"]])), "benchmark 'BM_Copy/1024': real_time 0.0 is not a positive time"),
    "unknown-unit": (_gb(lambda d: _first(d).update(time_unit="ticks")), "field 'benchmarks[0].time_unit': is 'ticks'; expected one of ns, us, ms, s"),
    "units-differ": (_gb(lambda d: (_first(d), d["benchmarks"][1].update(time_unit="us"))), "field 'benchmarks[1].time_unit': is 'us' where earlier repetitions said 'ns'"),
    "no-repetition-index": (_gb(lambda d: _first(d).pop("repetition_index")), "field 'benchmarks[0].repetition_index': missing"),
    "only-aggregates": (_gb(lambda d: d.update(benchmarks=[b for b in d["benchmarks"] if b["run_type"] == "aggregate" and b["run_name"] == "BM_Copy/1024"])), "benchmark 'BM_Copy/1024': field 'run_type': only aggregate rows"),
    "error-flag-not-bool": (_gb(lambda d: _first(d).update(error_occurred="yes")), "field 'benchmarks[0].error_occurred': expected true or false"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(GBENCH_CASES))
def test_malformed_gbench_output_is_one_line_and_a_failed_run(case, tmp_path):
    payload, expected = GBENCH_CASES[case]
    (tmp_path / "emit.py").write_text(GBENCH_EMIT)
    (tmp_path / "payload.txt").write_text(payload)
    spec = parse_recipe(tomllib.loads(GBENCH_RECIPE), tmp_path / "r.toml").benchmarks[0]
    res = GbenchRunner(LocalExecutor(), spec).run(tmp_path)
    assert not res.ok and res.samples == ()
    assert "\n" not in res.error and expected in res.error, res.error
    if "not a positive time" not in expected:  # a format error names the output first
        assert res.error.startswith(f"{sys.executable} stdout: "), res.error


def test_the_gbench_emitter_passes_well_formed_output(tmp_path):
    """The control: the same stand-in with the recorded output unbroken is a usable run."""
    (tmp_path / "emit.py").write_text(GBENCH_EMIT)
    (tmp_path / "payload.txt").write_text(_gb(_only_copy_1024))
    spec = parse_recipe(tomllib.loads(GBENCH_RECIPE), tmp_path / "r.toml").benchmarks[0]
    res = GbenchRunner(LocalExecutor(), spec).run(tmp_path)
    assert res.ok and len(res.samples) == 3, res.error


def _nv(edit: Callable[[dict], object]) -> str:
    doc = json.loads(NVBENCH_TEXT)
    edit(doc)
    return json.dumps(doc, indent=2)


def _grid(doc: dict) -> dict:
    """The state the recipe selects: copy_sweep_grid_shape BlockSize=2^8 NumBlocks=2^10."""
    return doc["benchmarks"][0]["states"][3]


def _summary(doc: dict, tag: str) -> dict:
    return next(s for s in _grid(doc)["summaries"] if s["tag"] == tag)


def _sidecar(doc: dict, size: int = 20) -> None:
    _grid(doc)["summaries"].append(
        {
            "tag": "nv/json/bin:nv/cold/sample_times", "name": "Sample Times File", "hint": "file/sample_times",
            "description": "Binary file containing sample times as little-endian float32.", "hide": "Not needed in table.",
            "data": [
                {"name": "filename", "type": "string", "value": "PAYLOAD.json-bin/0.bin"},
                {"name": "size", "type": "int64", "value": str(size)},
            ],
        }
    )  # fmt: skip


GPU_MEAN = "nv/cold/time/gpu/mean"
STATE = "benchmarks[0].states[3]"
NVBENCH_CASES: dict[str, tuple[str, bytes | None, str]] = {
    "markdown-not-json": ("| T | Samples | GPU Time |\n", None, "not JSON (Expecting value at line 1 column 1)"),
    "truncated": (NVBENCH_TEXT[: len(NVBENCH_TEXT) // 3], None, "not JSON ("),
    "no-meta": (_nv(lambda d: d.pop("meta")), None, "field 'meta': missing"),
    "unversioned": (_nv(lambda d: d["meta"].pop("version")), None, "field 'meta.version': missing"),
    "json-version-2": (_nv(lambda d: d["meta"]["version"]["json"].update(major=2)), None, "field 'meta.version.json.major': is 2; this reader knows NVBench JSON file version 1.x"),
    "states-an-object": (_nv(lambda d: d["benchmarks"][0].update(states={})), None, "benchmark 'copy_sweep_grid_shape': field 'benchmarks[0].states': expected a list"),
    "device-a-string": (_nv(lambda d: _grid(d).update(device="0")), None, f"field '{STATE}.device': expected an integer, got \"0\""),
    "is-skipped-missing": (_nv(lambda d: _grid(d).pop("is_skipped")), None, f"field '{STATE}.is_skipped': missing"),
    "axis-type-unknown": (_nv(lambda d: _grid(d)["axis_values"][0].update(type="complex")), None, f"field '{STATE}.axis_values[0].type': is 'complex'"),
    "pow2-not-a-power": (_nv(lambda d: _grid(d)["axis_values"][0].update(value="255")), None, "255 is not a power of two, but axis 'BlockSize' is pow2"),
    "gpu-time-missing": (_nv(lambda d: _grid(d).update(summaries=[s for s in _grid(d)["summaries"] if s["tag"] != GPU_MEAN])), None, f"field '{STATE}.summaries': no summary '{GPU_MEAN}'"),
    "gpu-time-not-a-number": (_nv(lambda d: _summary(d, GPU_MEAN)["data"][0].update(value="fast")), None, f"'{GPU_MEAN}' value 'fast' is not an float64"),
    "gpu-time-wrong-type": (_nv(lambda d: _summary(d, GPU_MEAN)["data"][0].update(type="int64")), None, f"'{GPU_MEAN}' value has type 'int64'; expected 'float64'"),
    "gpu-time-zero": (_nv(lambda d: _summary(d, GPU_MEAN)["data"][0].update(value="0")), None, f"'{GPU_MEAN}' is 0.0; expected a positive time"),
    "sidecar-missing": (_nv(_sidecar), None, "-bin/0.bin' cannot be read (No such file or directory)"),
    "sidecar-short": (_nv(_sidecar), b"\0\0\x80?" * 19, "has 76 bytes; expected 20 float32 values (80 bytes)"),
    "sidecar-nan": (_nv(_sidecar), b"\0\0\xc0\x7f" * 20, "-bin/0.bin' is nan; expected a positive finite time"),
    "sidecar-size-not-int": (_nv(lambda d: (_sidecar(d), _grid(d)["summaries"][-1]["data"][1].update(value="twenty"))), None, "size 'twenty' is not an int64"),
}  # fmt: skip


def _nvbench_runner(tmp_path: Path) -> NvbenchRunner:
    data = tomllib.loads(NVBENCH_RECIPE)
    data["benchmark"][0]["command"] = [sys.executable, "emit.py"]
    return NvbenchRunner(LocalExecutor(), parse_recipe(data, tmp_path / "r.toml").benchmarks[0])


@pytest.mark.parametrize("case", list(NVBENCH_CASES))
def test_malformed_nvbench_output_is_one_line_and_a_failed_run(case, tmp_path):
    payload, sidecar, expected = NVBENCH_CASES[case]
    (tmp_path / "emit.py").write_text(NVBENCH_EMIT)
    (tmp_path / "payload.json").write_text(payload)
    if sidecar is not None:
        (tmp_path / "payload-bin").mkdir()
        (tmp_path / "payload-bin" / "0.bin").write_bytes(sidecar)
    res = _nvbench_runner(tmp_path).run(tmp_path)
    assert not res.ok and res.samples == ()
    assert "\n" not in res.error and expected in res.error, res.error
    assert res.error.startswith("attrib-nvbench-"), res.error  # names the file it read
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(["emit.py", "payload.json", *(["payload-bin"] if sidecar else [])])  # output removed


def test_the_nvbench_emitter_passes_well_formed_output(tmp_path):
    (tmp_path / "emit.py").write_text(NVBENCH_EMIT)
    (tmp_path / "payload.json").write_text(_nv(_sidecar))
    (tmp_path / "payload-bin").mkdir()
    (tmp_path / "payload-bin" / "0.bin").write_bytes(b"\0\0\x80?" * 20)  # twenty 1.0 s samples
    res = _nvbench_runner(tmp_path).run(tmp_path)
    assert res.ok and res.samples == (1000.0,) * 20, res.error


@pytest.mark.slow
def test_malformed_output_in_a_bisection_is_a_skip_never_a_verdict(tmp_path):
    """Commits 2-4 of the tree write NVBench JSON of a file version this reader does not know:
    each one probed is a skip whose failed runs carry the one line; the culprit is still named."""
    tree = make_nvbench_tree(tmp_path / "repo", commits=8, culprit_at=6, broken=(2, 5))
    res, result = bisect_cli(tmp_path, tree, NVBENCH_RECIPE)
    assert result["status"] == "culprit_found"
    assert [c["commit"] for c in result["culprits"]] == [tree.culprit]
    chain = subprocess.run(
        ["git", "rev-list", "--reverse", f"{tree.good}..{tree.bad}"],
        cwd=tree.path,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    rows = {c["commit"]: c for c in result["commits"]}
    broken = [sha for sha in chain[1:4] if sha in rows]
    assert broken, "the search probed none of the broken commits: the test shows nothing"
    for sha in broken:
        assert rows[sha]["verdict"] == "skip", rows[sha]
        assert rows[sha]["failed_runs"], rows[sha]
        for line in rows[sha]["failed_runs"]:
            assert line.startswith("attrib-nvbench-") and "field 'meta.version.json.major': is 2" in line, line


def test_a_reference_with_malformed_output_stops_with_that_line(tmp_path):
    """The bad revision's output is malformed: nothing to compare against, so the bisection
    stops before any verdict (exit 1) with the reader's one line, not a traceback."""
    tree = make_nvbench_tree(tmp_path / "repo", commits=3, culprit_at=2, broken=(3, 99))
    recipe = tmp_path / "nv.toml"
    recipe.write_text(NVBENCH_RECIPE)
    res = run_cli(
        "bisect", "--repo", tree.path, "--good", tree.good, "--bad", tree.bad, "--recipe", recipe,
        "--workdir", tmp_path / "work", "--json", tmp_path / "result.json",
    )  # fmt: skip
    assert res.code == 1, res.stdout + res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert "cannot measure the references" in last and "field 'meta.version.json.major': is 2" in last, res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "result.json").exists()
