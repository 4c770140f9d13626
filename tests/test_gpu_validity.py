"""The GPU validity gate (core/gpu_validity.py) on recorded readings (tests/fixtures/gpu_readings/),
and the timing protocol that applies it (evaluate/gpu/protocol.measure_blocks) over a fake
device replaying them: which blocks are samples, why the others are not, how many are timed
again and how long the pauses are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_gpu_protocol import FakeDevice, FakeProblem

from attrib.core.gpu_validity import (
    HW_POWER_BRAKE,
    HW_SLOWDOWN,
    SW_POWER_CAP,
    DeviceReading,
    block_exclusion,
    other_processes,
    pause_s,
    reason_names,
    rerun,
)
from attrib.evaluate.gpu.protocol import BlockPlan, measure_blocks

READINGS = Path(__file__).parent / "fixtures" / "gpu_readings"
EPISODES = sorted(p.name for p in READINGS.glob("*.json"))


def _episode(name: str) -> dict[str, Any]:
    return json.loads((READINGS / name).read_text())


def _reading(raw: dict[str, Any], own_pid: int) -> DeviceReading:
    return DeviceReading(raw["reasons"], other_processes(tuple(raw["pids"]), own_pid))


def _replay(doc: dict[str, Any]) -> FakeDevice:
    """A fake device that serves the episode's clock reads and NVML readings in order."""
    dev = FakeDevice(steady_mhz=float(doc["reference_mhz"]))
    dev.reference_clock_mhz = lambda: float(doc["reference_mhz"])  # type: ignore[method-assign]
    for b in doc["blocks"]:
        dev.clocks += [float(c) for c in b["clock_mhz"]]
        dev.nvml += [_reading(r, doc["own_pid"]) for r in b["nvml"]]
    return dev


@pytest.mark.parametrize("name", EPISODES)
def test_each_recorded_block_is_kept_or_excluded_for_its_reason(name: str) -> None:
    doc = _episode(name)
    got = []
    for b in doc["blocks"]:
        before, after = (_reading(r, doc["own_pid"]) for r in b["nvml"])
        got.append(block_exclusion(min(b["clock_mhz"]), doc["reference_mhz"], 0.75, before, after))
    assert got == doc["expected"]


def test_a_power_capped_gpu_is_measured_not_excluded() -> None:
    """An H100 at its power cap in steady state: the cap is recorded, every block kept (nvbench
    would keep them too: the clock stays above 75 %)."""
    doc = _episode("h100-power-cap.json")
    blocks = measure_blocks(_replay(doc), FakeProblem("d", {}), BlockPlan(4, 0), 10, cold=False, throttle_fraction=0.75,
                            sleep=lambda s: None)  # fmt: skip
    assert [b.excluded for b in blocks] == [""] * 10
    assert [b.reasons for b in blocks][:3] == [0, SW_POWER_CAP, SW_POWER_CAP]
    assert reason_names(blocks[2].reasons or 0) == ("power cap",)


def test_thermal_blocks_above_nvbenchs_clock_threshold_are_still_excluded_and_rerun_within_a_bound() -> None:
    doc = _episode("h100-thermal.json")
    clock_rule_alone = [min(b["clock_mhz"]) < 0.75 * doc["reference_mhz"] for b in doc["blocks"]]
    assert not any(clock_rule_alone)  # nvbench's 75 % rule keeps every one of these blocks
    paused: list[float] = []
    blocks = measure_blocks(_replay(doc), FakeProblem("d", {}), BlockPlan(4, 0), 4, cold=False, throttle_fraction=0.75,
                            sleep=paused.append)  # fmt: skip
    # 4 asked; the thermal episode excludes 6 in a row: the bound (twice the asked) ends the run at 8
    assert len(blocks) == 8 and sum(1 for b in blocks if not b.excluded) == 2
    assert [b.excluded for b in blocks].count("thermal slowdown") == 6
    assert paused == pytest.approx([0.05, 0.05, 0.075, 0.1125, 0.16875])  # none after the last


def test_blocks_that_shared_the_device_are_timed_again_until_the_asked_are_kept() -> None:
    doc = _episode("h200-shared.json")
    blocks = measure_blocks(_replay(doc), FakeProblem("d", {}), BlockPlan(4, 0), 4, cold=False, throttle_fraction=0.75,
                            sleep=lambda s: None)  # fmt: skip
    assert [b.excluded for b in blocks] == doc["expected"]
    assert blocks[3].others == (31337,)
    assert sum(1 for b in blocks if not b.excluded) == 4


def test_a_power_brake_is_named_before_the_hw_slowdown_it_comes_with() -> None:
    brake = DeviceReading(HW_POWER_BRAKE | HW_SLOWDOWN, ())
    assert block_exclusion(1980, 1980, 0.75, DeviceReading(0, ()), brake) == "power brake"
    assert reason_names(HW_POWER_BRAKE | HW_SLOWDOWN) == ("HW slowdown", "power brake")


def test_nothing_read_leaves_the_clock_rule_alone() -> None:
    unread = DeviceReading(unread="nvidia-ml-py not installed")
    assert block_exclusion(1980, 1980, 0.75, unread, unread) == ""
    assert block_exclusion(1400, 1980, 0.75, unread, unread) == "SM clock below 75% of the reference"
    assert block_exclusion(100, 0, 0.75, unread, unread) == ""  # no reference clock: nothing is low


def test_our_own_process_is_not_another_even_under_a_containers_pids() -> None:
    assert other_processes((4242,), 4242) == () and other_processes((4242, 99), 4242) == (99,)
    assert other_processes((771203,), 4242) == ()  # a container: the one listed is ours
    assert other_processes((771877, 771203), 4242) == (771877,)


def test_the_rerun_bound_and_the_pauses() -> None:
    assert rerun(4, 3, 7) and not rerun(4, 4, 5) and not rerun(4, 1, 8)
    assert [pause_s(n) for n in range(6)] == pytest.approx([0.0, 0.05, 0.05, 0.075, 0.1125, 0.16875])
    assert pause_s(50) == 0.5
