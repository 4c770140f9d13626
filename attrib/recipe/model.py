"""The recipe as plain data: what to build, what to measure, and the defaults a recipe leaves
out, as named constants so that docs/recipes.md and the code cannot disagree. Nothing here reads
a file or validates a key (parse.py does), and nothing here imports a stage: every stage imports
these records.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from fnmatch import fnmatchcase
from pathlib import Path

from attrib.core.model import BlockStatistic, Direction, SearchMethod
from attrib.errors import ConfigError
from attrib.formats.gbench import GbenchTime
from attrib.recipe.dependency import DependencySpec
from attrib.recipe.slurm import SlurmSpec

SCHEMA_VERSION = 1
DEFAULT_BUILD_TIMEOUT_S = 600.0
DEFAULT_RUN_TIMEOUT_S = 120.0
DEFAULT_REPS = 10  # samples asked of one benchmark run ({reps}); one run is one block
DEFAULT_BISECT_MIN_CHANGE_PCT = 2.0  # a bisection's: smaller steps are not worth naming a culprit for (core/detect.py has DEFAULT_DETECT_MIN_CHANGE_PCT)
DEFAULT_MEMORY = "4g"  # memory limit of a build or benchmark container
DEFAULT_CACHE_SIZE = "5g"  # [build] cache_size: what the compiler cache may hold
DEFAULT_GITHUB_API = "https://api.github.com"  # [build.prebuilt_github] api_url
DEFAULT_GITHUB_TOKEN_ENV = "GITHUB_TOKEN"  # [build.prebuilt_github] token_env
BLOCK_STATISTICS = tuple(BlockStatistic)  # docs/statistics.md: how a block is summarised
CUPY_MODES = ("cold", "hot")  # cold: L2 flushed before each timed launch (nvbench's default)
# What ptxas reports about a compiled kernel that a recipe may bisect on (evaluate/gpu/metrics.py
# reads them); the names are the recipe's vocabulary, so they live here.
STATIC_METRICS = ("registers", "spill_stores", "spill_loads", "stack_frame", "shared_bytes", "binary_bytes")
CUPY_METRICS = ("time", *STATIC_METRICS)
DEFAULT_BLOCK_MS = 10.0  # GPU time per block of the cupy runner (evaluate/gpu/protocol.py)
DEFAULT_THROTTLE_FRACTION = 0.75  # nvbench's threshold: a block whose clock fell below it is retaken
DEFAULT_ARCHS = ("sm_90",)
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}  # gbench/nvbench samples are converted to the recipe's unit
GBENCH_TIMES = tuple(GbenchTime)
DEFAULT_GBENCH_UNIT = "ns"  # Google Benchmark's own default time unit
DEFAULT_NVBENCH_UNIT = "ms"  # as the cupy runner: GPU kernels take micro- to milliseconds


class CompilerCache(StrEnum):
    """[build] cache: the compiler cache a build runs under (docs/recipes.md). It never changes
    what a build produces, so it is not part of a build's cache key."""

    CCACHE = "ccache"
    SCCACHE = "sccache"


COMPILER_CACHES = tuple(CompilerCache)


class RunnerKind(StrEnum):
    """What measures a benchmark (docs/recipes.md): one closed set, as ExecutorKind is for where
    commands run. job/members.make_runner maps each to its class."""

    COMMAND = "command"  # numbers a command prints
    CUPY = "cupy"  # a kernel of attrib's suite, compiled from the tree and timed in process
    GBENCH = "gbench"  # a Google Benchmark binary
    NVBENCH = "nvbench"  # an NVBench binary


RUNNERS = tuple(RunnerKind)


class NvbenchStopping(StrEnum):
    """Who decides how many samples one NVBench run takes (docs/recipes.md)."""

    SAMPLE_COUNT = "sample-count"  # attrib: exactly `reps` samples per run, one block
    STDREL = "stdrel"  # NVBench's criteria, with at least `reps` samples
    ENTROPY = "entropy"
    COMMAND = "command"  # attrib adds no stopping option; the recipe's command decides


NVBENCH_STOPPING = tuple(NvbenchStopping)


@dataclass(frozen=True)
class GbenchSpec:
    """[benchmark.gbench]: which Google Benchmark benchmark of the binary, and which time."""

    filter: str  # --benchmark_filter; it must select exactly one benchmark
    time: GbenchTime = GbenchTime.REAL


