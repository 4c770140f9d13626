"""NVRTC compiles every suite kernel here, with no GPU, and ptxas's report gives metrics that
match what the source says (shared memory sizes, spills when registers are capped)."""

from __future__ import annotations

from pathlib import Path

import pytest

from attrib.core.model import Direction
from attrib.errors import KernelCompileError
from attrib.evaluate.gpu import nvrtc
from attrib.evaluate.gpu.build import KernelSource, compile_kernel, kernel_source
from attrib.evaluate.gpu.metrics import parse_ptxas_log, static_diff
from attrib.evaluate.runners.cupy import STATIC_OFFSET, CupyRunner
from attrib.recipe import BenchmarkSpec, CupySpec
from attrib.suite import SUITE, SUITE_BENCHMARKS


@pytest.mark.parametrize("bench", SUITE_BENCHMARKS, ids=[b.name for b in SUITE_BENCHMARKS])
def test_every_suite_kernel_compiles_for_sm90_with_metrics_for_every_entry(bench) -> None:
    ck = compile_kernel(KernelSource(bench.kernel, bench.dtype, bench.shape), "sm_90")
    kdef = SUITE[bench.kernel]
    entries = kdef.entries({**kdef.default_shape, **bench.shape}, bench.dtype)
    assert set(ck.metrics) == set(entries)
    assert ck.binary[:4] == b"\x7fELF"  # a cubin is an ELF image
    for m in ck.metrics.values():
        assert m.arch == "sm_90" and 0 < m.registers <= 255
        assert m.binary_bytes == len(ck.binary)
        assert m.spill_stores == 0 and m.spill_loads == 0  # the suite's kernels are tuned not to spill


def test_gemm_mma_shared_memory_is_the_two_padded_tiles_and_padding_changes_it() -> None:
    padded = compile_kernel(KernelSource("gemm_mma", "bf16", {})).primary_metrics()
    unpadded = compile_kernel(KernelSource("gemm_mma", "bf16", {}, defines={"SMEM_PAD": "0"})).primary_metrics()
    assert padded is not None and unpadded is not None
    assert padded.shared_bytes == 2 * 64 * (32 + 8) * 2
    assert unpadded.shared_bytes == 2 * 64 * 32 * 2
    assert static_diff(padded, unpadded)["shared_bytes"] == [10240, 8192]


def test_capping_registers_through_launch_bounds_makes_the_gemm_spill() -> None:
    big_tile = {"TM": "8", "TN": "8"}
    free = compile_kernel(KernelSource("gemm_fp32", "fp32", {}, defines=big_tile)).primary_metrics()
    capped = compile_kernel(
        KernelSource("gemm_fp32", "fp32", {}, defines={**big_tile, "GEMM_MIN_BLOCKS": "32"})
    ).primary_metrics()
    assert free is not None and capped is not None
    assert free.spill_stores == 0 and free.registers > 64
    # 64 threads x 32 resident blocks share 65536 registers: 32 each, and the 8x8 tile spills
    assert capped.registers <= 32
    assert capped.spill_stores > 0 and capped.spill_loads > 0 and capped.stack_frame > 0
    diff = static_diff(free, capped)
    assert diff["registers"][1] < diff["registers"][0] and diff["spill_stores"][0] == 0


def test_template_instances_are_named_by_expression_and_differ() -> None:
    plain = compile_kernel(KernelSource("attention", "fp32", {"CAUSAL": 0}))
    causal = compile_kernel(KernelSource("attention", "fp32", {"CAUSAL": 1}))
    assert list(plain.symbols) == ["attention_fwd<64, false>"]
    assert list(causal.symbols) == ["attention_fwd<64, true>"]
    assert plain.symbols["attention_fwd<64, false>"].startswith("_Z")  # the mangled symbol to load
    assert plain.digest != causal.digest


def _tree_with_tile_header(root: Path, pad: int) -> Path:
    inc = root / "include" / "lib"
    inc.mkdir(parents=True)
    (inc / "tile.cuh").write_text(f"#define SMEM_PAD {pad}\n")
    return root


def _header_spec(metric: str = "time") -> CupySpec:
    return CupySpec(
        kernel="gemm_mma",
        dtype="fp16",
        defines={"ATTRIB_TILE_HEADER": '"lib/tile.cuh"'},
        include_dirs=("include",),
        metric=metric,
    )


