"""The cupy runner: compile the benchmark's kernel from each built checkout with NVRTC, load
every commit's module side by side in one GPU worker process (gpu/isolated.py, gpu/worker.py),
check each against the NumPy reference, then time blocks of launches (gpu/protocol.py). The
evaluation stage alternates reference and candidate runs, so good, bad and candidate modules
are measured in interleaved rounds on a GPU whose state drifts for all of them alike. A kernel
that faults ends the worker, not attrib: that is one failed run of its commit, and a new
worker serves the others.

With `metric` set to a static metric the runner needs no GPU: each run returns that metric
(+1, so that zero spills is a value) for every sample, and the bisection is deterministic.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from attrib.errors import KernelCompileError
from attrib.evaluate.gpu.build import compile_kernel, kernel_source
from attrib.evaluate.gpu.isolated import KernelSlot, KernelWorker
from attrib.evaluate.gpu.metrics import KernelMetrics, static_diff
from attrib.evaluate.gpu.protocol import GpuDevice
from attrib.evaluate.gpu.session import KernelSession
from attrib.evaluate.runners import RunnerEvidence, RunResult, StaticDiff, Step
from attrib.recipe import BenchmarkSpec, CupySpec

STATIC_OFFSET = 1  # static samples are metric + 1: the statistics compare ratios of positives


class CupyRunner:
    def __init__(
        self, spec: BenchmarkSpec, device_factory: Callable[[], GpuDevice] | None = None, worker_argv: Sequence[str] | None = None,
        slot: KernelSlot | None = None,
    ) -> None:
        """Kernels run in a GPU worker process (`worker_argv`: its command, gpu/worker.py by
        default), or in a `slot` of one shared with other members (`sharing_one_worker`); with a
        `device_factory` (a test's fake device) in this process instead."""
        assert spec.cupy is not None
        self.spec = spec
        self.cupy: CupySpec = spec.cupy
        self.kernels: KernelSession | KernelWorker | KernelSlot = (
            KernelSession(self.cupy, device_factory) if device_factory is not None
            else slot if slot is not None
            else KernelWorker(self.cupy, spec.timeout_s, worker_argv)
        )  # fmt: skip
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
        if isinstance(self.kernels, KernelSession):
            return self.kernels.run(checkout, self.spec.reps)[0]
        return self.kernels.run(checkout, self.spec.reps)

    def close(self) -> None:
        """End the GPU worker (it also ends when the runner is dropped, or attrib dies)."""
        if not isinstance(self.kernels, KernelSession):
            self.kernels.close()

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
        return self.kernels.artifact(checkout)

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
        info = self.kernels.info() if isinstance(self.kernels, KernelSession) else self.kernels.info
        if info is None:
            return {}
        keep = (
            "compute_capability",
            "multiprocessors",
            "l2_bytes",
            "persistence_mode",
            "ecc_enabled",
            "nvrtc_version",
            "cupy_version",
            "power_limit_w",
            "gate",  # what the validity gate reads (docs/gpu.md), or why NVML is not read
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


def sharing_one_worker(specs: Sequence[BenchmarkSpec], worker_argv: Sequence[str] | None = None) -> list[CupyRunner]:
    """The runners of a group's cupy members that time kernels, all served by one GPU worker
    process (one CUDA context on the device, each commit's modules of every kernel loaded side
    by side): each member asks for its own kernel, with its own samples per run and timeout, and
    reads its answer as alone. A kernel that ends the worker is that member's failed run of that
    commit; the others go on in a new worker (gpu/isolated.py)."""
    cupys = [s.cupy for s in specs if s.cupy is not None]
    assert len(cupys) == len(specs)
    worker = KernelWorker(cupys, max(s.timeout_s for s in specs), worker_argv)
    return [CupyRunner(s, slot=KernelSlot(worker, i, s.timeout_s)) for i, s in enumerate(specs)]
