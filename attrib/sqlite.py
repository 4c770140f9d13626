"""SQLite connections, one per thread, as attrib's stores (the daemon's state, the history)
open them: transactions issued by the store itself (isolation_level=None, so a transaction is
exactly what the store writes), rows by name, foreign keys on, and WAL + synchronous=NORMAL,
which survives a killed process (not a power cut: the OS still has the pages)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from attrib.errors import StateError


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


class SqliteStore:
    """What a store built on ThreadConnections shares: its connection, explicit write
    transactions (BEGIN IMMEDIATE: the write lock is taken up front, so a busy database fails
    before anything is read for the write), and sqlite's errors as one StateError line."""

    kind = "database"  # how its errors name it: "state database", "history database"

    def __init__(self, path: Path, busy_timeout_s: float) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self._connections = ThreadConnections(path, busy_timeout_s)

    def _conn(self) -> sqlite3.Connection:
        return self._connections.get()

    def close(self) -> None:
        """Close this thread's connection."""
        self._connections.close()

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" in text or "busy" in text:
                raise StateError(
                    f"{self.kind} {self.path} is locked by another process "
                    f"(waited {self.busy_timeout_s:g} s to {what}); nothing was written"
                ) from None
            raise StateError(f"{self.kind} {self.path}: {what}: {text}") from None
        except sqlite3.DatabaseError as exc:
            raise StateError(f"{self.kind} {self.path}: {what}: {exc}") from None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
