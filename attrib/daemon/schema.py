"""The daemon store's schema, stated once.

Each table is a frozen dataclass whose fields carry their SQL declarations (`column(...)`):
the CREATE TABLE statements, the column lists of SELECTs and INSERTs and the row types the
store hands out all come from these classes, and every state written in SQL comes from
`JobState` (the active ones from `JobState.active`). Adding a column is one line here; the
store has no column list of its own. Tables only ever gain columns or tables (CREATE ... IF NOT
EXISTS on open); anything else bumps SCHEMA_VERSION.

Nothing here touches a database: store.py is the edge.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from attrib.core.model import JobState
from attrib.errors import ResultFormatError
from attrib.result import BisectResult, from_json

SCHEMA_VERSION = 1
_SQL = "sql"


def column(decl: str, default: Any = MISSING) -> Any:
    """A dataclass field that is also a column declared as `decl` (SQLite type and constraints)."""
    return field(metadata={_SQL: decl}) if default is MISSING else field(default=default, metadata={_SQL: decl})


ACTIVE_STATES = tuple(s for s in JobState if s.active)


def states_sql(states: tuple[JobState, ...]) -> str:
    """`('queued', 'running')` for a WHERE clause. Literals, not parameters: SQLite needs them
    in a partial index, and these values come from the enum, never from outside."""
    return "(" + ", ".join(f"'{s.value}'" for s in states) + ")"


ACTIVE_SQL = states_sql(ACTIVE_STATES)


@dataclass(frozen=True)
class NewJob:
    """A validated flag, ready to queue (see daemon/flags.py); every field is a jobs column."""

    repo: str = column("TEXT NOT NULL")  # what was flagged: a local path or a git URL
    repo_path: str = column("TEXT NOT NULL")  # the repository the job reads (the path, or our mirror of the URL)
    good: str = column("TEXT NOT NULL")  # full shas, resolved at submission
    bad: str = column("TEXT NOT NULL")
    good_rev: str = column("TEXT NOT NULL")  # as flagged
    bad_rev: str = column("TEXT NOT NULL")
    recipe: str = column("TEXT NOT NULL")
    benchmark: str = column("TEXT NOT NULL")
    source: str | None = column("TEXT")
    file_issue: str | None = column("TEXT")
    seed: int = column("INTEGER NOT NULL")  # the search is deterministic given this and the runs

    @property
    def dedup_key(self) -> str:
        return json.dumps([self.repo, self.good, self.bad, self.benchmark])


@dataclass(frozen=True)
class Job(NewJob):
    """A row of `jobs`: the flag's fields plus where the job is."""

    id: str = column("TEXT PRIMARY KEY")
    created: float = column("REAL NOT NULL")
    updated: float = column("REAL NOT NULL")
    state: JobState = column("TEXT NOT NULL")
    attempts: int = column("INTEGER NOT NULL DEFAULT 0")
    lease_owner: str | None = column("TEXT")
    lease_expires: float | None = column("REAL")
    cancel_requested: bool = column("INTEGER NOT NULL DEFAULT 0")
    progress: dict[str, Any] = column("TEXT NOT NULL DEFAULT '{}'")  # JSON
    result: BisectResult | None = column("TEXT")  # JSON of the bisect result (result/schema.py), read typed
    error: str | None = column("TEXT")
    filing: str | None = column("TEXT")

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Job:
        d = dict(row)
        d.pop("dedup_key", None)  # derived from the fields (NewJob.dedup_key)
        d["state"] = JobState(d["state"])
        d["cancel_requested"] = bool(d["cancel_requested"])
        d["progress"] = json.loads(d["progress"])
        d["result"], unreadable = _result(d["id"], d["result"])
        if unreadable:  # the row stays as it is; the job says why its result cannot be shown
            d["error"] = f"{d['error']}; {unreadable}" if d["error"] else unreadable
        return cls(**d)

    def summary(self, members: list[str] | None = None) -> dict[str, Any]:
        """What the API shows of a job (no result document: GET /v1/jobs/{id} adds it).
        `members`: a group job's benchmarks (Store.members); `benchmarks` lists them, or the one."""
        return {
            "id": self.id,
            "state": self.state.value,
            "repo": self.repo,
            "good": self.good,
            "bad": self.bad,
            "benchmark": self.benchmark,
            "benchmarks": members or [self.benchmark],
            "source": self.source,
            "created": self.created,
            "updated": self.updated,
            "attempts": self.attempts,
            "progress": self.progress,
            "error": self.error,
            "filing": self.filing,
        }


def _result(job_id: str, text: str | None) -> tuple[BisectResult | None, str]:
    """A stored result read by the one reader (from_json, any schema attrib wrote), or why not."""
    if not text:
        return None, ""
    source = f"job {job_id}'s result"
    try:
        result = from_json(json.loads(text), source)
    except ValueError as exc:
        return None, str(ResultFormatError(source, "", f"not JSON ({exc})"))
    except ResultFormatError as exc:
        return None, str(exc)
    if not isinstance(result, BisectResult):
        return None, str(ResultFormatError(source, "kind", f"expected a bisection's result, got {result.kind}"))
    return result, ""


@dataclass(frozen=True)
class Meta:
    key: str = column("TEXT PRIMARY KEY")
    value: str = column("TEXT NOT NULL")


@dataclass(frozen=True)
class Transition:
    job_id: str = column("TEXT NOT NULL REFERENCES jobs (id)")
    at: float = column("REAL NOT NULL")
    from_state: str | None = column("TEXT")
    to_state: str = column("TEXT NOT NULL")
    owner: str | None = column("TEXT")
    note: str = column("TEXT NOT NULL DEFAULT ''")


