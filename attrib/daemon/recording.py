"""Persist every runner call of a job, and replay them when the job resumes.

The search driver (bisection.py) is deterministic given its seed and the sequence of runner results (with one probe per step:
the run order within a round comes from random.Random(seed), builds and verdicts from what the
runner returned). So a resumed job re-runs the driver from the start and, for every runner
call already recorded, gets the stored RunResult back instead of measuring again: it walks
the same path to the point of the kill and only then starts measuring. Calls are keyed by
(checkout key, n-th call for that checkout): the checkout key is the build cache key, stable
across restarts because the work dir lives under --state.

The same object is the job's Events handler: it records builds and progress, and it is where
a cancel request, a stopping daemon or a lost lease unwind the bisection (JobStopped), between
runner calls and before builds.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attrib.core.model import BuildRecord, CommitInfo, Decided, Phase, Verdict
from attrib.daemon.store import Job, Store
from attrib.errors import JobStopped
from attrib.evaluate.runners import Runner, RunResult
from attrib.report.sentences import decided_text, phase_text

PROGRESS_EVERY_S = 1.0  # progress rows are rewritten at most this often (samples are not throttled)


class JobRecorder:
    """Runner wrapper and Events handler of one job attempt."""

    def __init__(self, store: Store, job: Job, owner: str, should_stop: Callable[[], str | None]) -> None:
        self.store = store
        self.job = job
        self.owner = owner
        self.should_stop = should_stop
        self.recorded = store.load_runs(job.id)
        self.calls: Counter[str] = Counter()
        self.seq = 0
        self.replayed = 0
        self.measured = 0
        self._last_progress = 0.0
        self.progress: dict[str, Any] = {
            "attempt": job.attempts,
            "phase": "starting",
            "builds": 0,
            "runs_measured": 0,
            "runs_replayed": 0,
            "runs_recorded_before": len(self.recorded),
            "verdicts": 0,
            "last_verdict": None,
        }

    def _check(self) -> None:
        why = self.should_stop()
        if why is not None:
            raise JobStopped(why)

    def _save(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_progress >= PROGRESS_EVERY_S:
            self._last_progress = now
            self.progress["runs_measured"], self.progress["runs_replayed"] = self.measured, self.replayed
            self.store.set_progress(self.job.id, self.progress)

    # --- the runner wrapper -------------------------------------------------------------------

    def wrap(self, inner: Runner) -> Runner:
        recorder = self

        class RecordingRunner:
            def run(self, checkout: Path) -> RunResult:
                return recorder.run(inner, checkout)

        return RecordingRunner()

    def run(self, inner: Runner, checkout: Path) -> RunResult:
        self._check()
        key = checkout.name
        n = self.calls[key]
        self.calls[key] += 1
        self.seq += 1
        stored = self.recorded.get((key, n))
        if stored is not None:
            self.replayed += 1
            return stored
        result = inner.run(checkout)
        # A cancel that arrived during the run: do not record a sample nobody will use.
        self._check()
        self.store.record_run(self.job.id, self.owner, key, n, self.seq, result)
        self.measured += 1
        self._save()
        return result

    # --- Events ---------------------------------------------------------------------------------

    def phase(self, phase: Phase) -> None:
        self.progress["phase"] = phase_text(phase)
        self._save(force=True)

    def build_started(self, commit: CommitInfo) -> None:
        self._check()

    def build_finished(self, commit: CommitInfo, record: BuildRecord) -> None:
        self.progress["builds"] += 1
        self.store.record_build(
            self.job.id, self.job.attempts, commit.sha, record.key, record.ok, record.cached, record.reason,
            record.duration_s, record.log_path,
        )  # fmt: skip
        self._save()

    def round_done(self, candidate: CommitInfo, reference: CommitInfo, rounds: int, llr: float, samples: int) -> None:
        self._save()

    def verdict(self, candidate: CommitInfo, reference: CommitInfo, verdict: Verdict, detail: Decided) -> None:
        self.progress["verdicts"] += 1
        self.progress["last_verdict"] = f"{candidate.short} vs {reference.short}: {verdict.value} ({decided_text(detail)})"
        self._save(force=True)

    def flush(self) -> None:
        self._save(force=True)
