"""The cupy runner's planning without a GPU: block sizing, the hold, throttle exclusion, call
order, one module per commit loaded side by side, and the correctness gate. The device is a
strict fake of protocol.GpuDevice: it refuses calls the protocol does not allow."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from attrib.core.gpu_validity import DeviceReading
from attrib.core.model import Direction
from attrib.evaluate.gpu.protocol import (
    EVENT_RESOLUTION_MS,
    HOLD_MARGIN,
    MAX_HOLD_MS,
    MIN_EVENT_SPAN,
    BlockPlan,
    measure_blocks,
    plan_block,
)
from attrib.evaluate.gpu.session import KernelSession
from attrib.evaluate.runners.cupy import CupyRunner
from attrib.recipe import BenchmarkSpec, CupySpec

# --- plan_block ---------------------------------------------------------------------------


def test_hot_blocks_of_a_tiny_kernel_span_enough_event_resolutions() -> None:
    plan = plan_block(0.002, 0.0, block_ms=0.01, cold=False)  # 2 us kernel, block asked 10 us
    assert plan.launches * 0.002 >= MIN_EVENT_SPAN * EVENT_RESOLUTION_MS
    assert plan.launches == 50


def test_block_is_the_asked_duration_in_launches() -> None:
    assert plan_block(0.5, 0.0, block_ms=10, cold=False).launches == 20
    assert plan_block(0.3, 0.0, block_ms=10, cold=True).launches == 34  # rounded up
    assert plan_block(25.0, 0.0, block_ms=10, cold=True).launches == 1  # a long kernel is a block alone


def test_hold_covers_twice_the_host_enqueue_time_of_the_block() -> None:
    plan = plan_block(0.5, 0.02, block_ms=10, cold=False)
    assert plan.hold_ns == int(HOLD_MARGIN * 0.02 * 20 * 1e6)
    assert plan.note == ""


def test_block_shrinks_when_the_hold_would_exceed_its_cap_and_says_why() -> None:
    plan = plan_block(0.001, 0.05, block_ms=10, cold=False)
    assert plan.launches * HOLD_MARGIN * 0.05 <= MAX_HOLD_MS
    assert plan.hold_ns <= MAX_HOLD_MS * 1e6
    assert "block cut" in plan.note


def test_cold_timing_of_a_tiny_kernel_says_it_is_near_event_resolution() -> None:
    plan = plan_block(0.01, 0.0, block_ms=1, cold=True)
    assert "event resolution" in plan.note


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_a_nonsense_launch_time_is_refused(bad: float) -> None:
    with pytest.raises(ValueError):
        plan_block(bad, 0.0, block_ms=10, cold=False)


# --- a strict fake device -------------------------------------------------------------------


@dataclass
class FakeProblem:
    digest: str
    shape: dict[str, int]


@dataclass
class FakeDevice:
    """ms per launch by kernel digest; SM clock reads served from a script, then `steady_mhz`;
    NVML readings from a script, then nothing read (as without nvidia-ml-py)."""

    ms_by_digest: dict[str, float] = field(default_factory=dict)
    default_ms: float = 0.5
    clocks: list[float] = field(default_factory=list)
    steady_mhz: float = 1980.0
    wrong_digests: set[str] = field(default_factory=set)
    arch: str = "sm_90"
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    loaded: dict[str, str] = field(default_factory=dict)  # function handle -> digest
    nvml: list[DeviceReading] = field(default_factory=list)

    def info(self) -> dict[str, Any]:
        return {"name": "fake"}

    def load(self, compiled: Any) -> dict[str, Any]:
        self.calls.append(("load", compiled.digest))
        assert compiled.arch == self.arch, "kernels must be compiled for the device's architecture"
        handles = {}
        for expr in compiled.symbols:
            handle = f"{compiled.digest}:{expr}"
            self.loaded[handle] = compiled.digest
            handles[expr] = handle
        return handles

    def setup(self, kdef: Any, funcs: dict[str, Any], shape: dict[str, int], dtype: str, seed: int = 0) -> FakeProblem:
        assert set(funcs) == set(kdef.entries(shape, dtype)), "setup gets functions by the suite's entry names"
        digests = {self.loaded[h] for h in funcs.values()}
        assert len(digests) == 1, "one problem uses one module"
        self.calls.append(("setup", shape))
        return FakeProblem(digests.pop(), dict(shape))

    def check(self, problem: FakeProblem) -> str | None:
        self.calls.append(("check", problem.digest))
        return "max error 3.1e-01 of the output's scale exceeds 1e-03" if problem.digest in self.wrong_digests else None

    def reference_clock_mhz(self) -> float:
        return 1980.0

    def sm_clock_mhz(self) -> float:
        self.calls.append(("clock",))
        return self.clocks.pop(0) if self.clocks else self.steady_mhz

    def readings(self) -> DeviceReading:
        self.calls.append(("nvml",))
        return self.nvml.pop(0) if self.nvml else DeviceReading(unread="nvidia-ml-py not installed")

    def run(self, problem: FakeProblem, launches: int) -> None:
        assert launches > 0
        self.calls.append(("run", problem.digest, launches))

    def enqueue_ms(self, problem: FakeProblem, launches: int) -> float:
        self.calls.append(("enqueue", problem.digest, launches))
        return 0.01 * launches

    def time_block(self, problem: FakeProblem, launches: int, cold: bool, hold_ns: int) -> float:
        assert launches > 0 and hold_ns >= 0
        self.calls.append(("time", problem.digest, launches, cold, hold_ns))
        return launches * self.ms_by_digest.get(problem.digest, self.default_ms)


def test_measure_blocks_reads_the_clock_around_each_block_and_times_throttled_ones_again() -> None:
    dev = FakeDevice(clocks=[1980, 1975, 1200, 1980, 1980, 1400])  # block 2 starts slow, block 3 ends slow
    problem = FakeProblem("d", {})
    paused: list[float] = []
    blocks = measure_blocks(dev, problem, BlockPlan(4, 1000), 3, cold=True, throttle_fraction=0.75, sleep=paused.append)
    assert [c[0] for c in dev.calls] == ["clock", "nvml", "time", "clock", "nvml"] * 5
    assert all(c[2:] == (4, True, 1000) for c in dev.calls if c[0] == "time")
    # two throttled blocks, each timed again: three kept, as asked
    assert [b.excluded == "" for b in blocks] == [True, False, False, True, True]
    assert blocks[1].clock_mhz == 1200 and blocks[1].excluded == "SM clock below 75% of the reference"
    assert paused == [0.05, 0.05]  # nvbench's pause after an excluded block
    assert blocks[0].ms_per_launch == pytest.approx(0.5) and blocks[0].reasons is None


# --- the runner over the fake ---------------------------------------------------------------


def _tree(root: Path, pad: int) -> Path:
    (root / "include").mkdir(parents=True)
    (root / "include" / "tile.cuh").write_text(f"#define SMEM_PAD {pad}\n")
    return root


def _spec(reps: int = 5, mode: str = "cold") -> BenchmarkSpec:
    cupy = CupySpec(
        kernel="gemm_mma",
        dtype="bf16",
        shape={"M": 256, "N": 256, "K": 256},
        defines={"ATTRIB_TILE_HEADER": '"tile.cuh"'},
        include_dirs=("include",),
        mode=mode,
    )
    return BenchmarkSpec("gemm", "cupy", (), "ms", Direction.LOWER, reps=reps, cupy=cupy)


def _digest_of(runner: CupyRunner, checkout: Path) -> str:
    assert isinstance(runner.kernels, KernelSession)
    compiled = runner.kernels.prepared[checkout.resolve()].compiled
    assert compiled is not None
    return compiled.digest


def test_each_commit_is_compiled_checked_and_calibrated_once_then_runs_interleave(tmp_path: Path) -> None:
    dev = FakeDevice()
    runner = CupyRunner(_spec(), device_factory=lambda: dev)
    good, bad = _tree(tmp_path / "good", 8), _tree(tmp_path / "bad", 0)
    r1 = runner.run(good)
    r2 = runner.run(bad)
    r3 = runner.run(good)
    assert r1.ok and r2.ok and r3.ok and len(r1.samples) == 5
    loads = [c for c in dev.calls if c[0] == "load"]
    assert len(loads) == 2  # one module per commit: the check and the timing share its code
    checks = [c for c in dev.calls if c[0] == "check"]
    assert len(checks) == 2 and checks[0][1] != checks[1][1]  # each commit's own binary is checked
    setups = [c[1] for c in dev.calls if c[0] == "setup"]
    assert setups[0] == {"M": 200, "N": 136, "K": 96} and setups[1] == {"M": 256, "N": 256, "K": 256}
    timed = [c[1] for c in dev.calls if c[0] == "time" and c[4] > 0]  # measured blocks carry a hold
    d_good, d_bad = _digest_of(runner, good), _digest_of(runner, bad)
    assert d_good != d_bad
    assert timed == [d_good] * 5 + [d_bad] * 5 + [d_good] * 5  # the third run reuses the loaded module


def test_samples_are_ms_per_launch_of_that_commits_module(tmp_path: Path) -> None:
    dev = FakeDevice()
    runner = CupyRunner(_spec(reps=3), device_factory=lambda: dev)
    good, bad = _tree(tmp_path / "good", 8), _tree(tmp_path / "bad", 0)
    runner.run(good), runner.run(bad)
    dev.ms_by_digest = {_digest_of(runner, good): 0.40, _digest_of(runner, bad): 0.52}
    assert runner.run(good).samples == pytest.approx((0.40,) * 3)
    assert runner.run(bad).samples == pytest.approx((0.52,) * 3)


def test_a_fast_wrong_kernel_is_a_failed_run_every_time_and_is_never_timed(tmp_path: Path) -> None:
    dev = FakeDevice()
    runner = CupyRunner(_spec(), device_factory=lambda: dev)
    bad = _tree(tmp_path / "bad", 0)
    from attrib.evaluate.gpu.build import compile_kernel, kernel_source

    check_instance = compile_kernel(kernel_source(runner.cupy, bad), "sm_90", {"M": 200, "N": 136, "K": 96})
    dev.wrong_digests = {check_instance.digest}
    first, second = runner.run(bad), runner.run(bad)
    assert not first.ok and first.error == second.error
    assert "differs from the NumPy reference at M=200 N=136 K=96" in first.error
    assert not [c for c in dev.calls if c[0] in ("time", "run")]
    assert len([c for c in dev.calls if c[0] == "check"]) == 1


def test_throttled_blocks_are_excluded_counted_and_timed_again_and_all_throttled_is_a_failed_run(tmp_path: Path) -> None:
    dev = FakeDevice(steady_mhz=900.0)
    runner = CupyRunner(_spec(reps=4), device_factory=lambda: dev)
    res = runner.run(_tree(tmp_path / "t", 8))
    # timed again up to twice the blocks asked, then the run ends with every block counted
    assert not res.ok and len(res.excluded) == 8 and "all 8 blocks excluded" in res.error
    dev.steady_mhz = 1980.0
    dev.clocks = [1980, 1000]  # the first block of the next run ends throttled
    res = runner.run(_tree(tmp_path / "t2", 8))
    assert res.ok and len(res.samples) == 4 and res.excluded == ("SM clock below 75% of the reference",)


def test_hot_mode_times_without_flushes(tmp_path: Path) -> None:
    dev = FakeDevice()
    runner = CupyRunner(_spec(reps=2, mode="hot"), device_factory=lambda: dev)
    assert runner.run(_tree(tmp_path / "h", 8)).ok
    assert all(c[3] is False for c in dev.calls if c[0] == "time")


def test_digest_is_the_sha256_of_the_binary(tmp_path: Path) -> None:
    dev = FakeDevice()
    runner = CupyRunner(_spec(reps=1), device_factory=lambda: dev)
    t = _tree(tmp_path / "x", 8)
    runner.run(t)
    assert isinstance(runner.kernels, KernelSession)
    compiled = runner.kernels.prepared[t.resolve()].compiled
    assert compiled is not None and compiled.digest == hashlib.sha256(compiled.binary).hexdigest()
