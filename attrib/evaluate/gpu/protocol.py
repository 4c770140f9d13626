"""The timing protocol, as pure planning over a small device interface (`GpuDevice`), so that
block sizing, throttle exclusion and call order are testable without a GPU.

One sample is one block: several launches between CUDA events (hot) or each launch between
its own events after an L2 flush (cold), averaged. Launches inside a block are correlated, so
blocks, not launches, are the independent samples (measurement.md). Before and after each
block the SM clock is read, and NVML's clock-event reasons and the other compute processes on
the device (`readings`); core/gpu_validity.py decides: a block run below `throttle_fraction` of
the reference clock (as nvbench discards samples under 0.75 x the default clock), on a shared
device, or under thermal, power-brake or HW-slowdown reasons is excluded, counted by its
reason, and timed again after a pause, within a bound.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from attrib.core.gpu_validity import DeviceReading, block_exclusion, pause_s, rerun

EVENT_RESOLUTION_MS = 0.0005  # CUDA events resolve about 0.5 us
MIN_EVENT_SPAN = 200  # a timed span should be this many resolutions long: 0.5 % quantisation
MAX_LAUNCHES = 10_000
HOLD_MARGIN = 2.0  # hold the stream for twice the measured host enqueue time
MAX_HOLD_MS = 200.0
CLOCK_PROBE_NS = 100_000  # 100 us of %globaltimer: its ~1 us ticks then cost under 1 %
WARMUP_LAUNCHES = 3


class GpuDevice(Protocol):
    """What the runner needs from a GPU. `device.CupyDevice` is the real one."""

    arch: str  # "sm_90": what kernels are compiled for

    def info(self) -> dict[str, Any]: ...

    def load(self, compiled: Any) -> dict[str, Any]:
        """Load a CompiledKernel; its functions by name expression."""
        ...

    def setup(self, kdef: Any, funcs: dict[str, Any], shape: dict[str, int], dtype: str, seed: int = 0) -> Any:
        """Allocate and fill one problem (suite.Problem) on the device."""
        ...

    def check(self, problem: Any) -> str | None:
        """Launch once and compare with the NumPy reference: None, or what is wrong."""
        ...

    def reference_clock_mhz(self) -> float: ...

    def sm_clock_mhz(self) -> float: ...

    def readings(self) -> DeviceReading:
        """NVML's clock-event reasons and the other compute processes, now (nvml.py)."""
        ...

    def run(self, problem: Any, launches: int) -> None:
        """Launch and synchronise, untimed (warm-up)."""
        ...

    def enqueue_ms(self, problem: Any, launches: int) -> float:
        """Host time to enqueue `launches` launches (behind a hold, so the GPU is not waited on)."""
        ...

    def time_block(self, problem: Any, launches: int, cold: bool, hold_ns: int) -> float:
        """GPU milliseconds of `launches` launches: hot, one event pair around all of them;
        cold, an L2 flush before each launch and an event pair around each launch alone."""
        ...


@dataclass(frozen=True)
class BlockPlan:
    launches: int
    hold_ns: int
    note: str = ""  # why the plan is not what the target asked for, if it is not


def plan_block(launch_ms: float, enqueue_ms_per_launch: float, *, block_ms: float, cold: bool) -> BlockPlan:
    """How many launches make one block, and how long to hold the stream while they enqueue.

    A block should be `block_ms` of GPU time; a hot block must also span MIN_EVENT_SPAN event
    resolutions. The hold covers the host's enqueue time so the start event fires right
    before the first launch; when even MAX_HOLD_MS cannot cover it, the block shrinks."""
    if not (launch_ms > 0 and math.isfinite(launch_ms)):
        raise ValueError(f"launch time must be positive and finite, got {launch_ms!r}")
    want = block_ms
    if not cold:
        want = max(want, MIN_EVENT_SPAN * EVENT_RESOLUTION_MS)
    n = min(MAX_LAUNCHES, max(1, math.ceil(want / launch_ms)))
    note = ""
    per_launch_hold = HOLD_MARGIN * max(enqueue_ms_per_launch, 0.0)
    if per_launch_hold * n > MAX_HOLD_MS:
        n = max(1, int(MAX_HOLD_MS / per_launch_hold))
        note = f"block cut to {n} launches: enqueueing more would outlast a {MAX_HOLD_MS:g} ms hold"
    if cold and launch_ms < MIN_EVENT_SPAN * EVENT_RESOLUTION_MS:
        note = note or (
            f"a launch takes {launch_ms * 1000:.1f} us: cold timing of each launch alone is within "
            f"{100 * EVENT_RESOLUTION_MS / launch_ms:.1f} % of the event resolution (hot mode times blocks)"
        )
    hold_ms = min(MAX_HOLD_MS, per_launch_hold * n)
    return BlockPlan(n, int(hold_ms * 1e6), note)


@dataclass(frozen=True)
class Calibration:
    launch_ms: float
    enqueue_ms: float  # per launch
    plan: BlockPlan


def calibrate(device: GpuDevice, problem: Any, *, block_ms: float, cold: bool) -> Calibration:
    """Warm up, then estimate one launch's GPU time and the host's enqueue cost per launch."""
    device.run(problem, WARMUP_LAUNCHES)
    probe = max(1, WARMUP_LAUNCHES)
    launch_ms = device.time_block(problem, probe, cold, 0) / probe
    launch_ms = max(launch_ms, EVENT_RESOLUTION_MS / probe)
    enqueue = device.enqueue_ms(problem, probe) / probe
    return Calibration(launch_ms, enqueue, plan_block(launch_ms, enqueue, block_ms=block_ms, cold=cold))


@dataclass(frozen=True)
class BlockSample:
    ms_per_launch: float
    clock_mhz: float  # the lower of the two reads around the block
    excluded: str  # empty when usable; else its reason (core/gpu_validity.py's names)
    reasons: int | None = None  # NVML's clock-event reasons at either end, OR'ed; None: not read
    others: tuple[int, ...] = ()  # other compute processes seen at either end


def measure_blocks(
    device: GpuDevice, problem: Any, plan: BlockPlan, blocks: int, *, cold: bool, throttle_fraction: float,
    sleep: Callable[[float], None] = time.sleep,
) -> list[BlockSample]:
    """`blocks` kept blocks if the device allows: an excluded one is timed again after a pause
    (nvbench's back-off), up to twice `blocks` timed in all; every timed block is returned."""
    reference = device.reference_clock_mhz()
    out: list[BlockSample] = []
    in_a_row = 0
    while rerun(blocks, sum(1 for b in out if not b.excluded), len(out)):
        if in_a_row:
            sleep(pause_s(in_a_row))
        before, seen = device.sm_clock_mhz(), device.readings()
        total = device.time_block(problem, plan.launches, cold, plan.hold_ns)
        clock, after = min(before, device.sm_clock_mhz()), device.readings()
        why = block_exclusion(clock, reference, throttle_fraction, seen, after)
        reasons = None if seen.reasons is None and after.reasons is None else (seen.reasons or 0) | (after.reasons or 0)
        others = tuple(sorted(set(seen.others or ()) | set(after.others or ())))
        out.append(BlockSample(total / plan.launches, clock, why, reasons, others))
        in_a_row = in_a_row + 1 if why else 0
    return out
