"""Recipes: TOML files that say how to build a tree and what to measure (docs/recipes.md).

model.py holds the records and the defaults, parse.py reads and validates a file, slurm.py the
[slurm] table, checks.py the predicates the tables are validated with. This face names what the
rest of attrib uses.
"""

from attrib.recipe.dependency import DependencySpec
from attrib.recipe.model import (
    BLOCK_STATISTICS,
    COMPILER_CACHES,
    CUPY_METRICS,
    CUPY_MODES,
    DEFAULT_ARCHS,
    DEFAULT_BISECT_MIN_CHANGE_PCT,
    DEFAULT_BLOCK_MS,
    DEFAULT_BUILD_TIMEOUT_S,
    DEFAULT_GBENCH_UNIT,
    DEFAULT_MEMORY,
    DEFAULT_NVBENCH_UNIT,
    DEFAULT_REPS,
    DEFAULT_RUN_TIMEOUT_S,
    DEFAULT_THROTTLE_FRACTION,
    GBENCH_TIMES,
    NVBENCH_STOPPING,
    RUNNERS,
    SCHEMA_VERSION,
    STATIC_METRICS,
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
    member_label,
    parse_member_label,
)
from attrib.recipe.parse import load_recipe, parse_duration, parse_recipe
from attrib.recipe.slurm import (
    DEFAULT_SLURM_MAX_BUILDS,
    DEFAULT_SLURM_MAX_RETRIES,
    DEFAULT_SLURM_ROUND_TIME_MIN,
    DEFAULT_SLURM_START_TIMEOUT_S,
    SLURM_RESERVED_ARGS,
    SlurmClass,
    SlurmSpec,
)

__all__ = [
    "BLOCK_STATISTICS", "COMPILER_CACHES", "CUPY_METRICS", "CUPY_MODES", "DEFAULT_ARCHS", "DEFAULT_BLOCK_MS", "DEFAULT_BUILD_TIMEOUT_S",
    "DEFAULT_GBENCH_UNIT", "DEFAULT_MEMORY", "DEFAULT_BISECT_MIN_CHANGE_PCT", "DEFAULT_NVBENCH_UNIT", "DEFAULT_REPS",
    "DEFAULT_RUN_TIMEOUT_S", "DEFAULT_THROTTLE_FRACTION", "DEFAULT_SLURM_MAX_BUILDS", "DEFAULT_SLURM_MAX_RETRIES", "DEFAULT_SLURM_ROUND_TIME_MIN",
    "DEFAULT_SLURM_START_TIMEOUT_S", "GBENCH_TIMES", "NVBENCH_STOPPING", "RUNNERS", "SCHEMA_VERSION", "STATIC_METRICS",
    "SLURM_RESERVED_ARGS", "TIME_UNITS", "BenchmarkSpec", "BuildSpec", "PrebuiltGithub", "CompilerCache", "CupySpec", "EnvironmentSpec", "GbenchSpec", "NvbenchSpec",
    "NvbenchStopping", "Recipe", "DependencySpec", "RunnerKind", "SlurmClass", "SlurmSpec", "load_recipe", "member_label",
    "parse_duration", "parse_member_label", "parse_recipe",
]
