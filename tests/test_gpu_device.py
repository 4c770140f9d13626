"""On a real GPU (skipped with the reason elsewhere): every suite kernel matches its NumPy
reference, a wrong kernel is a failed run, the clock probe reads a plausible clock, and two
commits' modules are timed side by side in one process."""

from __future__ import annotations

from pathlib import Path

import pytest

from attrib.core.model import Direction
from attrib.evaluate.gpu.build import KernelSource, compile_kernel
from attrib.evaluate.runners.cupy import CupyRunner
from attrib.recipe import BenchmarkSpec, CupySpec
from attrib.suite import KERNELS_DIR, SUITE_BENCHMARKS

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def device():
    from attrib.evaluate.gpu.device import CupyDevice

    return CupyDevice()


@pytest.mark.parametrize("bench", SUITE_BENCHMARKS, ids=[b.name for b in SUITE_BENCHMARKS])
def test_every_suite_kernel_matches_its_numpy_reference_on_the_device(device, bench) -> None:
    src = KernelSource(bench.kernel, bench.dtype, bench.shape)
    shape = src.definition.check_shape_for(src.full_shape())
    compiled = compile_kernel(src, device.arch, shape)
    problem = device.setup(src.definition, src.by_role(device.load(compiled), shape), shape, src.dtype)
    assert device.check(problem) is None


def test_sm_clock_probe_reads_a_plausible_clock(device) -> None:
    mhz = device.sm_clock_mhz()
    assert 100 < mhz < 5000
    assert device.reference_clock_mhz() > 100


def _copy_tree(root: Path, broken: bool) -> Path:
    root.mkdir(parents=True)
    text = (KERNELS_DIR / "copy.cu").read_text()
    if broken:  # fast and wrong: the last 16 bytes are never copied
        text = text.replace("for (; i < n4; i += stride)", "for (; i < n4 - 1; i += stride)")
        assert "n4 - 1" in text
    (root / "copy.cu").write_text(text)
    return root


def _copy_spec(reps: int = 4) -> BenchmarkSpec:
    cupy = CupySpec(kernel="copy", dtype="fp32", shape={"N": 1 << 24}, source="copy.cu", mode="hot", block_ms=2)
    return BenchmarkSpec("copy", "cupy", (), "ms", Direction.LOWER, reps=reps, cupy=cupy)


def test_a_fast_wrong_kernel_is_a_failed_run(tmp_path: Path) -> None:
    runner = CupyRunner(_copy_spec())
    res = runner.run(_copy_tree(tmp_path / "bad", broken=True))
    assert not res.ok and "differs from the NumPy reference" in res.error


def test_two_commits_modules_are_timed_side_by_side(tmp_path: Path) -> None:
    runner = CupyRunner(_copy_spec())
    a, b = _copy_tree(tmp_path / "a", False), _copy_tree(tmp_path / "b", False)
    ra, rb, ra2 = runner.run(a), runner.run(b), runner.run(a)
    assert ra.ok and rb.ok and ra2.ok
    assert len(ra.samples) + len(ra.excluded) == 4
    assert all(s > 0 for s in ra.samples + rb.samples)
    env = runner.gpu_environment()
    assert env["name"] and env["cuda"]
