"""Workers: threads of the daemon process that claim jobs, bisect them and write the results.

A worker claims the oldest queued job (or one whose lease expired: its worker died) and keeps
the lease alive from a heartbeat thread while the bisection runs. Threads, not processes: a
kill -9 of the daemon takes every worker with it, and the restarted daemon takes the job up
again once the lease has expired. Nothing keeps measuring behind its back: every build or
benchmark command runs under a guard that kills its process group when the daemon dies
(executors/guard.py), what a job's commands leave running dies when the job ends, and before
the workers start, the daemon ends whatever the local commands of a dead one still left
(executors/processes.py: found by a token in their environment, never by a bare pid) and, with
the docker executor, removes the containers its jobs left (executors/docker.py).

Daemon jobs run the search with one probe per step, so its run order is a function of the seed alone and
a resumed job replays the recorded runs exactly (daemon/recording.py).
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import traceback
import uuid
from dataclasses import replace
from pathlib import Path

from attrib.core.model import JobState, Phase, Status, Step
from attrib.core.stats import TestConfig
from attrib.daemon.config import Settings
from attrib.daemon.flags import submodule_rule
from attrib.daemon.recording import JobRecorder
from attrib.daemon.store import Job, Store
from attrib.errors import AttribError, JobStopped, StateError
from attrib.fsutil import atomic_write_text
from attrib.report.markdown import write_report
from attrib.result import BisectResult, dump

log = logging.getLogger("attrib.daemon")

POLL_S = 0.5  # an idle worker looks for work this often
MAX_ATTEMPTS = 5  # a job claimed this many times (each time its worker died) is failed, not retried forever
STOP_CANCELLED = "cancelled"
STOP_STOPPING = "daemon stopping"
STOP_LEASE_LOST = "lease lost"
STOP_REASONS = (STOP_CANCELLED, STOP_STOPPING, STOP_LEASE_LOST)


def workdir_for(settings: Settings, repo_path: str) -> Path:
    """One work dir (mirror, build cache) per repository, under --state: jobs on the same
    repository share builds, and a resumed job finds the builds of its earlier attempt."""
    digest = hashlib.sha256(repo_path.encode()).hexdigest()[:12]
    return settings.state / "work" / f"{Path(repo_path).name}-{digest}"


def file_report(sink: str, result: BisectResult, plot: Path | None, filed_root: Path) -> str:
    """File as `attrib bisect --file-issue SINK` does and return what the tracker logged. A
    dir: sink from a flag is a name under --state/filed (flags.py refuses paths). A filing
    failure of any kind (a forge's refusal, a disk error) is recorded on the job, after what
    was logged before it; the result and report are already written and stay with the job."""
    from attrib.tracker import Filing

    if sink.startswith("dir:"):
        sink = f"dir:{filed_root / sink[4:]}"
    lines: list[str] = []
    try:
        filing = Filing.prepare(sink, None, None)
        if filing is not None:
            filing.run(result, plot, lines.append)
    except AttribError as exc:
        return "; ".join([*lines, f"filing to {sink} failed: {exc}"])
    except Exception as exc:  # noqa: BLE001  (filing is the last step: whatever breaks it, the result stays with the job)
        log.exception("filing to %s failed", sink)
        return "; ".join([*lines, f"filing to {sink} failed: {type(exc).__name__}: {exc}"])
    return "; ".join(lines) or f"nothing filed to {sink}"


class Worker(threading.Thread):
    def __init__(self, store: Store, settings: Settings, stopping: threading.Event, index: int) -> None:
        super().__init__(name=f"attrib-worker-{index}", daemon=True)
        self.store = store
        self.settings = settings
        self.stopping = stopping
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{index}:{uuid.uuid4().hex[:6]}"

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                try:
                    job = self.store.claim(self.owner, self.settings.lease_s)
                except StateError as exc:
                    log.error("%s", exc)
                    self.stopping.wait(POLL_S)
                    continue
                if job is None:
                    self.stopping.wait(POLL_S)
                    continue
                if job.attempts > MAX_ATTEMPTS:
                    self.store.finish(job.id, self.owner, JobState.FAILED, error=f"gave up after {MAX_ATTEMPTS} attempts")
                    continue
                self.process(job)
        finally:
            self.store.close()

    def _heartbeat(self, job: Job, lost: threading.Event, done: threading.Event) -> None:
        try:
            while not done.wait(self.settings.lease_s / 3):
                try:
                    if not self.store.heartbeat(job.id, self.owner, self.settings.lease_s):
                        lost.set()
                        return
                except StateError as exc:
                    log.error("job %s: heartbeat: %s", job.id, exc)  # the next one may get through
        finally:
            self.store.close()

    def process(self, job: Job) -> None:
        lost, done = threading.Event(), threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(job, lost, done), name=f"{self.name}-heartbeat", daemon=True)
        beat.start()

        def should_stop() -> str | None:
            if lost.is_set():
                return STOP_LEASE_LOST
            if self.stopping.is_set():
                return STOP_STOPPING
            if self.store.cancel_requested(job.id):
                return STOP_CANCELLED
            return None

        log.info("job %s: attempt %d: %s %s..%s", job.id, job.attempts, job.repo, job.good[:10], job.bad[:10])
        recorder = JobRecorder(self.store, job, self.owner, should_stop)
        try:
            result = self.bisect(job, recorder)
            recorder.phase(Phase(Step.FINISHED, status=result.status))
            filing = self.write_outputs(job, result)
            self.store.finish(
                job.id, self.owner, JobState.DONE, result=result, filing=filing, note=result.status.value
            )
            log.info("job %s: done: %s", job.id, result.status.value)
        except JobStopped as stop:
            recorder.flush()
            if stop.why == STOP_CANCELLED:
                # run_bisect closed the executor (containers gone, no process left): only the
                # state changes; the samples stay for the record.
                self.store.finish(job.id, self.owner, JobState.CANCELLED, note="cancelled while running")
            elif stop.why == STOP_STOPPING:
                self.store.release(job.id, self.owner, "daemon stopping; resumes on restart")
            log.info("job %s: %s", job.id, stop.why)
        except StateError as exc:
            # The database itself is unusable right now: leave the job to its lease, it is
            # taken up again when the lease expires (attempts bound the retries).
            log.error("job %s: %s", job.id, exc)
        except AttribError as exc:
            self.store.finish(job.id, self.owner, JobState.FAILED, error=str(exc))
            log.info("job %s: failed: %s", job.id, exc)
        except Exception as exc:  # a bug in one job must not take the daemon's worker down
            log.error("job %s: internal error\n%s", job.id, traceback.format_exc())
            self.store.finish(job.id, self.owner, JobState.FAILED, error=f"internal error: {type(exc).__name__}: {exc}")
        finally:
            done.set()
            beat.join()

    def bisect(self, job: Job, recorder: JobRecorder) -> BisectResult:
        from attrib.job import plan, run_bisect

        # a group job bisects all its benchmarks (job_members, issue 29); another, its one
        members = self.store.members([job.id]).get(job.id)
        p = plan(
            Path(job.repo_path), job.good, job.bad, Path(job.recipe), members or ([job.benchmark] if job.benchmark else []),
            self.settings.executor,
            workdir_for(self.settings, job.repo_path), run_id=f"d{job.id}",
        )  # fmt: skip
        # slurm: its jobs are named after the daemon job (a restart finds and cancels leftovers),
        # and a cancel or a stop reaches the jobs it waits on, not only the next runner call.
        p = replace(p, stop_check=recorder.should_stop, submodule_urls=submodule_rule(job.repo, self.settings.allow_http_repos))
        # probes=1: see the module docstring; verify=confirm: the CLI's default.
        return run_bisect(p, TestConfig(), job.seed, recorder, probes=1, wrap_runner=recorder.wrap)

    def write_outputs(self, job: Job, result: BisectResult) -> str | None:
        out = self.settings.job_dir(job.id)
        from attrib.daemon.nightly import environment_not_reproduced, origin

        env = ""
        if detected := origin(self.settings, job.id):  # a change point in nightly history
            result = replace(result, detected=detected)
            if result.status is Status.NOT_REPRODUCED and any(cp.environment for cp in detected):
                # the controlled comparison did not reproduce a change whose nights differ in
                # environment: the environment's, filed as such (docs/history.md)
                env = environment_not_reproduced(self.settings, job.id)
        atomic_write_text(out / "result.json", dump(result))
        plot = write_report(result, out / "report.md")
        if job.file_issue is None:
            return env or None
        return "; ".join(x for x in (file_report(job.file_issue, result, plot, self.settings.state / "filed"), env) if x)


class WorkerPool:
    def __init__(self, store: Store, settings: Settings) -> None:
        self.stopping = threading.Event()
        self.settings = settings
        self.workers = [Worker(store, settings, self.stopping, i) for i in range(settings.workers)]

    def start(self) -> None:
        from attrib.evaluate.executors.processes import end_leftovers

        if ended := end_leftovers(self.settings.state / "work"):
            log.warning("ended %d process(es) the local commands of a previous daemon left running", ended)
        if self.settings.executor == "docker":
            self._remove_containers()
        for w in self.workers:
            w.start()

    def _remove_containers(self) -> None:
        from attrib.evaluate.executors.docker import connect, remove_leftovers

        try:
            if removed := remove_leftovers(connect(), self.settings.state / "work"):
                log.warning("removed %d container(s) the jobs of a previous daemon left running", removed)
        except AttribError as exc:  # the engine is down: each job will say so when it starts
            log.error("could not look for containers a previous daemon left: %s", exc)

    def stop(self, timeout_s: float) -> None:
        """Ask every worker to stop at its next runner call (its job goes back to the queue)."""
        self.stopping.set()
        for w in self.workers:
            w.join(timeout_s)
