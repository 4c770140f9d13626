"""The edge to Slurm's commands: every call attrib makes to the cluster goes through `SlurmCli`
(argv lists, no shell, counted per command), and `JobWatcher` turns many threads' waits into
one shared `squeue --json` per interval, backing off while nothing changes. Nothing here
decides anything about builds or rounds (executors/slurm.py does)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence

from attrib.errors import SlurmUnavailable
from attrib.evaluate.executors.slurm_plan import Backoff, JobInfo, job_from_scontrol, job_from_squeue

CLI_TIMEOUT_S = 60.0  # one Slurm command; a controller slower than this counts as not answering


class SlurmCli:
    """The only place attrib runs Slurm's commands; counts each call by command."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.started = time.monotonic()
        self._lock = threading.Lock()

    def call(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None, timeout_s: float = CLI_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        with self._lock:
            self.calls[argv[0]] += 1
        try:
            return subprocess.run(
                list(argv), capture_output=True, text=True, errors="replace", env=None if env is None else dict(env),
                timeout=timeout_s, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        except FileNotFoundError:
            raise SlurmUnavailable(
                f"--executor slurm: {argv[0]} not found on PATH (Slurm's client commands; Debian: slurm-client)"
            ) from None
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(list(argv), -1, "", f"{argv[0]} did not answer within {timeout_s:g} s")

    def require_controller(self) -> None:
        """SlurmUnavailable (exit 2) unless the commands are there and a controller answers."""
        res = self.call(["squeue", "--json", "--me"])
        if res.returncode != 0:
            conf = os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")
            tail = (res.stderr.strip() or f"exit {res.returncode}").splitlines()[-1]
            raise SlurmUnavailable(f"--executor slurm: no Slurm controller answers (SLURM_CONF={conf}): {tail}")

    def submit(self, argv: Sequence[str], env: Mapping[str, str]) -> tuple[int | None, str]:
        """(job id, "") or (None, sbatch's complaint)."""
        res = self.call(argv, env)
        first = res.stdout.strip().split(";")[0]
        if res.returncode == 0 and first.isdigit():
            return int(first), ""
        return None, (res.stderr.strip() or res.stdout.strip() or f"exit {res.returncode}").splitlines()[-1]

    def jobs(self) -> list[JobInfo] | None:
        """Every job of this user the controller knows (pending, running, recently ended).
        22.05's squeue ignores its filters with --json, so the caller filters by name."""
        res = self.call(["squeue", "--json", "--me"])
        if res.returncode != 0:
            return None
        try:
            return [job_from_squeue(j) for j in json.loads(res.stdout).get("jobs", [])]
        except (ValueError, KeyError, TypeError):
            return None

    def show_job(self, job_id: int) -> JobInfo | None:
        res = self.call(["scontrol", "show", "job", "-o", str(job_id)])
        return job_from_scontrol(res.stdout.strip()) if res.returncode == 0 else None

    def cancel(self, job_ids: Sequence[int]) -> None:
        if job_ids:
            self.call(["scancel", *map(str, job_ids)])

    def nodes(self, partition: str | None) -> list[str]:
        argv = ["sinfo", "--noheader", "--Node", "--format=%N"] + ([f"--partition={partition}"] if partition else [])
        res = self.call(argv)
        if res.returncode != 0:
            raise SlurmUnavailable(f"--executor slurm: sinfo failed: {res.stderr.strip() or res.returncode}")
        return sorted(set(res.stdout.split()))


class JobWatcher:
    """One squeue for all of this run's jobs in flight, shared by every waiting thread, at an
    interval that starts short and backs off while nothing changes."""

    def __init__(self, cli: SlurmCli, prefix: str, backoff: Backoff | None = None) -> None:
        self.cli = cli
        self.prefix = prefix
        self.backoff = backoff or Backoff()
        self.latest: dict[int, JobInfo] = {}
        self._cond = threading.Condition()
        self._poll_lock = threading.Lock()
        self._generation = 0
        self._interval = self.backoff.first_s
        self._last = 0.0

    def kick(self) -> None:
        """Something new happened (a submission): look again soon."""
        with self._cond:
            self._interval = self.backoff.first_s

    def _poll(self) -> None:
        jobs = self.cli.jobs()
        with self._cond:
            changed = False
            if jobs is not None:  # a failed poll keeps what the last one saw
                ours = {j.job_id: j for j in jobs if j.name.startswith(self.prefix)}
                changed = any(
                    self.latest.get(k) is None or self.latest[k].state is not j.state for k, j in ours.items()
                )
                self.latest = ours  # a job gone from the listing is looked up with scontrol
            self._interval = self.backoff.first_s if changed else self.backoff.next(self._interval)
            self._last = time.monotonic()
            self._generation += 1
            self._cond.notify_all()

    def next(self, job_id: int) -> JobInfo | None:
        """The job as the next poll (not an earlier one) sees it."""
        with self._cond:
            seen = self._generation
        while True:
            with self._cond:
                if self._generation > seen:
                    return self.latest.get(job_id)
                due = self._last + self._interval - time.monotonic()
            if due <= 0 and self._poll_lock.acquire(blocking=False):
                try:
                    self._poll()
                finally:
                    self._poll_lock.release()
                continue
            with self._cond:
                if self._generation == seen:
                    self._cond.wait(timeout=max(0.05, due))

    def refresh(self, job_id: int) -> JobInfo | None:
        """Poll now (a step just failed: is its allocation still there?)."""
        with self._poll_lock:
            self._poll()
        return self.latest.get(job_id)
