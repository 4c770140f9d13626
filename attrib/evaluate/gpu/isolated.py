"""The cupy runner's side of the GPU worker (gpu/worker.py has the protocol): every commit's
kernels run in one worker process, which can die alone.

A kernel that faults (an illegal address) leaves its CUDA context unusable. In the worker, that
ends the worker: attrib reads its death (or a `fault` answer, or no answer within the
benchmark's `timeout_s`, or an answer outside the protocol) as one failed run of the commit it
was asked about, remembers that commit as failed (it is not run again: its kernels would fault
again), kills what is left of the worker and starts a new one for the next request. The other
commits are prepared again in the new worker on their next run, so the bisection goes on.

The worker runs under the local executor's guard (its own process group, killed when attrib
dies); it is killed when the runner is dropped or closed.
"""

from __future__ import annotations

import json
import math
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from attrib.errors import GpuUnavailable
from attrib.evaluate.executors.local import start_guarded
from attrib.evaluate.gpu.worker import PROTOCOL, spec_json
from attrib.evaluate.runners import RunResult
from attrib.recipe import CupySpec

MAX_LINE = 1 << 20  # an answer longer than this is not the protocol
HELLO_TIMEOUT_S = 300.0  # opening the device (CuPy's import, the context, NVML) on a busy machine
WORKER_LIFE_S = 7 * 86400.0  # the guard's own deadline for a worker: it lives as long as its bisection
RUN_FIELDS = {"id", "samples", "excluded", "error", "duration_s", "sample_s", "fault"}
ARTIFACT_FIELDS = {"id", "digest", "fault"}
DEFAULT_ARGV = (sys.executable, "-m", "attrib.evaluate.gpu.worker")