@dataclass(frozen=True)
class NvbenchSpec:
    """[benchmark.nvbench]: which NVBench benchmark and state, and who sizes a block."""

    benchmark: str
    axes: dict[str, str] = field(default_factory=dict)
    stopping: NvbenchStopping = NvbenchStopping.SAMPLE_COUNT
    jsonbin: bool = True  # per-sample times (--jsonbin); false: the state's summary only (--json)


@dataclass(frozen=True)
class CupySpec:
    """[benchmark.cupy]: which suite kernel, and what the tree under test decides about it.
    Paths are relative to the built checkout (docs/recipes.md)."""

    kernel: str
    dtype: str
    shape: dict[str, int] = field(default_factory=dict)
    source: str | None = None
    binary: str | None = None  # a cubin or PTX file the build produced
    function: str | None = None
    defines: dict[str, str] = field(default_factory=dict)
    include_dirs: tuple[str, ...] = ()
    mode: str = CUPY_MODES[0]
    archs: tuple[str, ...] = DEFAULT_ARCHS
    metric: str = "time"
    block_ms: float = DEFAULT_BLOCK_MS
    throttle_fraction: float = DEFAULT_THROTTLE_FRACTION


@dataclass(frozen=True)
class PrebuiltGithub:
    """[build.prebuilt_github]: a commit's build as a GitHub Actions artifact, uploaded by
    `workflow`'s successful run of that commit (evaluate/prebuilt_github.py)."""

    repo: str  # "owner/name"
    workflow: str  # the workflow's file name ("build.yml") or its numeric id
    artifact: str  # the artifact's name; {sha} in it becomes the commit
    api_url: str = DEFAULT_GITHUB_API  # GitHub Enterprise: "https://ghe.example/api/v3"
    token_env: str = DEFAULT_GITHUB_TOKEN_ENV  # the environment variable holding the token

    def artifact_name(self, sha: str) -> str:
        return self.artifact.replace("{sha}", sha)


