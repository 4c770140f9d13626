"""Builds and benchmark rounds as jobs on a Slurm cluster, through Slurm's own commands.

attrib hands work to Slurm and keeps no queue of its own: a build is one batch job (the
evaluation stage's build threads submit several at once, up to [slurm] max_builds); a measurement round
is one allocation on one node (`round()`), and every run of the round is a step in it
(`srun --jobid`), so the pairing of the round's runs cancels that node's drift. Every call is
an argv list (sbatch --parsable, srun, squeue --json, scontrol, scancel, sinfo): no shell
sees user input. The argv themselves are planned in slurm_plan.py (pure, tested without a
cluster); this module runs them, polls with back-off (one squeue for every job in flight,
shared by the build threads) and counts every call.

Faults are failed runs, never verdicts: a build whose job Slurm lost (node down, preempted,
cancelled by an admin, failed to launch or to start) is resubmitted, off that node where
another exists, up to max_retries times; a round whose allocation is lost fails its remaining
runs with Slurm's reason and the next round gets a fresh allocation elsewhere. Ctrl-C, SIGTERM,
a daemon cancel or stop, and `close()` scancel every job this run submitted and wait until
squeue no longer lists them; a daemon restarted after a kill -9 cancels the jobs of the
daemon job it resumes before measuring again (they are named after it), and the recorded
runs are replayed, not measured twice (daemon/recording.py).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from attrib.errors import SlurmUnavailable
from attrib.evaluate.executors.base import (
    Executor,
    ProcessResult,
    SlurmBuildJob,
    SlurmDescription,
    SlurmRound,
    command_environment,
)
from attrib.evaluate.executors.local import run_process
from attrib.evaluate.executors.slurm_cli import CLI_TIMEOUT_S, SlurmCli
from attrib.evaluate.executors.slurm_jobs import SlurmJobs
from attrib.evaluate.executors.slurm_plan import (
    Ending,
    JobKind,
    SlurmState,
    build_time_min,
    ending,
    exclusion,
    job_name,
    run_prefix,
    sbatch_build_argv,
    sbatch_round_argv,
    srun_check_argv,
    srun_step_argv,
    with_class,
)
from attrib.recipe import BenchmarkSpec, BuildSpec, SlurmClass, SlurmSpec

log = logging.getLogger("attrib.slurm")

STEP_POLL_S = 0.5  # how often a running step checks for a cancel or a stop
STAMP_VAR = "ATTRIB_STAMP"
SLURM_CLIENT_ENV = ("SLURM_CONF",)  # what sbatch and srun need to find the cluster; more: [build] pass_env

# attrib's batch script: stamps the command's start and end (the per-job overhead figures)
# and runs its arguments as they are. It is the same text for every job; no user input in it.
JOB_SCRIPT = """#!/bin/sh
# written by attrib (executors/slurm.py): run the arguments, stamping start and end
[ -n "$ATTRIB_STAMP" ] && date +%s.%N > "$ATTRIB_STAMP.start"
"$@"
rc=$?
[ -n "$ATTRIB_STAMP" ] && date +%s.%N > "$ATTRIB_STAMP.end"
exit $rc
"""


@dataclass
class _Round:
    index: int
    job_id: int | None = None
    node: str = ""
    fault: str = ""  # set once the allocation is lost: the round's remaining runs fail
    lost: list[str] = field(default_factory=list)  # allocations lost before a run started (retried)
    runs: int = 0
    submit_to_start_s: float | None = None
    spec: SlurmSpec | None = None  # placement of the allocation (a machine class's); None: the table's
    machine_class: str = ""


def _read_stamp(path: Path) -> float | None:
    try:
        return float(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _check_shared(spec: SlurmSpec, cli: SlurmCli, workdir: Path, logs: Path, script: Path, run_id: str) -> None:
    """Checkouts and builds must be on a filesystem every node mounts: check it now, with
    one short job that reads a token written here, rather than fail every build later."""
    shared = spec.shared_dir
    if shared and not workdir.is_relative_to(Path(shared)):
        raise SlurmUnavailable(
            f"[slurm] shared_dir {shared}: the work dir {workdir} is not under it; "
            "give --workdir under it, or leave --workdir out to use it"
        )
    fresh = not workdir.exists()  # bad input leaves nothing behind: remove it again on failure
    logs.mkdir(parents=True, exist_ok=True)
    if not script.exists() or script.read_text() != JOB_SCRIPT:
        script.write_text(JOB_SCRIPT)
    script.chmod(0o755)
    token = secrets.token_hex(8)
    token_file = logs / f".shared-check-{run_id}"
    token_file.write_text(token)
    try:
        res = cli.call(srun_check_argv(spec, job_name(run_id, JobKind.CHECK), token_file, workdir))
    finally:
        token_file.unlink(missing_ok=True)
    if res.returncode != 0 or res.stdout.strip() != token:
        said = (res.stderr.strip() or res.stdout.strip() or f"exit {res.returncode}").splitlines()[-1]
        if fresh:
            shutil.rmtree(workdir, ignore_errors=True)
        raise SlurmUnavailable(
            f"work dir {workdir}: a Slurm node cannot read it ({said}); checkouts and builds must be on a "
            "filesystem every node mounts: set [slurm] shared_dir (docs/slurm.md)"
        )


class SlurmExecutor:
    name = "slurm"

    def __init__(
        self, spec: SlurmSpec, build: BuildSpec, workdir: Path, *, bench: BenchmarkSpec | None = None,
        run_id: str | None = None, cli: SlurmCli | None = None,
    ) -> None:  # fmt: skip
        self.spec = spec
        self.build_spec = build
        self.workdir = workdir
        self.bench = bench
        self.run_id = run_id or uuid.uuid4().hex[:8]
        self.cli = cli or SlurmCli()
        self.prefix = run_prefix(self.run_id)
        self.slurm_jobs = SlurmJobs(spec, self.cli, self.prefix)  # submitted, cancelled, waits, stops
        self.watcher = self.slurm_jobs.watcher
        self.logs = workdir / "slurm"
        self.script = self.logs / "attrib-job.sh"
        self.bad_nodes: set[str] = set()
        self.rounds: list[SlurmRound] = []
        self.jobs: list[SlurmBuildJob] = []  # one entry per build job: node, state, overheads
        self.step_overheads: list[float] = []
        self._round: _Round | None = None
        self._lock = threading.Lock()
        self._builds = threading.BoundedSemaphore(spec.max_builds)
        self._closed = False
        self.cli.require_controller()
        self.all_nodes = self.cli.nodes(spec.partition)
        if not self.all_nodes:
            where = f"partition {spec.partition!r}" if spec.partition else "the default partition"
            raise SlurmUnavailable(f"--executor slurm: {where} has no nodes (sinfo lists none)")
        self.orphans_cancelled = self._cancel_leftovers() if run_id else 0
        _check_shared(spec, self.cli, workdir, self.logs, self.script, self.run_id)
        self.slurm_jobs.hook_signals()

    # --- plan-time checks -----------------------------------------------------------------

    def _cancel_leftovers(self) -> int:
        """Jobs of this run id still in Slurm (a daemon killed with -9): cancel them before
        measuring again. Their runs were never recorded, so nothing is counted twice."""
        jobs = self.cli.jobs() or []
        live = [j.job_id for j in jobs if j.name.startswith(self.prefix) and j.active]
        if live:
            log.warning("cancelling %d job(s) of %s left from an earlier attempt: %s", len(live), self.run_id, live)
            self.slurm_jobs.cancel_and_wait(live)
        return len(live)

    def watch(self, should_stop: Callable[[], str | None]) -> None:
        """The daemon's stop check (cancel, daemon stopping, lease lost): polled while jobs wait."""
        self.slurm_jobs.watch(should_stop)

    def environment(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """What sbatch and srun are run with, and so what their jobs and steps get (Slurm exports
        the submitting environment): base.command_environment and the client's SLURM_CLIENT_ENV,
        never attrib's whole environment."""
        client = {k: os.environ[k] for k in SLURM_CLIENT_ENV if k in os.environ}
        return command_environment(self.build_spec.pass_env, client | dict(env or {}))

    # --- builds ---------------------------------------------------------------------------

    def identity(self) -> str:
        # The node's toolchain decides the output: the partition (or the container) names it.
        return f"slurm:{self.spec.partition or 'default'}:{self.spec.container_image or 'host'}"

    def shell(self, checkout: Path, command: str, env: Mapping[str, str], timeout_s: float) -> ProcessResult:
        faults: list[str] = []
        with self._builds:
            for attempt in range(self.spec.max_retries + 1):
                name = job_name(self.run_id, JobKind.BUILD, f"{checkout.name[:12]}-{attempt}")
                done = self._build_job(name, checkout, ["sh", "-c", command], env, timeout_s)
                if isinstance(done, ProcessResult):
                    if faults:
                        done = replace(done, stderr=f"slurm: retried after: {'; '.join(faults)}\n{done.stderr}")
                    return done
                faults.append(done)
                log.warning("build %s: %s; %s", checkout.name, done,
                            "resubmitting" if attempt < self.spec.max_retries else "giving up")  # fmt: skip
        why = "; ".join(faults)
        return ProcessResult(None, "", f"slurm: the build job was lost {len(faults)} times: {why}\n", False, 0.0)

    def _build_job(
        self, name: str, checkout: Path, argv: list[str], env: Mapping[str, str], timeout_s: float
    ) -> ProcessResult | str:
        """One build job: its result, or the fault that lost it (to retry)."""
        stamp = self.logs / f"{name}.stamp"
        job_env = self.environment(env) | {STAMP_VAR: str(stamp)}
        exclude = exclusion(self.bad_nodes, self.all_nodes)
        argv = sbatch_build_argv(
            self.spec, name, checkout, self.logs, self.script, argv, build_time_min(self.spec, timeout_s),
            self.workdir, exclude,
        )  # fmt: skip
        submitted, t0 = time.time(), time.monotonic()
        job_id, err = self.slurm_jobs.submit(argv, name, job_env)
        if job_id is None:
            return f"sbatch refused {name}: {err}"
        info, action = self.slurm_jobs.wait(job_id, timeout_s)
        done_at = time.time()
        out_path, err_path = self.logs / f"{name}-{job_id}.out", self.logs / f"{name}-{job_id}.err"
        out = out_path.read_text(errors="replace") if out_path.exists() else ""
        errs = err_path.read_text(errors="replace") if err_path.exists() else ""
        started, ended = _read_stamp(Path(f"{stamp}.start")), _read_stamp(Path(f"{stamp}.end"))
        for leftover in (out_path, err_path, Path(f"{stamp}.start"), Path(f"{stamp}.end")):
            leftover.unlink(missing_ok=True)
        duration = time.monotonic() - t0
        end = ending(info, job_id in self.slurm_jobs.cancelled)
        with self._lock:
            self.jobs.append(
                SlurmBuildJob(
                    job=job_id, name=name, node=info.nodes, state=info.state.value, reason=info.reason,
                    submit_to_start_s=None if started is None else round(started - submitted, 3),
                    end_to_result_s=None if ended is None else round(done_at - ended, 3),
                )
            )  # fmt: skip
        if action == "timeout" or end is Ending.TIMED_OUT:
            return ProcessResult(None, out, errs + f"\nslurm: {info.describe()}\n", True, duration, info.nodes)
        if action == "start":
            return f"{info.describe()}: not started after {self.spec.start_timeout_s:g} s"
        if end is Ending.EXITED:
            code = (
                info.exit_status if info.exit_status is not None else (0 if info.state is SlurmState.COMPLETED else 1)
            )
            return ProcessResult(code, out, errs, False, duration, info.nodes)
        if info.state is SlurmState.UNKNOWN:
            self.slurm_jobs.cancel([job_id])  # lost from sight, maybe not from the cluster: never leave it running
        if info.nodes:
            self.bad_nodes.add(info.nodes)
        return info.describe()

    # --- rounds ---------------------------------------------------------------------------

    @contextmanager
    def round(self, cls: SlurmClass | None = None) -> Iterator[object]:
        """One allocation on one node for the runs inside (taken at the first run), on a node
        of the machine class `cls` where one is given."""
        if self._round is not None:  # nested: the outer round holds the node
            if cls is not None and self._round.machine_class != cls.label:
                raise SlurmUnavailable(f"a round of class {cls.label} inside one of {self._round.machine_class or 'none'}")
            yield self._round
            return
        current = _Round(len(self.rounds), spec=with_class(self.spec, cls), machine_class=cls.label if cls else "")
        self._round = current
        try:
            yield current
        finally:
            self._round = None
            if current.job_id is not None:
                self.slurm_jobs.cancel([current.job_id])
            self.rounds.append(
                SlurmRound(
                    round=current.index, job=current.job_id, node=current.node, runs=current.runs,
                    fault=current.fault, lost=tuple(current.lost), submit_to_start_s=current.submit_to_start_s,
                    machine_class=current.machine_class,
                )
            )  # fmt: skip

    def _allocate(self, r: _Round) -> None:
        faults = []
        for attempt in range(self.spec.max_retries + 1):
            name = job_name(self.run_id, JobKind.ROUND, f"{r.index}" + (f"-{attempt}" if attempt else ""))
            spec = r.spec or self.spec
            argv = sbatch_round_argv(spec, name, self.logs, self.script, exclusion(self.bad_nodes, self.all_nodes))
            submitted = time.monotonic()
            job_id, err = self.slurm_jobs.submit(argv, name, self.environment())
            if job_id is None:
                faults.append(f"sbatch refused {name}: {err}")
                continue
            info, action = self.slurm_jobs.wait(job_id, None)
            if info.state is SlurmState.RUNNING and not action:
                r.submit_to_start_s = round(time.monotonic() - submitted, 3)
                # A first, empty step: the node is still starting the batch step, which would
                # disturb whichever run came first; and a node that cannot start steps shows here.
                warm = run_process(srun_step_argv(spec, job_id, self.workdir, self.workdir, ["true"], None),
                                   self.workdir, self.environment(), CLI_TIMEOUT_S)  # fmt: skip
                if warm.ok:
                    r.job_id, r.node = job_id, info.nodes
                    return
                info = self.watcher.refresh(job_id) or info
                action = f"its first step failed: {(warm.stderr.strip() or 'timed out').splitlines()[-1]}"
            self.slurm_jobs.cancel([job_id])
            if action == "start":
                action = f"not started after {self.spec.start_timeout_s:g} s"
            why = info.describe() + (f": {action}" if action else "")
            if info.nodes:
                self.bad_nodes.add(info.nodes)
            faults.append(why)
            r.lost.append(why)
            log.warning("round %d: allocation %s", r.index, why)
        r.fault = "; ".join(faults)

    def run(self, checkout: Path, argv: Sequence[str], timeout_s: float, cls: SlurmClass | None = None) -> ProcessResult:
        if self._round is None or cls is not None:  # a run outside a round is a round of one
            with self.round(cls):
                return self._step(checkout, argv, timeout_s)
        return self._step(checkout, argv, timeout_s)

    def placed(self, cls: SlurmClass | None) -> Executor:
        """This executor with its rounds and runs on nodes of the machine class `cls` (builds
        stay where the table puts them); itself when there is none."""
        return self if cls is None else _Placed(self, cls)

    def _step(self, checkout: Path, argv: Sequence[str], timeout_s: float) -> ProcessResult:
        r = self._round
        assert r is not None
        if not r.fault and r.job_id is None:
            self._allocate(r)
        if r.fault or r.job_id is None:
            return ProcessResult(
                None, "", f"slurm: not run: the round's allocation is lost: {r.fault}\n", False, 0.0, r.node
            )
        stamp = self.logs / f"step-{r.job_id}-{r.runs}.stamp"
        script = None if self.spec.container_image else self.script
        step = srun_step_argv(r.spec or self.spec, r.job_id, checkout, self.workdir, list(argv), script)
        res = self._run_step(step, self.environment() | {STAMP_VAR: str(stamp)}, timeout_s, r.job_id)
        r.runs += 1
        started, ended = _read_stamp(Path(f"{stamp}.start")), _read_stamp(Path(f"{stamp}.end"))
        for leftover in (Path(f"{stamp}.start"), Path(f"{stamp}.end")):
            leftover.unlink(missing_ok=True)
        if started is not None and ended is not None:
            self.step_overheads.append(max(0.0, res.duration_s - (ended - started)))
        if res.timed_out:
            # srun is killed, its step might linger: cancel the allocation so nothing stray
            # runs next to the round's later runs; they fail and the next round starts afresh.
            self.slurm_jobs.cancel([r.job_id])
            r.fault = f"a run timed out after {timeout_s:g} s; the allocation was cancelled"
            return replace(res, node=r.node)
        if res.returncode != 0:
            info = self.watcher.refresh(r.job_id)
            if info is None or info.state is not SlurmState.RUNNING:
                why = info.describe() if info is not None else f"job {r.job_id} unknown to the controller"
                r.fault = why
                if r.node:
                    self.bad_nodes.add(r.node)
                log.warning("round %d: the allocation is lost: %s", r.index, why)
                return ProcessResult(
                    None,
                    res.stdout,
                    f"{res.stderr}slurm: the round's allocation is lost: {why}\n",
                    False,
                    res.duration_s,
                    r.node,
                )
        return replace(res, node=r.node)

    def _run_step(self, argv: list[str], env: Mapping[str, str], timeout_s: float, job_id: int) -> ProcessResult:
        """srun in the foreground, with attrib's timeout and stop checks (a daemon cancel must
        not wait for a long step to end by itself)."""
        if not self.slurm_jobs.watched:
            return run_process(argv, self.workdir, env, timeout_s)
        deadline = time.monotonic() + timeout_s
        holder: dict[str, ProcessResult] = {}
        worker = threading.Thread(
            target=lambda: holder.update(r=run_process(argv, self.workdir, env, timeout_s)), daemon=True
        )
        worker.start()
        while worker.is_alive():
            worker.join(STEP_POLL_S)
            if worker.is_alive() and (why := self.slurm_jobs.stop_reason()):
                self.slurm_jobs.unwind(why, [job_id])  # the cancelled allocation ends the step, and srun with it
            if time.monotonic() > deadline + CLI_TIMEOUT_S:
                break
        return holder.get("r") or ProcessResult(None, "", "srun did not return\n", True, timeout_s)

    # --- the rest of the protocol ---------------------------------------------------------

    def describe(self) -> SlurmDescription:
        elapsed_min = max(1e-9, (time.monotonic() - self.cli.started) / 60)
        polls = self.cli.calls["squeue"] + self.cli.calls["scontrol"]
        return SlurmDescription(
            run_id=self.run_id,
            partition=self.spec.partition or "(default)",
            container_image=self.spec.container_image,
            nodes_available=tuple(self.all_nodes),
            nodes_used=tuple(sorted({*(r.node for r in self.rounds if r.node), *(j.node for j in self.jobs if j.node)})),
            jobs_submitted=len(self.slurm_jobs.submitted),
            orphans_cancelled=self.orphans_cancelled,
            calls=dict(self.cli.calls),
            polls_per_min=round(polls / elapsed_min, 2),
            rounds=tuple(self.rounds),
            build_jobs=tuple(self.jobs),
            step_overhead_s=tuple(round(x, 4) for x in self.step_overheads),
        )

    def close(self) -> None:
        """scancel every job this run submitted that may still be there, wait until squeue
        no longer lists them; safe to call more than once."""
        self.slurm_jobs.restore_signals()
        if self._closed:
            return
        self._closed = True
        jobs = self.cli.jobs() or []
        live = sorted({j.job_id for j in jobs if j.name.startswith(self.prefix) and j.active})
        if live:
            self.slurm_jobs.cancel_and_wait(live)


class _Placed:
    """A SlurmExecutor whose rounds go to one machine class: a member's runner and round
    context use it, so its rounds are allocations of its class and paired on that node."""

    def __init__(self, executor: SlurmExecutor, cls: SlurmClass) -> None:
        self.executor, self.cls = executor, cls
        self.name = executor.name

    def identity(self) -> str:
        return self.executor.identity()

    def shell(self, checkout: Path, command: str, env: Mapping[str, str], timeout_s: float) -> ProcessResult:
        return self.executor.shell(checkout, command, env, timeout_s)

    def run(self, checkout: Path, argv: Sequence[str], timeout_s: float) -> ProcessResult:
        return self.executor.run(checkout, argv, timeout_s, self.cls)

    def round(self) -> AbstractContextManager[object]:
        return self.executor.round(self.cls)

    def describe(self) -> SlurmDescription:
        return self.executor.describe()

    def close(self) -> None:
        """The executor is the run's: closed once, by its owner."""
