"""The nightly history: benchmark results per (project, benchmark, configuration, commit, time)
and the change points decided on them, in SQLite. The schema is stated in history/schema.py
and nowhere else.

The daemon keeps these tables in its own database (--state/state.db, next to the jobs they
lead to); the CLI in a file of its own (`attrib history add --db`). A file is ingested in one
transaction, keyed by the digest of its rows (not of its bytes: a blank line added changes
nothing): a file with one bad row stores nothing, and the same rows sent twice are stored once.
Every series a file touches is marked `pending` in that same transaction and unmarked only
once its detection succeeded, so a series whose detection failed (or never ran: a crash) is
detected again with the next upload instead of being forgotten. The store never orders commits: it keeps what
it was given, and the caller orders a series by the repository's first-parent line.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from attrib.core.detect import ChangeDirection, DetectScale
from attrib.core.model import Direction
from attrib.errors import IngestError, StateError
from attrib.history.schema import HISTORY_SCHEMA, INDEXES, MIGRATIONS, SCHEMA
from attrib.sqlite import SqliteStore

DEFAULT_BUSY_TIMEOUT_S = 10.0
# A change point waits for a bisection (detected, or rate limited by the daily cap) at most this
# long after it was detected; then it is marked expired and no upload looks at it again: a
# backlog larger than the cap can ever clear must not be carried by every upload forever.
WAITING_EXPIRY_S = 7 * 86_400.0

class FlagState(StrEnum):
    """What became of a change point on its way to a bisection (attrib/history/flagging.py)."""

    DETECTED = "detected"  # found; nothing decided about bisecting it (the CLI's store)
    RECORDED = "recorded"  # an improvement: kept, not bisected (unless the project says so)
    UNMAPPED = "unmapped"  # no mapping pattern names a recipe for this benchmark
    RATE_LIMITED = "rate_limited"  # the project's bisections per day are used up: retried later
    QUEUED = "queued"  # a job was queued for the range: job_id
    DUPLICATE = "duplicate"  # an open job or an earlier flag covers an overlapping range: job_id
    GROUPED = "grouped"  # joined the group job of an overlapping range (queued once, counted once): job_id
    REFUSED = "refused"  # the flag did not validate (note says why): not retried
    EXPIRED = "expired"  # waited WAITING_EXPIRY_S without a bisection (note says since when): not retried
    ENVIRONMENT = "environment"  # the environment's, not the code's (note names the keys): filed, not bisected

    @property
    def retried(self) -> bool:
        return self in (FlagState.DETECTED, FlagState.RATE_LIMITED)


@dataclass(frozen=True)
class Series:
    id: int
    project: str
    benchmark: str
    config: dict[str, str]
    unit: str
    direction: Direction
    scale: DetectScale | None = None  # what its last detection read it on (None: not detected yet)

    @property
    def label(self) -> str:
        extra = " ".join(f"{k}={v}" for k, v in self.config.items())
        return f"{self.benchmark} [{extra}]" if extra else self.benchmark


@dataclass(frozen=True)
class Point:
    commit: str
    value: float
    measured_at: float
    environment: Mapping[str, str] = dataclasses.field(default_factory=dict)  # where it was measured


@dataclass(frozen=True)
class Estimates:
    """What detection estimates of a change point (its size re-estimated as nights arrive)."""

    direction: ChangeDirection
    change_pct: float
    ci_pct: tuple[float, float]
    p_value: float
    before_mean: float
    after_mean: float


@dataclass(frozen=True)
class Change:
    id: int
    series_id: int
    before: str
    after: str
    direction: ChangeDirection
    change_pct: float
    ci_pct: tuple[float, float]
    p_value: float
    before_mean: float
    after_mean: float
    detected_at: float
    recovered: str | None
    flag: FlagState
    job_id: str | None
    note: str


@dataclass(frozen=True)
class StoredRow:
    """A parsed row with its commit resolved to a full sha and its config settled."""

    row: str
    commit: str
    benchmark: str
    config: Mapping[str, str]
    value: float
    unit: str
    direction: Direction
    measured_at: float | None
    environment: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class FileRows:
    """One file, parsed and resolved, ready to store."""

    name: str
    format: str
    digest: str
    rows: Sequence[StoredRow]
    skipped: int = 0  # rows with an empty value (a night without a result), not stored


@dataclass(frozen=True)
class Ingested:
    name: str
    digest: str
    rows: int
    duplicate: bool  # the same file was ingested before: nothing new stored
    series: tuple[int, ...]
    skipped: int = 0  # rows with an empty value, skipped


def canonical_config(config: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(config.items())), separators=(",", ":"))


class HistoryStore(SqliteStore):
    kind = "history database"

    def __init__(self, path: Path, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        super().__init__(path, busy_timeout_s)
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._errors("open"), self._write() as c:
            for stmt in SCHEMA.split(";"):
                if stmt.strip():
                    c.execute(stmt)
            row = c.execute("SELECT value FROM meta WHERE key = 'history_schema'").fetchone()
            if row is None:
                c.execute("INSERT INTO meta VALUES ('history_schema', ?)", (str(HISTORY_SCHEMA),))
            elif row[0] in MIGRATIONS:
                version = row[0]
                while version in MIGRATIONS:
                    for stmt in MIGRATIONS[version]:
                        c.execute(stmt)
                    version = str(int(version) + 1)
                c.execute("UPDATE meta SET value = ? WHERE key = 'history_schema'", (str(HISTORY_SCHEMA),))
            elif row[0] != str(HISTORY_SCHEMA):
                raise StateError(f"history database {path}: history schema {row[0]}, this attrib reads {HISTORY_SCHEMA}")
            for stmt in INDEXES.split(";"):
                if stmt.strip():
                    c.execute(stmt)

    # --- ingestion ----------------------------------------------------------------------------

    def ingest(
        self, project: str, files: Sequence[FileRows], now: float | None = None, max_series: int | None = None
    ) -> list[Ingested]:
        """Store the files' rows in one transaction. A row that contradicts its series (another
        unit or direction), or that would make the project's series more than `max_series`, is
        an IngestError and nothing of any file is kept; a file whose digest is already stored
        adds nothing (the same rows sent twice). Every touched series is marked pending."""
        now = time.time() if now is None else now
        out: list[Ingested] = []
        with self._errors("ingest"), self._write() as c:
            room = _Room(c, project, max_series)
            for f in files:
                if c.execute("SELECT 1 FROM history_files WHERE digest = ?", (f.digest,)).fetchone():
                    out.append(Ingested(f.name, f.digest, 0, True, (), f.skipped))
                    continue
                c.execute(
                    "INSERT INTO history_files (digest, project, name, format, received, rows) VALUES (?,?,?,?,?,?)",
                    (f.digest, project, f.name, f.format, now, len(f.rows)),
                )
                touched: dict[int, None] = {}
                for r in f.rows:
                    sid = self._series_id(c, project, r, f.name, room)
                    touched[sid] = None
                    c.execute(
                        "INSERT INTO history_results (file_digest, row, series_id, commit_sha, value, measured_at, environment)"
                        " VALUES (?,?,?,?,?,?,?)",
                        (f.digest, r.row, sid, r.commit, r.value, now if r.measured_at is None else r.measured_at, canonical_config(r.environment)),
                    )
                # A count, not a flag: a detection that began before these rows were stored
                # cannot clear them (detected() clears only the mark it read).
                c.executemany("UPDATE history_series SET pending = pending + 1 WHERE id = ?", [(sid,) for sid in touched])
                out.append(Ingested(f.name, f.digest, len(f.rows), False, tuple(touched), f.skipped))
        return out

    @staticmethod
    def _series_id(c: sqlite3.Connection, project: str, r: StoredRow, name: str, room: _Room) -> int:
        config = canonical_config(r.config)
        row = c.execute(
            "SELECT id, unit, direction FROM history_series WHERE project = ? AND benchmark = ? AND config = ?",
            (project, r.benchmark, config),
        ).fetchone()
        if row is None:
            room.take(name, r)
            cur = c.execute(
                "INSERT INTO history_series (project, benchmark, config, unit, direction) VALUES (?,?,?,?,?)",
                (project, r.benchmark, config, r.unit, r.direction.value),
            )
            return int(cur.lastrowid or 0)
        for field, have, got in (("unit", row["unit"], r.unit), ("direction", row["direction"], r.direction.value)):
            if have != got:
                raise IngestError(name, r.row, field, f"{got!r}, but the series {r.benchmark!r} is stored with {have!r}")
        return int(row["id"])

    # --- reading ------------------------------------------------------------------------------

    def series_count(self, project: str) -> int:
        with self._errors("count series"):
            return int(self._conn().execute("SELECT COUNT(*) FROM history_series WHERE project = ?", (project,)).fetchone()[0])

    def series_page(self, project: str, offset: int, limit: int) -> list[Series]:
        """One page of the project's series in the index's order (benchmark, config)."""
        with self._errors("read series"):
            rows = self._conn().execute(
                "SELECT * FROM history_series WHERE project = ? ORDER BY benchmark, config LIMIT ? OFFSET ?", (project, limit, offset)
            ).fetchall()
        return [_series(r) for r in rows]

    def series_position(self, s: Series) -> int:
        """0-based place of `s` in its project's index (series_page's order)."""
        with self._errors("read series"):
            return int(self._conn().execute(
                "SELECT COUNT(*) FROM history_series WHERE project = ? AND (benchmark < ? OR (benchmark = ? AND config < ?))",
                (s.project, s.benchmark, s.benchmark, canonical_config(s.config)),
            ).fetchone()[0])  # fmt: skip

    def pending_series(self, project: str) -> list[tuple[Series, int]]:
        """Series with rows stored since their last successful detection, each with its mark
        for detected() (indexed: the cost is what is pending, not the project's size)."""
        with self._errors("read series"):
            rows = self._conn().execute(
                "SELECT * FROM history_series WHERE project = ? AND pending > 0 ORDER BY id", (project,)
            ).fetchall()
        return [(_series(r), int(r["pending"])) for r in rows]

    def detected(self, series_id: int, mark: int) -> None:
        """The series' detection succeeded on what was stored when `mark` was read; rows stored
        since then keep it pending."""
        with self._errors("mark a series detected"), self._write() as c:
            c.execute("UPDATE history_series SET pending = 0 WHERE id = ? AND pending = ?", (series_id, mark))

    def set_scale(self, series_id: int, scale: DetectScale) -> None:
        """Record the scale detection read the series on (detection.detect_series)."""
        with self._errors("record a series' scale"), self._write() as c:
            c.execute("UPDATE history_series SET scale = ? WHERE id = ? AND scale IS NOT ?", (scale.value, series_id, scale.value))

    def waiting_changes(self, project: str, new_only: bool = False) -> list[tuple[Series, Change]]:
        """Change points of `project` still waiting for a flag decision (FlagState.retried; with
        `new_only`, those never decided: DETECTED), found through the index on flag: not by
        walking every series."""
        waiting = [FlagState.DETECTED.value] if new_only else [f.value for f in FlagState if f.retried]
        with self._errors("read change points"):
            rows = self._conn().execute(
                "SELECT h.*, s.project, s.benchmark, s.config, s.unit, s.direction AS series_direction, s.scale"
                " FROM history_changes h JOIN history_series s ON s.id = h.series_id"
                f" WHERE s.project = ? AND h.flag IN ({', '.join('?' * len(waiting))}) ORDER BY h.id",
                (project, *waiting),
            ).fetchall()
        return [
            (Series(r["series_id"], r["project"], r["benchmark"], json.loads(r["config"]), r["unit"], Direction(r["series_direction"]), _scale(r)), _change(r))
            for r in rows
        ]

    def series(self, project: str | None = None, ids: Sequence[int] | None = None) -> list[Series]:
        sql, params = "SELECT * FROM history_series", list[object]()
        where = []
        if project is not None:
            where.append("project = ?")
            params.append(project)
        if ids is not None:
            where.append(f"id IN ({', '.join('?' * len(ids))})")
            params.extend(ids)
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._errors("read series"):
            rows = self._conn().execute(sql + " ORDER BY project, benchmark, config", params).fetchall()
        return [_series(r) for r in rows]

    def points(self, series_id: int) -> list[Point]:
        """Every stored value of the series, in no particular order (see history/order.py)."""
        with self._errors("read results"):
            rows = self._conn().execute(
                "SELECT commit_sha, value, measured_at, environment FROM history_results WHERE series_id = ? ORDER BY measured_at, rowid",
                (series_id,),
            ).fetchall()
        return [Point(r[0], r[1], r[2], json.loads(r[3])) for r in rows]

    def counts(self) -> dict[str, int]:
        with self._errors("count"):
            c = self._conn()
            return {t: c.execute(f"SELECT COUNT(*) FROM history_{t}").fetchone()[0] for t in ("series", "files", "results", "changes")}

    # --- change points ------------------------------------------------------------------------

    def changes(self, series_id: int | None = None, job_id: str | None = None) -> list[Change]:
        sql, params = "SELECT * FROM history_changes", list[object]()
        if series_id is not None:
            sql, params = sql + " WHERE series_id = ?", [series_id]
        elif job_id is not None:
            sql, params = sql + " WHERE job_id = ?", [job_id]
        with self._errors("read change points"):
            rows = self._conn().execute(sql + " ORDER BY id", params).fetchall()
        return [_change(r) for r in rows]

    def add_change(self, series_id: int, before: str, after: str, est: Estimates, flag: FlagState, now: float | None = None) -> int:
        with self._errors("record a change point"), self._write() as c:
            cur = c.execute(
                "INSERT INTO history_changes (series_id, before_sha, after_sha, direction, change_pct, ci_lo, ci_hi, p_value,"
                " before_mean, after_mean, detected_at, flag) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    series_id, before, after, est.direction.value, est.change_pct, est.ci_pct[0], est.ci_pct[1],
                    est.p_value, est.before_mean, est.after_mean, time.time() if now is None else now, flag.value,
                ),
            )  # fmt: skip
            return int(cur.lastrowid or 0)

    def refresh_estimates(self, change_id: int, est: Estimates) -> None:
        with self._errors("refresh a change point"), self._write() as c:
            c.execute(
                "UPDATE history_changes SET change_pct = ?, ci_lo = ?, ci_hi = ?, p_value = ?, before_mean = ?, after_mean = ?"
                " WHERE id = ?",
                (est.change_pct, *est.ci_pct, est.p_value, est.before_mean, est.after_mean, change_id),
            )

    def move_change(self, change_id: int, before: str, after: str, why: str) -> None:
        """A decided change re-placed because a late result landed between its commits; `why`
        is appended to its note, so the move is on record."""
        with self._errors("move a change point"), self._write() as c:
            c.execute(
                "UPDATE history_changes SET before_sha = ?, after_sha = ?,"
                " note = CASE WHEN note = '' THEN ? ELSE note || '; ' || ? END WHERE id = ?",
                (before, after, why, why, change_id),
            )

    def set_recovered(self, change_id: int, sha: str) -> None:
        with self._errors("record a recovery"), self._write() as c:
            c.execute("UPDATE history_changes SET recovered_sha = ? WHERE id = ? AND recovered_sha IS NULL", (sha, change_id))

    def set_flag(self, change_id: int, flag: FlagState, job_id: str | None = None, note: str = "", now: float | None = None) -> None:
        with self._errors("record a flag"), self._write() as c:
            c.execute(
                "UPDATE history_changes SET flag = ?, job_id = ?, note = ?, flagged_at = ? WHERE id = ?",
                (flag.value, job_id, note, time.time() if now is None else now, change_id),
            )

    def expire_waiting(self, project: str, now: float, expiry_s: float = WAITING_EXPIRY_S) -> list[tuple[str, Change]]:
        """Mark `project`'s change points detected more than `expiry_s` ago and still waiting
        as EXPIRED (one statement, through the index on flag): (benchmark, change) of each."""
        waiting = [f.value for f in FlagState if f.retried]
        note = f"waited {expiry_s / 86_400.0:g} days for a bisection (the daily limit) and expired; not retried"
        with self._errors("expire waiting change points"), self._write() as c:
            rows = c.execute(
                "UPDATE history_changes SET flag = ?, note = ?, flagged_at = ?"
                f" WHERE flag IN ({', '.join('?' * len(waiting))}) AND detected_at < ?"
                " AND series_id IN (SELECT id FROM history_series WHERE project = ?) RETURNING *",
                (FlagState.EXPIRED.value, note, now, *waiting, now - expiry_s, project),
            ).fetchall()
            names = {r["id"]: r["benchmark"] for r in c.execute(
                f"SELECT id, benchmark FROM history_series WHERE id IN ({', '.join('?' * len(rows))})", [r["series_id"] for r in rows]
            )} if rows else {}  # fmt: skip
        return [(names[r["series_id"]], _change(r)) for r in rows]

    def settle_waiting(self, change_id: int, flag: FlagState, job_id: str | None = None, note: str = "", now: float | None = None) -> bool:
        """set_flag, only while the change point is still waiting for a decision: an upload
        that read it before another claimed it must not overwrite the other's decision."""
        waiting = [f.value for f in FlagState if f.retried]
        with self._errors("record a flag"), self._write() as c:
            cur = c.execute(
                f"UPDATE history_changes SET flag = ?, job_id = ?, note = ?, flagged_at = ? WHERE id = ? AND flag IN ({', '.join('?' * len(waiting))})",
                (flag.value, job_id, note, time.time() if now is None else now, change_id, *waiting),
            )
            return cur.rowcount == 1

    def claim_bisection(
        self, change_id: int, project: str, since: float, limit: int, queue: QueueJob, now: float | None = None
    ) -> Claim:
        """Count the project's bisections queued since `since` and, below `limit`, queue the
        change point's job with `queue` and record on the change point what became of it: in
        one transaction, so concurrent uploads cannot all pass the count before any of them
        queued (issue 20), and a daemon killed anywhere in between leaves the claim, the job
        and their link all written or none of them (issue 33: a claim without its job kept its
        point `queued` and its slot of the day forever). `queue` runs on this transaction's
        connection: the jobs table lives in the same database. What it raises rolls all back."""
        now = time.time() if now is None else now
        waiting = [f.value for f in FlagState if f.retried]
        with self._errors("claim a bisection"), self._write() as c:
            row = c.execute("SELECT flag FROM history_changes WHERE id = ?", (change_id,)).fetchone()
            if row is None or row[0] not in waiting:
                return Claim.TAKEN
            if self._queued_since(c, project, since) >= limit:
                return Claim.LIMIT
            got = queue(c)
            c.execute(
                "UPDATE history_changes SET flag = ?, job_id = ?, note = ?, flagged_at = ? WHERE id = ?",
                (got.flag.value, got.job_id, got.note, now, change_id),
            )
        return Claim.CLAIMED

    def release_unqueued_claims(self, now: float | None = None) -> int:
        """Change points marked `queued` without a job: what a daemon before issue 33 left when it
        was killed between claiming a bisection and recording its job. They go back to waiting
        (retried with the next upload, their slot of the day freed); the count is returned."""
        with self._errors("release claims without a job"), self._write() as c:
            cur = c.execute(
                "UPDATE history_changes SET flag = ?, note = ?, flagged_at = ? WHERE flag = ? AND job_id IS NULL",
                (FlagState.DETECTED.value, CLAIM_WITHOUT_JOB, time.time() if now is None else now, FlagState.QUEUED.value),
            )
        return cur.rowcount

    @staticmethod
    def _queued_since(c: sqlite3.Connection, project: str, since: float) -> int:
        return int(
            c.execute(
                "SELECT COUNT(*) FROM history_changes h JOIN history_series s ON s.id = h.series_id"
                " WHERE s.project = ? AND h.flag = ? AND h.flagged_at >= ?",
                (project, FlagState.QUEUED.value, since),
            ).fetchone()[0]
        )

    def queued_since(self, project: str, since: float) -> int:
        """Bisections queued for `project`'s change points since `since` (the rate limit)."""
        with self._errors("count flags"):
            return self._queued_since(self._conn(), project, since)


