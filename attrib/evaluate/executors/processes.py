"""What local commands leave behind, and how it is ended: each command runs under a guard
(guard.py) that ends its process group when the attrib process that started it dies; this
module keeps the record that finds what might survive even that, and ends it.

An executor's processes carry one token in their environment (TOKEN_ENV: every descendant
inherits it). Its ledger, a file under the work dir written before the first command starts,
names the token and, line by line, each guard's pid with its start time (/proc/PID/stat, in
clock ticks since boot). `end()` ends every process carrying the token and every group whose
guard is still the recorded process. A pid is never signalled on its number alone: a process
is killed through a pidfd opened before its token is read back, a group only while its leader
has the recorded start time, so a pid the kernel handed to another process since is left alone.

`Ledger.close()` runs when the executor closes (the job's end: stragglers a build left, like a
compiler server, die with their job); `end_leftovers()` when a daemon starts, for the ledgers of
one that died. Linux only (pidfds: 5.3), as the daemon is.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from attrib.workdir import WorkDir

TOKEN_ENV = "ATTRIB_PROCESS_TOKEN"
GONE_WAIT_S = 10.0  # how long end() waits for what it killed to be gone (a process in D state takes a moment)
log = logging.getLogger("attrib.executors")


def start_ticks(pid: int) -> int | None:
    """The process's start time (clock ticks since boot), None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[19])  # field 22; the name may hold spaces and ')'


def _carries(pid: int, token: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or not ours to read (another user's process never carries our token)
        return False
    return f"{TOKEN_ENV}={token}".encode() in environ.split(b"\0")


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def end(token: str, guards: list[tuple[int, int]]) -> int:
    """Kill every process carrying `token` and the group of every guard (pid, start ticks) still
    alive; wait (bounded) until they are gone. Returns how many processes were signalled."""
    me, watches, count = os.getpid(), [], 0
    for pid, ticks in guards:
        if start_ticks(pid) == ticks:
            try:
                os.killpg(pid, signal.SIGKILL)  # its group: members that cleared their environment too
                count += 1
            except ProcessLookupError:
                pass
    for pid in _pids():
        if pid == me:
            continue
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        if not _carries(pid, token):  # read after the pidfd pins the process: a reused pid fails here
            os.close(fd)
            continue
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
            watches.append(fd)
            count += 1
        except ProcessLookupError:
            os.close(fd)
    deadline = time.monotonic() + GONE_WAIT_S
    while watches and time.monotonic() < deadline:
        ready, _, _ = select.select(watches, [], [], max(0.0, deadline - time.monotonic()))
        for fd in ready:
            watches.remove(fd)
            os.close(fd)
    for fd in watches:
        os.close(fd)
    return count


@dataclass
class Ledger:
    """One executor's token and guards, kept in `path` (None: in memory only)."""

    path: Path | None
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    guards: list[tuple[int, int]] = field(default_factory=list)

    @classmethod
    def under(cls, workdir: Path | None) -> Ledger:
        """A new ledger, kept in the work dir (`WorkDir.process_ledger`; written before any
        process carries the token), or in memory only when there is no work dir."""
        token = uuid.uuid4().hex
        if workdir is None:
            return cls(None, token)
        path = WorkDir(workdir).process_ledger(token)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{token}\n")
        return cls(path, token)

    def started(self, pid: int) -> None:
        ticks = start_ticks(pid)
        if ticks is None:
            return  # already gone
        self.guards.append((pid, ticks))
        if self.path is not None:
            with self.path.open("a") as f:
                f.write(f"{pid} {ticks}\n")

    def close(self) -> int:
        """End what this executor's commands left running; forget the ledger."""
        n = end(self.token, self.guards)
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        return n


def read_ledger(path: Path) -> tuple[str, list[tuple[int, int]]]:
    lines = path.read_text().splitlines()
    guards = []
    for line in lines[1:]:
        parts = line.split()
        if len(parts) == 2 and all(p.isdigit() for p in parts):  # a line cut by the kill is skipped
            guards.append((int(parts[0]), int(parts[1])))
    return (lines[0].strip() if lines else ""), guards


def end_leftovers(work_root: Path) -> int:
    """End what the local commands of a dead attrib process left running: every ledger in the
    work dirs under `work_root`. Only for a process that owns those work dirs alone (the daemon,
    holding its state's lock, before its workers start). Returns how many processes it ended."""
    total = 0
    for path in [p for wd in sorted(work_root.glob("*")) for p in WorkDir(wd).process_ledgers()]:
        token, guards = read_ledger(path)
        if token:
            n = end(token, guards)
            if n:
                log.warning("%s: ended %d process(es) a previous run left running", path, n)
            total += n
        path.unlink(missing_ok=True)
    return total
