"""The GPU validity gate (issue 41), as pure decisions over what was read around one block:
whether the block is a sample, and if not, why (one stable name per reason, so the result
counts them), and how many blocks a run may re-run and how long it pauses first.

NVBench discards a sample whose SM clock is under 75 % of the default clock. attrib keeps that
rule and adds what NVML says the clock was doing: a block is excluded when the device was
shared with another compute process, or when NVML's clock-event reasons (nvmlDeviceGetCurrent-
ClocksEventReasons; ClocksThrottleReasons in older drivers; DCGM's CLOCK_THROTTLE_REASONS maps
1:1) held thermal slowdown (software or hardware), a hardware power brake or a hardware slowdown
at either end of it. A software power cap and application-clock settings are recorded, never
excluded: under load a GPU runs at its power cap in steady state, and excluding it would exclude
the steady state. The reads happen in evaluate/gpu/ (nvml.py, protocol.py).
"""

from __future__ import annotations

from dataclasses import dataclass

# NVML's clock-event reason bits (nvml.h: nvmlClocksEventReason*)
GPU_IDLE = 0x1
APPLICATIONS_CLOCKS_SETTING = 0x2
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SYNC_BOOST = 0x10
SW_THERMAL = 0x20
HW_THERMAL = 0x40
HW_POWER_BRAKE = 0x80
REASON_NAMES = {
    GPU_IDLE: "idle", APPLICATIONS_CLOCKS_SETTING: "applications clocks", SW_POWER_CAP: "power cap",
    HW_SLOWDOWN: "HW slowdown", SYNC_BOOST: "sync boost", SW_THERMAL: "SW thermal", HW_THERMAL: "HW thermal",
    HW_POWER_BRAKE: "power brake",
}  # fmt: skip

# Why a block is not a sample: the result's excluded_samples counts blocks by these names.
SHARED = "device shared with another process"
THERMAL = "thermal slowdown"
POWER_BRAKE = "power brake"
SLOWDOWN = "HW slowdown"

# NVBench's back-off after throttled samples (measure_cold.cu): 0.05 s, x1.5 after more than 2
# in a row, at most 0.5 s.
PAUSE_S = 0.05
PAUSE_GROWTH = 1.5
MAX_PAUSE_S = 0.5


def low_clock(fraction: float) -> str:
    return f"SM clock below {fraction:.0%} of the reference"


@dataclass(frozen=True)
class DeviceReading:
    """NVML's view of the device at one instant. `reasons`: the clock-event reason bits, None
    when not read; `others`: the other compute processes' pids, None when not read;
    `unread`: why something was not read (nvidia-ml-py missing, a query the device refuses)."""

    reasons: int | None = None
    others: tuple[int, ...] | None = None
    unread: str = ""


def reason_names(mask: int) -> tuple[str, ...]:
    return tuple(name for bit, name in REASON_NAMES.items() if mask & bit)


def other_processes(pids: tuple[int, ...], own_pid: int) -> tuple[int, ...]:
    """The compute processes on the device that are not this one. In a container NVML lists
    the host's pids, so our own is not among them: then one of the listed is ours (this
    process holds a context on the device), and the others are all but one of them."""
    if own_pid in pids:
        return tuple(p for p in pids if p != own_pid)
    return tuple(sorted(pids))[1:]


def block_exclusion(
    clock_mhz: float, reference_mhz: float, fraction: float, before: DeviceReading, after: DeviceReading
) -> str:
    """Why the block between the two readings is not a sample ("" when it is): the first that
    holds of sharing, thermal, power brake, HW slowdown, then the SM clock rule (the lower of the
    clock reads around the block under `fraction` of the reference)."""
    reasons = (before.reasons or 0) | (after.reasons or 0)
    if (before.others or ()) or (after.others or ()):
        return SHARED
    if reasons & (SW_THERMAL | HW_THERMAL):
        return THERMAL
    if reasons & HW_POWER_BRAKE:
        return POWER_BRAKE
    if reasons & HW_SLOWDOWN:
        return SLOWDOWN
    if reference_mhz > 0 and clock_mhz < fraction * reference_mhz:
        return low_clock(fraction)
    return ""


def rerun(asked: int, kept: int, measured: int) -> bool:
    """Whether to time one more block: until `asked` are kept, within twice `asked` in all (a
    run on a device that stays throttled or shared ends, and its blocks are counted)."""
    return kept < asked and measured < 2 * asked


def pause_s(excluded_in_a_row: int) -> float:
    """How long to wait before the next block after `excluded_in_a_row` excluded blocks."""
    if excluded_in_a_row <= 0:
        return 0.0
    return min(MAX_PAUSE_S, PAUSE_S * PAUSE_GROWTH ** max(0, excluded_in_a_row - 2))