@dataclass(frozen=True)
class FlagRow:
    """Every accepted flag, merged into an active job or not, with the body as received."""

    id: str = column("TEXT PRIMARY KEY")
    job_id: str = column("TEXT NOT NULL REFERENCES jobs (id)")
    received: float = column("REAL NOT NULL")
    route: str = column("TEXT NOT NULL")
    duplicate: bool = column("INTEGER NOT NULL")
    body: str = column("TEXT NOT NULL")


@dataclass(frozen=True)
class Delivery:
    """A request already answered (issue 16): the same signed request again gets the answer
    of its flag. `expires` is when its signed timestamp leaves the tolerance (the timestamp
    refuses it from then on); NULL for deliveries without a signed time (GitHub, GitLab, the
    legacy signature): kept as long as their flag."""

    key: str = column("TEXT PRIMARY KEY")
    flag_id: str = column("TEXT NOT NULL REFERENCES flags (id)")
    expires: float | None = column("REAL")


@dataclass(frozen=True)
class Sample:
    """Runner call n (0-based) for one checkout key within a job (seq orders all calls of the job)."""

    job_id: str = column("TEXT NOT NULL REFERENCES jobs (id)")
    key: str = column("TEXT NOT NULL")
    n: int = column("INTEGER NOT NULL")
    seq: int = column("INTEGER NOT NULL")
    samples: str = column("TEXT NOT NULL")  # JSON list
    error: str = column("TEXT NOT NULL")
    duration_s: float = column("REAL NOT NULL")
    excluded: str = column("TEXT NOT NULL")  # JSON list
    at: float = column("REAL NOT NULL")


@dataclass(frozen=True)
class Build:
    job_id: str = column("TEXT NOT NULL REFERENCES jobs (id)")
    attempt: int = column("INTEGER NOT NULL")
    commit_sha: str = column("TEXT NOT NULL")
    key: str = column("TEXT NOT NULL")
    ok: bool = column("INTEGER NOT NULL")
    cached: bool = column("INTEGER NOT NULL")
    reason: str = column("TEXT NOT NULL")
    duration_s: float = column("REAL NOT NULL")
    log_path: str = column("TEXT NOT NULL")
    at: float = column("REAL NOT NULL")


@dataclass(frozen=True)
class JobMember:
    """A benchmark of a group job (issue 29): a job with none is its `benchmark` alone. Rows are
    added while the job is queued (a flag or change point joining it), never after."""

    job_id: str = column("TEXT NOT NULL REFERENCES jobs (id)")
    benchmark: str = column("TEXT NOT NULL")
    position: int = column("INTEGER NOT NULL")  # the order asked


@dataclass(frozen=True)
class JobHold:
    """A queued job no worker claims before `until`: the grouping window, in which change points
    and flags of overlapping ranges join it (issue 29, `group_window_s`)."""

    job_id: str = column("TEXT PRIMARY KEY REFERENCES jobs (id)")
    until: float = column("REAL NOT NULL")


@dataclass(frozen=True)
class Table:
    """A table: its row type, columns that are not fields of the row (a rowid alias, a value
    derived from the row), table constraints and indexes."""

    name: str
    row: type
    extra: tuple[tuple[str, str], ...] = ()
    constraints: tuple[str, ...] = ()
    indexes: tuple[str, ...] = ()

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(f.name for f in fields(self.row))

    def statements(self) -> list[str]:
        cols = [*self.extra, *((f.name, f.metadata[_SQL]) for f in fields(self.row))]
        body = ",\n    ".join([*(f"{name} {decl}" for name, decl in cols), *self.constraints])
        return [f"CREATE TABLE IF NOT EXISTS {self.name} (\n    {body}\n)", *self.indexes]

    def insert(self, columns: tuple[str, ...] | None = None) -> str:
        """INSERT of `columns` (default: every field of the row), values as parameters."""
        cols = columns or self.fields
        return f"INSERT INTO {self.name} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"

    def values(self, row: Any) -> tuple[Any, ...]:
        return tuple(getattr(row, name) for name in self.fields)


META = Table("meta", Meta)
JOBS = Table(
    "jobs",
    Job,
    extra=(("dedup_key", "TEXT NOT NULL"),),  # NewJob.dedup_key, stored for the index below
    indexes=(
        # One active job per (repo, good, bad, benchmark): the database itself refuses a second one.
        f"CREATE UNIQUE INDEX IF NOT EXISTS jobs_active ON jobs (dedup_key) WHERE state IN {ACTIVE_SQL}",
        "CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state, created)",
    ),
)
TRANSITIONS = Table("transitions", Transition, extra=(("id", "INTEGER PRIMARY KEY"),))
FLAGS = Table("flags", FlagRow)
DELIVERIES = Table("deliveries", Delivery, indexes=("CREATE INDEX IF NOT EXISTS deliveries_by_expiry ON deliveries (expires)",))
SAMPLES = Table("samples", Sample, constraints=("PRIMARY KEY (job_id, key, n)",))
BUILDS = Table("builds", Build, extra=(("id", "INTEGER PRIMARY KEY"),))
JOB_MEMBERS = Table("job_members", JobMember, constraints=("PRIMARY KEY (job_id, benchmark)",))
JOB_HOLDS = Table("job_holds", JobHold)
TABLES = (META, JOBS, TRANSITIONS, FLAGS, DELIVERIES, SAMPLES, BUILDS, JOB_MEMBERS, JOB_HOLDS)
JOB_COLUMNS = ", ".join((*JOBS.fields, "dedup_key"))  # what Job.from_row reads
COUNTED = ("jobs", "flags", "samples", "builds")  # the status page's row counts
