"""The jobs one Slurm run submitted: submit, wait, cancel, and the stop checks that cut a wait short.

SlurmExecutor (slurm.py) decides what to submit and what a job's end means; this keeps the
bookkeeping every decision shares: which jobs this run submitted and cancelled, one squeue poll
for all of them (JobWatcher), and the ways a wait ends early: Ctrl-C/SIGTERM on the main thread,
or the daemon's stop check (cancel, daemon stopping, lease lost). Either cancels the jobs being
waited on before it unwinds, so nothing of this run is left running in the cluster.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from attrib.errors import JobStopped, SlurmInterrupted
from attrib.evaluate.executors.slurm_cli import JobWatcher, SlurmCli
from attrib.evaluate.executors.slurm_plan import JobInfo, SlurmState
from attrib.recipe import SlurmSpec

log = logging.getLogger("attrib.slurm")

CLOSE_WAIT_S = 60.0  # how long close() waits for squeue to stop listing cancelled jobs
INTERRUPTED = "interrupted"


class SlurmJobs:
    def __init__(self, spec: SlurmSpec, cli: SlurmCli, prefix: str) -> None:
        self.spec = spec
        self.cli = cli
        self.prefix = prefix
        self.watcher = JobWatcher(cli, prefix)
        self.submitted: dict[int, str] = {}
        self.cancelled: set[int] = set()
        self._lock = threading.Lock()
        self._aborted = threading.Event()
        self._should_stop: Callable[[], str | None] | None = None
        self._saved_handlers: dict[int, Any] = {}

    # --- stopping -------------------------------------------------------------------------

    def watch(self, should_stop: Callable[[], str | None]) -> None:
        """The daemon's stop check (cancel, daemon stopping, lease lost): polled while jobs wait."""
        self._should_stop = should_stop

    @property
    def watched(self) -> bool:
        return self._should_stop is not None

    def hook_signals(self) -> None:
        """Ctrl-C/SIGTERM reach the main thread only; build threads waiting on jobs learn of
        it here, cancel their jobs and unwind, instead of waiting out builds nobody wants."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(sig)
            self._saved_handlers[sig] = previous

            def handler(signum: int, frame: Any, previous: Any = previous) -> None:
                if previous == signal.SIG_IGN:
                    return
                self._aborted.set()
                if callable(previous):
                    previous(signum, frame)
                raise KeyboardInterrupt

            signal.signal(sig, handler)

    def restore_signals(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig, previous in self._saved_handlers.items():
                signal.signal(sig, previous)
        self._saved_handlers.clear()

    def stop_reason(self) -> str | None:
        if self._aborted.is_set():
            return INTERRUPTED
        return self._should_stop() if self._should_stop is not None else None

    def unwind(self, why: str, job_ids: Sequence[int]) -> None:
        self.cancel(job_ids)
        if why == INTERRUPTED:
            raise SlurmInterrupted(f"interrupted; cancelled Slurm job(s) {', '.join(map(str, job_ids)) or '(none)'}")
        raise JobStopped(why)

    # --- jobs -----------------------------------------------------------------------------

    def submit(self, argv: list[str], name: str, env: Mapping[str, str]) -> tuple[int | None, str]:
        job_id, err = self.cli.submit(argv, env)
        if job_id is not None:
            with self._lock:
                self.submitted[job_id] = name
            self.watcher.kick()
        return job_id, err

    def cancel(self, job_ids: Sequence[int]) -> None:
        with self._lock:
            self.cancelled.update(job_ids)
        self.cli.cancel(list(job_ids))

    def cancel_and_wait(self, job_ids: Sequence[int]) -> None:
        self.cancel(job_ids)
        deadline = time.monotonic() + CLOSE_WAIT_S
        pending = set(job_ids)
        while pending and time.monotonic() < deadline:
            jobs = self.cli.jobs()
            if jobs is None:
                break
            active = {j.job_id for j in jobs if j.active}
            pending &= active
            if pending:
                time.sleep(0.5)
        if pending:
            log.warning("Slurm still lists job(s) %s %g s after scancel", sorted(pending), CLOSE_WAIT_S)

    def live(self) -> list[int]:
        """This run's jobs Slurm still lists as pending or running, by their name's prefix."""
        jobs = self.cli.jobs() or []
        return sorted({j.job_id for j in jobs if j.name.startswith(self.prefix) and j.active})

    def info(self, job_id: int) -> JobInfo:
        info = self.watcher.next(job_id)
        if info is None:  # not in squeue's answer: aged out of the controller's memory, or never seen
            info = self.cli.show_job(job_id)
        return info or JobInfo(
            job_id, self.submitted.get(job_id, ""), SlurmState.UNKNOWN, reason="unknown to the controller"
        )

    def wait(self, job_id: int, run_timeout_s: float | None) -> tuple[JobInfo, str]:
        """Wait until the job ends (run_timeout_s given: a build) or runs (None: a round's
        allocation). Returns its info and "" or what attrib did to it ("start" / "timeout")."""
        start_deadline = time.monotonic() + self.spec.start_timeout_s
        running_since: float | None = None
        while True:
            if why := self.stop_reason():
                self.unwind(why, [job_id])
            info = self.info(job_id)
            now = time.monotonic()
            if not info.active:
                return info, ""
            if info.state is SlurmState.RUNNING:
                if run_timeout_s is None:
                    return info, ""
                running_since = running_since or now
                if now - running_since > run_timeout_s:
                    self.cancel([job_id])
                    return info, "timeout"
            elif running_since is None and now > start_deadline:
                self.cancel([job_id])
                return info, "start"