def test_headers_come_from_each_checkout_so_binaries_differ_with_them(tmp_path: Path) -> None:
    """The reason attrib compiles itself: a header change must change the binary."""
    spec = _header_spec()
    a = compile_kernel(kernel_source(spec, _tree_with_tile_header(tmp_path / "a", 8)))
    b = compile_kernel(kernel_source(spec, _tree_with_tile_header(tmp_path / "b", 0)))
    same = compile_kernel(kernel_source(spec, _tree_with_tile_header(tmp_path / "c", 8)))
    assert a.digest != b.digest and a.digest == same.digest
    assert a.primary_metrics().shared_bytes == 10240 and b.primary_metrics().shared_bytes == 8192  # type: ignore[union-attr]


def test_static_metric_runner_returns_the_metric_plus_one_for_every_rep_without_a_gpu(tmp_path: Path) -> None:
    spec = BenchmarkSpec(
        "smem", "cupy", (), "shared_bytes + 1", Direction.LOWER, reps=4, cupy=_header_spec("shared_bytes")
    )

    def no_gpu():
        raise AssertionError("a static metric must not touch the GPU")

    runner = CupyRunner(spec, device_factory=no_gpu)
    res = runner.run(_tree_with_tile_header(tmp_path / "a", 8))
    assert res.ok and res.samples == (10240.0 + STATIC_OFFSET,) * 4
    res = runner.run(_tree_with_tile_header(tmp_path / "b", 0))
    assert res.samples == (8192.0 + STATIC_OFFSET,) * 4


def test_a_commit_whose_kernel_does_not_compile_is_a_failed_run_not_an_exception(tmp_path: Path) -> None:
    root = _tree_with_tile_header(tmp_path / "a", 8)
    (root / "include" / "lib" / "tile.cuh").write_text("#define SMEM_PAD 8\nthis is not C++;\n")
    spec = BenchmarkSpec("smem", "cupy", (), "x", Direction.LOWER, reps=2, cupy=_header_spec("registers"))
    res = CupyRunner(spec).run(root)
    assert not res.ok and "does not compile" in res.error and "\n" not in res.error


def test_compile_error_is_one_line_naming_the_file_and_the_first_error() -> None:
    with pytest.raises(KernelCompileError) as info:
        nvrtc.compile_source('extern "C" __global__ void k() { undefined_thing(); }', "broken.cu")
    msg = str(info.value)
    assert "\n" not in msg and "broken.cu" in msg and "undefined_thing" in msg
    assert "error" in info.value.log


def test_a_virtual_architecture_gives_ptx() -> None:
    out = nvrtc.compile_source('extern "C" __global__ void k(float* x) { x[0] = 1.0f; }', "k.cu", arch="compute_90")
    text = out.binary.decode()
    assert ".entry k" in text and ".target sm_90" in text


PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'first' for 'sm_90'
ptxas info    : Function properties for first
ptxas         .     920 bytes stack frame, 2640 bytes spill stores, 2436 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 920 bytes cumulative stack size, 4096 bytes smem, 400 bytes cmem[0]
ptxas info    : Compiling entry function 'second' for 'sm_90'
ptxas info    : Function properties for second
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, 380 bytes cmem[0]
"""


def test_ptxas_report_parses_per_function() -> None:
    m = parse_ptxas_log(PTXAS_LOG, 1234)
    assert m["first"].registers == 32 and m["first"].spill_stores == 2640 and m["first"].spill_loads == 2436
    assert m["first"].stack_frame == 920 and m["first"].shared_bytes == 4096 and m["first"].barriers == 1
    assert m["first"].constant_bytes == 400
    assert m["second"].registers == 10 and m["second"].shared_bytes == 0 and m["second"].binary_bytes == 1234


def test_a_log_without_a_ptxas_report_is_refused() -> None:
    with pytest.raises(ValueError, match="no ptxas verbose report"):
        parse_ptxas_log("ptxas info    : 0 bytes gmem\n", 10)


def test_the_isolated_compile_reports_the_same_metrics_as_in_process() -> None:
    """The fallback for an empty in-process log (NVRTC 13 on a compute-cache hit)."""
    src = KernelSource("gemm_mma", "fp16", {}, defines={"SMEM_PAD": "0"})
    compiled = nvrtc.compile_file(src.source_path(), options=src.options(), name_expressions=src.entries())
    isolated = nvrtc.ptxas_report_isolated(src.source_path(), "sm_90", compiled.options, src.entries())
    assert parse_ptxas_log(isolated, 1) == parse_ptxas_log(compiled.log, 1)
    assert parse_ptxas_log(isolated, 1)["gemm_mma"].shared_bytes == 8192
