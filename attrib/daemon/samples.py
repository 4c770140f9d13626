"""The runs and builds recorded for a daemon job, in the daemon's store (daemon/store.py's Store
is one): every runner call committed on its own, so a kill -9 loses at most the call in flight,
and read back when the job resumes (daemon/recording.py replays them rather than measure twice).
"""

from __future__ import annotations

import json
import time
from typing import Any

from attrib.daemon.schema import BUILDS, SAMPLES, Build, Sample
from attrib.errors import StateError
from attrib.evaluate.runners import RunResult
from attrib.sqlite import SqliteStore


class SampleRecords(SqliteStore):
    """The store's writes and reads of samples and builds."""

    def load_runs(self, job_id: str) -> dict[tuple[str, int], RunResult]:
        """Every runner call recorded for a job, by (checkout key, n-th call for that key)."""
        with self._errors("read samples"):
            rows = self._conn().execute(
                "SELECT key, n, samples, error, duration_s, excluded FROM samples WHERE job_id = ?", (job_id,)
            ).fetchall()
        return {
            (r["key"], r["n"]): RunResult(
                tuple(json.loads(r["samples"])), r["error"], r["duration_s"], tuple(json.loads(r["excluded"]))
            )
            for r in rows
        }

    def record_run(self, job_id: str, owner: str, key: str, n: int, seq: int, run: RunResult) -> None:
        """One runner call, committed on its own: a kill -9 loses at most the call in flight.
        Only the lease holder may write, so a worker that lost its job cannot add samples."""
        with self._errors("record samples"), self._write() as c:
            if c.execute("SELECT 1 FROM jobs WHERE id = ? AND lease_owner = ?", (job_id, owner)).fetchone() is None:
                raise StateError(f"job {job_id}: lease lost; samples not recorded")
            row = Sample(
                job_id, key, n, seq, json.dumps(list(run.samples)), run.error, run.duration_s, json.dumps(list(run.excluded)), time.time()
            )
            c.execute(SAMPLES.insert(), SAMPLES.values(row))

    def record_build(
        self, job_id: str, attempt: int, commit: str, key: str, ok: bool, cached: bool, reason: str, duration_s: float, log_path: str
    ) -> None:
        with self._errors("record a build"), self._write() as c:
            row = Build(job_id, attempt, commit, key, ok, cached, reason, duration_s, log_path, time.time())
            c.execute(BUILDS.insert(), BUILDS.values(row))

    def builds(self, job_id: str) -> list[dict[str, Any]]:
        with self._errors("read builds"):
            rows = self._conn().execute("SELECT * FROM builds WHERE job_id = ? ORDER BY id", (job_id,)).fetchall()
        return [dict(r) for r in rows]
