"""The edge of the result: what the machine and the input files say, read once by the caller
of the writer (job.py), never by the writer itself."""

from __future__ import annotations

import getpass
import hashlib
import os
import platform
import sys
from pathlib import Path

from attrib.core.environment import Fingerprint
from attrib.result.types import Machine
from attrib.result.writer import Provenance


def machine_info() -> Machine:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass  # not Linux: platform's answer stands
    return Machine(
        hostname=platform.node(),
        platform=platform.platform(),
        cpu=cpu,
        cpus=os.cpu_count(),
        python=sys.version.split()[0],
        user=getpass.getuser(),
    )


def file_sha256(path: Path) -> str:
    """Of the file as it is now; of nothing when it is gone (a recipe deleted mid-run)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return hashlib.sha256(b"").hexdigest()


def provenance(recipe_path: Path, fingerprint: Fingerprint | None = None) -> Provenance:
    """`fingerprint`: the environment the executor read where the work ran (evaluate/fingerprint.py)."""
    return Provenance(machine_info(), file_sha256(recipe_path), fingerprint)
