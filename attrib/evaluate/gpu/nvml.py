"""NVML's reads around each timed block (core/gpu_validity.py decides on them): the clock-event
reasons and the other compute processes on the device. nvidia-ml-py (`pynvml`, in the `cuda`
extras) is imported lazily: without it, or on a device that refuses a query, each reading says
why it has nothing, and only the SM clock rule applies."""

from __future__ import annotations

import os
from typing import Any

from attrib.core.gpu_validity import DeviceReading, other_processes


class NvmlMonitor:
    """One device's NVML handle (by its PCI bus id: CUDA's device 0), opened once per worker."""

    def __init__(self, pci_bus_id: str | None = None) -> None:
        self.nv: Any = None
        self.handle: Any = None
        self.unread = ""
        try:
            import pynvml as nv
        except ImportError:
            self.unread = "nvidia-ml-py not installed (pip install 'attrib[cuda]')"
            return
        try:
            nv.nvmlInit()
            by_bus = getattr(nv, "nvmlDeviceGetHandleByPciBusId_v2", None) or nv.nvmlDeviceGetHandleByPciBusId
            self.handle = by_bus(pci_bus_id) if pci_bus_id else nv.nvmlDeviceGetHandleByIndex(0)
            self.nv = nv
        except Exception as exc:  # no driver, no device: NVMLError subclasses
            self.unread = f"NVML unavailable ({type(exc).__name__}: {exc})"

    def reading(self) -> DeviceReading:
        if self.nv is None:
            return DeviceReading(unread=self.unread)
        nv, h = self.nv, self.handle
        unread = []
        reasons = None
        # the current name since driver 535; the older one stays for older drivers
        query = (
            getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        try:
            reasons = int(query(h))
        except Exception as exc:
            unread.append(f"clock-event reasons: {type(exc).__name__}")
        others = None
        try:
            pids = tuple(int(p.pid) for p in nv.nvmlDeviceGetComputeRunningProcesses(h))
            others = other_processes(pids, os.getpid())
        except Exception as exc:  # MIG or a container without the rights
            unread.append(f"compute processes: {type(exc).__name__}")
        return DeviceReading(reasons, others, "; ".join(unread))

    def close(self) -> None:
        if self.nv is not None:
            try:
                self.nv.nvmlShutdown()
            except Exception:
                pass  # ending the worker anyway
            self.nv = None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _enabled(flag: Any) -> str:
    return "Enabled" if flag else "Disabled"


def gpu_fingerprint() -> tuple[dict[str, str], str]:
    """The environment fingerprint's GPU keys (core/environment.GPU_KEYS) from NVML, in this
    process, written as nvidia-smi writes them (evaluate/fingerprint.py reads those where the
    work runs), so the two readings compare equal; or nothing, and why. A query a device does
    not support is left out, as nvidia-smi's "[N/A]" is."""
    try:
        import pynvml as nv
    except ImportError:
        return {}, "nvidia-ml-py not installed"
    try:
        nv.nvmlInit()
    except Exception as exc:  # no driver: NVMLError_LibraryNotFound, _DriverNotLoaded
        return {}, f"NVML unavailable ({type(exc).__name__})"
    try:
        per: dict[str, list[str]] = {}
        for i in range(nv.nvmlDeviceGetCount()):
            for key, value in _device_keys(nv, nv.nvmlDeviceGetHandleByIndex(i)).items():
                per.setdefault(key, []).append(value)
        values = {k: ", ".join(dict.fromkeys(v)) for k, v in per.items()}
        values["driver"] = _text(nv.nvmlSystemGetDriverVersion())
        cuda = int(nv.nvmlSystemGetCudaDriverVersion())  # 12040: what nvidia-smi's header says as 12.4
        values["cuda_runtime"] = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        return values, ""
    except Exception as exc:
        return {}, f"NVML failed ({type(exc).__name__}: {exc})"
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass  # nothing more to read


def _device_keys(nv: Any, h: Any) -> dict[str, str]:
    """One device's keys; a query it does not support is left out (nvidia-smi says [N/A])."""
    reads = {
        "gpu": lambda: _text(nv.nvmlDeviceGetName(h)),
        "power_limit_w": lambda: f"{nv.nvmlDeviceGetPowerManagementLimit(h) / 1000:.2f}",
        "app_clocks": lambda: f"{nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_GRAPHICS)}/"
        f"{nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_MEM)} MHz",
        "mig": lambda: _enabled(nv.nvmlDeviceGetMigMode(h)[0]),
        "persistence": lambda: _enabled(nv.nvmlDeviceGetPersistenceMode(h)),
    }
    out = {}
    for key, read in reads.items():
        try:
            out[key] = read()
        except Exception:
            continue  # not supported on this device
    return out
