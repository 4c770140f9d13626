"""What attrib asks of Slurm, as data: job names, sbatch/srun argv, and how a job's final state
reads. Pure (no subprocess, no clock), so every argv attrib would submit, pyxis flags
included, is tested without a cluster; executors/slurm.py is the edge that runs them.

Names: every job is `attrib-<run id>-<kind>-<tag>`, so `squeue` finds all of one bisection
(a CLI run: a random id; a daemon job: `d<job id>`, which a restarted daemon looks for).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from attrib.recipe import SlurmClass, SlurmSpec

JOB_PREFIX = "attrib-"
BUILD_TIME_SLACK_MIN = 1  # Slurm's limit is a backstop past attrib's own timeout, not a race with it


class JobKind(StrEnum):
    BUILD = "build"
    ROUND = "round"
    CHECK = "check"  # the plan-time shared-directory check


class SlurmState(StrEnum):
    """Job states as squeue --json and scontrol report them (Slurm 22.05 and later)."""

    PENDING = "PENDING"
    CONFIGURING = "CONFIGURING"
    RUNNING = "RUNNING"
    SUSPENDED = "SUSPENDED"
    COMPLETING = "COMPLETING"
    REQUEUED = "REQUEUED"
    RESIZING = "RESIZING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    REVOKED = "REVOKED"
    SPECIAL_EXIT = "SPECIAL_EXIT"
    UNKNOWN = "UNKNOWN"  # not (or no longer) known to the controller


ACTIVE_STATES = frozenset(
    {
        SlurmState.PENDING, SlurmState.CONFIGURING, SlurmState.RUNNING, SlurmState.SUSPENDED,
        SlurmState.COMPLETING, SlurmState.REQUEUED, SlurmState.RESIZING,
    }
)  # fmt: skip


class Ending(StrEnum):
    """How a finished job reads for attrib."""

    EXITED = "exited"  # the command ran to an exit status (0 or not): the command's own result
    TIMED_OUT = "timed_out"  # it hit its time limit: a timeout of the command
    FAULT = "fault"  # Slurm lost it (node down, preempted, cancelled by someone, failed to launch)


# A FAILED job whose reason is one of these ran the command and it exited non-zero; any other
# reason (JobLaunchFailure, a prolog error...) means the command never ran properly.
COMMAND_FAILURE_REASONS = frozenset({"NonZeroExitCode", "None", ""})


@dataclass(frozen=True)
class JobInfo:
    job_id: int
    name: str
    state: SlurmState
    nodes: str = ""
    reason: str = ""
    exit_status: int | None = None  # the command's exit status when it exited
    exit_signal: int = 0
    submit_time: int = 0  # epoch seconds, as the controller records them
    start_time: int = 0
    end_time: int = 0

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    def describe(self) -> str:
        """Slurm's own account of the job, for logs and run errors."""
        where = f" on {self.nodes}" if self.nodes else ""
        why = f", reason {self.reason}" if self.reason and self.reason != "None" else ""
        sig = f", signal {self.exit_signal}" if self.exit_signal else ""
        return f"job {self.job_id} ({self.name}) {self.state.value}{where}{why}{sig}"


def _state(raw: Any) -> SlurmState:
    if isinstance(raw, list):  # Slurm 23.02+: a list of the state and its flags
        raw = raw[0] if raw else "UNKNOWN"
    try:
        return SlurmState(str(raw).split()[0])
    except (ValueError, IndexError):
        return SlurmState.UNKNOWN


def _exit(raw: Any) -> tuple[int | None, int]:
    """(exit status, signal) from squeue's exit_code: a wait status in 22.05, an object later."""
    if isinstance(raw, dict):  # 23.02+: {"status": [...], "return_code": {...}, "signal": {...}}
        rc, sig = raw.get("return_code"), raw.get("signal", {})
        code = rc.get("number") if isinstance(rc, dict) else rc
        num = sig.get("id", {}).get("number", 0) if isinstance(sig, dict) else 0
        return (int(code) if isinstance(code, int) else None), int(num or 0)
    if isinstance(raw, int):
        return (raw >> 8) & 0xFF, raw & 0x7F
    return None, 0


