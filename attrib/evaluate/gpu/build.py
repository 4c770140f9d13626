"""From a cupy benchmark spec and a checkout to a compiled kernel module and its static
metrics. Shared by the `cupy` runner, `attrib inspect` and the report's static diff."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attrib.errors import KernelCompileError
from attrib.evaluate.gpu import nvrtc
from attrib.evaluate.gpu.metrics import KernelMetrics, parse_ptxas_log
from attrib.recipe.model import CupySpec
from attrib.suite import KERNELS_DIR, SUITE, KernelDef


@dataclass(frozen=True)
class KernelSource:
    """Everything that decides the binary. `include_dirs` and `source` are already absolute."""

    kernel: str
    dtype: str
    shape: Mapping[str, int]
    source: Path | None = None  # None: attrib's kernels/<def.source>
    binary: Path | None = None  # a cubin or PTX the build produced (compiler trees)
    function: str | None = None  # replaces the single entry's name expression
    defines: Mapping[str, str] = field(default_factory=dict)
    include_dirs: tuple[Path, ...] = ()
    extra_options: tuple[str, ...] = ()

    @property
    def definition(self) -> KernelDef:
        return SUITE[self.kernel]

    def full_shape(self) -> dict[str, int]:
        return {**self.definition.default_shape, **self.shape}

    def entries(self, shape: Mapping[str, int] | None = None) -> tuple[str, ...]:
        names = self.definition.entries(shape or self.full_shape(), self.dtype)
        return (self.function,) if self.function else names

    def options(self) -> tuple[str, ...]:
        defines = {**self.definition.defines(self.dtype), **self.defines}
        return (
            *(f"-D{k}={v}" for k, v in sorted(defines.items())),
            *(f"-I{d}" for d in self.include_dirs),
            *self.extra_options,
        )

    def by_role(self, funcs: dict[str, Any], shape: Mapping[str, int]) -> dict[str, Any]:
        """Loaded functions keyed by the suite's entry names, which the setup code launches
        by; a recipe `function` may have renamed the single entry."""
        roles = self.definition.entries(shape, self.dtype)
        return {role: funcs[name] for role, name in zip(roles, self.entries(shape), strict=True)}

    def source_path(self) -> Path:
        return self.source or KERNELS_DIR / self.definition.source


def kernel_source(spec: CupySpec, checkout: Path | None) -> KernelSource:
    """The compile inputs of a recipe's cupy table for one checkout (None: attrib's own kernels/,
    no tree). The recipe stays plain data; this stage turns it into what it compiles."""
    root = checkout or Path(".")
    return KernelSource(
        kernel=spec.kernel,
        dtype=spec.dtype,
        shape=dict(spec.shape),
        source=root / spec.source if spec.source else None,
        binary=root / spec.binary if spec.binary else None,
        function=spec.function,
        defines=dict(spec.defines),
        include_dirs=tuple(root / d for d in spec.include_dirs),
    )


@dataclass(frozen=True)
class CompiledKernel:
    binary: bytes
    arch: str
    symbols: dict[str, str]  # name expression -> symbol to load
    metrics: dict[str, KernelMetrics]  # by name expression; empty for a prebuilt binary
    digest: str  # sha256 of the binary: what identifies it in logs and results
    log: str
    metrics_note: str = ""  # why metrics are missing, when they are

    def primary_metrics(self) -> KernelMetrics | None:
        return next(iter(self.metrics.values()), None)


def compile_kernel(src: KernelSource, arch: str = "sm_90", shape: Mapping[str, int] | None = None) -> CompiledKernel:
    """Compile (or load the prebuilt binary). NVRTC reads the headers from the checkout's
    include dirs at this call, so each commit's headers are what gets compiled."""
    entries = src.entries(shape)
    if src.binary is not None:
        try:
            data = src.binary.read_bytes()
        except OSError as exc:
            raise KernelCompileError(str(src.binary), arch, f"cannot read the built binary ({exc.strerror})") from None
        symbols = {e: e for e in entries}  # a prebuilt module exports plain extern "C" names
        return CompiledKernel(data, arch, symbols, {}, hashlib.sha256(data).hexdigest(), "")
    compiled = nvrtc.compile_file(src.source_path(), arch=arch, options=src.options(), name_expressions=entries)
    symbols = {e: compiled.lowered.get(e) or e for e in entries}
    metrics: dict[str, KernelMetrics] = {}
    note = ""
    if not arch.startswith("compute_"):
        log = compiled.log
        try:
            if "ptxas info" not in log:
                log = nvrtc.ptxas_report_isolated(src.source_path(), arch, compiled.options, entries)
            by_symbol = parse_ptxas_log(log, len(compiled.binary))
        except (ValueError, KernelCompileError) as exc:  # a missing report costs the metrics, never the kernel
            by_symbol, note = {}, f"{exc} (NVRTC {'.'.join(map(str, nvrtc.version()))} at {nvrtc.library_path()})"
        for expr, sym in symbols.items():
            if sym in by_symbol:
                metrics[expr] = by_symbol[sym]
    return CompiledKernel(
        compiled.binary, arch, symbols, metrics, hashlib.sha256(compiled.binary).hexdigest(), compiled.log, note
    )


def timing_module(arch: str) -> CompiledKernel:
    """attrib's hold and clock kernels (kernels/timing.cu)."""
    compiled = nvrtc.compile_file(KERNELS_DIR / "timing.cu", arch=arch)
    names = ("attrib_hold", "attrib_clock")
    return CompiledKernel(
        compiled.binary, arch, {n: n for n in names}, {}, hashlib.sha256(compiled.binary).hexdigest(), compiled.log
    )