class _Live:
    """The running worker, if any: killed by stop(), by close, and when the runner is dropped."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.lifeline: Any = None
        self.stderr: IO[bytes] | None = None
        self.buffer = b""

    def stop(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the guard and the worker it leads
            except ProcessLookupError:
                pass
            self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    pipe.close()
        if self.lifeline is not None:
            self.lifeline.close()
        if self.stderr is not None:
            self.stderr.close()
        self.proc, self.lifeline, self.stderr, self.buffer = None, None, None, b""

    def last_words(self) -> str:
        """The last line the worker wrote to stderr (CUDA's own message, when it has one)."""
        if self.stderr is None:
            return ""
        self.stderr.seek(0)
        lines = [ln.strip() for ln in self.stderr.read()[-4096:].decode(errors="replace").splitlines() if ln.strip()]
        return lines[-1][:300] if lines else ""


class KernelWorker:
    """A worker for one kernel, or for several (`cupy` a sequence: a group's cupy members share
    one process and its CUDA context; `kernel` in a request is the index). A kernel that ends
    the worker is that kernel's failed run of that commit; the other kernels go on in a new one."""

    def __init__(self, cupy: CupySpec | Sequence[CupySpec], timeout_s: float, argv: Sequence[str] | None = None) -> None:
        self.kernels = (cupy,) if isinstance(cupy, CupySpec) else tuple(cupy)
        self.timeout_s = timeout_s
        self.argv = list(argv or DEFAULT_ARGV)
        self.failed: dict[tuple[int, Path], str] = {}  # (kernel, commit) that lost a worker: its failure, remembered
        self.info: dict[str, Any] | None = None  # the first worker's device, for the result
        self.started = 0  # workers started: more than one means some commit's kernels faulted
        self._id = 0
        self._live = _Live()
        self._finalizer = weakref.finalize(self, self._live.stop)

    def close(self) -> None:
        self._live.stop()

    def run(self, checkout: Path, reps: int, kernel: int = 0, timeout_s: float | None = None) -> RunResult:
        start = time.monotonic()
        key = checkout.resolve()
        request = {"op": "run", "kernel": kernel, "checkout": str(key), "reps": reps}
        reply = self._ask(request, (kernel, key), _run_problem, timeout_s)
        if isinstance(reply, str):
            return RunResult((), reply, time.monotonic() - start)
        return RunResult(tuple(reply["samples"]), reply["error"], reply["duration_s"], tuple(reply["excluded"]), sample_s=reply["sample_s"])

    def artifact(self, checkout: Path, kernel: int = 0, timeout_s: float | None = None) -> str | None:
        key = checkout.resolve()
        reply = self._ask({"op": "artifact", "kernel": kernel, "checkout": str(key)}, (kernel, key), _artifact_problem, timeout_s)
        return None if isinstance(reply, str) else reply["digest"]

    def _ask(
        self, request: dict[str, Any], key: tuple[int, Path], problem: Callable[[Any, int], str], timeout_s: float | None
    ) -> dict[str, Any] | str:
        """The worker's answer about one kernel at the commit of `key`, or why there is none:
        then that kernel's commit is remembered as failed and the worker is gone (a new one
        serves the next request). `timeout_s`: the asking member's own (default the worker's)."""
        if key in self.failed:
            return self.failed[key]
        if self._live.proc is None:
            self._start()
        self._id += 1
        line = self._exchange({"id": self._id, **request}, self.timeout_s if timeout_s is None else timeout_s)
        why = line if isinstance(line, str) else problem(line, self._id)
        if not why and line["fault"]:  # type: ignore[index]
            why = str(line.get("error") or "a CUDA error")  # type: ignore[union-attr]
        if why:
            why = f"{why}; the GPU worker was ended and the other commits go on in a new one"
            self._live.stop()
            self.failed[key] = why
            return why
        assert isinstance(line, dict)
        return line

    def _start(self) -> None:
        live = self._live
        live.stderr = tempfile.TemporaryFile()
        try:
            live.proc, live.lifeline = start_guarded(
                self.argv, Path.cwd(), os.environ, WORKER_LIFE_S, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=live.stderr
            )
        except OSError as exc:
            live.stop()
            raise GpuUnavailable(f"the GPU worker {self.argv[-1]} cannot start: {exc.strerror}") from None
        self.started += 1
        self._id = 0  # each worker counts its requests from 1
        hello = self._exchange({"setup": PROTOCOL, "cupy": [spec_json(k) for k in self.kernels]}, HELLO_TIMEOUT_S)
        why = hello if isinstance(hello, str) else _hello_problem(hello)
        if why:
            live.stop()
            raise GpuUnavailable(f"the GPU worker did not start: {why.removeprefix('the GPU worker ')}")
        assert isinstance(hello, dict)
        if self.info is None:
            self.info = hello["info"]

    def _exchange(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any] | str:
        """Send one line and read one; or why not (the worker died, hung or wrote garbage)."""
        live = self._live
        assert live.proc is not None and live.proc.stdin is not None and live.proc.stdout is not None
        try:
            live.proc.stdin.write(json.dumps(message).encode() + b"\n")
            live.proc.stdin.flush()
        except OSError:
            return self._death()
        fd, end = live.proc.stdout.fileno(), time.monotonic() + timeout_s
        while b"\n" not in live.buffer:
            if len(live.buffer) > MAX_LINE:
                return f"the GPU worker answered outside its protocol (a line of more than {MAX_LINE} bytes)"
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return f"the GPU worker did not answer within {timeout_s:g} s (a hung kernel?)"
            chunk = os.read(fd, 65536)
            if not chunk:
                return self._death()
            live.buffer += chunk
        line, _, live.buffer = live.buffer.partition(b"\n")
        try:
            answer = json.loads(line, parse_constant=_refuse)
        except ValueError:
            return f"the GPU worker answered outside its protocol (not JSON: {line[:80]!r})"
        if not isinstance(answer, dict):
            return f"the GPU worker answered outside its protocol (not an object: {line[:80]!r})"
        return answer

    def _death(self) -> str:
        live = self._live
        assert live.proc is not None
        try:
            code = live.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "the GPU worker closed its output and did not end"
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        words = live.last_words()
        return f"the GPU worker died while running this commit's kernels ({how}){': ' + words if words else ''}"


def _refuse(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _fields(answer: dict[str, Any], want: set[str], n: int) -> str:
    if set(answer) != want:
        return f"the GPU worker answered outside its protocol (fields {sorted(answer)}, expected {sorted(want)})"
    if answer["id"] != n or not isinstance(answer["fault"], bool):
        return f"the GPU worker answered outside its protocol (id {answer['id']!r} to request {n}, or fault not a boolean)"
    return ""


def _run_problem(a: dict[str, Any], n: int) -> str:
    if why := _fields(a, RUN_FIELDS, n):
        return why
    ok = (
        isinstance(a["samples"], list) and all(_number(s) and s > 0 for s in a["samples"])
        and isinstance(a["excluded"], list) and all(isinstance(e, str) for e in a["excluded"])
        and isinstance(a["error"], str) and _number(a["duration_s"]) and a["duration_s"] >= 0
        and (a["sample_s"] is None or (_number(a["sample_s"]) and a["sample_s"] >= 0))
        and (bool(a["error"]) or bool(a["samples"])) and not (a["fault"] and not a["error"])
    )  # fmt: skip
    return "" if ok else f"the GPU worker answered outside its protocol (a run answer that does not hold: {json.dumps(a)[:120]})"


def _artifact_problem(a: dict[str, Any], n: int) -> str:
    if why := _fields(a, ARTIFACT_FIELDS, n):
        return why
    d = a["digest"]
    if d is None or (isinstance(d, str) and len(d) == 64 and all(c in "0123456789abcdef" for c in d)):
        return ""
    return f"the GPU worker answered outside its protocol (digest {str(d)[:80]!r})"


def _hello_problem(h: dict[str, Any]) -> str:
    if h.get("hello") != PROTOCOL:
        return f"answered outside its protocol (expected hello {PROTOCOL}: {json.dumps(h)[:120]})"
    if set(h) == {"hello", "error"} and isinstance(h["error"], str):
        return h["error"]
    if set(h) != {"hello", "arch", "info"} or not isinstance(h["arch"], str) or not isinstance(h["info"], dict):
        return f"answered outside its protocol (a hello without arch and info: {json.dumps(h)[:120]})"
    return ""


class KernelSlot:
    """One kernel of a worker that serves several: what one cupy member's runner asks, with its
    own index and timeout (runners/cupy.py `sharing_one_worker`)."""

    def __init__(self, worker: KernelWorker, kernel: int, timeout_s: float) -> None:
        self.worker = worker
        self.kernel = kernel
        self.timeout_s = timeout_s

    @property
    def info(self) -> dict[str, Any] | None:
        return self.worker.info

    def run(self, checkout: Path, reps: int) -> RunResult:
        return self.worker.run(checkout, reps, self.kernel, self.timeout_s)

    def artifact(self, checkout: Path) -> str | None:
        return self.worker.artifact(checkout, self.kernel, self.timeout_s)

    def close(self) -> None:
        self.worker.close()
