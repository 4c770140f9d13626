"""The recipe's [slurm] table (docs/slurm.md): where and how --executor slurm submits builds
and measurement rounds. Every default is a named constant here and a row in the docs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attrib.errors import ConfigError
from attrib.recipe.checks import (
    _BOOL,
    _NON_NEG_INT,
    _OPT_STR_LIST,
    _POS_INT,
    _POS_NUM,
    _STR,
    Check,
    _check_table,
    _rule,
    _table,
)

DEFAULT_SLURM_ROUND_TIME_MIN = 60  # wall-clock limit of one measurement round's allocation
DEFAULT_SLURM_MAX_BUILDS = 8  # builds in flight as separate Slurm jobs (also capped by --probes)
DEFAULT_SLURM_MAX_RETRIES = 2  # resubmissions of a build whose job Slurm lost (node down, preempted...)
DEFAULT_SLURM_START_TIMEOUT_S = 3600.0  # a job still pending after this is a failed start
# sbatch options attrib sets itself: sbatch_args may not override them.
SLURM_RESERVED_ARGS = (
    "--job-name", "--output", "--error", "--parsable", "--wrap", "--chdir", "--nodes", "--ntasks",
    "--time", "--partition", "--account", "--qos", "--gres", "--constraint", "--exclude",
    "--nodelist", "--requeue", "--no-requeue", "--array", "--export", "--wait", "--dependency",
    "--cpus-per-task", "--exclusive",
)  # fmt: skip


@dataclass(frozen=True)
class SlurmClass:
    """[slurm.classes."key=value"]: where a benchmark whose configuration has key = value runs
    its rounds (docs/slurm.md). Its partition and constraint replace the table's for those rounds."""

    key: str
    value: str
    partition: str | None = None
    constraint: str | None = None

    @property
    def label(self) -> str:
        return f"{self.key}={self.value}"


@dataclass(frozen=True)
class SlurmSpec:
    """[slurm]: where and how builds and rounds are submitted. None of it changes a build's
    output except the container image, which is why only that enters the build cache key."""

    partition: str | None = None  # None: the cluster's default partition
    account: str | None = None
    qos: str | None = None
    build_time_min: int | None = None  # None: the recipe's build timeout, rounded up, plus a minute
    round_time_min: int = DEFAULT_SLURM_ROUND_TIME_MIN
    gres: str | None = None  # of a round's allocation, e.g. "gpu:1"
    build_gres: str | None = None
    constraint: str | None = None
    build_cpus: int | None = None  # --cpus-per-task of a build job; None: the cluster's default
    exclusive_rounds: bool = True  # a round's node runs nothing else: others' jobs are noise
    sbatch_args: tuple[str, ...] = ()
    container_image: str | None = None  # pyxis: srun --container-image
    container_mounts: tuple[str, ...] = ()  # pyxis: --container-mounts (shared_dir is always mounted)
    shared_dir: str | None = None  # a directory every node mounts; the work dir goes under it
    max_builds: int = DEFAULT_SLURM_MAX_BUILDS
    max_retries: int = DEFAULT_SLURM_MAX_RETRIES
    start_timeout_s: float = DEFAULT_SLURM_START_TIMEOUT_S
    classes: tuple[SlurmClass, ...] = ()  # machine classes, by a benchmark's configuration


_SLURM: dict[str, tuple[Check, bool]] = {
    "partition": (_STR, False),
    "account": (_STR, False),
    "qos": (_STR, False),
    "build_time_min": (_POS_INT, False),
    "round_time_min": (_POS_INT, False),
    "gres": (_STR, False),
    "build_gres": (_STR, False),
    "constraint": (_STR, False),
    "build_cpus": (_POS_INT, False),
    "exclusive_rounds": (_BOOL, False),
    "sbatch_args": (_OPT_STR_LIST, False),
    "container_image": (_STR, False),
    "container_mounts": (_OPT_STR_LIST, False),
    "shared_dir": (_rule(str, lambda v: v.startswith("/"), "an absolute path"), False),
    "max_builds": (_POS_INT, False),
    "max_retries": (_NON_NEG_INT, False),
    "start_timeout_s": (_POS_NUM, False),
    "classes": (_table('a table of machine classes such as [slurm.classes."gpu=H100"]'), False),
}
_CLASS: dict[str, tuple[Check, bool]] = {"partition": (_STR, False), "constraint": (_STR, False)}
_CLASS_KEY = re.compile(r"([^=\s]+)=([^=\s]+)")


def _parse_classes(path: Path, table: dict[str, Any]) -> tuple[SlurmClass, ...]:
    out = []
    for key, body in table.items():
        where = f'slurm.classes."{key}"'
        m = _CLASS_KEY.fullmatch(key)
        if m is None:
            raise ConfigError(path, where, 'expected a configuration key=value such as "gpu=H100"')
        if not isinstance(body, dict):
            raise ConfigError(path, where, "expected a table with partition and/or constraint")
        body = _check_table(path, where + ".", body, _CLASS)
        if not body:
            raise ConfigError(path, where, "expected partition and/or constraint (where its rounds run)")
        out.append(SlurmClass(m.group(1), m.group(2), body.get("partition"), body.get("constraint")))
    return tuple(out)
_SBATCH_ARG = re.compile(r"--([a-z][a-z0-9-]*)(=.+)?")


def _parse_slurm(path: Path, table: dict[str, Any]) -> SlurmSpec:
    table = _check_table(path, "slurm.", table, _SLURM)
    for i, arg in enumerate(table.get("sbatch_args", ())):
        # Long options only, one list element each: no shell ever sees them, and attrib's own
        # options (names, outputs, placement) cannot be overridden behind its back.
        m = _SBATCH_ARG.fullmatch(arg)
        if m is None:
            raise ConfigError(path, f"slurm.sbatch_args[{i}]", f'expected a long option such as "--mem=8G", got {arg!r}')
        if f"--{m.group(1)}" in SLURM_RESERVED_ARGS:
            raise ConfigError(
                path, f"slurm.sbatch_args[{i}]", f"--{m.group(1)} is set by attrib (use the [slurm] keys in docs/slurm.md)"
            )
    for i, mount in enumerate(table.get("container_mounts", ())):
        if not mount.startswith("/") or "," in mount:
            raise ConfigError(path, f"slurm.container_mounts[{i}]", f'expected "/src[:/dst[:flags]]" without commas, got {mount!r}')
    if "container_mounts" in table and "container_image" not in table:
        raise ConfigError(path, "slurm.container_mounts", "only with slurm.container_image")
    return SlurmSpec(
        partition=table.get("partition"),
        account=table.get("account"),
        qos=table.get("qos"),
        build_time_min=table.get("build_time_min"),
        round_time_min=table.get("round_time_min", DEFAULT_SLURM_ROUND_TIME_MIN),
        gres=table.get("gres"),
        build_gres=table.get("build_gres"),
        constraint=table.get("constraint"),
        build_cpus=table.get("build_cpus"),
        exclusive_rounds=table.get("exclusive_rounds", True),
        sbatch_args=tuple(table.get("sbatch_args", ())),
        container_image=table.get("container_image"),
        container_mounts=tuple(table.get("container_mounts", ())),
        shared_dir=table.get("shared_dir"),
        max_builds=table.get("max_builds", DEFAULT_SLURM_MAX_BUILDS),
        max_retries=table.get("max_retries", DEFAULT_SLURM_MAX_RETRIES),
        start_timeout_s=float(table.get("start_timeout_s", DEFAULT_SLURM_START_TIMEOUT_S)),
        classes=_parse_classes(path, table.get("classes", {})),
    )
