"""The environment fingerprint: what the machine a measurement ran on says about itself, as
data (issue 41). The executor reads it where the work runs (evaluate/fingerprint.py: the host,
the container, the Slurm node); this module names its keys, parses what the probe printed and
compares two fingerprints. Pure.

Every value is a string, as a history row's `env.<key>` column holds it, so a fingerprint, a
CSV column and a POST body compare alike. A key that could not be read is not guessed: it is
absent from `values` and `unavailable` says why (no GPU, nvidia-smi missing, no cpufreq).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class EnvKey(StrEnum):
    """The fingerprint's keys: the result's `environment.fingerprint`, a history row's
    `env.<key>`. A recipe's own probes add `probe.<name>` keys (PROBE_PREFIX)."""

    COMPILER = "compiler"  # first version line of each compiler the build calls
    IMAGE = "image"  # the container image's id or digest (docker, a Slurm container)
    OS = "os"  # /etc/os-release's PRETTY_NAME
    KERNEL = "kernel"  # uname -r
    CPU = "cpu"  # the CPU model
    GOVERNOR = "governor"  # cpufreq scaling governor(s)
    GPU = "gpu"  # the GPU's name(s)
    DRIVER = "driver"  # the NVIDIA driver
    CUDA_RUNTIME = "cuda_runtime"  # the CUDA version the driver supports (nvidia-smi, NVML)
    CUDA_TOOLKIT = "cuda_toolkit"  # nvcc's release, where the work runs
    POWER_LIMIT_W = "power_limit_w"
    APP_CLOCKS = "app_clocks"  # application clocks, "graphics/memory MHz"
    MIG = "mig"  # MIG mode
    PERSISTENCE = "persistence"  # persistence mode


PROBE_PREFIX = "probe."
GPU_KEYS = (
    EnvKey.GPU, EnvKey.DRIVER, EnvKey.CUDA_RUNTIME, EnvKey.POWER_LIMIT_W, EnvKey.APP_CLOCKS, EnvKey.MIG, EnvKey.PERSISTENCE,
)  # fmt: skip


@dataclass(frozen=True)
class Fingerprint:
    """`values`: key -> value; `unavailable`: key -> why it was not read; `where`: the machine it
    was read on (a host, a container on it, a Slurm node), recorded, never compared: Slurm runs
    land on several nodes of one class."""

    values: Mapping[str, str] = field(default_factory=dict)
    unavailable: Mapping[str, str] = field(default_factory=dict)
    where: str = ""

    def get(self, key: str) -> str | None:
        return self.values.get(key)


@dataclass(frozen=True)
class EnvChange:
    key: str
    before: str  # the value, or "unavailable (why)"
    after: str

    def text(self) -> str:
        return f"{self.key} {self.before} -> {self.after}"


def _shown(fp: Fingerprint, key: str) -> str | None:
    if key in fp.values:
        return fp.values[key]
    if key in fp.unavailable:
        return f"unavailable ({fp.unavailable[key]})"
    return None


def changes(before: Fingerprint, after: Fingerprint) -> tuple[EnvChange, ...]:
    """The keys whose reading differs, in key order. A key read once and unavailable the other
    time is a change (a driver updated under a running process makes nvidia-smi fail); a key
    unavailable both times, for whatever reason, is not; a key one of the two never looked at
    (a probe added in between) is not either."""
    out = []
    for key in sorted(set(before.values) | set(after.values)):
        a, b = _shown(before, key), _shown(after, key)
        if a is None or b is None or a == b:
            continue
        if key not in before.values and key not in after.values:
            continue
        out.append(EnvChange(key, a, b))
    return tuple(out)


def changed_line(found: tuple[EnvChange, ...], when: str) -> str:
    """One line: which keys changed, and when the later reading was taken."""
    return f"the environment changed {when}: " + "; ".join(c.text() for c in found)


def parse_probe(text: str, where: str = "") -> Fingerprint:
    """What the probe script printed (evaluate/fingerprint.py): `key=value` lines, and
    `!key=why` for a key it could not read. Later lines win (a recipe's probe after the
    built-in ones); blank values are unavailable; anything else is ignored (a login banner)."""
    values: dict[str, str] = {}
    missing: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        failed = key.startswith("!")
        key = key.lstrip("!").strip()
        if not key or any(ch.isspace() for ch in key):
            continue
        value = value.strip()
        if failed or not value:
            values.pop(key, None)
            missing[key] = value or "empty"
        else:
            missing.pop(key, None)
            values[key] = value
    return Fingerprint(values, missing, where)


def first_version_line(text: str) -> str | None:
    """The first line of a `--version` answer that holds a version (x.y): gcc's first line,
    nvcc's third ("Cuda compilation tools, release 12.4, V12.4.131"), clang's first."""
    for line in text.splitlines():
        if re.search(r"\d+\.\d+", line):
            return line.strip()
    return None
