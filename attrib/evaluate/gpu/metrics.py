"""Static kernel metrics read from ptxas's verbose report and the binary: registers per thread,
spill stores and loads, stack frame (local memory), static shared memory, constant memory,
barriers and binary size. Pure parsing; nvrtc.py produces the text."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from attrib.recipe.model import STATIC_METRICS

# The metrics a recipe may bisect on (runner "cupy", metric = ...); all are per kernel entry.


@dataclass(frozen=True)
class KernelMetrics:
    function: str  # the symbol ptxas reported (mangled for templates)
    arch: str
    registers: int
    spill_stores: int  # bytes
    spill_loads: int  # bytes
    stack_frame: int  # bytes of local memory per thread
    shared_bytes: int  # static shared memory per block
    constant_bytes: int
    barriers: int
    binary_bytes: int  # size of the whole cubin the function is in

    def value(self, metric: str) -> int:
        return int(getattr(self, metric))

    def as_dict(self) -> dict[str, int | str]:
        return asdict(self)


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")
_BARRIERS = re.compile(r"used (\d+) barriers")


def parse_ptxas_log(log: str, binary_bytes: int) -> dict[str, KernelMetrics]:
    """symbol -> metrics, for every entry function ptxas reports. Raises ValueError when the
    log has no verbose report (ptxas was not asked for one, or the format changed)."""
    out: dict[str, KernelMetrics] = {}
    current: dict[str, int | str] | None = None

    def flush() -> None:
        if current is not None and "registers" in current:
            out[str(current["function"])] = KernelMetrics(
                function=str(current["function"]),
                arch=str(current["arch"]),
                registers=int(current["registers"]),
                spill_stores=int(current.get("spill_stores", 0)),
                spill_loads=int(current.get("spill_loads", 0)),
                stack_frame=int(current.get("stack_frame", 0)),
                shared_bytes=int(current.get("shared_bytes", 0)),
                constant_bytes=int(current.get("constant_bytes", 0)),
                barriers=int(current.get("barriers", 0)),
                binary_bytes=binary_bytes,
            )

    for line in log.splitlines():
        if m := _ENTRY.search(line):
            flush()
            current = {"function": m.group(1), "arch": m.group(2)}
            continue
        if current is None:
            continue
        if m := _PROPS.search(line):
            current["stack_frame"], current["spill_stores"], current["spill_loads"] = map(int, m.groups())
        if m := _USED.search(line):
            current["registers"] = int(m.group(1))
            if s := _SMEM.search(line):
                current["shared_bytes"] = int(s.group(1))
            if c := _CMEM.search(line):
                current["constant_bytes"] = int(c.group(1))
            if b := _BARRIERS.search(line):
                current["barriers"] = int(b.group(1))
    flush()
    if not out:
        raise ValueError("the compiler log has no ptxas verbose report")
    return out


def static_diff(before: KernelMetrics, after: KernelMetrics) -> dict[str, list[int]]:
    """Only the metrics that changed, as [before, after]: what a report shows beside the timing."""
    diff = {}
    for name in (*STATIC_METRICS, "constant_bytes", "barriers"):
        a, b = before.value(name), after.value(name)
        if a != b:
            diff[name] = [a, b]
    return diff
