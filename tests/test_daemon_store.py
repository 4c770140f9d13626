"""The daemon's store against real SQLite files: leases, dedup, the queue bound, WAL, and a
database locked by another process (a clear error, nothing half-written)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from attrib.core.model import JobState
from attrib.daemon.store import Accepted, NewJob, Store
from attrib.errors import QueueFull, StateError
from attrib.evaluate.runners import RunResult
from attrib.result import BisectResult, load_result

RESULT = load_result(Path(__file__).parent / "fixtures" / "schema1" / "culprit.json")
assert isinstance(RESULT, BisectResult)


def new_job(good: str = "a" * 40, bad: str = "b" * 40, bench: str = "loop") -> NewJob:
    return NewJob("/r", "/r", good, bad, "v1", "v2", "/recipes/x.toml", bench, "ci", None, seed=7)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "state.db", busy_timeout_s=0.5)


def test_claim_lease_expiry_and_takeover(store: Store):
    acc = store.submit(new_job(), "test", "{}")
    assert acc.duplicate_of is None
    job = store.claim("A", lease_s=10, now=1000.0)
    assert job is not None and job.id == acc.job_id and job.state is JobState.RUNNING and job.attempts == 1
    assert store.claim("B", lease_s=10, now=1005.0) is None  # A's lease still holds
    assert store.heartbeat(job.id, "A", lease_s=10, now=1008.0)  # renewed until 1018
    assert store.claim("B", lease_s=10, now=1015.0) is None
    taken = store.claim("B", lease_s=10, now=1019.0)  # A died: its lease expired
    assert taken is not None and taken.id == job.id and taken.attempts == 2 and taken.lease_owner == "B"
    # A, if it was only slow, finds out and cannot write anything any more.
    assert not store.heartbeat(job.id, "A", lease_s=10, now=1020.0)
    assert not store.holds(job.id, "A")
    with pytest.raises(StateError, match="lease lost"):
        store.record_run(job.id, "A", "k", 0, 1, RunResult((1.0,), "", 0.1))
    assert not store.finish(job.id, "A", JobState.DONE, result=RESULT)
    assert store.finish(job.id, "B", JobState.DONE, result=RESULT)
    done = store.get(job.id)
    assert done is not None and done.state is JobState.DONE and done.result == RESULT
    assert [t[1] for t in store.transitions(job.id)] == ["queued", "running", "running", "done"]
    assert "expired" in store.transitions(job.id)[2][3]


def test_a_stored_result_is_read_typed_and_one_that_cannot_be_read_says_why(store: Store, tmp_path: Path):
    job_id = store.submit(new_job(), "test", "{}").job_id
    store.claim("A")
    assert store.finish(job_id, "A", JobState.DONE, result=RESULT)
    assert store.get(job_id).result == RESULT  # type: ignore[union-attr]
    # A row another attrib (or a hand) left unreadable: the job still lists, without a result,
    # and its error names the field; the row itself is left as it was.
    conn = sqlite3.connect(tmp_path / "state.db")
    with conn:
        conn.execute("UPDATE jobs SET result = json_set(result, '$.status', 'found-it') WHERE id = ?", (job_id,))
    conn.close()
    job = store.get(job_id)
    assert job is not None and job.result is None and job.state is JobState.DONE
    assert job.error is not None and f"job {job_id}'s result: field 'status': expected one of" in job.error
    assert [j.id for j in store.jobs(10)] == [job_id]


def test_samples_round_trip_by_key_and_call(store: Store):
    job_id = store.submit(new_job(), "test", "{}").job_id
    store.claim("A")
    store.record_run(job_id, "A", "k1", 0, 1, RunResult((1.0, 2.0), "", 0.5, ("throttled",)))
    store.record_run(job_id, "A", "k1", 1, 2, RunResult((), "exit 1", 0.1))
    runs = store.load_runs(job_id)
    assert runs[("k1", 0)] == RunResult((1.0, 2.0), "", 0.5, ("throttled",))
    assert runs[("k1", 1)].error == "exit 1"
    with pytest.raises(StateError, match="UNIQUE"):  # a call is recorded once, never overwritten
        store.record_run(job_id, "A", "k1", 1, 3, RunResult((3.0,), "", 0.1))


def test_duplicates_merge_while_active_only(store: Store):
    first = store.submit(new_job(), "test", '{"n": 1}')
    second = store.submit(new_job(), "test", '{"n": 2}')
    other_bench = store.submit(new_job(bench="other"), "test", "{}")
    assert second.duplicate_of == first.job_id and second.job_id == first.job_id
    assert other_bench.duplicate_of is None
    assert store.counts()["jobs"] == 2 and store.counts()["flags"] == 3  # every flag kept
    job = store.claim("A")
    assert job is not None and job.id == first.job_id
    assert store.submit(new_job(), "test", "{}").duplicate_of == first.job_id  # running: still one job
    store.finish(first.job_id, "A", JobState.FAILED, error="x")
    again = store.submit(new_job(), "test", "{}")  # finished: a new flag is new work
    assert again.duplicate_of is None and again.job_id != first.job_id


def test_queue_bound(tmp_path: Path):
    store = Store(tmp_path / "state.db", max_queue=2)
    store.submit(new_job(bad="1" * 40), "t", "{}")
    store.submit(new_job(bad="2" * 40), "t", "{}")
    with pytest.raises(QueueFull, match="queue is full"):
        store.submit(new_job(bad="3" * 40), "t", "{}")
    assert store.counts()["flags"] == 2 and store.counts()["jobs"] == 2  # the refused flag left nothing
    assert store.submit(new_job(bad="1" * 40), "t", "{}").duplicate_of is not None  # no new work: accepted
    store.claim("A")  # one leaves the queue: room again
    assert store.submit(new_job(bad="3" * 40), "t", "{}").duplicate_of is None


def test_cancel_and_release(store: Store):
    queued = store.submit(new_job(bad="1" * 40), "t", "{}").job_id
    running = store.submit(new_job(bad="2" * 40), "t", "{}").job_id
    assert store.request_cancel(queued) is JobState.CANCELLED
    assert store.claim("A").id == running  # type: ignore[union-attr]  # the cancelled one is never claimed
    assert store.request_cancel(running) is JobState.RUNNING and store.cancel_requested(running)
    assert store.request_cancel("f" * 16) is None
    assert store.release(running, "A", "stopping")
    assert store.get(running).state is JobState.QUEUED  # type: ignore[union-attr]


def test_wal_mode(store: Store, tmp_path: Path):
    store.submit(new_job(), "t", "{}")
    conn = sqlite3.connect(tmp_path / "state.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert (tmp_path / "state.db-wal").exists()
    conn.close()


HOLDER = textwrap.dedent(
    """
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("INSERT INTO meta VALUES ('holder', 'uncommitted')")
    print("locked", flush=True)
    sys.stdin.readline()  # hold the lock until the test says so
    conn.execute("ROLLBACK")
    """
)


def test_locked_by_another_process_is_a_clear_error_and_no_corruption(store: Store, tmp_path: Path):
    db = tmp_path / "state.db"
    kept = store.submit(new_job(bad="1" * 40), "t", "{}").job_id
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(StateError, match=r"state\.db is locked by another process .*nothing was written"):
            store.submit(new_job(bad="2" * 40), "t", "{}")
        with pytest.raises(StateError, match="locked by another process"):
            Store(db, busy_timeout_s=0.2)  # a second daemon starting now says so too
    finally:
        holder.communicate("go\n", timeout=30)
    assert holder.returncode == 0
    assert store.integrity() == "ok"
    assert store.counts()["jobs"] == 1 and store.get(kept) is not None
    assert store.submit(new_job(bad="2" * 40), "t", "{}").duplicate_of is None  # usable again


def test_a_state_database_from_before_the_replay_memory_opens_and_works(tmp_path: Path):
    """A database written by the schema-1 SQL as it stood before issue 16 (no deliveries
    table): the store adds what is missing and reads and writes it as its own."""
    golden = Path(__file__).parent / "golden" / "daemon-state-schema-1.sql"
    db = tmp_path / "state.db"
    with sqlite3.connect(db) as conn:
        conn.executescript(golden.read_text())
        conn.execute("INSERT INTO meta VALUES ('schema', '1')")
    store = Store(db)
    acc = store.submit(new_job(), "test", "{}", ("attrib:v1:abc",), None)
    assert store.submit(new_job(), "test", "{}", ("attrib:v1:abc",), None) == Accepted(acc.job_id, acc.flag_id, None, replay=True)
    job = store.claim("A")
    assert job is not None and job.id == acc.job_id and job.state is JobState.RUNNING
    assert store.counts()["flags"] == 1 and store.integrity() == "ok"


def test_replay_memory_expires_with_the_signed_time(store: Store):
    first = store.submit(new_job(), "test", "{}", ("k-old",), 1.0)  # its tolerance ended long ago
    assert store.answered(["k-old"]) is None  # (the signature's timestamp refuses it from then on)
    kept = store.submit(new_job(bad="c" * 40), "test", "{}", ("k-new",), 4e9)
    assert store.answered(["k-new", "other"]) == Accepted(kept.job_id, kept.flag_id, None, replay=True)
    with sqlite3.connect(store.path) as conn:  # the expired key was pruned when the next flag came
        assert [r[0] for r in conn.execute("SELECT key FROM deliveries")] == ["k-new"]
    assert first.job_id != kept.job_id
