"""Recipes: TOML files that say how to build a tree and what to measure.

Validation is strict and happens on load: an unknown key, a missing key or a wrong type is
one `RecipeError` naming the file, the dotted key and what was expected. Defaults are named
constants so that docs/recipes.md and the code cannot disagree.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from attrib.core.model import BlockStatistic, Direction, SearchMethod
from attrib.errors import RecipeError
from attrib.evaluate.gpu.build import KernelSource
from attrib.evaluate.gpu.metrics import STATIC_METRICS
from attrib.evaluate.gpu.protocol import DEFAULT_BLOCK_MS, DEFAULT_THROTTLE_FRACTION
from attrib.evaluate.gpu.suite import SUITE
from attrib.formats.gbench import GbenchTime
from attrib.recipe.checks import (  # noqa: F401  (re-exported: the recipe's vocabulary)
    _BOOL,
    _NON_NEG_INT,
    _OPT_STR,
    _OPT_STR_LIST,
    _POS_INT,
    _POS_NUM,
    _STR,
    _STR_LIST,
    _STR_TABLE,
    Check,
    _check_table,
    _enum,
)
from attrib.recipe.slurm import (  # noqa: F401  (re-exported)
    DEFAULT_SLURM_MAX_BUILDS,
    DEFAULT_SLURM_MAX_RETRIES,
    DEFAULT_SLURM_ROUND_TIME_MIN,
    DEFAULT_SLURM_START_TIMEOUT_S,
    SLURM_RESERVED_ARGS,
    SlurmSpec,
    _parse_slurm,
)

SCHEMA_VERSION = 1
DEFAULT_BUILD_TIMEOUT_S = 600.0
DEFAULT_RUN_TIMEOUT_S = 120.0
DEFAULT_REPS = 10  # samples asked of one benchmark run ({reps}); one run is one block
DEFAULT_MIN_CHANGE_PCT = 2.0  # smaller steps are not worth naming a culprit for
DEFAULT_MEMORY = "4g"  # memory limit of a build or benchmark container
RUNNERS = ("command", "cupy", "gbench", "nvbench")
BLOCK_STATISTICS = tuple(BlockStatistic)  # docs/statistics.md: how a block is summarised
CUPY_MODES = ("cold", "hot")  # cold: L2 flushed before each timed launch (nvbench's default)
CUPY_METRICS = ("time", *STATIC_METRICS)
DEFAULT_ARCHS = ("sm_90",)
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}  # gbench/nvbench samples are converted to the recipe's unit
GBENCH_TIMES = tuple(GbenchTime)
DEFAULT_GBENCH_UNIT = "ns"  # Google Benchmark's own default time unit
DEFAULT_NVBENCH_UNIT = "ms"  # as the cupy runner: GPU kernels take micro- to milliseconds


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

    def kernel_source(self, checkout: Path | None) -> KernelSource:
        """The compile inputs for one checkout (None: attrib's own kernels/, no tree)."""
        root = checkout or Path(".")
        return KernelSource(
            kernel=self.kernel,
            dtype=self.dtype,
            shape=dict(self.shape),
            source=root / self.source if self.source else None,
            binary=root / self.binary if self.binary else None,
            function=self.function,
            defines=dict(self.defines),
            include_dirs=tuple(root / d for d in self.include_dirs),
        )


@dataclass(frozen=True)
class BuildSpec:
    commands: tuple[str, ...]
    timeout_s: float = DEFAULT_BUILD_TIMEOUT_S
    env: dict[str, str] = field(default_factory=dict)
    # --executor docker only: the image (or a Dockerfile to build it from), limits, network
    image: str | None = None
    dockerfile: str | None = None  # relative to the recipe file
    network: bool = False
    cpus: float | None = None
    memory: str = DEFAULT_MEMORY
    artifacts: tuple[str, ...] = ()  # globs of what the benchmark runs: hashed after each build

    def cache_identity(self) -> str:
        """Stable digest of everything in [build] that can change a build's output."""
        fields = asdict(self)
        if not fields["artifacts"]:
            del fields["artifacts"]  # keeps the cache keys of recipes that declare none
        blob = json.dumps(fields, sort_keys=True, default=list)
        return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str
    runner: str
    command: tuple[str, ...]
    unit: str = "s"
    direction: Direction = Direction.LOWER
    timeout_s: float = DEFAULT_RUN_TIMEOUT_S
    reps: int = DEFAULT_REPS
    min_change_pct: float = DEFAULT_MIN_CHANGE_PCT
    ignore_below_pct: float | None = None  # a step this small is never named; None: half the minimum
    block_statistic: BlockStatistic = BlockStatistic.FASTER_HALF
    cupy: CupySpec | None = None
    gbench: GbenchSpec | None = None
    nvbench: NvbenchSpec | None = None

    @property
    def ignore_pct(self) -> float:
        """The indifference zone's lower edge: steps at or below it are never named culprits."""
        return self.min_change_pct / 2 if self.ignore_below_pct is None else self.ignore_below_pct

    def argv(self, reps: int | None = None) -> list[str]:
        n = str(self.reps if reps is None else reps)
        return [part.replace("{reps}", n) for part in self.command]


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
    search_method: SearchMethod = SearchMethod.SEQUENTIAL  # [search] method

    def benchmark(self, name: str | None) -> BenchmarkSpec:
        if name is None:
            if len(self.benchmarks) > 1:
                names = ", ".join(b.name for b in self.benchmarks)
                raise RecipeError(self.path, "benchmark", f"several benchmarks ({names}): choose one with --benchmark")
            return self.benchmarks[0]
        for bench in self.benchmarks:
            if bench.name == name:
                return bench
        names = ", ".join(b.name for b in self.benchmarks)
        raise RecipeError(self.path, "benchmark", f"no benchmark named '{name}' (have: {names})")


# --- a tiny declarative checker: each key has a type check and an expectation text ---------

_TOP: dict[str, tuple[Check, bool]] = {
    "schema": ((lambda v: type(v) is int and v == SCHEMA_VERSION, f"the integer {SCHEMA_VERSION}"), True),
    "name": (_STR, True),
    "description": (_OPT_STR, False),
    "build": ((lambda v: isinstance(v, dict), "a table [build]"), True),
    "benchmark": (
        (lambda v: isinstance(v, list) and len(v) > 0, "at least one [[benchmark]] table"),
        True,
    ),
    "slurm": ((lambda v: isinstance(v, dict), "a table [slurm]"), False),
    "search": ((lambda v: isinstance(v, dict), "a table [search]"), False),
}
_MEMORY: Check = (
    lambda v: isinstance(v, str) and re.fullmatch(r"[1-9][0-9]*[kmg]?", v) is not None,
    'a memory size such as "4g" or "512m"',
)
_GLOBS: Check = (
    lambda v: (
        isinstance(v, list)
        and len(v) > 0
        and all(isinstance(x, str) and x != "" and not x.startswith("/") and ".." not in Path(x).parts for x in v)
    ),
    'a non-empty list of globs relative to the checkout, such as ["bench", "lib/*.so"]',
)
_BUILD: dict[str, tuple[Check, bool]] = {
    "commands": (_STR_LIST, True),
    "artifacts": (_GLOBS, False),
    "timeout_s": (_POS_NUM, False),
    "env": (_STR_TABLE, False),
    "image": (_STR, False),
    "dockerfile": (_STR, False),
    "network": (_BOOL, False),
    "cpus": (_POS_NUM, False),
    "memory": (_MEMORY, False),
}
_SEARCH: dict[str, tuple[Check, bool]] = {
    "paths": (
        (
            lambda v: isinstance(v, list) and len(v) > 0 and all(isinstance(x, str) and x and not x.startswith("/") for x in v),
            'a non-empty list of paths relative to the repository, such as ["kernels/", "include/"]',
        ),
        False,
    ),
    "budget": (
        (lambda v: isinstance(v, str) and parse_duration(v) is not None, 'a duration such as "30m", "2h" or "90s"'),
        False,
    ),
    "method": (_enum(tuple(m.value for m in SearchMethod)), False),
}
_BENCH: dict[str, tuple[Check, bool]] = {
    "name": (_STR, True),
    "runner": (_enum(RUNNERS), True),
    "command": (_STR_LIST, False),  # required for runner "command"
    "unit": (_STR, False),
    "direction": (_enum(tuple(d.value for d in Direction)), False),
    "timeout_s": (_POS_NUM, False),
    "reps": (_POS_INT, False),
    "min_change_pct": (_POS_NUM, False),
    "ignore_below_pct": (_POS_NUM, False),
    "block_statistic": (_enum(BLOCK_STATISTICS), False),
    "cupy": ((lambda v: isinstance(v, dict), "a table [benchmark.cupy]"), False),
    "gbench": ((lambda v: isinstance(v, dict), "a table [benchmark.gbench]"), False),
    "nvbench": ((lambda v: isinstance(v, dict), "a table [benchmark.nvbench]"), False),
}
_REL_PATH: Check = (
    lambda v: isinstance(v, str) and v != "" and not v.startswith("/") and ".." not in Path(v).parts,
    "a path relative to the checkout (no '..')",
)
_ARCH: Check = (
    lambda v: (
        isinstance(v, list)
        and len(v) > 0
        and all(isinstance(x, str) and re.fullmatch(r"(sm|compute)_\d+a?", x) for x in v)
    ),
    'a non-empty list of architectures such as ["sm_90"]',
)
_DEFINES: Check = (
    lambda v: (
        isinstance(v, dict)
        and all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) for k in v)
        and all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in v.values())
    ),
    "a table of macro names to string or integer values",
)
_CUPY: dict[str, tuple[Check, bool]] = {
    "kernel": (_enum(tuple(SUITE)), True),
    "dtype": (_STR, False),
    "shape": ((lambda v: isinstance(v, dict), "a table of problem sizes"), False),
    "source": (_REL_PATH, False),
    "binary": (_REL_PATH, False),
    "function": (_STR, False),
    "defines": (_DEFINES, False),
    "include_dirs": (
        (lambda v: isinstance(v, list) and all(_REL_PATH[0](x) for x in v), "a list of paths relative to the checkout"),
        False,
    ),
    "mode": (_enum(CUPY_MODES), False),
    "arch": (_ARCH, False),
    "metric": (_enum(CUPY_METRICS), False),
    "block_ms": (_POS_NUM, False),
    "throttle_fraction": (
        (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1, "a number in [0, 1)"),
        False,
    ),
}


