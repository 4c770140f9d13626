"""The real GPU behind `protocol.GpuDevice`: CuPy on device 0. Imported only when a `cupy`
benchmark is timed; every CuPy call in attrib lives here or in suite.py's setup functions."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from attrib.core.gpu_validity import DeviceReading
from attrib.errors import GpuUnavailable
from attrib.evaluate.gpu.build import CompiledKernel, timing_module
from attrib.evaluate.gpu.nvml import NvmlMonitor
from attrib.evaluate.gpu.protocol import CLOCK_PROBE_NS
from attrib.suite import KernelDef, Problem

# Dense arithmetic per SM per clock, by compute capability: (fp32 FLOP, fp16/bf16 tensor FLOP).
# From NVIDIA's architecture whitepapers; the tensor figure is mma's dense rate.
PER_SM_CLOCK = {"90": (256, 4096), "100": (256, 8192), "89": (256, 1024), "80": (128, 2048), "86": (256, 1024)}


def probe() -> str:
    """'' when a GPU is usable through CuPy, else why not (one line, for the demo and errors)."""
    try:
        import cupy  # noqa: F401
    except Exception as exc:  # ImportError, or CuPy failing to find its CUDA libraries
        return f"CuPy is not importable ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"CUDA reports no usable device ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    return "" if count > 0 else "CUDA reports 0 devices"


class CupyDevice:
    def __init__(self) -> None:
        why = probe()
        if why:
            raise GpuUnavailable(f"the cupy runner needs an NVIDIA GPU and CuPy: {why}")
        import cupy as cp

        self.cp = cp
        # Our own cubins are loaded from files we write; CuPy's compile cache is never asked
        # for them. Point it somewhere private anyway, so nothing CuPy compiles for us (its
        # own elementwise kernels) can collide with another process's entries.
        os.environ.setdefault("CUPY_CACHE_DIR", tempfile.mkdtemp(prefix="attrib-cupy-cache-"))
        self.device = cp.cuda.Device(0)
        self.device.use()
        self.attrs = self.device.attributes
        self.cc = str(self.device.compute_capability)
        self.arch = f"sm_{self.cc}"
        self._dir = Path(tempfile.mkdtemp(prefix="attrib-modules-"))
        self.stream = cp.cuda.Stream(non_blocking=True)
        timing = self.load(timing_module(self.arch))
        self._hold, self._clock = timing["attrib_hold"], timing["attrib_clock"]
        self._clock_out = cp.zeros(2, dtype=cp.uint64)
        # NVML by the PCI bus id: CUDA numbers devices fastest first, NVML by bus order
        self.monitor = NvmlMonitor(str(cp.cuda.runtime.deviceGetPCIBusId(0)))
        l2 = int(self.attrs.get("L2CacheSize", 0)) or 64 << 20
        self._flush = cp.empty(max(2 * l2, 32 << 20), dtype=cp.uint8)  # >= L2, as nvbench flushes
        self._events: list[tuple[Any, Any]] = []

    # --- modules and problems -------------------------------------------------------------

    def load(self, compiled: CompiledKernel) -> dict[str, Any]:
        """Load a cubin/PTX from a file named by its digest; functions by name expression."""
        suffix = ".ptx" if compiled.arch.startswith("compute_") else ".cubin"
        path = self._dir / f"{compiled.digest}{suffix}"
        path.write_bytes(compiled.binary)
        module = self.cp.RawModule(path=str(path))
        return {expr: module.get_function(symbol) for expr, symbol in compiled.symbols.items()}

    def setup(
        self, kdef: KernelDef, funcs: dict[str, Any], shape: dict[str, int], dtype: str, seed: int = 0
    ) -> Problem:
        with self.stream:
            problem = kdef.setup(self.cp, funcs, shape, dtype, np.random.default_rng(seed))
        self.cp.cuda.Device(0).synchronize()
        return problem

    def check(self, problem: Problem) -> str | None:
        with self.stream:
            problem.launch()
        self.stream.synchronize()
        return problem.check()

    # --- protocol.GpuDevice ---------------------------------------------------------------

    def run(self, problem: Problem, launches: int) -> None:
        with self.stream:
            for _ in range(launches):
                problem.launch()
        self.stream.synchronize()

    def enqueue_ms(self, problem: Problem, launches: int) -> float:
        with self.stream:
            self._hold((1,), (1,), (np.uint64(50_000_000),))  # 50 ms: the GPU must not drain the queue
            t0 = time.perf_counter()
            for _ in range(launches):
                problem.launch()
            elapsed = time.perf_counter() - t0
        self.stream.synchronize()
        return elapsed * 1000.0

    def time_block(self, problem: Problem, launches: int, cold: bool, hold_ns: int) -> float:
        cp, s = self.cp, self.stream
        with s:
            if hold_ns > 0:
                self._hold((1,), (1,), (np.uint64(hold_ns),))
            if not cold:
                start, end = self._event_pair(0)
                start.record(s)
                for _ in range(launches):
                    problem.launch()
                end.record(s)
                end.synchronize()
                return float(cp.cuda.get_elapsed_time(start, end))
            pairs = [self._event_pair(i) for i in range(launches)]
            for start, end in pairs:
                cp.cuda.runtime.memsetAsync(self._flush.data.ptr, 0, self._flush.nbytes, s.ptr)
                start.record(s)
                problem.launch()
                end.record(s)
            pairs[-1][1].synchronize()
            return float(sum(cp.cuda.get_elapsed_time(a, b) for a, b in pairs))

    def sm_clock_mhz(self) -> float:
        with self.stream:
            self._clock((1,), (1,), (np.uint64(CLOCK_PROBE_NS), self._clock_out))
        self.stream.synchronize()
        cycles, ns = (int(v) for v in self._clock_out.get())
        return cycles / ns * 1000.0 if ns else 0.0

    def readings(self) -> DeviceReading:
        return self.monitor.reading()

    def reference_clock_mhz(self) -> float:
        khz = int(self.attrs.get("ClockRate", 0))
        if khz:
            return khz / 1000.0
        nvml = _nvml()
        return float(nvml.get("max_sm_clock_mhz", 0.0))

    def info(self) -> dict[str, Any]:
        cp = self.cp
        props = cp.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        sms = int(self.attrs.get("MultiProcessorCount", 0))
        ref = self.reference_clock_mhz()
        mem_khz = int(self.attrs.get("MemoryClockRate", 0))
        bus = int(self.attrs.get("GlobalMemoryBusWidth", 0))
        fp32, tensor = PER_SM_CLOCK.get(self.cc, (0, 0))
        from attrib.evaluate.gpu import nvrtc

        info: dict[str, Any] = {
            "name": name,
            "compute_capability": self.cc,
            "multiprocessors": sms,
            "l2_bytes": int(self.attrs.get("L2CacheSize", 0)),
            "memory_bytes": int(props.get("totalGlobalMem", 0)),
            "driver_version": _cuda_version(cp.cuda.runtime.driverGetVersion()),
            "runtime_version": _cuda_version(cp.cuda.runtime.runtimeGetVersion()),
            "nvrtc_version": ".".join(map(str, nvrtc.version())),
            "cupy_version": cp.__version__,
            "sm_clock_reference_mhz": ref,
            "memory_clock_mhz": mem_khz / 1000.0 if mem_khz else None,
            "peak_memory_gbps": 2 * mem_khz * 1e3 * bus / 8 / 1e9 if mem_khz and bus else None,
            "peak_fp32_tflops": fp32 * sms * ref * 1e6 / 1e12 if fp32 and ref else None,
            "peak_tensor_tflops": tensor * sms * ref * 1e6 / 1e12 if tensor and ref else None,
        }
        info.update(_nvml())
        unread = self.monitor.reading().unread
        info["gate"] = f"SM clock, and NVML partly: {unread}" if unread else "SM clock, NVML clock-event reasons, compute processes"
        return info

    def _event_pair(self, i: int) -> tuple[Any, Any]:
        while len(self._events) <= i:
            self._events.append((self.cp.cuda.Event(), self.cp.cuda.Event()))
        return self._events[i]


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _nvml() -> dict[str, Any]:
    """Driver string, persistence, ECC and clocks from NVML when nvidia-ml-py is installed."""
    try:
        import pynvml as nv
    except ImportError:
        return {"nvml": "not installed (pip install nvidia-ml-py)"}
    out: dict[str, Any] = {}
    try:
        nv.nvmlInit()
        h = nv.nvmlDeviceGetHandleByIndex(0)
        reads = {
            "driver": lambda: nv.nvmlSystemGetDriverVersion(),
            "persistence_mode": lambda: bool(nv.nvmlDeviceGetPersistenceMode(h)),
            "ecc_enabled": lambda: bool(nv.nvmlDeviceGetEccMode(h)[0]),
            "sm_clock_mhz_now": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
            "max_sm_clock_mhz": lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM),
            "memory_clock_mhz_now": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
            "applications_sm_clock_mhz": lambda: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_SM),
            "power_limit_w": lambda: nv.nvmlDeviceGetPowerManagementLimit(h) / 1000.0,
        }
        for key, read in reads.items():
            try:
                value = read()
                out[key] = value.decode() if isinstance(value, bytes) else value
            except Exception as exc:  # one unsupported query must not hide the others
                out[key] = f"unavailable ({type(exc).__name__})"
        nv.nvmlShutdown()
    except Exception as exc:
        out["nvml"] = f"unavailable ({type(exc).__name__})"
    return out
