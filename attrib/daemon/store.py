"""The daemon's memory: one SQLite database (WAL) under --state.

Jobs and every state transition, every accepted flag, every sample a runner measured, the
builds a job used, and results. Workers claim jobs with a lease they renew (heartbeat); a job
whose lease expired (its worker died) is claimable again. Samples are written one runner call
per transaction, so a kill -9 loses at most the run in flight.

Each thread gets its own connection (sqlite3 connections must not be shared across threads).
Write transactions use BEGIN IMMEDIATE so two writers never deadlock on a lock upgrade; a
database held by another process past the busy timeout becomes a StateError naming the file.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from attrib.core.model import JobState
from attrib.daemon.grouping import GroupQueries, Join, add_members, join_queued
from attrib.daemon.samples import SampleRecords
from attrib.daemon.schema import (
    ACTIVE_SQL,
    COUNTED,
    DELIVERIES,
    FLAGS,
    JOB_COLUMNS,
    JOB_HOLDS,
    JOBS,
    META,
    SCHEMA_VERSION,
    TABLES,
    TRANSITIONS,
    Delivery,
    FlagRow,
    Job,
    JobHold,
    NewJob,
    Transition,
)
from attrib.errors import QueueFull, StateError
from attrib.result import BisectResult, dump

DEFAULT_BUSY_TIMEOUT_S = 10.0  # how long a write waits for another writer before it is an error
DEFAULT_MAX_QUEUE = 100  # queued jobs; more flags are refused with 429 until the queue drains
DEFAULT_LEASE_S = 30.0  # a running job's worker must renew its lease within this time

__all__ = ["Accepted", "Job", "Join", "NewJob", "Store"]  # the row types are the schema's (daemon/schema.py)


@dataclass(frozen=True)
class Accepted:
    job_id: str
    flag_id: str
    duplicate_of: str | None
    replay: bool = False  # the same request was answered before: this is that answer, nothing stored
    joined: bool = False  # merged into a queued group job of an overlapping range (issue 29)

    def answer(self) -> dict[str, Any]:
        return {"id": self.job_id, "duplicate_of": self.duplicate_of, "flag": self.flag_id}


@dataclass(frozen=True)
class JobRange:
    """A job as a range of one benchmark (Store.ranges)."""

    id: str
    benchmark: str
    good: str
    bad: str
    state: JobState


class Store(GroupQueries, SampleRecords):
    kind = "state database"

    def __init__(self, path: Path, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S, max_queue: int = DEFAULT_MAX_QUEUE) -> None:
        super().__init__(path, busy_timeout_s)
        self.max_queue = max_queue
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._errors("open"):
            conn = self._conn()
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StateError(f"state database {path}: cannot switch to WAL mode (got {mode})")
            with self._write() as c:
                # statement by statement: executescript() would COMMIT our transaction first
                for table in TABLES:
                    for stmt in table.statements():
                        c.execute(stmt)
                row = c.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
                if row is None:
                    c.execute(META.insert(), ("schema", str(SCHEMA_VERSION)))
                elif row[0] != str(SCHEMA_VERSION):
                    raise StateError(f"state database {path}: schema {row[0]}, this attrib reads {SCHEMA_VERSION}")

    # --- connections and transactions -----------------------------------------------------

    # --- flags and jobs ---------------------------------------------------------------------

    def submit(
        self, job: NewJob, route: str, body: str, replay_keys: Sequence[str] = (), replay_expires: float | None = None,
        members: Sequence[str] = (), join: Sequence[Join] = (), covered: Sequence[str] = (),
    ) -> Accepted:
        """Queue `job`, or merge it into the active job with the same key. Every accepted flag
        is stored; a full queue refuses new work (QueueFull) and stores nothing. `replay_keys`
        name the request (its signature, a forge's delivery id; auth.Verified): when one of
        them was answered before, that answer is returned and nothing is stored; otherwise they
        are stored with the flag, in the same transaction, until `replay_expires` (None: as
        long as the flag)."""
        with self._errors("accept a flag"), self._write() as c:
            return self.submit_within(c, job, route, body, replay_keys, replay_expires, members, join, covered=covered)

    def submit_within(
        self, c: sqlite3.Connection, job: NewJob, route: str, body: str,
        replay_keys: Sequence[str] = (), replay_expires: float | None = None,
        members: Sequence[str] = (), join: Sequence[Join] = (), hold_until: float | None = None,
        covered: Sequence[str] = (),
    ) -> Accepted:  # fmt: skip
        """submit() inside a write transaction the caller holds on this database: the nightly
        history claims a change point and queues its job in one transaction (issue 33).
        Groups (issue 29): `members`, the benchmarks of a flag naming several (the first is
        `job.benchmark`); `join`, queued jobs of overlapping ranges it may join (the first still
        queued takes it, its range widened to cover both); `hold_until`, a new job's grouping
        window (no worker claims it before); `covered`, active jobs that already bisect every
        benchmark of the flag over a range covering its own (grouping.covering): the first still
        active takes it as a duplicate."""
        now = time.time()
        flag_id = uuid.uuid4().hex[:16]
        c.execute("DELETE FROM deliveries WHERE expires < ?", (now,))
        earlier = self._answered(c, replay_keys, now)
        if earlier is not None:
            return earlier
        row = c.execute(f"SELECT id, state FROM jobs WHERE dedup_key = ? AND state IN {ACTIVE_SQL}", (job.dedup_key,)).fetchone()
        if row is None and covered:
            marks = ", ".join("?" * len(covered))
            row = c.execute(f"SELECT id, state FROM jobs WHERE id IN ({marks}) AND state IN {ACTIVE_SQL} ORDER BY created, rowid", tuple(covered)).fetchone()
        target = join_queued(c, join, now, members or (job.benchmark,)) if row is None else None
        if row is not None:
            job_id, dup = row["id"], row["id"]
            if row["state"] == JobState.QUEUED:  # not started: a benchmark it lacks joins it
                add_members(c, job_id, members)
        elif target is not None:
            job_id = dup = target
            add_members(c, job_id, members or (job.benchmark,))
            self._transition(c, job_id, JobState.QUEUED, JobState.QUEUED, None, f"an overlapping range joined its group via {route}", now)
        else:
            queued = c.execute("SELECT COUNT(*) FROM jobs WHERE state = ?", (JobState.QUEUED,)).fetchone()[0]
            if queued >= self.max_queue:
                raise QueueFull(f"the queue is full ({queued} queued jobs); try again later")
            job_id, dup = uuid.uuid4().hex[:16], None
            cols = (*(f.name for f in fields(NewJob)), "id", "created", "updated", "state", "dedup_key")
            c.execute(
                JOBS.insert(cols),
                (*(getattr(job, f.name) for f in fields(NewJob)), job_id, now, now, JobState.QUEUED, job.dedup_key),
            )
            self._transition(c, job_id, None, JobState.QUEUED, None, f"flagged via {route}", now)
            if len(members) > 1:
                add_members(c, job_id, members)
            if hold_until is not None and hold_until > now:
                c.execute(JOB_HOLDS.insert(), JOB_HOLDS.values(JobHold(job_id, hold_until)))
        c.execute(FLAGS.insert(), FLAGS.values(FlagRow(flag_id, job_id, now, route, dup is not None, body)))
        for key in replay_keys:
            c.execute(DELIVERIES.insert(), DELIVERIES.values(Delivery(key, flag_id, replay_expires)))
        return Accepted(job_id, flag_id, dup, joined=target is not None)


    def answered(self, keys: Sequence[str]) -> Accepted | None:
        """The answer given to the request one of `keys` names, if it was accepted before (and
        its signed time is still inside the tolerance); None for a request not seen."""
        with self._errors("look up a delivery"):
            return self._answered(self._conn(), keys, time.time())

    @staticmethod
    def _answered(c: sqlite3.Connection, keys: Sequence[str], now: float) -> Accepted | None:
        if not keys:
            return None
        row = c.execute(
            f"SELECT f.id, f.job_id, f.duplicate FROM deliveries d JOIN flags f ON f.id = d.flag_id"
            f" WHERE d.key IN ({', '.join('?' * len(keys))}) AND (d.expires IS NULL OR d.expires >= ?) LIMIT 1",
            (*keys, now),
        ).fetchone()
        if row is None:
            return None
        return Accepted(row["job_id"], row["id"], row["job_id"] if row["duplicate"] else None, replay=True)

    def get(self, job_id: str) -> Job | None:
        with self._errors("read a job"):
            row = self._conn().execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else Job.from_row(row)

    def jobs(self, limit: int = 100, states: Sequence[JobState] | None = None) -> list[Job]:
        """Newest first."""
        sql = f"SELECT {JOB_COLUMNS} FROM jobs"
        params: list[Any] = []
        if states:
            sql += f" WHERE state IN ({', '.join('?' * len(states))})"
            params.extend(s.value for s in states)
        sql += " ORDER BY created DESC, rowid DESC LIMIT ?"
        params.append(limit)
        with self._errors("list jobs"):
            rows = self._conn().execute(sql, params).fetchall()
        return [Job.from_row(r) for r in rows]

    def ranges(self, repo_path: str, recipe: str, limit: int = 1000) -> list[JobRange]:
        """The newest `limit` jobs of one repository and recipe as ranges, without their results
        (Job.from_row parses every result document): what deciding a change point reads."""
        with self._errors("list job ranges"):
            rows = self._conn().execute(
                "SELECT id, benchmark, good, bad, state FROM jobs WHERE repo_path = ? AND recipe = ?"
                " ORDER BY created DESC, rowid DESC LIMIT ?",
                (repo_path, recipe, limit),
            ).fetchall()
        return [JobRange(r["id"], r["benchmark"], r["good"], r["bad"], JobState(r["state"])) for r in rows]

    def counts(self) -> dict[str, int]:
        """Rows per table and jobs per state: the status page and the tests read these."""
        with self._errors("count"):
            c = self._conn()
            out = {t: c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in COUNTED}
            for state, n in c.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state"):
                out[f"jobs_{state}"] = n
        return out

    def transitions(self, job_id: str) -> list[tuple[str | None, str, str | None, str]]:
        with self._errors("read transitions"):
            rows = self._conn().execute(
                "SELECT from_state, to_state, owner, note FROM transitions WHERE job_id = ? ORDER BY id", (job_id,)
            ).fetchall()
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    @staticmethod
    def _transition(
        c: sqlite3.Connection, job_id: str, old: JobState | None, new: JobState, owner: str | None, note: str, now: float
    ) -> None:
        c.execute(TRANSITIONS.insert(), TRANSITIONS.values(Transition(job_id, now, old, new, owner, note)))

    # --- leases -------------------------------------------------------------------------------

    def claim(self, owner: str, lease_s: float = DEFAULT_LEASE_S, now: float | None = None) -> Job | None:
        """The oldest queued job, or a running one whose lease expired (its worker died)."""
        now = time.time() if now is None else now
        with self._errors("claim a job"), self._write() as c:
            row = c.execute(
                "SELECT id, state, lease_owner FROM jobs WHERE (state = ? AND NOT EXISTS"
                " (SELECT 1 FROM job_holds h WHERE h.job_id = jobs.id AND h.until > ?))"
                " OR (state = ? AND lease_expires < ?) ORDER BY created, rowid LIMIT 1",
                (JobState.QUEUED, now, JobState.RUNNING, now),
            ).fetchone()
            if row is None:
                return None
            old = JobState(row["state"])
            note = "claimed" if old is JobState.QUEUED else f"lease of {row['lease_owner']} expired; taken over"
            c.execute(
                "UPDATE jobs SET state = ?, lease_owner = ?, lease_expires = ?, attempts = attempts + 1,"
                " updated = ? WHERE id = ?",
                (JobState.RUNNING, owner, now + lease_s, now, row["id"]),
            )
            self._transition(c, row["id"], old, JobState.RUNNING, owner, note, now)
        return self.get(row["id"])

    def heartbeat(self, job_id: str, owner: str, lease_s: float = DEFAULT_LEASE_S, now: float | None = None) -> bool:
        """Renew the lease; False when `owner` no longer holds it (it expired and was taken)."""
        now = time.time() if now is None else now
        with self._errors("renew a lease"), self._write() as c:
            cur = c.execute(
                "UPDATE jobs SET lease_expires = ? WHERE id = ? AND lease_owner = ? AND state = ?",
                (now + lease_s, job_id, owner, JobState.RUNNING),
            )
        return cur.rowcount == 1

    def holds(self, job_id: str, owner: str) -> bool:
        with self._errors("check a lease"):
            row = self._conn().execute(
                "SELECT 1 FROM jobs WHERE id = ? AND lease_owner = ? AND state = ?", (job_id, owner, JobState.RUNNING)
            ).fetchone()
        return row is not None

    def cancel_requested(self, job_id: str) -> bool:
        with self._errors("read a job"):
            row = self._conn().execute("SELECT cancel_requested FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return bool(row and row[0])

    def finish(
        self,
        job_id: str,
        owner: str,
        state: JobState,
        *,
        result: BisectResult | None = None,
        error: str | None = None,
        filing: str | None = None,
        note: str = "",
    ) -> bool:
        """Move a job this owner holds to a final state; False when it lost the lease meanwhile."""
        assert not state.active
        now = time.time()
        with self._errors("finish a job"), self._write() as c:
            cur = c.execute(
                "UPDATE jobs SET state = ?, result = ?, error = ?, filing = ?, lease_owner = NULL, lease_expires = NULL,"
                " updated = ? WHERE id = ? AND lease_owner = ? AND state = ?",
                (state, dump(result) if result is not None else None, error, filing, now, job_id, owner, JobState.RUNNING),
            )
            if cur.rowcount != 1:
                return False
            self._transition(c, job_id, JobState.RUNNING, state, owner, note or (error or ""), now)
        return True

    def release(self, job_id: str, owner: str, note: str) -> bool:
        """Give a running job back to the queue (the daemon is stopping): it resumes later."""
        now = time.time()
        with self._errors("release a job"), self._write() as c:
            cur = c.execute(
                "UPDATE jobs SET state = ?, lease_owner = NULL, lease_expires = NULL, updated = ?"
                " WHERE id = ? AND lease_owner = ? AND state = ?",
                (JobState.QUEUED, now, job_id, owner, JobState.RUNNING),
            )
            if cur.rowcount != 1:
                return False
            self._transition(c, job_id, JobState.RUNNING, JobState.QUEUED, owner, note, now)
        return True

    def request_cancel(self, job_id: str) -> JobState | None:
        """A queued job is cancelled at once; a running one is flagged and its worker stops at
        the next runner call. Returns the state after the request (None: no such job)."""
        now = time.time()
        with self._errors("cancel a job"), self._write() as c:
            row = c.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                return None
            state = JobState(row["state"])
            if state is JobState.QUEUED:
                c.execute(
                    "UPDATE jobs SET state = ?, cancel_requested = 1, updated = ? WHERE id = ?", (JobState.CANCELLED, now, job_id)
                )
                self._transition(c, job_id, state, JobState.CANCELLED, None, "cancelled while queued", now)
                return JobState.CANCELLED
            if state is JobState.RUNNING:
                c.execute("UPDATE jobs SET cancel_requested = 1, updated = ? WHERE id = ?", (now, job_id))
            return state

    def set_progress(self, job_id: str, progress: dict[str, Any]) -> None:
        with self._errors("record progress"), self._write() as c:
            c.execute("UPDATE jobs SET progress = ?, updated = ? WHERE id = ?", (json.dumps(progress), time.time(), job_id))

    def integrity(self) -> str:
        with self._errors("check integrity"):
            return str(self._conn().execute("PRAGMA integrity_check").fetchone()[0])
