"""Reading the environment fingerprint (core/environment.py) where the work runs: one `sh`
script through the executor's own `shell`, so that it reads the host (local), the build's
container (docker) or the Slurm node a job landed on, never the daemon's machine. The script
prints `key=value` lines; what it cannot read it says with `!key=why`.

What it reads: the first version line of each compiler the build calls (`[environment]
compilers`, else those the build names: CC, CXX, CUDACXX, FC in [build] env, compiler words in
the commands, `${CC:-cc}` and `${CXX:-c++}` behind cmake, make, ninja or meson), nvcc's release
(`cuda_toolkit`), /etc/os-release, `uname -r`, the CPU model, the cpufreq governors, and from
nvidia-smi the GPU's name, driver, CUDA version, power limit, application clocks, MIG and
persistence modes (under the local executor NVML reads those in this process, nvidia-ml-py
imported lazily; nvidia-smi's stand where it cannot). The container image's id comes from the executor (it started the
container). A recipe's `[environment] probes` run last, each recorded as `probe.<name>`.

`EnvironmentWatch` takes the fingerprint at a bisection's first build (in that checkout, so a
probe may read the tree) and again at later builds and phases, at most every `interval_s`, and
at the end: a change stops the bisection (EnvironmentChanged) with one line naming the keys.
"""

from __future__ import annotations

import os
import re
import shlex
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from attrib.core.environment import EnvKey, Fingerprint, changed_line, changes, first_version_line, parse_probe
from attrib.core.model import BuildRecord, CommitInfo, Decided, Phase, Verdict
from attrib.errors import EnvironmentChanged
from attrib.evaluate.executors.base import (
    DockerDescription,
    Executor,
    ExecutorDescription,
    LocalDescription,
    SlurmDescription,
)
from attrib.evaluate.gpu.nvml import gpu_fingerprint
from attrib.events import Events, NullEvents
from attrib.recipe import BuildSpec, EnvironmentSpec, Recipe

PROBE_TIMEOUT_S = 60.0
CHECK_INTERVAL_S = 60.0  # a later reading at most this often: on Slurm each reading is a job
_SEP = "\x1f"  # joins a multi-line answer onto one key=value line
_COMPILER_WORDS = re.compile(
    r"(nvcc|gcc|g\+\+|cc|c\+\+|clang|clang\+\+|icx|icpx|hipcc|nvc|nvc\+\+|gfortran)(-[0-9.]+)?"
)
_BUILD_TOOLS = {"cmake", "make", "gmake", "ninja", "meson"}
_COMPILER_VARS = ("CC", "CXX", "CUDACXX", "FC")
_SMI_FIELDS = "name,driver_version,power.limit,clocks.applications.graphics,clocks.applications.memory,mig.mode.current,persistence_mode"


