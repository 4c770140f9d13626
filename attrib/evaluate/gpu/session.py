"""One process's kernels: every commit's module compiled, loaded, checked and calibrated once on
one `GpuDevice`, then timed in blocks (protocol.py) whenever that commit is run again.

It runs inside the GPU worker process (gpu/worker.py, on the real device), or in the attrib
process itself over a device a test hands the runner (a fake). A failure of one commit's
preparation is remembered as that commit's failed run; an unexpected exception (a CUDA error:
the context may be unusable now) is a `fault`, and the worker ends after answering it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attrib.errors import AttribError, KernelCompileError
from attrib.evaluate.gpu.build import CompiledKernel, compile_kernel, kernel_source
from attrib.evaluate.gpu.protocol import Calibration, GpuDevice, calibrate, measure_blocks
from attrib.evaluate.runners import RunResult
from attrib.recipe import CupySpec


@dataclass
class Prepared:
    error: str = ""
    compiled: CompiledKernel | None = None
    problem: Any = None
    calibration: Calibration | None = None
    fault: bool = False  # the error came from the device, not from the commit's code being wrong


class KernelSession:
    def __init__(self, cupy: CupySpec, device_factory: Callable[[], GpuDevice]) -> None:
        self.cupy = cupy
        self._factory = device_factory
        self._device: Any = None
        self.prepared: dict[Path, Prepared] = {}

    @property
    def device(self) -> Any:
        if self._device is None:
            self._device = self._factory()
        return self._device

    def info(self) -> dict[str, Any] | None:
        """The device's description; None while no device was opened."""
        return None if self._device is None else dict(self._device.info())

    def artifact(self, checkout: Path) -> str | None:
        prepared = self.prepare(checkout)
        return None if prepared.error or prepared.compiled is None else prepared.compiled.digest

    def run(self, checkout: Path, reps: int) -> tuple[RunResult, bool]:
        """One run of `reps` blocks, and whether it faulted (the device may be unusable now)."""
        start = time.monotonic()
        prepared = self.prepare(checkout)
        if prepared.error:
            return RunResult((), prepared.error, time.monotonic() - start), prepared.fault
        assert prepared.calibration is not None
        try:
            blocks = measure_blocks(
                self.device, prepared.problem, prepared.calibration.plan, reps,
                cold=self.cupy.mode == "cold", throttle_fraction=self.cupy.throttle_fraction,
            )  # fmt: skip
        except AttribError:
            raise
        except Exception as exc:  # a CUDA error while timing: this commit's failed run, and a fault
            prepared.error, prepared.fault = _one_line(exc), True
            return RunResult((), prepared.error, time.monotonic() - start), True
        samples = tuple(b.ms_per_launch for b in blocks if not b.excluded)
        excluded = tuple(b.excluded for b in blocks if b.excluded)
        error = "" if samples else f"all {len(blocks)} blocks excluded ({excluded[0]})"
        # the GPU time its launches took; the rest of the run is the overhead a block size trades
        gpu_s = sum(b.ms_per_launch for b in blocks) * prepared.calibration.plan.launches / 1000.0
        return RunResult(samples, error, time.monotonic() - start, excluded, sample_s=gpu_s), False

    def prepare(self, checkout: Path) -> Prepared:
        """Once per checkout: compile, load, check at a small size, set up, calibrate. A
        failure is remembered as that commit's failed run; it never ends the bisection."""
        key = checkout.resolve()
        if key in self.prepared:
            return self.prepared[key]
        prepared = Prepared()
        self.prepared[key] = prepared
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
            prepared.calibration = calibrate(dev, prepared.problem, block_ms=self.cupy.block_ms, cold=self.cupy.mode == "cold")
        except KernelCompileError as exc:
            prepared.error = str(exc)
        except AttribError:
            raise
        except Exception as exc:  # a CUDA error in one commit's kernel is that commit's failure
            prepared.error, prepared.fault = _one_line(exc), True
        return prepared


def _one_line(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _fmt(shape: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items())
