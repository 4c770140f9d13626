"""A strict stand-in for the GPU worker (attrib/evaluate/gpu/worker.py), for machines without a
GPU: it speaks the worker's protocol and refuses anything else attrib sends (one line on stderr,
exit status 3), and misbehaves as a faulting kernel would, by the name of the checkout it is
asked about:

    segv     the process dies by SIGSEGV (what a CUDA fault can do to a process)
    hang     it never answers (a kernel that never ends)
    garbage  it writes a line that is not JSON
    fault    it answers the run as failed with "fault": true, then exits (a CUDA error it caught)
    anything else: 'ms' in the checkout holds the time of one launch; samples are that, `reps` times

It serves every kernel its setup lists (a group's cupy members share one worker): for kernel
`k` (CupySpec.kernel), 'ms.k' in the checkout, when there is one, holds that kernel's time,
and a file 'segv.k' makes the process die by SIGSEGV when asked about that kernel there.

Every request it took is appended to $STANDIN_LOG as `PID OP CHECKOUT-NAME KERNEL`, so a test
can see which process served which commit and kernel, in which order."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from attrib.recipe import CupySpec

PROTOCOL = 2


def refuse(why: str) -> None:
    sys.stderr.write(f"gpu stand-in: protocol violation: {why}\n")
    sys.exit(3)


def read(line: str) -> dict[str, Any]:
    try:
        msg = json.loads(line)
    except ValueError:
        refuse(f"not JSON: {line[:80]!r}")
    if not isinstance(msg, dict):
        refuse(f"not an object: {line[:80]!r}")
    return msg  # type: ignore[no-any-return]


def answer(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def main() -> int:
    log = Path(os.environ["STANDIN_LOG"])
    setup = read(sys.stdin.readline())
    if set(setup) != {"setup", "cupy"} or setup["setup"] != PROTOCOL:
        refuse(f"expected {{setup: {PROTOCOL}, cupy}} first, got {sorted(setup)}")
    fields = {f.name for f in dataclasses.fields(CupySpec)}
    kernels = setup["cupy"]
    if not isinstance(kernels, list) or not kernels:
        refuse("cupy: not a list of kernels")
    for k in kernels:
        if not isinstance(k, dict) or set(k) != fields or not isinstance(k["kernel"], str):
            refuse("cupy: not CupySpec's fields")
    answer({"hello": PROTOCOL, "arch": "sm_90", "info": {"name": "stand-in", "runtime_version": "12.8"}})
    expected_id = 1
    for line in sys.stdin:
        req = read(line)
        op = req.get("op")
        want = {"run": {"id", "op", "kernel", "checkout", "reps"}, "artifact": {"id", "op", "kernel", "checkout"}}.get(op)  # type: ignore[arg-type]
        if want is None or set(req) != want:
            refuse(f"request {sorted(req)} with op {op!r}")
        if not isinstance(req["kernel"], int) or isinstance(req["kernel"], bool) or not 0 <= req["kernel"] < len(kernels):
            refuse(f"kernel {req['kernel']!r} of {len(kernels)}")
        kernel = kernels[req["kernel"]]["kernel"]
        if req["id"] != expected_id:
            refuse(f"id {req['id']!r}, expected {expected_id}")
        expected_id += 1
        checkout = Path(req["checkout"])
        if not checkout.is_absolute() or not checkout.is_dir():
            refuse(f"checkout {req['checkout']!r} is not an absolute directory")
        if op == "run" and (not isinstance(req["reps"], int) or isinstance(req["reps"], bool) or req["reps"] < 1):
            refuse(f"reps {req['reps']!r}")
        with log.open("a") as f:
            f.write(f"{os.getpid()} {op} {checkout.name} {kernel}\n")
        name = checkout.name
        if name == "segv" or (checkout / f"segv.{kernel}").exists():
            os.kill(os.getpid(), signal.SIGSEGV)
        if name == "hang":
            time.sleep(3600)
        if name == "garbage":
            sys.stdout.write("\x00\x01 this is not the protocol\n")
            sys.stdout.flush()
            continue
        if name == "fault":
            sys.stderr.write("CUDARuntimeError: cudaErrorIllegalAddress: an illegal memory access was encountered\n")
            answer({"id": req["id"], "samples": [], "excluded": [], "error": "CUDARuntimeError: cudaErrorIllegalAddress",
                    "duration_s": 0.01, "sample_s": None, "fault": True})  # fmt: skip
            return 0
        ms = (checkout / (f"ms.{kernel}" if (checkout / f"ms.{kernel}").exists() else "ms")).read_text()
        if op == "artifact":
            answer({"id": req["id"], "digest": hashlib.sha256(ms.encode()).hexdigest(), "fault": False})
        else:
            answer({"id": req["id"], "samples": [float(ms)] * req["reps"], "excluded": [], "error": "",
                    "duration_s": 0.01, "sample_s": float(ms) * req["reps"] / 1000, "fault": False})  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