@dataclass(frozen=True)
class BuildSpec:
    commands: tuple[str, ...]
    timeout_s: float = DEFAULT_BUILD_TIMEOUT_S
    env: dict[str, str] = field(default_factory=dict)
    # names of attrib's environment that builds and benchmark runs get besides the base
    # allow-list (executors/base.py BASE_ENV): nothing else of the daemon's (its tokens) reaches them
    pass_env: tuple[str, ...] = ()
    # --executor docker only: the image (or a Dockerfile to build it from), limits, network
    image: str | None = None
    dockerfile: str | None = None  # relative to the recipe file
    network: bool = False
    cpus: float | None = None
    memory: str = DEFAULT_MEMORY
    artifacts: tuple[str, ...] = ()  # globs of what the benchmark runs: hashed after each build
    # the compiler cache (evaluate/compiler_cache.py): which, how large, and where when not in the
    # work dir (an absolute path: on Slurm a directory every node shares)
    cache: CompilerCache | None = None
    cache_size: str = DEFAULT_CACHE_SIZE
    cache_dir: str | None = None
    cache_check: bool = True  # each culprit's two ends built again with nothing served, digests compared
    # incremental trees (evaluate/incremental.py): the out-of-tree build directory, relative to the
    # checkout, that a build reuses from the nearest commit already built
    incremental: bool = False
    build_dir: str | None = None
    # where a commit's build may already exist (evaluate/prebuilt.py): a URL or an absolute path
    # with {sha}; its archive replaces the build, and `<archive>.sha256` is checked when published
    prebuilt: str | None = None
    # or a GitHub Actions artifact of the commit (evaluate/prebuilt_github.py); not with `prebuilt`
    prebuilt_github: PrebuiltGithub | None = None
    # the build targets the benchmark needs: `{targets}` in a command becomes them, so that the
    # build compiles only those (cmake --build build --target {targets}; make {targets})
    targets: tuple[str, ...] = ()

    def command_lines(self) -> tuple[str, ...]:
        """The build commands as they run: `{targets}` replaced by the targets, each quoted for sh."""
        names = " ".join(shlex.quote(t) for t in self.targets)
        return tuple(c.replace("{targets}", names) for c in self.commands)

    def cache_identity(self) -> str:
        """Stable digest of everything in [build] that can change a build's output."""
        fields = asdict(self)
        if not fields["artifacts"]:
            del fields["artifacts"]  # keeps the cache keys of recipes that declare none
        if not fields["targets"]:
            del fields["targets"]  # keeps the keys of recipes without them
        if fields["prebuilt"] is None:
            del fields["prebuilt"]  # keeps the keys of recipes without one; an archive is another build
        if fields["prebuilt_github"] is None:
            del fields["prebuilt_github"]  # the same for a GitHub artifact: where it comes from is the key's
        else:
            del fields["prebuilt_github"]["token_env"]  # which credentials fetch it changes no byte of it
        if not fields["pass_env"]:
            del fields["pass_env"]  # keeps the keys of recipes without it
        if fields["cache"] is None:
            del fields["cache"]  # keeps the keys of recipes without one
        # The tool is part of the key: ccache's base_dir, which lets two checkouts share entries,
        # hands the compiler relative paths, so a build embedding __FILE__ (an assert's message)
        # differs from one without the cache by those strings (libgit2: benchmarks/REAL.md).
        # The same code, but not the same digest: builds of the two are never mixed.
        for name in ("cache_size", "cache_dir", "cache_check", "incremental", "build_dir"):
            del fields[name]  # the cache's size and place, a reused build dir: the bytes a clean build gives
        blob = json.dumps(fields, sort_keys=True, default=list)
        return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str
    runner: RunnerKind
    command: tuple[str, ...]
    unit: str = "s"
    direction: Direction = Direction.LOWER
    timeout_s: float = DEFAULT_RUN_TIMEOUT_S
    reps: int = DEFAULT_REPS
    adapt_reps: bool = True  # the posterior search may choose another number per run (docs/statistics.md)
    min_change_pct: float = DEFAULT_BISECT_MIN_CHANGE_PCT
    ignore_below_pct: float | None = None  # a step this small is never named; None: half the minimum
    block_statistic: BlockStatistic = BlockStatistic.FASTER_HALF
    cupy: CupySpec | None = None
    gbench: GbenchSpec | None = None
    nvbench: NvbenchSpec | None = None
    # runner "command" only: its command prints `name value` lines, one benchmark per name; each
    # is a member `--benchmark` selects (by name or glob), and one run measures them all. A member's
    # own spec has its one name here and the benchmark's name in `process`.
    names: tuple[str, ...] = ()
    process: str = ""
    # `config = { gpu = "H100" }`: what the benchmark is a member of, as sorted (key, value)
    # pairs; under --executor slurm, [slurm.classes] maps a pair to where its rounds run.
    config: tuple[tuple[str, str], ...] = ()

    @property
    def ignore_pct(self) -> float:
        """The indifference zone's lower edge: steps at or below it are never named culprits."""
        return self.min_change_pct / 2 if self.ignore_below_pct is None else self.ignore_below_pct

    def argv(self, reps: int | None = None) -> list[str]:
        n = str(self.reps if reps is None else reps)
        return [part.replace("{reps}", n) for part in self.command]


_LABEL = re.compile(r"([^\[\]]+)\[([^\[\]=,\s]+=[^\[\]=,\s]+(?:,[^\[\]=,\s]+=[^\[\]=,\s]+)*)\]")


def member_label(name: str, config: Sequence[tuple[str, str]]) -> str:
    """A benchmark with its configuration, as results name a group's member: `gemm[gpu=H100]`."""
    return name if not config else name + "[" + ",".join(f"{k}={v}" for k, v in config) + "]"


def parse_member_label(text: str) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """(name, sorted pairs) of a member's label; None when `text` is not one (a plain name, a glob)."""
    m = _LABEL.fullmatch(text)
    if m is None:
        return None
    pairs = dict(tuple(p.split("=", 1)) for p in m[2].split(","))
    return m[1], tuple(sorted(pairs.items()))


