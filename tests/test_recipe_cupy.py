"""The [benchmark.cupy] table: defaults, every key used, and one-line errors for bad values."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_recipe import TOP, assert_one_line_error, load_error, write

from attrib.evaluate.gpu.build import kernel_source
from attrib.recipe import DEFAULT_BLOCK_MS, DEFAULT_THROTTLE_FRACTION, load_recipe

BUILD = '[build]\ncommands = ["true"]\n'
CUPY = '[[benchmark]]\nname = "g"\nrunner = "cupy"\n[benchmark.cupy]\nkernel = "gemm_mma"\n'


def text(extra: str = "", bench: str = CUPY) -> str:
    return TOP + BUILD + bench + extra


def test_minimal_cupy_benchmark_gets_the_documented_defaults(tmp_path: Path) -> None:
    bench = load_recipe(write(tmp_path, text())).benchmark(None)
    c = bench.cupy
    assert c is not None and bench.runner == "cupy" and bench.command == ()
    assert (c.kernel, c.dtype, c.mode, c.metric, c.archs) == ("gemm_mma", "bf16", "cold", "time", ("sm_90",))
    assert c.block_ms == DEFAULT_BLOCK_MS and c.throttle_fraction == DEFAULT_THROTTLE_FRACTION
    assert bench.unit == "ms"


def test_every_cupy_key_is_used_and_paths_resolve_in_the_checkout(tmp_path: Path) -> None:
    extra = (
        'dtype = "fp16"\nshape = { M = 256, N = 128, K = 64 }\nsource = "src/gemm.cu"\n'
        'defines = { SMEM_PAD = 0, TAG = "x" }\ninclude_dirs = ["include", "third_party/inc"]\n'
        'mode = "hot"\narch = ["sm_90", "sm_80"]\nmetric = "registers"\nblock_ms = 5\nthrottle_fraction = 0.5\n'
    )
    bench = load_recipe(write(tmp_path, text(extra))).benchmark(None)
    c = bench.cupy
    assert c is not None
    assert (c.dtype, c.shape, c.mode, c.archs, c.metric, c.block_ms) == (
        "fp16",
        {"M": 256, "N": 128, "K": 64},
        "hot",
        ("sm_90", "sm_80"),
        "registers",
        5.0,
    )
    assert bench.unit == "registers + 1"
    src = kernel_source(c, Path("/co"))
    assert src.source == Path("/co/src/gemm.cu")
    assert src.include_dirs == (Path("/co/include"), Path("/co/third_party/inc"))
    assert "-DSMEM_PAD=0" in src.options() and "-DTAG=x" in src.options() and "-I/co/include" in src.options()
    assert src.full_shape() == {"M": 256, "N": 128, "K": 64}


BAD = [
    ("unknown-kernel", 'kernel = "conv"\n', "", "kernel", ['"gemm_mma"', "'conv'"]),
    ("wrong-dtype", "", 'dtype = "fp8"\n', "dtype", ['"bf16" or "fp16"']),
    ("shape-unknown-key", "", "shape = { Q = 3 }\n", "shape", ["unknown shape key 'Q'", "M, N, K"]),
    ("shape-not-int", "", 'shape = { M = "big" }\n', "shape", ["positive integer", "'big'"]),
    ("shape-k-not-mult", "", "shape = { K = 100 }\n", "shape", ["multiple of 32", "100"]),
    ("mode", "", 'mode = "lukewarm"\n', "mode", ['"cold"', '"hot"']),
    ("metric", "", 'metric = "speed"\n', "metric", ['"registers"', '"spill_stores"']),
    ("arch", "", 'arch = ["hopper"]\n', "arch", ['["sm_90"]']),
    ("abs-source", "", 'source = "/etc/x.cu"\n', "source", ["relative to the checkout"]),
    ("dotdot-include", "", 'include_dirs = ["../up"]\n', "include_dirs", ["relative to the checkout"]),
    ("source-and-binary", "", 'source = "a.cu"\nbinary = "a.cubin"\n', "binary", ["either source", "not both"]),
    ("binary-static", "", 'binary = "a.cubin"\nmetric = "registers"\n', "metric", ["prebuilt binary"]),
    ("defines-bad-name", "", 'defines = { "A B" = "1" }\n', "defines", ["macro names"]),
    ("throttle", "", "throttle_fraction = 1.5\n", "throttle_fraction", ["[0, 1)"]),
    ("unknown-key", "", "colour = 1\n", "colour", ["unknown key", "kernel"]),
]


@pytest.mark.parametrize(("replace", "extra", "key", "expected"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_cupy_keys_are_one_line_errors(
    tmp_path: Path, replace: str, extra: str, key: str, expected: list[str]
) -> None:
    bench = CUPY.replace('kernel = "gemm_mma"\n', replace) if replace else CUPY
    path = write(tmp_path, text(extra, bench))
    assert_one_line_error(load_error(path), path, "benchmark[0].cupy." + key, *expected)


def test_function_is_refused_for_a_kernel_with_several_entries(tmp_path: Path) -> None:
    path = write(tmp_path, text('function = "my_moe"\n', CUPY.replace("gemm_mma", "moe")))
    assert_one_line_error(load_error(path), path, "benchmark[0].cupy.function", "launches several functions")


@pytest.mark.parametrize(
    ("bench", "key", "expected"),
    [
        ('[[benchmark]]\nname = "g"\nrunner = "cupy"\n', "benchmark[0].cupy", "needs a [benchmark.cupy] table"),
        (
            CUPY.replace('runner = "cupy"', 'runner = "cupy"\ncommand = ["x"]'),
            "benchmark[0].command",
            "launches kernels itself",
        ),
        (
            CUPY.replace('runner = "cupy"', 'runner = "command"\ncommand = ["x"]'),
            "benchmark[0].cupy",
            'only for runner = "cupy"',
        ),
    ],
    ids=["cupy-table-missing", "cupy-with-command", "command-with-cupy-table"],
)
def test_runner_and_table_must_agree(tmp_path: Path, bench: str, key: str, expected: str) -> None:
    path = write(tmp_path, text(bench=bench))
    assert_one_line_error(load_error(path), path, key, expected)
