"""One daemon per --state directory (issue 16).

Two daemons on one state directory would both serve and both claim jobs. The daemon holds an
exclusive lock on --state/daemon.lock for its whole life (flock: the kernel drops it when the
process dies, even by kill -9, so a crash never leaves the directory locked). The lock file
holds the owner's pid and address, so a second daemon exits 2 with one line naming them.
--state/daemon.json tells clients where the daemon listens; it is removed when the daemon
stops (after a kill -9 it stays, naming a dead pid, until the next start rewrites it).
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import IO

from attrib.errors import StateInUse
from attrib.fsutil import atomic_write_text

LOCK_NAME = "daemon.lock"
INFO_NAME = "daemon.json"


class StateOwner:
    """The lock on one state directory; `acquire` before opening anything in it."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self._fh: IO[str] | None = None

    def acquire(self) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        fh = open(self.state / LOCK_NAME, "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = _holder(fh.read())
            fh.close()
            raise StateInUse(f"--state {self.state}: already served by {holder}; stop it or use another --state") from None
        self._fh = fh
        self._record({"pid": os.getpid()})

    def announce(self, url: str) -> None:
        """The address is known (the socket is bound): tell the lock file and the clients."""
        info = {"pid": os.getpid(), "url": url}
        self._record(info)
        atomic_write_text(self.state / INFO_NAME, json.dumps(info) + "\n")

    def release(self) -> None:
        if self._fh is None:
            return
        (self.state / INFO_NAME).unlink(missing_ok=True)
        self._fh.truncate(0)
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()
        self._fh = None

    def _record(self, info: dict[str, object]) -> None:
        assert self._fh is not None
        self._fh.truncate(0)
        self._fh.write(json.dumps(info) + "\n")
        self._fh.flush()


def _holder(text: str) -> str:
    try:
        info = json.loads(text)
        pid, url = info.get("pid"), info.get("url")
    except (ValueError, AttributeError):
        return "another daemon (pid unknown: it is starting)"
    return f"the daemon with pid {pid}" + (f" at {url}" if url else " (starting: no address yet)")