@dataclass(frozen=True)
class EnvironmentSpec:
    """[environment]: what the fingerprint (evaluate/fingerprint.py) reads besides its own keys.
    `compilers`: commands whose `--version` is the `compiler` key, in place of those found in
    the build (CC, CXX, CUDACXX, nvcc...); `probes`: name -> a shell command run where the work
    runs, its first line of output recorded as `probe.<name>`."""

    compilers: tuple[str, ...] = ()
    probes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Recipe:
    path: Path
    name: str
    description: str
    build: BuildSpec
    benchmarks: tuple[BenchmarkSpec, ...]
    slurm: SlurmSpec | None = None  # the [slurm] table; None: cluster defaults
    search_paths: tuple[str, ...] = ()  # [search] paths: only commits touching these are candidates
    budget_s: float | None = None  # the recipe's default --budget
    search_method: SearchMethod = SearchMethod.POSTERIOR  # [search] method
    dependencies: tuple[DependencySpec, ...] = ()  # [[dependency]]: pins kept in files (recipe/dependency.py)
    futility: bool = True  # [search] futility: false runs every test to its cap (core/futility.py)
    environment: EnvironmentSpec = field(default_factory=EnvironmentSpec)  # [environment]

    def select(self, patterns: Sequence[str]) -> tuple[BenchmarkSpec, ...]:
        """The benchmarks `--benchmark` names, each a name or a glob (`'gemm_*'`, `'*'` for every
        one), in the order asked: a benchmark whose command prints `name value` lines stands for
        its members (its own name selects all of them). None given: `benchmark(None)`'s one. A
        pattern that matches nothing is one ConfigError naming the known benchmarks. A member's
        label, `name[key=value,...]` (`member_label`), selects that benchmark with those
        configuration pairs added to its table's (the daemon hands a series' configuration on
        so); the same benchmark under two configurations is two members."""
        if not patterns:
            return self._members(self.benchmark(None))
        known = {m.name: m for b in self.benchmarks for m in self._members(b)}
        chosen: dict[tuple[str, tuple[tuple[str, str], ...]], BenchmarkSpec] = {}
        for pattern in patterns:
            labelled = parse_member_label(pattern)
            if labelled is not None and labelled[0] in known:
                m = self._configured(known[labelled[0]], labelled[1])
                chosen[(m.name, m.config)] = m
                continue
            parents = [m for b in self.benchmarks if fnmatchcase(b.name, pattern) for m in self._members(b)]
            hits = parents + [m for name, m in known.items() if fnmatchcase(name, pattern)]
            if not hits:
                names = ", ".join(known)
                raise ConfigError(self.path, "benchmark", f"no benchmark matches '{pattern}' (have: {names})")
            chosen.update(((m.name, m.config), m) for m in hits)
        return tuple(chosen.values())

    def _configured(self, bench: BenchmarkSpec, pairs: tuple[tuple[str, str], ...]) -> BenchmarkSpec:
        """`bench` with `pairs` added to its table's configuration; a key its table sets to
        another value is one ConfigError (the table pins it), and so is a pair the recipe does
        not declare (`declared_pairs`): a label is a configuration the recipe knows, not any
        text (issue 40: 1,000 made-up labels were 1,000 members)."""
        own = dict(bench.config)
        declared = self.declared_pairs()
        for key, value in pairs:
            if own.get(key, value) != value:
                raise ConfigError(
                    self.path, "benchmark", f"'{member_label(bench.name, pairs)}': benchmark '{bench.name}' has {key}={own[key]}"
                )
            if own.get(key) != value and f"{key}={value}" not in declared:
                known = ", ".join(sorted(declared)) or "none"
                raise ConfigError(
                    self.path, "benchmark", f"'{member_label(bench.name, pairs)}': {key}={value} is not a configuration the recipe declares (have: {known})"
                )
        return replace(bench, config=tuple(sorted({**own, **dict(pairs)}.items())))

    def declared_pairs(self) -> frozenset[str]:
        """The configuration pairs ("gpu=H100") a member's label may add: the recipe's machine
        classes ([slurm.classes]) and the pairs its benchmarks' own config tables set."""
        classes = {c.label for c in self.slurm.classes} if self.slurm else set()
        return frozenset(classes | {f"{k}={v}" for b in self.benchmarks for k, v in b.config})

    def label(self, bench: BenchmarkSpec) -> str:
        """What selects `bench` again (`select`): its name, with the configuration pairs its
        table does not set itself."""
        table = next((m for b in self.benchmarks for m in self._members(b) if m.name == bench.name), bench)
        return member_label(bench.name, tuple(p for p in bench.config if p not in table.config))

    @staticmethod
    def _members(bench: BenchmarkSpec) -> tuple[BenchmarkSpec, ...]:
        if not bench.names:
            return (bench,)
        return tuple(replace(bench, name=name, names=(name,), process=bench.name) for name in bench.names)

    def benchmark(self, name: str | None) -> BenchmarkSpec:
        if name is None:
            if len(self.benchmarks) > 1:
                names = ", ".join(b.name for b in self.benchmarks)
                raise ConfigError(self.path, "benchmark", f"several benchmarks ({names}): choose one with --benchmark")
            return self.benchmarks[0]
        for bench in self.benchmarks:
            if bench.name == name:
                return bench
        names = ", ".join(b.name for b in self.benchmarks)
        raise ConfigError(self.path, "benchmark", f"no benchmark named '{name}' (have: {names})")
