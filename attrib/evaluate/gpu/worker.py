"""The GPU worker: the process that holds the CUDA context, every commit's modules and their
problems, and times them (`python -m attrib.evaluate.gpu.worker`). The cupy runner talks to it
through gpu/isolated.py; a kernel that faults kills this process, not attrib's.

The protocol, version PROTOCOL: one JSON object per line each way, on the worker's stdin and
stdout (the worker moves its own stdout to stderr first, so nothing CuPy prints can break a
line). attrib writes first:

    {"setup": PROTOCOL, "cupy": [{CupySpec's fields}, ...]}
        -> {"hello": PROTOCOL, "arch": "sm_90", "info": {...}}     or {"hello": PROTOCOL, "error": "why"}
    {"id": N, "op": "run", "kernel": K, "checkout": PATH, "reps": R}
        -> {"id": N, "samples": [ms...], "excluded": [why...], "error": "", "duration_s": S, "sample_s": S|null, "fault": false}
    {"id": N, "op": "artifact", "kernel": K, "checkout": PATH}
        -> {"id": N, "digest": HEX|null, "fault": false}

The setup lists the kernels this worker serves (one, or every cupy member of a group: they
share the process, its CUDA context and the device); K is a kernel's index in that list. N
counts from 1 by one. An answer with `"fault": true` is the last: the worker ends after it (a
CUDA error may have left the context unusable). End of input ends the worker.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from attrib.errors import AttribError
from attrib.recipe import CupySpec

PROTOCOL = 2  # 2: several kernels per worker (1 had one)
TUPLE_FIELDS = ("include_dirs", "archs")


def spec_json(cupy: CupySpec) -> dict[str, Any]:
    return dataclasses.asdict(cupy)


def spec_from_json(data: dict[str, Any]) -> CupySpec:
    names = {f.name for f in dataclasses.fields(CupySpec)}
    if set(data) != names:
        raise ValueError(f"cupy: expected the fields {sorted(names)}, got {sorted(data)}")
    values: dict[str, Any] = {k: tuple(v) if k in TUPLE_FIELDS else v for k, v in data.items()}
    return CupySpec(**values)


def _answer(out: IO[str], message: dict[str, Any]) -> None:
    out.write(json.dumps(message, allow_nan=False) + "\n")
    out.flush()


def serve(lines: IO[str], out: IO[str], device_factory: Callable[[], Any]) -> int:
    from attrib.evaluate.gpu.session import KernelSession

    setup = json.loads(lines.readline() or "null")
    if not isinstance(setup, dict) or setup.get("setup") != PROTOCOL:
        sys.stderr.write(f"attrib gpu worker: expected a setup of protocol {PROTOCOL} first\n")
        return 2
    device = _one_device(device_factory)
    sessions = [KernelSession(spec_from_json(spec), device) for spec in setup["cupy"]]
    try:
        _answer(out, {"hello": PROTOCOL, "arch": sessions[0].device.arch, "info": sessions[0].info()})
    except AttribError as exc:  # no usable GPU here
        _answer(out, {"hello": PROTOCOL, "error": str(exc)})
        return 1
    for line in lines:
        req = json.loads(line)
        session = sessions[int(req["kernel"])]
        checkout = Path(req["checkout"])
        if req["op"] == "run":
            res, fault = session.run(checkout, int(req["reps"]))
            _answer(out, {"id": req["id"], "samples": list(res.samples), "excluded": list(res.excluded), "error": res.error,
                          "duration_s": res.duration_s, "sample_s": res.sample_s, "fault": fault})  # fmt: skip
        else:
            digest = session.artifact(checkout)
            fault = session.prepared[checkout.resolve()].fault
            _answer(out, {"id": req["id"], "digest": digest, "fault": fault})
        if fault:
            return 0
    return 0


def _one_device(factory: Callable[[], Any]) -> Callable[[], Any]:
    """The device, opened once for every kernel's session (one CUDA context per worker)."""
    opened: list[Any] = []

    def device() -> Any:
        if not opened:
            opened.append(factory())
        return opened[0]

    return device


def main() -> int:
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever else writes to stdout (CuPy, NVRTC) lands in stderr, not in the protocol
    from attrib.evaluate.gpu.device import CupyDevice

    return serve(sys.stdin, proto, CupyDevice)


if __name__ == "__main__":
    sys.exit(main())
