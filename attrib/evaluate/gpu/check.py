"""`python -m attrib.evaluate.gpu.check`: every suite kernel on this GPU, checked and timed.

For each kernel: its reference check at the small size; then at the benchmark size the time
per launch cold (L2 flushed) and hot, achieved bandwidth or FLOP/s against the device's peak,
the coefficient of variation of the blocks, blocks excluded by the validity gate (by reason)
and the NVML clock-event reasons seen, and the ratio of attrib's hot time to
`cupyx.profiler.benchmark` on the same launch. Then the gate's own reads on this device
(`gate_check`): NVML answers the clock-event reasons and the compute processes, sees none but
this one at rest, and sees a second process that opens a CUDA context, whose blocks the gate
excludes as shared. `--readings` writes every block's reads in tests/fixtures/gpu_readings/'s
format. Prints a table and optionally writes JSON. Exit 1 if any kernel fails its check or the
gate cannot read what it must. Needs a GPU and CuPy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from attrib.core.gpu_validity import SHARED, DeviceReading, block_exclusion, reason_names
from attrib.evaluate.gpu.build import KernelSource, compile_kernel
from attrib.evaluate.gpu.device import CupyDevice
from attrib.evaluate.gpu.protocol import calibrate, measure_blocks
from attrib.suite import SUITE, SUITE_BENCHMARKS

BLOCKS = 10


class Recorded:
    """The device, with every SM clock read and NVML reading kept in order (for --readings)."""

    def __init__(self, dev: CupyDevice) -> None:
        self.dev, self.log = dev, []  # type: ignore[var-annotated]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.dev, name)

    def sm_clock_mhz(self) -> float:
        clock = self.dev.sm_clock_mhz()
        self.log.append(("clock", round(clock)))
        return clock

    def readings(self) -> DeviceReading:
        r = self.dev.readings()
        # the fixtures list the processes as NVML does, this one among them (own_pid)
        self.log.append(("nvml", {"reasons": r.reasons, "pids": [os.getpid(), *(r.others or ())]}))
        return r

    def episode(self) -> dict[str, Any]:
        """The reads as tests/fixtures/gpu_readings/ keeps them: per block, clock and NVML before
        and after."""
        clocks = [v for k, v in self.log if k == "clock"]
        nvml = [v for k, v in self.log if k == "nvml"]
        blocks = [{"clock_mhz": clocks[i:i + 2], "nvml": nvml[i:i + 2]} for i in range(0, min(len(clocks), len(nvml)) - 1, 2)]
        return {"device": self.dev.info().get("name"), "reference_mhz": self.dev.reference_clock_mhz(), "own_pid": os.getpid(),
                "blocks": blocks}  # fmt: skip


def gate_check(dev: CupyDevice) -> dict[str, Any]:
    """The gate's reads on a real device: answered, alone at rest, and a second CUDA process seen."""
    out: dict[str, Any] = {"gate": dev.info().get("gate")}
    rest = dev.readings()
    out["at_rest"] = {"reasons": reason_names(rest.reasons or 0), "raw": rest.reasons, "others": rest.others, "unread": rest.unread}
    ok = rest.reasons is not None and rest.others == ()
    code = "import cupy, time; cupy.zeros(1); print('up', flush=True); time.sleep(8)"
    other = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        up = other.stdout.readline() if other.stdout else ""
        time.sleep(1.0)  # its context is listed once it exists
        busy = dev.readings()
    finally:
        other.kill()
        other.wait()
    seen = block_exclusion(1.0, 0.0, 0.75, busy, busy)
    out["with_another"] = {"started": up.strip() == "up", "others": busy.others, "child_pid": other.pid, "excluded": seen}
    out["ok"] = ok and seen == SHARED
    return out


