"""Run on this host, each command in its own process group so a timeout kills all of it."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from attrib.evaluate.executors.base import LocalDescription, ProcessResult


def run_process(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str] | None, timeout_s: float
) -> ProcessResult:
    start = time.monotonic()
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        return ProcessResult(None, "", f"cannot start {argv[0]}: {exc.strerror}", False, 0.0)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return ProcessResult(proc.returncode, out, err, False, time.monotonic() - start)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        return ProcessResult(None, out, err, True, time.monotonic() - start)
    except BaseException:
        # Ctrl-C or anything else: never leave the child's process group running.
        _kill_group(proc)
        proc.communicate()
        raise


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class LocalExecutor:
    name = "local"

    def identity(self) -> str:
        return f"local:{platform.machine()}"

    def describe(self) -> LocalDescription:
        return LocalDescription(host=platform.node())

    def round(self) -> AbstractContextManager[object]:
        return nullcontext()  # one host: every run of a round is on it already

    def close(self) -> None:
        pass  # every process is waited for or killed by run_process itself

    def shell(self, checkout: Path, command: str, env: Mapping[str, str], timeout_s: float) -> ProcessResult:
        return run_process(["sh", "-c", command], checkout, env, timeout_s)

    def run(self, checkout: Path, argv: Sequence[str], timeout_s: float) -> ProcessResult:
        return run_process(argv, checkout, None, timeout_s)