def _epoch(raw: Any) -> int:
    if isinstance(raw, dict):  # 23.02+: {"set": true, "number": N}
        raw = raw.get("number", 0)
    return int(raw) if isinstance(raw, int) else 0


def job_from_squeue(entry: dict[str, Any]) -> JobInfo:
    status, signal = _exit(entry.get("exit_code"))
    return JobInfo(
        job_id=int(entry["job_id"]),
        name=str(entry.get("name", "")),
        state=_state(entry.get("job_state")),
        nodes=str(entry.get("nodes") or ""),
        reason=str(entry.get("state_reason") or ""),
        exit_status=status,
        exit_signal=signal,
        submit_time=_epoch(entry.get("submit_time")),
        start_time=_epoch(entry.get("start_time")),
        end_time=_epoch(entry.get("end_time")),
    )


def job_from_scontrol(line: str) -> JobInfo | None:
    """`scontrol show job -o ID`: one line of Key=Value fields (the fallback once squeue no
    longer lists a job)."""
    fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
    if "JobId" not in fields:
        return None
    code, _, sig = fields.get("ExitCode", "").partition(":")
    nodes = fields.get("NodeList", "")
    return JobInfo(
        job_id=int(fields["JobId"]),
        name=fields.get("JobName", ""),
        state=_state(fields.get("JobState", "UNKNOWN")),
        nodes="" if nodes == "(null)" else nodes,
        reason=fields.get("Reason", ""),
        exit_status=int(code) if code.isdigit() else None,
        exit_signal=int(sig) if sig.isdigit() else 0,
    )


def ending(info: JobInfo, cancelled_by_us: bool = False) -> Ending:
    """How a job that is no longer active ended, from attrib's point of view."""
    if info.state is SlurmState.COMPLETED:
        return Ending.EXITED
    if info.state in (SlurmState.FAILED, SlurmState.OUT_OF_MEMORY) and info.reason in COMMAND_FAILURE_REASONS | {
        "OutOfMemory"
    }:
        return Ending.EXITED
    if info.state is SlurmState.TIMEOUT:
        return Ending.TIMED_OUT
    return Ending.FAULT  # NODE_FAIL, PREEMPTED, BOOT_FAIL, CANCELLED by someone else, launch failures...


def job_name(run_id: str, kind: JobKind, tag: str = "") -> str:
    return f"{JOB_PREFIX}{run_id}-{kind.value}" + (f"-{tag}" if tag else "")


def run_prefix(run_id: str) -> str:
    return f"{JOB_PREFIX}{run_id}-"


def minutes(seconds: float) -> int:
    return max(1, math.ceil(seconds / 60))


def build_time_min(spec: SlurmSpec, build_timeout_s: float) -> int:
    return spec.build_time_min or minutes(build_timeout_s) + BUILD_TIME_SLACK_MIN


def machine_class(spec: SlurmSpec, config: tuple[tuple[str, str], ...]) -> SlurmClass | None:
    """The class a benchmark's configuration names ([slurm.classes]); None: the table's own
    placement. The recipe refuses a configuration that names two."""
    return next((c for c in spec.classes if (c.key, c.value) in config), None)


def with_class(spec: SlurmSpec, cls: SlurmClass | None) -> SlurmSpec:
    """The spec a class's rounds are submitted with: its partition and constraint replace the
    table's (a class is a kind of node; the table's own constraint may name another)."""
    if cls is None:
        return spec
    return replace(
        spec, partition=cls.partition or spec.partition, constraint=cls.constraint or spec.constraint, classes=()
    )


def _placement(spec: SlurmSpec) -> list[str]:
    """Where jobs may go: the same for builds and rounds."""
    out = []
    for flag, value in (("--partition", spec.partition), ("--account", spec.account), ("--qos", spec.qos)):
        if value:
            out.append(f"{flag}={value}")
    if spec.constraint:
        out.append(f"--constraint={spec.constraint}")
    return out


def container_args(spec: SlurmSpec, workdir: Path, chdir: Path | None) -> list[str]:
    """pyxis's srun options: the image, the shared directory mounted at the same path (so a
    checkout's path means the same inside), any extra mounts, and the working directory."""
    if not spec.container_image:
        return []
    shared = spec.shared_dir or str(workdir)
    mounts = [f"{shared}:{shared}", *spec.container_mounts]
    out = [f"--container-image={spec.container_image}", f"--container-mounts={','.join(mounts)}"]
    if chdir is not None:
        out.append(f"--container-workdir={chdir}")
    return out


