"""On a real GPU (skipped with the reason elsewhere): the validity gate's reads. NVML answers
the clock-event reasons and the compute processes for CUDA's device 0 (found by its PCI bus id),
each timed block carries them, and a second process with a CUDA context is seen and its blocks
excluded as shared. Not yet run on a device: no GPU was lent to the session that wrote it."""

from __future__ import annotations

import pytest

from attrib.core.gpu_validity import SHARED

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def device():
    pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed (pip install 'attrib[cuda12]')")
    from attrib.evaluate.gpu.device import CupyDevice

    return CupyDevice()


def test_nvml_answers_the_reasons_and_the_processes(device) -> None:
    r = device.readings()
    assert r.unread == "" and r.reasons is not None and r.others is not None
    assert 0 <= r.reasons < 1 << 16
    assert device.info()["gate"] == "SM clock, NVML clock-event reasons, compute processes"


def test_each_block_carries_the_reads(device) -> None:
    from attrib.evaluate.gpu.build import KernelSource, compile_kernel
    from attrib.evaluate.gpu.protocol import calibrate, measure_blocks
    from attrib.suite import SUITE_BENCHMARKS

    bench = next(b for b in SUITE_BENCHMARKS if b.kernel == "copy")
    src = KernelSource(bench.kernel, bench.dtype, bench.shape)
    shape = src.full_shape()
    problem = device.setup(src.definition, src.by_role(device.load(compile_kernel(src, device.arch, shape)), shape), shape, src.dtype)
    cal = calibrate(device, problem, block_ms=10.0, cold=False)
    blocks = measure_blocks(device, problem, cal.plan, 5, cold=False, throttle_fraction=0.75)
    assert len(blocks) >= 5 and all(b.reasons is not None for b in blocks)


def test_a_second_cuda_process_is_seen_and_excluded(device) -> None:
    from attrib.evaluate.gpu.check import gate_check

    out = gate_check(device)
    assert out["with_another"]["started"], out
    assert out["with_another"]["excluded"] == SHARED, out