def _parse_cupy(path: Path, prefix: str, table: dict[str, Any]) -> CupySpec:
    _check_table(path, prefix, table, _CUPY)
    kdef = SUITE[table["kernel"]]
    dtype = table.get("dtype", kdef.dtypes[0])
    if dtype not in kdef.dtypes:
        raise RecipeError(
            path, prefix + "dtype", f"kernel {kdef.name} takes dtype " + " or ".join(f'"{d}"' for d in kdef.dtypes)
        )
    shape = table.get("shape", {})
    if problem := kdef.shape_errors(shape):
        raise RecipeError(path, prefix + "shape", problem)
    if "source" in table and "binary" in table:
        raise RecipeError(
            path, prefix + "binary", "give either source (compiled by attrib) or binary (built by the tree), not both"
        )
    if "function" in table and len(kdef.entries({**kdef.default_shape, **shape}, dtype)) > 1:
        raise RecipeError(
            path,
            prefix + "function",
            f"kernel {kdef.name} launches several functions; rename them in the source instead",
        )
    if "binary" in table and table.get("metric", "time") != "time":
        raise RecipeError(
            path, prefix + "metric", "static metrics need a source attrib compiles, not a prebuilt binary"
        )
    return CupySpec(
        kernel=kdef.name,
        dtype=dtype,
        shape=dict(shape),
        source=table.get("source"),
        binary=table.get("binary"),
        function=table.get("function"),
        defines={k: str(v) for k, v in table.get("defines", {}).items()},
        include_dirs=tuple(table.get("include_dirs", ())),
        mode=table.get("mode", CUPY_MODES[0]),
        archs=tuple(table.get("arch", DEFAULT_ARCHS)),
        metric=table.get("metric", "time"),
        block_ms=float(table.get("block_ms", DEFAULT_BLOCK_MS)),
        throttle_fraction=float(table.get("throttle_fraction", DEFAULT_THROTTLE_FRACTION)),
    )


