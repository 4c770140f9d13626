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
        query = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
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