def sbatch_build_argv(
    spec: SlurmSpec, name: str, checkout: Path, logs: Path, script: Path, argv: list[str], time_min: int,
    workdir: Path, exclude: tuple[str, ...] = (),
) -> list[str]:  # fmt: skip
    """One build command as one batch job. The batch script is attrib's own (it stamps start and
    end and execs its arguments); the command reaches it as arguments, never through a shell
    of attrib's making (the build command itself is `sh -c <command>` as on every executor)."""
    out = ["sbatch", "--parsable", f"--job-name={name}", "--nodes=1", "--ntasks=1", f"--time={time_min}"]
    out += [f"--chdir={checkout}", f"--output={logs}/%x-%j.out", f"--error={logs}/%x-%j.err", "--no-requeue"]
    out += _placement(spec)
    if spec.build_cpus:
        out.append(f"--cpus-per-task={spec.build_cpus}")
    if spec.build_gres:
        out.append(f"--gres={spec.build_gres}")
    if exclude:
        out.append(f"--exclude={','.join(exclude)}")
    out += spec.sbatch_args
    inner = argv
    if spec.container_image:  # pyxis options are srun's: run the command as a step in the container
        inner = ["srun", "--ntasks=1", *container_args(spec, workdir, checkout), *argv]
    return [*out, str(script), *inner]


def sbatch_round_argv(spec: SlurmSpec, name: str, logs: Path, script: Path, exclude: tuple[str, ...] = ()) -> list[str]:
    """The allocation that holds one node for one measurement round: its batch step only
    sleeps; the round's runs are steps in it (`srun --jobid`)."""
    out = ["sbatch", "--parsable", f"--job-name={name}", "--nodes=1", "--ntasks=1", f"--time={spec.round_time_min}"]
    out += [f"--output={logs}/%x-%j.out", f"--error={logs}/%x-%j.err", "--no-requeue"]
    out += _placement(spec)
    if spec.exclusive_rounds:
        out.append("--exclusive")
    if spec.gres:
        out.append(f"--gres={spec.gres}")
    if exclude:
        out.append(f"--exclude={','.join(exclude)}")
    out += spec.sbatch_args
    return [*out, str(script), "sleep", str(spec.round_time_min * 60)]


def srun_step_argv(
    spec: SlurmSpec, job_id: int, checkout: Path, workdir: Path, argv: list[str], script: Path | None
) -> list[str]:
    """One benchmark run as a step of the round's allocation (so: on its node). `--overlap`
    lets the step share the CPUs the sleeping batch step holds. Without a container the run
    goes through attrib's stamping script, which measures the step's launch overhead."""
    out = ["srun", f"--jobid={job_id}", "--overlap", "--nodes=1", "--ntasks=1", f"--chdir={checkout}"]
    if spec.gres:
        out.append(f"--gres={spec.gres}")
    if spec.container_image:
        return [*out, *container_args(spec, workdir, checkout), *argv]
    return [*out, *([str(script)] if script else []), *argv]


def srun_check_argv(spec: SlurmSpec, name: str, token_file: Path, workdir: Path) -> list[str]:
    """The plan-time check that a node sees the work dir: read a token attrib just wrote there."""
    out = ["srun", f"--job-name={name}", "--nodes=1", "--ntasks=1", "--time=2", *_placement(spec)]
    return [*out, *container_args(spec, workdir, None), "cat", str(token_file)]


def exclusion(bad_nodes: set[str], all_nodes: list[str]) -> tuple[str, ...]:
    """Nodes to keep a retry off: those that lost a job, unless that would leave none."""
    keep_off = tuple(sorted(n for n in bad_nodes if n in all_nodes))
    return keep_off if len(keep_off) < len(set(all_nodes)) else ()


@dataclass(frozen=True)
class Backoff:
    """Polling interval: short while jobs change, growing while nothing does (clusters
    rate-limit RPCs; docs/slurm.md gives the figures)."""

    first_s: float = 0.25
    factor: float = 1.5
    max_s: float = 5.0

    def next(self, current: float) -> float:
        return min(self.max_s, current * self.factor)