def build_compilers(build: BuildSpec, declared: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The compilers the build calls, as shell words (`"${CC:-cc}"` expands in the build's env)."""
    if declared:
        return tuple(shlex.quote(c) for c in declared)
    found: list[str] = [f'"${{{var}}}"' for var in _COMPILER_VARS if build.env.get(var)]
    behind_tool = False
    for line in build.command_lines():
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        for word in words:
            base = os.path.basename(word)
            if _COMPILER_WORDS.fullmatch(base):
                found.append(shlex.quote(word))
            behind_tool = behind_tool or base in _BUILD_TOOLS
    if behind_tool:  # CMake and make's implicit rules take CC and CXX, else cc and c++ on PATH
        found += ['"${CC:-cc}"', '"${CXX:-c++}"']
    return tuple(dict.fromkeys(found))


def probe_script(compilers: tuple[str, ...], probes: Mapping[str, str]) -> str:
    """The script: POSIX sh, no bash, nothing installed beyond coreutils."""
    lines = [
        "export LC_ALL=C",
        'line() { printf "%s=%s\\n" "$1" "$(printf "%s" "$2" | tr "\\n" "\\037")"; }',
        'no() { printf "!%s=%s\\n" "$1" "$2"; }',
        'line where "${SLURMD_NODENAME:-$(uname -n)}"',
        'if [ -r /etc/os-release ]; then line os "$(. /etc/os-release; echo "${PRETTY_NAME:-$NAME $VERSION_ID}")"; '
        "else no os 'no /etc/os-release'; fi",
        'line kernel "$(uname -r)"',
        "cpu=$(grep -m1 -E '^(model name|Model|cpu model)' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')",
        'if [ -n "$cpu" ]; then line cpu "$cpu"; else line cpu "$(uname -m)"; fi',
        "gov=$(cat /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor 2>/dev/null | sort -u | tr '\\n' ' ' | sed 's/ $//')",
        'if [ -n "$gov" ]; then line governor "$gov"; else no governor "no cpufreq governor in /sys"; fi',
        "nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })",
        'if [ -n "$nvcc" ]; then line raw.nvcc "$("$nvcc" --version 2>&1)"; else no cuda_toolkit "nvcc not found"; fi',
        "if command -v nvidia-smi >/dev/null 2>&1; then",
        f"  out=$(nvidia-smi --query-gpu={_SMI_FIELDS} --format=csv,noheader,nounits 2>&1) "
        '&& line raw.smi "$out" || no gpu "nvidia-smi failed: $(echo "$out" | head -n1)"',
        "  line raw.smi_cuda \"$(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: *[0-9.]*' | head -n1)\"",
        'else no gpu "nvidia-smi not found"; fi',
    ]
    for i, c in enumerate(compilers):
        lines.append(
            f'c={c}; if command -v "$c" >/dev/null 2>&1; then line raw.compiler.{i} "$c{_SEP}$("$c" --version 2>&1 </dev/null)"; '
            f'else no raw.compiler.{i} "$c: not found"; fi'
        )
    for name, command in probes.items():
        lines.append(
            f"out=$( ( {command} ) 2>&1 </dev/null ); rc=$?; "
            f'if [ $rc -eq 0 ]; then line probe.{name} "$(echo "$out" | head -n1)"; '
            f'else no probe.{name} "exit $rc $(echo "$out" | head -n1)"; fi'
        )
    return "\n".join(lines) + "\n"


def _image(description: ExecutorDescription) -> tuple[str | None, str]:
    """The image's id (or digest) and, when there is none, why."""
    if isinstance(description, DockerDescription):
        image = description.image_id or (description.digests[0] if description.digests else None)
        return image, "the engine gave no id"
    if isinstance(description, SlurmDescription) and description.container_image:
        return description.container_image, ""
    return None, "not in a container attrib started"


def finish(raw: Fingerprint, image: tuple[str | None, str]) -> Fingerprint:
    """The probe's raw answers made keys: compilers' first version lines, nvcc's release, the
    GPUs' fields (one value per key, several GPUs' distinct values joined by ', ')."""
    values = {k: v for k, v in raw.values.items() if not k.startswith("raw.") and k != "where"}
    missing = {k: v for k, v in raw.unavailable.items() if not k.startswith("raw.")}
    compilers = []
    for key in sorted(k for k in (*raw.values, *raw.unavailable) if k.startswith("raw.compiler.")):
        if key in raw.values:
            command, _, answer = raw.values[key].partition(_SEP)
            compilers.append(first_version_line(answer.replace(_SEP, "\n")) or f"{command}: no version in --version")
        else:
            compilers.append(raw.unavailable[key])
    if compilers:
        values[EnvKey.COMPILER] = "; ".join(dict.fromkeys(compilers))
    else:
        missing[EnvKey.COMPILER] = "no compiler named in the build (name them: [environment] compilers)"
    if "raw.nvcc" in raw.values:
        answer = raw.values["raw.nvcc"]
        release = re.search(r"V(\d+\.\d+\.\d+)", answer) or re.search(r"release (\d+\.\d+)", answer)
        values[EnvKey.CUDA_TOOLKIT] = release.group(1) if release else answer.replace(_SEP, " ")[:80]
    if "raw.smi" in raw.values:
        values.update(_smi(raw.values["raw.smi"].split(_SEP)))
        cuda = re.search(r"[0-9.]+", raw.values.get("raw.smi_cuda", ""))
        if cuda:
            values[EnvKey.CUDA_RUNTIME] = cuda.group(0)
    if image[0]:
        values[EnvKey.IMAGE] = image[0]
    else:
        missing[EnvKey.IMAGE] = image[1]
    # keys as plain strings: EnvKey members are equal to them, but not as JSON or repr
    return Fingerprint({str(k): v for k, v in values.items()}, {str(k): v for k, v in missing.items()}, raw.values.get("where", raw.where))


def _smi(rows: list[str]) -> dict[str, str]:
    """nvidia-smi's CSV rows, one per GPU: name, driver, power limit, application clocks
    (graphics, memory), MIG mode, persistence mode. "[N/A]" is left out."""
    columns: dict[str, list[str]] = {}
    for row in rows:
        cells = [c.strip() for c in row.split(",")]
        if len(cells) != 7:
            continue
        name, driver, power, graphics, memory, mig, persistence = cells
        found = {
            EnvKey.GPU: name, EnvKey.DRIVER: driver, EnvKey.POWER_LIMIT_W: power,
            EnvKey.APP_CLOCKS: f"{graphics}/{memory} MHz" if "N/A" not in graphics + memory else "[N/A]",
            EnvKey.MIG: mig, EnvKey.PERSISTENCE: persistence,
        }  # fmt: skip
        for key, value in found.items():
            if value and "N/A" not in value:
                columns.setdefault(key, []).append(value)
    return {k: ", ".join(dict.fromkeys(v)) for k, v in columns.items()}


def read_fingerprint(executor: Executor, build: BuildSpec, spec: EnvironmentSpec, checkout: Path) -> Fingerprint:
    """The fingerprint where `executor` runs, read in `checkout` with the build's environment."""
    script = probe_script(build_compilers(build, spec.compilers), spec.probes)
    result = executor.shell(checkout, script, dict(build.env), PROBE_TIMEOUT_S)
    if result.timed_out or not result.stdout.strip():
        why = "timed out" if result.timed_out else f"exit {result.returncode}: {result.stderr.strip()[:120]}"
        return Fingerprint({}, {"probe": f"the probe did not answer ({why})"}, result.node)
    description = executor.describe()
    found = finish(parse_probe(result.stdout, result.node), _image(description))
    return with_nvml(found, gpu_fingerprint()) if isinstance(description, LocalDescription) else found


def with_nvml(found: Fingerprint, nvml: tuple[dict[str, str], str]) -> Fingerprint:
    """The local executor's machine is this one: NVML (nvidia-ml-py) reads its GPU keys in this
    process; where it read none, nvidia-smi's stand, and a GPU key neither read says both whys."""
    values, why = nvml
    missing = dict(found.unavailable)
    if why and EnvKey.GPU not in found.values:
        missing[EnvKey.GPU] = f"{missing.get(EnvKey.GPU, 'nvidia-smi read none')}; NVML: {why}"
    for key in values:
        missing.pop(key, None)
    return Fingerprint({**found.values, **values}, missing, found.where)


class EnvironmentWatch:
    """An `Events` that passes every event on, and reads the fingerprint at the first build
    (`start`) and again at later builds and phases at most every `interval_s` (and at `close`):
    a reading that differs raises EnvironmentChanged (threads: builds may finish in a pool,
    whose map raises it in the bisection's thread). `per_machine` (Slurm: one bisection's jobs
    land on several nodes of a class): a reading is compared with the first one taken on the
    same machine (`where`), and the first on another machine is that machine's start."""

    def __init__(
        self, read: Callable[[Path], Fingerprint], inner: Events, interval_s: float = CHECK_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic, per_machine: bool = False,
    ) -> None:  # fmt: skip
        self.read, self.inner, self.interval_s, self.clock = read, inner, interval_s, clock
        self.per_machine = per_machine
        self.start: Fingerprint | None = None
        self._starts: dict[str, Fingerprint] = {}
        self._checkout: Path | None = None
        self._last = 0.0
        self._lock = threading.Lock()

    def phase(self, phase: Phase) -> None:
        self.inner.phase(phase)
        self._check(f"at the {phase.step.value} step", force=False)

    def build_started(self, commit: CommitInfo) -> None:
        self.inner.build_started(commit)

    def build_finished(self, commit: CommitInfo, record: BuildRecord) -> None:
        self.inner.build_finished(commit, record)
        if record.checkout and Path(record.checkout).is_dir():
            with self._lock:
                self._checkout = Path(record.checkout)
        self._check(f"after the build of {commit.sha[:10]}", force=False)

    def round_done(self, candidate: CommitInfo, reference: CommitInfo, rounds: int, llr: float, samples: int) -> None:
        self.inner.round_done(candidate, reference, rounds, llr, samples)

    def verdict(self, candidate: CommitInfo, reference: CommitInfo, verdict: Verdict, detail: Decided) -> None:
        self.inner.verdict(candidate, reference, verdict, detail)

    def close(self) -> Fingerprint | None:
        """The last reading (unless none was ever taken): the start's, when nothing changed."""
        self._check("at the end", force=True)
        return self.start

    def _check(self, when: str, force: bool) -> None:
        with self._lock:
            checkout, now = self._checkout, self.clock()
            if checkout is None or (self.start is not None and not force and now - self._last < self.interval_s):
                return
            self._last = now
        reading = self.read(checkout)
        machine = reading.where if self.per_machine else ""
        with self._lock:
            self.start = self.start or reading
            before = self._starts.setdefault(machine, reading)
        found = changes(before, reading)
        if found:
            on = f" on {reading.where}" if self.per_machine else ""
            raise EnvironmentChanged(
                changed_line(found, when + on) + " (stopped, not to compare commits measured in two environments)"
            )


def watched(executor: Executor, recipe: Recipe, events: Events | None) -> EnvironmentWatch:
    """`events` behind a watch of the environment where `executor` runs (job/run.py's one call)."""
    return EnvironmentWatch(
        lambda checkout: read_fingerprint(executor, recipe.build, recipe.environment, checkout),
        events or NullEvents(),
        per_machine=isinstance(executor.describe(), SlurmDescription),
    )
