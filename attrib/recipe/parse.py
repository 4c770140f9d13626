"""Reading a recipe: TOML → the records of model.py. Validation is strict and happens on load:
an unknown key, a missing key or a wrong type is one `ConfigError` naming the file, the dotted
key and what was expected.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attrib.core.model import BlockStatistic, Direction, SearchMethod
from attrib.errors import ConfigError
from attrib.formats.gbench import GbenchTime
from attrib.recipe.checks import (
    _BOOL,
    _OPT_STR,
    _POS_INT,
    _POS_NUM,
    _STR,
    _STR_LIST,
    _STR_TABLE,
    Check,
    _check_table,
    _enum,
    _rule,
    _table,
    relative_path,
)
from attrib.recipe.dependency import parse_dependencies
from attrib.recipe.model import (
    BLOCK_STATISTICS,
    COMPILER_CACHES,
    CUPY_METRICS,
    CUPY_MODES,
    DEFAULT_ARCHS,
    DEFAULT_BISECT_MIN_CHANGE_PCT,
    DEFAULT_BLOCK_MS,
    DEFAULT_BUILD_TIMEOUT_S,
    DEFAULT_CACHE_SIZE,
    DEFAULT_GBENCH_UNIT,
    DEFAULT_GITHUB_API,
    DEFAULT_GITHUB_TOKEN_ENV,
    DEFAULT_MEMORY,
    DEFAULT_NVBENCH_UNIT,
    DEFAULT_REPS,
    DEFAULT_RUN_TIMEOUT_S,
    DEFAULT_THROTTLE_FRACTION,
    GBENCH_TIMES,
    NVBENCH_STOPPING,
    RUNNERS,
    SCHEMA_VERSION,
    TIME_UNITS,
    BenchmarkSpec,
    BuildSpec,
    CompilerCache,
    CupySpec,
    EnvironmentSpec,
    GbenchSpec,
    NvbenchSpec,
    NvbenchStopping,
    PrebuiltGithub,
    Recipe,
    RunnerKind,
)
from attrib.recipe.slurm import _parse_slurm
from attrib.suite import SUITE

# --- each table declared key by key: the type and what it expects (recipe/checks.py) ----------

_TOP: dict[str, tuple[Check, bool]] = {
    "schema": (_rule(int, lambda v: v == SCHEMA_VERSION, f"the integer {SCHEMA_VERSION}"), True),
    "name": (_STR, True),
    "description": (_OPT_STR, False),
    "build": (_table("a table [build]"), True),
    "benchmark": (_rule(tuple[Any, ...], lambda v: len(v) > 0, "at least one [[benchmark]] table"), True),
    "slurm": (_table("a table [slurm]"), False),
    "search": (_table("a table [search]"), False),
    "environment": (_table("a table [environment]"), False),
    "dependency": (_rule(tuple[Any, ...], lambda v: len(v) > 0, "[[dependency]] tables"), False),
}
_MEMORY: Check = _rule(
    str, lambda v: re.fullmatch(r"[1-9][0-9]*[kmg]?", v) is not None, 'a memory size such as "4g" or "512m"'
)
_GLOBS: Check = _rule(
    tuple[str, ...],
    lambda v: len(v) > 0 and all(relative_path(x) for x in v),
    'a non-empty list of globs relative to the checkout, such as ["bench", "lib/*.so"]',
)
_BUILD: dict[str, tuple[Check, bool]] = {
    "commands": (_STR_LIST, True),
    "artifacts": (_GLOBS, False),
    "timeout_s": (_POS_NUM, False),
    "env": (_STR_TABLE, False),
    "pass_env": (
        _rule(tuple[str, ...], lambda v: all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", x) for x in v), 'a list of environment variable names, such as ["CUDA_HOME", "CC"]'),
        False,
    ),
    "image": (_STR, False),
    "dockerfile": (_STR, False),
    "network": (_BOOL, False),
    "cpus": (_POS_NUM, False),
    "memory": (_MEMORY, False),
    "cache": (_enum(COMPILER_CACHES), False),
    "cache_size": (_rule(str, lambda v: re.fullmatch(r"[1-9][0-9]*[kmgt]", v.lower()) is not None, 'a size such as "5g" or "500m"'), False),
    "cache_check": (_BOOL, False),
    "incremental": (_BOOL, False),
    "targets": (
        _rule(tuple[str, ...], lambda v: len(v) > 0 and all(x and not x.startswith("-") for x in v), 'a non-empty list of build target names, such as ["zlibstatic"]'),
        False,
    ),
    "prebuilt": (
        _rule(
            str,
            lambda v: "{sha}" in v and (v.startswith(("http://", "https://", "/"))),
            'a URL or an absolute path with {sha}, such as "https://ci.example/builds/{sha}.tar.gz"',
        ),
        False,
    ),
    "prebuilt_github": (_table("a table [build.prebuilt_github] (repo, workflow, artifact)"), False),
    "build_dir": (_rule(str, relative_path, 'a directory relative to the checkout, such as "build"'), False),
    "cache_dir": (_rule(str, lambda v: v.startswith("/"), "an absolute path (on Slurm: a directory every node shares)"), False),
}
# an artifact's name may hold none of these (actions/upload-artifact refuses them)
_ARTIFACT_NAME_BAD = set('":<>|*?\\/\r\n')
_PREBUILT_GITHUB: dict[str, tuple[Check, bool]] = {
    "repo": (_rule(str, lambda v: re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+", v) is not None and not v.endswith((".", "/..")), 'a GitHub repository "owner/name", such as "acme/kernels"'), True),
    "workflow": (_rule(str, lambda v: re.fullmatch(r"[1-9][0-9]*|[A-Za-z0-9_.-]+\.ya?ml", v) is not None, 'a workflow file name such as "build.yml", or its numeric id such as "161335"'), True),
    "artifact": (_rule(str, lambda v: v != "" and not (_ARTIFACT_NAME_BAD & set(v)), 'an artifact name ({sha} becomes the commit), such as "bench-{sha}", without " : < > | * ? \\ / or line breaks'), True),
    "api_url": (_rule(str, lambda v: re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", v) is not None, 'an http(s) URL of the GitHub API, such as "https://ghe.example/api/v3"'), False),
    "token_env": (_rule(str, lambda v: re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v) is not None, 'the name of an environment variable, such as "GITHUB_TOKEN"'), False),
}  # fmt: skip
_PROBE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_ENVIRONMENT: dict[str, tuple[Check, bool]] = {
    "compilers": (_STR_LIST, False),
    "probes": (
        _rule(
            Mapping[str, str],
            lambda v: all(_PROBE_NAME.fullmatch(k) and c.strip() for k, c in v.items()),
            'a table of names (letters, digits, "_", "-", ".") to non-empty shell commands, such as '
            '{ zlib = "git -C third_party/zlib rev-parse HEAD" }',
        ),
        False,
    ),
}
_SEARCH: dict[str, tuple[Check, bool]] = {
    "paths": (
        _rule(
            tuple[str, ...],
            lambda v: len(v) > 0 and all(x and not x.startswith("/") for x in v),
            'a non-empty list of paths relative to the repository, such as ["kernels/", "include/"]',
        ),
        False,
    ),
    "budget": (_rule(str, lambda v: parse_duration(v) is not None, 'a duration such as "30m", "2h" or "90s"'), False),
    "method": (_enum(tuple(m.value for m in SearchMethod)), False),
    "futility": (_BOOL, False),
}
_BENCH: dict[str, tuple[Check, bool]] = {
    "name": (_STR, True),
    "runner": (_enum(RUNNERS), True),
    "command": (_STR_LIST, False),  # required for runner "command"
    "unit": (_STR, False),
    "direction": (_enum(tuple(d.value for d in Direction)), False),
    "timeout_s": (_POS_NUM, False),
    "reps": (_POS_INT, False),
    "adapt_reps": (_BOOL, False),
    "min_change_pct": (_POS_NUM, False),
    "ignore_below_pct": (_POS_NUM, False),
    "block_statistic": (_enum(BLOCK_STATISTICS), False),
    "cupy": (_table("a table [benchmark.cupy]"), False),
    "gbench": (_table("a table [benchmark.gbench]"), False),
    "nvbench": (_table("a table [benchmark.nvbench]"), False),
    "names": (_STR_LIST, False),  # runner "command": it prints `name value` lines, these names
    "config": (_STR_TABLE, False),  # the benchmark's configuration (a machine class under Slurm)
}
_REL_PATH: Check = _rule(str, relative_path, "a path relative to the checkout (no '..')")
_ARCH: Check = _rule(
    tuple[str, ...],
    lambda v: len(v) > 0 and all(re.fullmatch(r"(sm|compute)_\d+a?", x) for x in v),
    'a non-empty list of architectures such as ["sm_90"]',
)
_DEFINES: Check = _rule(
    Mapping[str, str | int],
    lambda v: all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) for k in v),
    "a table of macro names to string or integer values",
)
_CUPY: dict[str, tuple[Check, bool]] = {
    "kernel": (_enum(tuple(SUITE)), True),
    "dtype": (_STR, False),
    "shape": (_table("a table of problem sizes"), False),
    "source": (_REL_PATH, False),
    "binary": (_REL_PATH, False),
    "function": (_STR, False),
    "defines": (_DEFINES, False),
    "include_dirs": (
        _rule(tuple[str, ...], lambda v: all(relative_path(x) for x in v), "a list of paths relative to the checkout"),
        False,
    ),
    "mode": (_enum(CUPY_MODES), False),
    "arch": (_ARCH, False),
    "metric": (_enum(CUPY_METRICS), False),
    "block_ms": (_POS_NUM, False),
    "throttle_fraction": (_rule(float, lambda v: 0 <= v < 1, "a number in [0, 1)"), False),
}


def _parse_cupy(path: Path, prefix: str, table: dict[str, Any]) -> CupySpec:
    table = _check_table(path, prefix, table, _CUPY)
    kdef = SUITE[table["kernel"]]
    dtype = table.get("dtype", kdef.dtypes[0])
    if dtype not in kdef.dtypes:
        raise ConfigError(
            path, prefix + "dtype", f"kernel {kdef.name} takes dtype " + " or ".join(f'"{d}"' for d in kdef.dtypes)
        )
    shape = table.get("shape", {})
    if problem := kdef.shape_errors(shape):
        raise ConfigError(path, prefix + "shape", problem)
    if "source" in table and "binary" in table:
        raise ConfigError(
            path, prefix + "binary", "give either source (compiled by attrib) or binary (built by the tree), not both"
        )
    if "function" in table and len(kdef.entries({**kdef.default_shape, **shape}, dtype)) > 1:
        raise ConfigError(
            path,
            prefix + "function",
            f"kernel {kdef.name} launches several functions; rename them in the source instead",
        )
    if "binary" in table and table.get("metric", "time") != "time":
        raise ConfigError(
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


def _regex(v: str) -> bool:
    try:
        re.compile(v)
    except re.error:
        return False
    return v != ""


_GBENCH: dict[str, tuple[Check, bool]] = {
    "filter": (_rule(str, _regex, "a non-empty regular expression (--benchmark_filter)"), True),
    "time": (_enum(GBENCH_TIMES), False),
}
_AXES: Check = _rule(
    Mapping[str, str | int],
    lambda v: all(k and "=" not in k and "[" not in k for k in v) and all(str(x) != "" for x in v.values()),
    'a table of axis names to values as NVBench prints them, such as { T = "F32", Elements = "2^24" }',
)
_NVBENCH: dict[str, tuple[Check, bool]] = {
    "benchmark": (_STR, True),
    "axes": (_AXES, False),
    "stopping": (_enum(NVBENCH_STOPPING), False),
    "jsonbin": (_BOOL, False),
}


def _parse_tool_table(
    path: Path, prefix: str, runner: RunnerKind, bench_t: dict[str, Any]
) -> tuple[GbenchSpec | None, NvbenchSpec | None]:
    """[benchmark.gbench] / [benchmark.nvbench]: required by their runner, refused elsewhere."""
    for tool in (RunnerKind.GBENCH, RunnerKind.NVBENCH):
        if runner == tool and tool not in bench_t:
            raise ConfigError(path, prefix + tool, f'missing; runner "{tool}" needs a [benchmark.{tool}] table')
        if runner != tool and tool in bench_t:
            raise ConfigError(path, prefix + tool, f'only for runner = "{tool}"')
    if runner == RunnerKind.GBENCH:
        table = _check_table(path, prefix + "gbench.", bench_t["gbench"], _GBENCH)
        return GbenchSpec(filter=table["filter"], time=GbenchTime(table.get("time", GbenchTime.REAL))), None
    if runner == RunnerKind.NVBENCH:
        table = _check_table(path, prefix + "nvbench.", bench_t["nvbench"], _NVBENCH)
        axes = {k: str(v) for k, v in table.get("axes", {}).items()}
        return None, NvbenchSpec(
            benchmark=table["benchmark"],
            axes=axes,
            stopping=NvbenchStopping(table.get("stopping", NvbenchStopping.SAMPLE_COUNT)),
            jsonbin=bool(table.get("jsonbin", True)),
        )
    return None, None


def _check_build(path: Path, build_t: dict[str, Any]) -> None:
    """The [build] keys that only mean something together."""
    if "image" in build_t and "dockerfile" in build_t:
        raise ConfigError(path, "build.dockerfile", "give either build.image or build.dockerfile, not both")
    for key in ("cache_size", "cache_dir"):
        if key in build_t and "cache" not in build_t:
            raise ConfigError(path, f"build.{key}", 'only with build.cache ("ccache" or "sccache")')
    if "prebuilt" in build_t and "prebuilt_github" in build_t:
        raise ConfigError(path, "build.prebuilt_github", "give either build.prebuilt (a path or URL) or build.prebuilt_github, not both")
    if "cache_check" in build_t and not ({"cache", "prebuilt", "prebuilt_github"} & set(build_t) or build_t.get("incremental")):
        raise ConfigError(path, "build.cache_check", "only with build.cache, build.incremental, build.prebuilt or build.prebuilt_github: what it checks")
    if "targets" in build_t and not any("{targets}" in c for c in build_t["commands"]):
        raise ConfigError(path, "build.targets", "no build command says where they go: put {targets} in one, such as \"cmake --build build --target {targets}\"")
    if build_t.get("incremental"):
        for key, why in (("build_dir", "the out-of-tree build directory to reuse"), ("artifacts", "what the benchmark runs, hashed and copied from the reused tree")):
            if key not in build_t:
                raise ConfigError(path, f"build.{key}", f"missing; build.incremental needs {why}")


def _parse_benchmark(path: Path, i: int, bench_t: Any, seen: set[str]) -> BenchmarkSpec:
    """benchmark[i]; `seen` collects the benchmark names so far (each must be unique)."""
    prefix = f"benchmark[{i}]."
    if not isinstance(bench_t, dict):
        raise ConfigError(path, f"benchmark[{i}]", "expected a table")
    bench_t = _check_table(path, prefix, bench_t, _BENCH)
    runner = RunnerKind(bench_t["runner"])
    if runner != RunnerKind.CUPY and "command" not in bench_t:
        raise ConfigError(path, prefix + "command", "missing; expected a non-empty list of non-empty strings")
    if runner == RunnerKind.CUPY and "command" in bench_t:
        raise ConfigError(
            path, prefix + "command", 'runner "cupy" launches kernels itself; describe them in [benchmark.cupy]'
        )
    if runner == RunnerKind.CUPY and "cupy" not in bench_t:
        raise ConfigError(path, prefix + "cupy", 'missing; runner "cupy" needs a [benchmark.cupy] table')
    if runner != RunnerKind.CUPY and "cupy" in bench_t:
        raise ConfigError(path, prefix + "cupy", 'only for runner = "cupy"')
    cupy = _parse_cupy(path, prefix + "cupy.", bench_t["cupy"]) if runner == RunnerKind.CUPY else None
    gbench, nvbench = _parse_tool_table(path, prefix, runner, bench_t)
    default_unit = ("ms" if cupy.metric == "time" else f"{cupy.metric} + 1") if cupy else "s"
    if gbench or nvbench:
        default_unit = DEFAULT_GBENCH_UNIT if gbench else DEFAULT_NVBENCH_UNIT
        if bench_t.get("unit", default_unit) not in TIME_UNITS:
            units = ", ".join(f'"{u}"' for u in TIME_UNITS)
            raise ConfigError(path, prefix + "unit", f'runner "{runner}" converts times to the recipe unit: one of {units}')
    if "ignore_below_pct" in bench_t and bench_t["ignore_below_pct"] >= bench_t.get("min_change_pct", DEFAULT_BISECT_MIN_CHANGE_PCT):
        raise ConfigError(path, prefix + "ignore_below_pct", "must be below min_change_pct (the zone between them may be named)")
    if bench_t["name"] in seen:
        raise ConfigError(path, prefix + "name", f"duplicate benchmark name '{bench_t['name']}'")
    seen.add(bench_t["name"])
    if "names" in bench_t and runner != RunnerKind.COMMAND:
        raise ConfigError(path, prefix + "names", 'only for runner = "command" (it prints `name value` lines)')
    for name in bench_t.get("names", ()):
        if name in seen or any(c.isspace() for c in name):
            raise ConfigError(path, prefix + "names", f"'{name}': expected unique benchmark names without spaces")
        seen.add(name)
    return BenchmarkSpec(
        name=bench_t["name"],
        runner=runner,
        command=tuple(bench_t.get("command", ())),
        unit=bench_t.get("unit", default_unit),
        direction=Direction(bench_t.get("direction", Direction.LOWER.value)),
        timeout_s=float(bench_t.get("timeout_s", DEFAULT_RUN_TIMEOUT_S)),
        reps=int(bench_t.get("reps", DEFAULT_REPS)),
        adapt_reps=bool(bench_t.get("adapt_reps", True)),
        min_change_pct=float(bench_t.get("min_change_pct", DEFAULT_BISECT_MIN_CHANGE_PCT)),
        ignore_below_pct=float(bench_t["ignore_below_pct"]) if "ignore_below_pct" in bench_t else None,
        block_statistic=BlockStatistic(bench_t.get("block_statistic", BlockStatistic.FASTER_HALF)),
        cupy=cupy,
        gbench=gbench,
        nvbench=nvbench,
        names=tuple(bench_t.get("names", ())),
        config=_config(path, prefix + "config", bench_t.get("config", {})),
    )


def _prebuilt_github(path: Path, table: Any) -> PrebuiltGithub:
    t = _check_table(path, "build.prebuilt_github.", table, _PREBUILT_GITHUB)
    return PrebuiltGithub(
        t["repo"], t["workflow"], t["artifact"], t.get("api_url", DEFAULT_GITHUB_API).rstrip("/"), t.get("token_env", DEFAULT_GITHUB_TOKEN_ENV)
    )


def _build_spec(path: Path, build_t: dict[str, Any]) -> BuildSpec:
    return BuildSpec(
        commands=tuple(build_t["commands"]),
        timeout_s=float(build_t.get("timeout_s", DEFAULT_BUILD_TIMEOUT_S)),
        env=dict(build_t.get("env", {})),
        pass_env=tuple(build_t.get("pass_env", ())),
        image=build_t.get("image"),
        dockerfile=build_t.get("dockerfile"),
        network=bool(build_t.get("network", False)),
        cpus=float(build_t["cpus"]) if "cpus" in build_t else None,
        memory=build_t.get("memory", DEFAULT_MEMORY),
        artifacts=tuple(build_t.get("artifacts", ())),
        cache=CompilerCache(build_t["cache"]) if "cache" in build_t else None,
        cache_size=build_t.get("cache_size", DEFAULT_CACHE_SIZE).lower(),
        cache_dir=build_t.get("cache_dir"),
        cache_check=bool(build_t.get("cache_check", True)),
        incremental=bool(build_t.get("incremental", False)),
        build_dir=build_t.get("build_dir"),
        prebuilt=build_t.get("prebuilt"),
        prebuilt_github=_prebuilt_github(path, build_t["prebuilt_github"]) if "prebuilt_github" in build_t else None,
        targets=tuple(build_t.get("targets", ())),
    )


def parse_recipe(data: dict[str, Any], path: Path) -> Recipe:
    data = _check_table(path, "", data, _TOP)
    build_t = _check_table(path, "build.", data["build"], _BUILD)
    search_t = _check_table(path, "search.", data.get("search", {}), _SEARCH)
    env_t = _check_table(path, "environment.", data.get("environment", {}), _ENVIRONMENT)
    _check_build(path, build_t)
    benches: list[BenchmarkSpec] = []
    seen: set[str] = set()
    for i, bench_t in enumerate(data["benchmark"]):
        benches.append(_parse_benchmark(path, i, bench_t, seen))
    slurm = _parse_slurm(path, data["slurm"]) if "slurm" in data else None
    for i, bench in enumerate(benches):
        classes = [c.label for c in (slurm.classes if slurm else ()) if (c.key, c.value) in bench.config]
        if len(classes) > 1:
            raise ConfigError(path, f"benchmark[{i}].config", f"matches machine classes {' and '.join(classes)}: expected at most one")
    return Recipe(
        path=path,
        name=data["name"],
        description=data.get("description", ""),
        build=_build_spec(path, build_t),
        benchmarks=tuple(benches),
        slurm=slurm,
        search_paths=tuple(search_t.get("paths", ())),
        budget_s=parse_duration(search_t["budget"]) if "budget" in search_t else None,
        search_method=SearchMethod(search_t.get("method", SearchMethod.POSTERIOR.value)),
        dependencies=parse_dependencies(path, data["dependency"]) if "dependency" in data else (),
        futility=bool(search_t.get("futility", True)),
        environment=EnvironmentSpec(tuple(env_t.get("compilers", ())), dict(env_t.get("probes", {}))),
    )


def _config(path: Path, where: str, table: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    for key, value in table.items():
        if not value or any(c.isspace() or c == "=" for c in key + value):
            raise ConfigError(path, f"{where}.{key}", f"expected a non-empty value without spaces or '=', got {value!r}")
    return tuple(sorted(table.items()))


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
        raise ConfigError(path, "", "recipe file not found") from None
    except OSError as exc:
        raise ConfigError(path, "", f"cannot read recipe ({exc.strerror})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(path, "", f"not valid TOML ({exc})") from None
    return parse_recipe(data, path)
