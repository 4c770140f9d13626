"""`attrib inspect`: static metrics of kernels compiled with NVRTC, no GPU needed. Without a
recipe, every kernel of attrib's suite; with one, its cupy benchmarks as a given checkout
(or the repository's working tree) would compile them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attrib.errors import InputError, KernelCompileError
from attrib.evaluate.gpu import nvrtc
from attrib.evaluate.gpu.build import KernelSource, compile_kernel, kernel_source
from attrib.evaluate.gpu.metrics import KernelMetrics
from attrib.recipe import Recipe
from attrib.suite import SUITE_BENCHMARKS

# constant memory is left out: ptxas for sm_90 no longer reports it, and a column of zeros would claim it did
COLUMNS = ("registers", "spill_stores", "spill_loads", "stack_frame", "shared_bytes", "binary_bytes")


@dataclass(frozen=True)
class Row:
    benchmark: str
    function: str  # name expression
    arch: str
    metrics: KernelMetrics | None
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"benchmark": self.benchmark, "function": self.function, "arch": self.arch}
        if self.metrics is not None:
            out.update({k: self.metrics.value(k) for k in COLUMNS})
        if self.error:
            out["error"] = self.error
        return out


def targets_from_suite() -> list[tuple[str, KernelSource]]:
    return [(b.name, KernelSource(b.kernel, b.dtype, b.shape)) for b in SUITE_BENCHMARKS]


def targets_from_recipe(
    recipe: Recipe, bench_name: str | None, checkout: Path | None
) -> list[tuple[str, KernelSource]]:
    benches = [recipe.benchmark(bench_name)] if bench_name else list(recipe.benchmarks)
    cupy = [b for b in benches if b.cupy is not None]
    if not cupy:
        raise InputError(f'{recipe.path}: no benchmark with runner = "cupy" to inspect')
    return [(b.name, kernel_source(b.cupy, checkout)) for b in cupy if b.cupy is not None]


def inspect(targets: list[tuple[str, KernelSource]], archs: tuple[str, ...]) -> list[Row]:
    nvrtc.library()  # no NVRTC: one clear error before anything else
    rows = []
    for name, src in targets:
        for arch in archs:
            try:
                compiled = compile_kernel(src, arch)
            except KernelCompileError as exc:
                rows.append(Row(name, src.entries()[0], arch, None, str(exc)))
                continue
            for expr in compiled.symbols:
                rows.append(Row(name, expr, arch, compiled.metrics.get(expr)))
    return rows
