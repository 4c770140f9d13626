"""SQLite connections, one per thread, as attrib's stores (the daemon's state, the history)
open them: transactions issued by the store itself (isolation_level=None, so a transaction is
exactly what the store writes), rows by name, foreign keys on, and WAL + synchronous=NORMAL,
which survives a killed process (not a power cut: the OS still has the pages)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path


class ThreadConnections:
    """Each thread gets its own connection to `path` (sqlite3 connections are not shared)."""

    def __init__(self, path: Path, busy_timeout_s: float) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self._local = threading.local()

    def get(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=True)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
