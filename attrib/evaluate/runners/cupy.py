"""The cupy runner: compile the benchmark's kernel from each built checkout with NVRTC, load
every commit's module side by side in this one process, check each against the NumPy
reference, then time blocks of launches (gpu/protocol.py). The evaluation stage alternates reference
and candidate runs, so good, bad and candidate modules are measured in interleaved rounds
on a GPU whose state drifts for all of them alike.

With `metric` set to a static metric the runner needs no GPU: each run returns that metric
(+1, so that zero spills is a value) for every sample, and the bisection is deterministic.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from attrib.errors import AttribError, KernelCompileError
from attrib.evaluate.gpu.build import CompiledKernel, compile_kernel, kernel_source
from attrib.evaluate.gpu.metrics import KernelMetrics, static_diff
from attrib.evaluate.gpu.protocol import Calibration, GpuDevice, calibrate, measure_blocks
from attrib.evaluate.runners import RunnerEvidence, RunResult, StaticDiff, Step
from attrib.recipe import BenchmarkSpec, CupySpec

STATIC_OFFSET = 1  # static samples are metric + 1: the statistics compare ratios of positives


@dataclass
class _Prepared:
    error: str = ""
    compiled: CompiledKernel | None = None
    problem: Any = None
    calibration: Calibration | None = None


class CupyRunner:
    def __init__(self, spec: BenchmarkSpec, device_factory: Callable[[], GpuDevice] | None = None) -> None:
        assert spec.cupy is not None
        self.spec = spec
        self.cupy: CupySpec = spec.cupy
        self._factory = device_factory
        self._device: Any = None
        self._prepared: dict[Path, _Prepared] = {}
        self._static: dict[tuple[Path, str], KernelMetrics | str] = {}

    # --- static metrics (no GPU) ------------------------------------------------------------

    def static_metrics(self, checkout: Path | None, arch: str | None = None) -> KernelMetrics | str:
        """The primary kernel's metrics for `arch` (the first recipe arch by default), or why not."""
        arch = arch or self.cupy.archs[0]
        key = ((checkout or Path("")).resolve(), arch)
        if key not in self._static:
            try:
                compiled = compile_kernel(kernel_source(self.cupy, checkout), arch)
                m = compiled.primary_metrics()
                self._static[key] = m if m is not None else compiled.metrics_note or f"no ptxas report for {arch}"
            except KernelCompileError as exc:
                self._static[key] = str(exc)
        return self._static[key]

    # --- Runner ------------------------------------------------------------------------------

    def run(self, checkout: Path) -> RunResult:
        start = time.monotonic()
        if self.cupy.metric != "time":
            m = self.static_metrics(checkout)
            if isinstance(m, str):
                return RunResult((), m, time.monotonic() - start)
            value = float(m.value(self.cupy.metric) + STATIC_OFFSET)
            return RunResult((value,) * self.spec.reps, "", time.monotonic() - start)
        prepared = self._prepare(checkout)
        if prepared.error:
            return RunResult((), prepared.error, time.monotonic() - start)
        assert prepared.calibration is not None
        blocks = measure_blocks(
            self.device,
            prepared.problem,
            prepared.calibration.plan,
            self.spec.reps,
            cold=self.cupy.mode == "cold",
            throttle_fraction=self.cupy.throttle_fraction,
        )
        samples = tuple(b.ms_per_launch for b in blocks if not b.excluded)
        excluded = tuple(b.excluded for b in blocks if b.excluded)
        error = "" if samples else f"all {len(blocks)} blocks excluded ({excluded[0]})"
        # the GPU time its launches took; the rest of the run is the overhead a block size trades
        gpu_s = sum(b.ms_per_launch for b in blocks) * prepared.calibration.plan.launches / 1000.0
        return RunResult(samples, error, time.monotonic() - start, excluded, sample_s=gpu_s)

    def with_reps(self, reps: int) -> CupyRunner:
        """Another number of timed blocks per run, sharing this runner's compiled kernels and
        calibrations (a shallow copy)."""
        sized = copy.copy(self)
        sized.spec = replace(self.spec, reps=reps)
        return sized

    def artifact(self, checkout: Path) -> str | None:
        """The sha256 of the commit's compiled module (what the timed launches run), so the
        evaluation can give identical binaries one verdict; None when it does not compile or
        for static metrics (those are read off the compile, never sampled)."""
        if self.cupy.metric != "time":
            return None
        prepared = self._prepare(checkout)
        return None if prepared.error or prepared.compiled is None else prepared.compiled.digest

    @property
    def device(self) -> Any:
        if self._device is None:
            if self._factory is None:
                from attrib.evaluate.gpu.device import CupyDevice

                self._device = CupyDevice()
            else:
                self._device = self._factory()
        return self._device

    def static_diff(self, before: Path, after: Path) -> StaticDiff:
        """Changed static metrics of the primary kernel; or why there are none (a side that
        does not compile, or no ptxas report)."""
        a, b = self.static_metrics(before), self.static_metrics(after)
        if isinstance(a, str) or isinstance(b, str):
            return StaticDiff(unavailable=a if isinstance(a, str) else str(b))
        return StaticDiff({name: (pair[0], pair[1]) for name, pair in static_diff(a, b).items()})

    def evidence(self, steps: Sequence[Step]) -> RunnerEvidence:
        """What only this runner knows: each step's static kernel diff, and the GPU it timed on."""
        return RunnerEvidence({s.commit: self.static_diff(s.before, s.after) for s in steps}, self.gpu_environment())

    def gpu_environment(self) -> dict[str, Any]:
        """The GPU the samples came from, as the result's environment.gpu (empty if none was used)."""
        if self._device is None:
            return {}
        info = self._device.info()
        keep = (
            "compute_capability",
            "multiprocessors",
            "l2_bytes",
            "persistence_mode",
            "ecc_enabled",
            "nvrtc_version",
            "cupy_version",
            "power_limit_w",
        )
        clocks = {
            "sm_reference_mhz": info.get("sm_clock_reference_mhz"),
            "sm_max_mhz": info.get("max_sm_clock_mhz"),
            "sm_now_mhz": info.get("sm_clock_mhz_now"),
            "applications_sm_mhz": info.get("applications_sm_clock_mhz"),
            "memory_mhz": info.get("memory_clock_mhz"),
        }
        return {
            "name": info.get("name"),
            "driver": info.get("driver") or info.get("driver_version"),
            "cuda": info.get("runtime_version"),
            "clocks": {k: v for k, v in clocks.items() if v is not None},
            **{k: info[k] for k in keep if info.get(k) is not None},
            "timing": f"{self.cupy.mode}, {self.cupy.block_ms:g} ms blocks, throttle below {self.cupy.throttle_fraction:.0%} of the reference SM clock",
        }

    def _prepare(self, checkout: Path) -> _Prepared:
        """Once per checkout: compile, load, check at a small size, set up, calibrate. A
        failure is remembered as that commit's failed run; it never ends the bisection."""
        key = checkout.resolve()
        if key in self._prepared:
            return self._prepared[key]
        prepared = _Prepared()
        self._prepared[key] = prepared
        dev = self.device
        try:
            src = kernel_source(self.cupy, checkout)
            kdef = src.definition
            shape = src.full_shape()
            check_shape = kdef.check_shape_for(shape)
            timed_kernel = compile_kernel(src, dev.arch, shape)
            same_code = src.entries(check_shape) == src.entries(shape)  # same template instances
            check_kernel = timed_kernel if same_code else compile_kernel(src, dev.arch, check_shape)
            check_funcs = dev.load(check_kernel)
            check_problem = dev.setup(kdef, src.by_role(check_funcs, check_shape), check_shape, src.dtype)
            wrong = dev.check(check_problem)
            del check_problem
            if wrong:
                prepared.error = f"output differs from the NumPy reference at {_fmt(check_shape)}: {wrong}"
                return prepared
            funcs = check_funcs if same_code else dev.load(timed_kernel)  # one module per commit
            prepared.problem = dev.setup(kdef, src.by_role(funcs, shape), shape, src.dtype)
            prepared.compiled = timed_kernel
            prepared.calibration = calibrate(
                dev, prepared.problem, block_ms=self.cupy.block_ms, cold=self.cupy.mode == "cold"
            )
        except KernelCompileError as exc:
            prepared.error = str(exc)
        except AttribError:
            raise
        except Exception as exc:  # a CUDA error in one commit's kernel is that commit's failure
            prepared.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return prepared


def _fmt(shape: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items())