def _regex(v: Any) -> bool:
    try:
        re.compile(v)
    except (re.error, TypeError):
        return False
    return isinstance(v, str) and v != ""


_GBENCH: dict[str, tuple[Check, bool]] = {
    "filter": ((_regex, "a non-empty regular expression (--benchmark_filter)"), True),
    "time": (_enum(GBENCH_TIMES), False),
}
_AXES: Check = (
    lambda v: (
        isinstance(v, dict)
        and all(k and "=" not in k and "[" not in k for k in v)
        and all(isinstance(x, (str, int)) and not isinstance(x, bool) and str(x) != "" for x in v.values())
    ),
    'a table of axis names to values as NVBench prints them, such as { T = "F32", Elements = "2^24" }',
)
_NVBENCH: dict[str, tuple[Check, bool]] = {
    "benchmark": (_STR, True),
    "axes": (_AXES, False),
    "stopping": (_enum(NVBENCH_STOPPING), False),
    "jsonbin": (_BOOL, False),
}


def _parse_tool_table(
    path: Path, prefix: str, runner: str, bench_t: dict[str, Any]
) -> tuple[GbenchSpec | None, NvbenchSpec | None]:
    """[benchmark.gbench] / [benchmark.nvbench]: required by their runner, refused elsewhere."""
    for tool in ("gbench", "nvbench"):
        if runner == tool and tool not in bench_t:
            raise RecipeError(path, prefix + tool, f'missing; runner "{tool}" needs a [benchmark.{tool}] table')
        if runner != tool and tool in bench_t:
            raise RecipeError(path, prefix + tool, f'only for runner = "{tool}"')
    if runner == "gbench":
        table = bench_t["gbench"]
        _check_table(path, prefix + "gbench.", table, _GBENCH)
        return GbenchSpec(filter=table["filter"], time=GbenchTime(table.get("time", GbenchTime.REAL))), None
    if runner == "nvbench":
        table = bench_t["nvbench"]
        _check_table(path, prefix + "nvbench.", table, _NVBENCH)
        axes = {k: str(v) for k, v in table.get("axes", {}).items()}
        return None, NvbenchSpec(
            benchmark=table["benchmark"],
            axes=axes,
            stopping=NvbenchStopping(table.get("stopping", NvbenchStopping.SAMPLE_COUNT)),
            jsonbin=bool(table.get("jsonbin", True)),
        )
    return None, None