CLAIM_WITHOUT_JOB = "claimed for a bisection whose job was never recorded (the daemon stopped in between); retried"


@dataclass(frozen=True)
class Flagged:
    """What the caller of claim_bisection made of a claimed change point: its flag, job, note."""

    flag: FlagState
    job_id: str | None
    note: str = ""


QueueJob = Callable[[sqlite3.Connection], Flagged]


class Claim(StrEnum):
    CLAIMED = "claimed"  # the job queued and linked, in the claim's transaction
    LIMIT = "limit"  # the project's bisections of the day are used up
    TAKEN = "taken"  # another upload decided this change point meanwhile


class _Room:
    """Series a project may still gain in one ingestion (None: no cap), counted once."""

    def __init__(self, c: sqlite3.Connection, project: str, max_series: int | None) -> None:
        self.project, self.max_series = project, max_series
        self.have = (
            0 if max_series is None else int(c.execute("SELECT COUNT(*) FROM history_series WHERE project = ?", (project,)).fetchone()[0])
        )

    def take(self, name: str, r: StoredRow) -> None:
        if self.max_series is not None and self.have >= self.max_series:
            raise IngestError(
                name, r.row, "benchmark",
                f"{r.benchmark!r} would be a new series, and project {self.project} has its limit of {self.max_series}"
                " series (max_series in its [history] config); nothing was stored",
            )  # fmt: skip
        self.have += 1


def _series(r: sqlite3.Row) -> Series:
    return Series(r["id"], r["project"], r["benchmark"], json.loads(r["config"]), r["unit"], Direction(r["direction"]), _scale(r))


def _scale(r: sqlite3.Row) -> DetectScale | None:
    return DetectScale(r["scale"]) if r["scale"] is not None else None


def _change(r: sqlite3.Row) -> Change:
    return Change(
        r["id"], r["series_id"], r["before_sha"], r["after_sha"], ChangeDirection(r["direction"]), r["change_pct"],
        (r["ci_lo"], r["ci_hi"]),
        r["p_value"], r["before_mean"], r["after_mean"], r["detected_at"], r["recovered_sha"], FlagState(r["flag"]),
        r["job_id"], r["note"],
    )  # fmt: skip