def _one(dev: CupyDevice, name: str, src: KernelSource, block_ms: float) -> dict[str, Any]:
    import cupyx.profiler

    kdef = src.definition
    shape = src.full_shape()
    check_shape = kdef.check_shape_for(shape)
    row: dict[str, Any] = {"benchmark": name, "shape": shape, "dtype": src.dtype}
    t0 = time.monotonic()
    compiled = compile_kernel(src, dev.arch, shape)
    row["compile_s"] = round(time.monotonic() - t0, 2)
    m = compiled.primary_metrics()
    if m is not None:
        row["registers"], row["spill_stores"] = m.registers, m.spill_stores
    funcs = dev.load(compiled)
    check_compiled = (
        compiled if src.entries(check_shape) == src.entries(shape) else compile_kernel(src, dev.arch, check_shape)
    )
    small = dev.setup(kdef, src.by_role(dev.load(check_compiled), check_shape), check_shape, src.dtype)
    row["check"] = dev.check(small) or "ok"
    del small
    problem = dev.setup(kdef, src.by_role(funcs, shape), shape, src.dtype)
    row["check_full_size"] = (
        dev.check(problem) if shape_is_checkable(kdef.name) else "skipped (reference too slow at this size)"
    )
    for mode in ("cold", "hot"):
        cal = calibrate(dev, problem, block_ms=block_ms, cold=mode == "cold")
        blocks = measure_blocks(dev, problem, cal.plan, BLOCKS, cold=mode == "cold", throttle_fraction=0.75)
        kept = [b.ms_per_launch for b in blocks if not b.excluded]
        med = statistics.median(kept) if kept else float("nan")
        row[mode] = {
            "ms": med,
            "cv_pct": 100 * statistics.stdev(kept) / statistics.mean(kept) if len(kept) > 1 else None,
            "launches_per_block": cal.plan.launches,
            "excluded": len(blocks) - len(kept),
            "excluded_by": dict(Counter(b.excluded for b in blocks if b.excluded)),
            "reasons_seen": sorted({n for b in blocks for n in reason_names(b.reasons or 0)}),
            "reasons_read": all(b.reasons is not None for b in blocks),
            "clock_mhz_min": min(b.clock_mhz for b in blocks),
            "note": cal.plan.note,
        }
    work = kdef.work(shape, src.dtype)
    info = dev.info()
    for mode in ("cold", "hot"):
        sec = row[mode]["ms"] / 1000
        if work.flops and kdef.name not in ("reduce",):
            peak = info["peak_tensor_tflops"] if work.tensor_cores else info["peak_fp32_tflops"]
            row[mode]["tflops"] = work.flops / sec / 1e12
            row[mode]["pct_of_peak"] = 100 * row[mode]["tflops"] / peak if peak else None
        else:
            row[mode]["gbps"] = work.bytes / sec / 1e9
            peak = info["peak_memory_gbps"]
            row[mode]["pct_of_peak"] = 100 * row[mode]["gbps"] / peak if peak else None
    # cupyx.profiler.benchmark times the same launch with its own events on the current stream
    with dev.stream:
        n = max(10, min(2000, int(200 / max(row["hot"]["ms"], 1e-3))))
        res = cupyx.profiler.benchmark(problem.launch, n_repeat=n, n_warmup=10)
    cupyx_ms = float(res.gpu_times.mean()) * 1000
    row["cupyx_ms"] = cupyx_ms
    row["attrib_hot_over_cupyx"] = row["hot"]["ms"] / cupyx_ms
    return row


def shape_is_checkable(kernel: str) -> bool:
    """Full-size NumPy references that finish in seconds (the GEMMs and attention do not)."""
    return kernel in ("copy", "reduce", "softmax", "layernorm")


def _fmt_row(r: dict[str, Any]) -> str:
    def rate(mode: str) -> str:
        m = r[mode]
        value = f"{m['tflops']:.1f} TFLOP/s" if "tflops" in m else f"{m['gbps']:.0f} GB/s"
        pct = f" ({m['pct_of_peak']:.0f} % of peak)" if m.get("pct_of_peak") is not None else ""
        return value + pct

    cv = lambda m: f"{m['cv_pct']:.2f} %" if m["cv_pct"] is not None else "n/a"  # noqa: E731
    return (
        f"{r['benchmark']:<17} check {r['check']:<4} | cold {r['cold']['ms']:.4f} ms, {rate('cold')}, cv {cv(r['cold'])}, "
        f"excl {r['cold']['excluded']} | hot {r['hot']['ms']:.4f} ms, {rate('hot')}, cv {cv(r['hot'])}, "
        f"excl {r['hot']['excluded']} | cupyx {r['cupyx_ms']:.4f} ms, attrib/cupyx {r['attrib_hot_over_cupyx']:.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--block-ms", type=float, default=10.0)
    ap.add_argument("--only", nargs="*", help="benchmark names (default: all)")
    ap.add_argument("--readings", type=Path, help="write every block's clock and NVML reads here")
    args = ap.parse_args(argv)
    dev: Any = Recorded(CupyDevice())
    info = dev.info()
    print("device:", json.dumps(info, default=str))
    print(f"SM clock now (probe): {dev.sm_clock_mhz():.0f} MHz")
    rows, failed = [], False
    for b in SUITE_BENCHMARKS:
        if args.only and b.name not in args.only:
            continue
        src = KernelSource(b.kernel, b.dtype, b.shape)
        assert b.kernel in SUITE
        try:
            r = _one(dev, b.name, src, args.block_ms)
        except Exception as exc:  # report and go on: one broken kernel must not hide the others
            print(f"{b.name:<17} ERROR {type(exc).__name__}: {exc}", flush=True)
            rows.append({"benchmark": b.name, "error": f"{type(exc).__name__}: {exc}"})
            failed = True
            continue
        failed |= r["check"] != "ok" or r["check_full_size"] not in (None, "skipped (reference too slow at this size)")
        rows.append(r)
        print(_fmt_row(r), flush=True)
        if r["check_full_size"] not in (None, "skipped (reference too slow at this size)"):
            print(f"    full-size check: {r['check_full_size']}")
    if args.readings:
        args.readings.write_text(json.dumps(dev.episode(), indent=1) + "\n")
    gate = gate_check(dev.dev)
    print("gate:", json.dumps(gate, default=str), flush=True)
    failed |= not gate["ok"]
    if args.json:
        args.json.write_text(json.dumps({"device": info, "kernels": rows, "gate": gate}, indent=2, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