def parse_recipe(data: dict[str, Any], path: Path) -> Recipe:
    _check_table(path, "", data, _TOP)
    build_t = data["build"]
    _check_table(path, "build.", build_t, _BUILD)
    search_t = data.get("search", {})
    _check_table(path, "search.", search_t, _SEARCH)
    if "image" in build_t and "dockerfile" in build_t:
        raise RecipeError(path, "build.dockerfile", "give either build.image or build.dockerfile, not both")
    benches: list[BenchmarkSpec] = []
    seen: set[str] = set()
    for i, bench_t in enumerate(data["benchmark"]):
        prefix = f"benchmark[{i}]."
        if not isinstance(bench_t, dict):
            raise RecipeError(path, f"benchmark[{i}]", "expected a table")
        _check_table(path, prefix, bench_t, _BENCH)
        runner = bench_t["runner"]
        if runner in ("command", "gbench", "nvbench") and "command" not in bench_t:
            raise RecipeError(path, prefix + "command", "missing; expected a non-empty list of non-empty strings")
        if runner == "cupy" and "command" in bench_t:
            raise RecipeError(
                path, prefix + "command", 'runner "cupy" launches kernels itself; describe them in [benchmark.cupy]'
            )
        if runner == "cupy" and "cupy" not in bench_t:
            raise RecipeError(path, prefix + "cupy", 'missing; runner "cupy" needs a [benchmark.cupy] table')
        if runner != "cupy" and "cupy" in bench_t:
            raise RecipeError(path, prefix + "cupy", 'only for runner = "cupy"')
        cupy = _parse_cupy(path, prefix + "cupy.", bench_t["cupy"]) if runner == "cupy" else None
        gbench, nvbench = _parse_tool_table(path, prefix, runner, bench_t)
        default_unit = ("ms" if cupy.metric == "time" else f"{cupy.metric} + 1") if cupy else "s"
        if gbench or nvbench:
            default_unit = DEFAULT_GBENCH_UNIT if gbench else DEFAULT_NVBENCH_UNIT
            if bench_t.get("unit", default_unit) not in TIME_UNITS:
                units = ", ".join(f'"{u}"' for u in TIME_UNITS)
                raise RecipeError(path, prefix + "unit", f'runner "{runner}" converts times to the recipe unit: one of {units}')
        if "ignore_below_pct" in bench_t and bench_t["ignore_below_pct"] >= bench_t.get("min_change_pct", DEFAULT_MIN_CHANGE_PCT):
            raise RecipeError(path, prefix + "ignore_below_pct", "must be below min_change_pct (the zone between them may be named)")
        if bench_t["name"] in seen:
            raise RecipeError(path, prefix + "name", f"duplicate benchmark name '{bench_t['name']}'")
        seen.add(bench_t["name"])
        benches.append(
            BenchmarkSpec(
                name=bench_t["name"],
                runner=bench_t["runner"],
                command=tuple(bench_t.get("command", ())),
                unit=bench_t.get("unit", default_unit),
                direction=Direction(bench_t.get("direction", Direction.LOWER.value)),
                timeout_s=float(bench_t.get("timeout_s", DEFAULT_RUN_TIMEOUT_S)),
                reps=int(bench_t.get("reps", DEFAULT_REPS)),
                min_change_pct=float(bench_t.get("min_change_pct", DEFAULT_MIN_CHANGE_PCT)),
                ignore_below_pct=float(bench_t["ignore_below_pct"]) if "ignore_below_pct" in bench_t else None,
                block_statistic=BlockStatistic(bench_t.get("block_statistic", BlockStatistic.FASTER_HALF)),
                cupy=cupy,
                gbench=gbench,
                nvbench=nvbench,
            )
        )
    return Recipe(
        path=path,
        name=data["name"],
        description=data.get("description", ""),
        build=BuildSpec(
            commands=tuple(build_t["commands"]),
            timeout_s=float(build_t.get("timeout_s", DEFAULT_BUILD_TIMEOUT_S)),
            env=dict(build_t.get("env", {})),
            image=build_t.get("image"),
            dockerfile=build_t.get("dockerfile"),
            network=bool(build_t.get("network", False)),
            cpus=float(build_t["cpus"]) if "cpus" in build_t else None,
            memory=build_t.get("memory", DEFAULT_MEMORY),
            artifacts=tuple(build_t.get("artifacts", ())),
        ),
        benchmarks=tuple(benches),
        slurm=_parse_slurm(path, data["slurm"]) if "slurm" in data else None,
        search_paths=tuple(search_t.get("paths", ())),
        budget_s=parse_duration(search_t["budget"]) if "budget" in search_t else None,
        search_method=SearchMethod(search_t.get("method", SearchMethod.SEQUENTIAL.value)),
    )


_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*")


def parse_duration(text: str) -> float | None:
    """ "30m" -> 1800.0, "2h", "90s", "45" (seconds); None when it is not a duration."""
    m = _DURATION.fullmatch(text)
    if not m or float(m.group(1)) <= 0:
        return None
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


def load_recipe(path: Path) -> Recipe:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise RecipeError(path, "", "recipe file not found") from None
    except OSError as exc:
        raise RecipeError(path, "", f"cannot read recipe ({exc.strerror})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RecipeError(path, "", f"not valid TOML ({exc})") from None
    return parse_recipe(data, path)
