"""Run on this host, each command under a guard (guard.py) that leads its own process group: a
timeout kills all of the group, and so does the death of this process, `kill -9` included (the
guard's lifeline closes). The executor's ledger (processes.py) ends what its commands left
when it closes, and lets a restarted daemon end what a dead one left."""

from __future__ import annotations

import os
import platform
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from attrib.evaluate.executors import guard
from attrib.evaluate.executors.base import LocalDescription, ProcessResult, command_environment
from attrib.evaluate.executors.processes import TOKEN_ENV, Ledger

GUARD_MARGIN_S = 10.0  # the guard's own deadline is the caller's timeout plus this: the caller acts first


def start_guarded(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], deadline_s: float, **popen: Any
) -> tuple[subprocess.Popen[Any], socket.socket]:
    """Start `argv` under a guard that leads its new process group (the group dies with this
    process, or at `deadline_s`), and return it with this side of its lifeline: keep that open
    while the command may run, close it after. OSError when it cannot start (no such cwd)."""
    ours, theirs = socket.socketpair()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", guard.__file__, str(theirs.fileno()), f"{deadline_s:g}", "--", *argv],
            cwd=cwd, env=dict(env), start_new_session=True, pass_fds=(theirs.fileno(),), **popen,
        )  # fmt: skip
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return proc, ours


def run_process(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str] | None, timeout_s: float, ledger: Ledger | None = None
) -> ProcessResult:
    """`argv` under a guard, with `env` as its whole environment (None: attrib's own, for the
    tools attrib runs itself, such as srun; a build or a benchmark is given
    base.command_environment, never attrib's)."""
    start = time.monotonic()
    full_env = dict(os.environ if env is None else env)
    if ledger is not None:
        full_env[TOKEN_ENV] = ledger.token
    try:
        proc, lifeline = start_guarded(
            argv, cwd, full_env, timeout_s + GUARD_MARGIN_S,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
        )  # fmt: skip
    except OSError as exc:  # the checkout (cwd) is missing, or no room for a process
        return ProcessResult(None, "", f"cannot start {argv[0]}: {exc.strerror}", False, 0.0)
    try:
        if ledger is not None:
            ledger.started(proc.pid)
        return _wait(proc, lifeline, argv, timeout_s, start)
    finally:
        lifeline.close()


def _wait(proc: subprocess.Popen[str], lifeline: socket.socket, argv: Sequence[str], timeout_s: float, start: float) -> ProcessResult:
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        return ProcessResult(None, out, err, True, time.monotonic() - start)
    except BaseException:
        # Ctrl-C or anything else: never leave the child's process group running.
        _kill_group(proc)
        proc.communicate()
        raise
    lifeline.setblocking(False)
    try:
        told = lifeline.recv(64)
    except BlockingIOError:
        told = b""
    if told.startswith(b"E"):  # the guard could not start the command
        return ProcessResult(None, "", f"cannot start {argv[0]}: {os.strerror(int(told[1:]))}", False, 0.0)
    elapsed = time.monotonic() - start
    if proc.returncode == -signal.SIGKILL and elapsed >= timeout_s:  # the guard's deadline, reached first on a busy host
        return ProcessResult(None, out, err, True, elapsed)
    return ProcessResult(proc.returncode, out, err, False, elapsed)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class LocalExecutor:
    name = "local"

    def __init__(self, workdir: Path | None = None, pass_env: Sequence[str] = ()) -> None:
        self.ledger = Ledger.under(workdir)
        self.pass_env = tuple(pass_env)  # the recipe's [build] pass_env (base.command_environment)

    def identity(self) -> str:
        return f"local:{platform.machine()}"

    def describe(self) -> LocalDescription:
        return LocalDescription(host=platform.node())

    def round(self) -> AbstractContextManager[object]:
        return nullcontext()  # one host: every run of a round is on it already

    def close(self) -> None:
        """End whatever the commands left running (a server a build started): every process a
        job starts dies with its job. Safe to call more than once."""
        self.ledger.close()

    def shell(self, checkout: Path, command: str, env: Mapping[str, str], timeout_s: float) -> ProcessResult:
        return run_process(["sh", "-c", command], checkout, command_environment(self.pass_env, env), timeout_s, self.ledger)

    def run(self, checkout: Path, argv: Sequence[str], timeout_s: float) -> ProcessResult:
        return run_process(argv, checkout, command_environment(self.pass_env), timeout_s, self.ledger)
