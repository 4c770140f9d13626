"""The [benchmark.gbench] and [benchmark.nvbench] tables: defaults, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_recipe import TOP, assert_one_line_error, load_error, write

from attrib.recipe import load_recipe

BUILD = '[build]\ncommands = ["true"]\n'
GBENCH = '[[benchmark]]\nname = "g"\nrunner = "gbench"\ncommand = ["./bench"]\n[benchmark.gbench]\nfilter = "^BM_Copy/1024$"\n'
NVBENCH = (
    '[[benchmark]]\nname = "n"\nrunner = "nvbench"\ncommand = ["./bench"]\n[benchmark.nvbench]\nbenchmark = "copy"\n'
)


def test_gbench_defaults(tmp_path: Path) -> None:
    bench = load_recipe(write(tmp_path, TOP + BUILD + GBENCH)).benchmark(None)
    assert bench.gbench is not None and bench.nvbench is None
    assert (bench.gbench.filter, bench.gbench.time, bench.unit) == ("^BM_Copy/1024$", "real_time", "ns")


def test_nvbench_defaults_and_axes(tmp_path: Path) -> None:
    extra = 'axes = { T = "F32", Elements = "2^24", Block = 256 }\nstopping = "stdrel"\njsonbin = false\n'
    bench = load_recipe(write(tmp_path, TOP + BUILD + NVBENCH + extra)).benchmark(None)
    nv = bench.nvbench
    assert nv is not None and bench.unit == "ms"
    assert (nv.benchmark, nv.axes, nv.stopping, nv.jsonbin) == (
        "copy",
        {"T": "F32", "Elements": "2^24", "Block": "256"},
        "stdrel",
        False,
    )
    plain = load_recipe(write(tmp_path, TOP + BUILD + NVBENCH, "p.toml")).benchmark(None).nvbench
    assert plain is not None and (plain.axes, plain.stopping, plain.jsonbin) == ({}, "sample-count", True)


BAD = [
    ("gbench-table-missing", GBENCH.split("[benchmark.gbench]")[0], "benchmark[0].gbench", ['needs a [benchmark.gbench] table']),
    ("gbench-no-command", GBENCH.replace('command = ["./bench"]\n', ""), "benchmark[0].command", ["missing"]),
    ("gbench-no-filter", GBENCH.replace('filter = "^BM_Copy/1024$"\n', 'time = "cpu_time"\n'), "benchmark[0].gbench.filter", ["missing", "regular expression"]),
    ("gbench-bad-regex", GBENCH.replace("^BM_Copy/1024$", "BM_(Copy"), "benchmark[0].gbench.filter", ["regular expression", "'BM_(Copy'"]),
    ("gbench-time", GBENCH + 'time = "wall"\n', "benchmark[0].gbench.time", ['"real_time"', '"cpu_time"']),
    ("gbench-unknown-key", GBENCH + "repetitions = 3\n", "benchmark[0].gbench.repetitions", ["unknown key", "filter, time"]),
    ("gbench-unit", GBENCH.replace('command = ["./bench"]\n', 'command = ["./bench"]\nunit = "cycles"\n'), "benchmark[0].unit", ['"s", "ms", "us", "ns"']),
    ("gbench-table-on-command", '[[benchmark]]\nname = "c"\nrunner = "command"\ncommand = ["x"]\n[benchmark.gbench]\nfilter = "x"\n', "benchmark[0].gbench", ['only for runner = "gbench"']),
    ("nvbench-table-missing", NVBENCH.split("[benchmark.nvbench]")[0], "benchmark[0].nvbench", ["needs a [benchmark.nvbench] table"]),
    ("nvbench-no-benchmark", NVBENCH.replace('benchmark = "copy"\n', 'stopping = "stdrel"\n'), "benchmark[0].nvbench.benchmark", ["missing"]),
    ("nvbench-axes-list", NVBENCH + 'axes = ["T=F32"]\n', "benchmark[0].nvbench.axes", ["table of axis names"]),
    ("nvbench-axes-bool", NVBENCH + "axes = { Flag = true }\n", "benchmark[0].nvbench.axes", ["table of axis names"]),
    ("nvbench-axes-spec-in-name", NVBENCH + 'axes = { "Elements[pow2]" = "24" }\n', "benchmark[0].nvbench.axes", ["as NVBench prints them"]),
    ("nvbench-stopping", NVBENCH + 'stopping = "forever"\n', "benchmark[0].nvbench.stopping", ['"sample-count"', '"command"']),
    ("nvbench-jsonbin", NVBENCH + 'jsonbin = "yes"\n', "benchmark[0].nvbench.jsonbin", ["true or false"]),
    ("nvbench-table-on-gbench", GBENCH + '[benchmark.nvbench]\nbenchmark = "copy"\n', "benchmark[0].nvbench", ['only for runner = "nvbench"']),
]  # fmt: skip


@pytest.mark.parametrize(("bench", "key", "expected"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_tool_tables_are_one_line_errors(tmp_path: Path, bench: str, key: str, expected: list[str]) -> None:
    path = write(tmp_path, TOP + BUILD + bench)
    assert_one_line_error(load_error(path), path, key, *expected)


@pytest.mark.parametrize("runner", ["gbench", "nvbench"])
def test_the_worked_recipes_in_the_docs_load(tmp_path: Path, runner: str) -> None:
    docs = (Path(__file__).resolve().parent.parent / "docs" / "recipes.md").read_text()
    blocks = [b.split("```", 1)[0] for b in docs.split("```toml\n")[1:]]
    (block,) = [b for b in blocks if f'runner = "{runner}"' in b and b.startswith("schema")]
    bench = load_recipe(write(tmp_path, block)).benchmark(None)
    assert bench.runner == runner and (bench.gbench or bench.nvbench) is not None
