"""Recipe loading: strict validation with one-line errors, defaults, and the demo recipe."""

from __future__ import annotations

from pathlib import Path

import pytest

from attrib.core.model import Direction
from attrib.demo import DEMO_RECIPE
from attrib.errors import ConfigError, InputError
from attrib.recipe import (
    BLOCK_STATISTICS,
    DEFAULT_BISECT_MIN_CHANGE_PCT,
    DEFAULT_BUILD_TIMEOUT_S,
    DEFAULT_REPS,
    DEFAULT_RUN_TIMEOUT_S,
    BenchmarkSpec,
    BuildSpec,
    load_recipe,
)

REPO_ROOT = Path(__file__).resolve().parent.parent

# Smallest valid recipe: only the required keys. Sections are kept apart so that a test can
# add or drop lines in one of them.
TOP = 'schema = 1\nname = "mini"\n'
BUILD = '[build]\ncommands = ["make"]\n'
BENCH = '[[benchmark]]\nname = "b"\nrunner = "command"\ncommand = ["./b", "{reps}"]\n'


def write(tmp_path: Path, text: str, name: str = "recipe.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def recipe_text(top: str = TOP, build: str = BUILD, bench: str = BENCH) -> str:
    return "\n".join(part for part in (top, build, bench) if part)


def load_error(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_recipe(path)
    return info.value


def assert_one_line_error(err: ConfigError, path: Path, key: str, *expected: str) -> None:
    msg = str(err)
    assert "\n" not in msg and "\r" not in msg, msg
    assert str(path) in msg, msg
    if key:
        assert f"'{key}'" in msg, msg
    assert err.key == key
    for text in expected:
        assert text in msg, f"{text!r} not in {msg!r}"
    assert isinstance(err, InputError)
    assert err.exit_code == 2


# --- valid recipes -------------------------------------------------------------------------


def test_minimal_recipe_gets_the_documented_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, recipe_text())
    recipe = load_recipe(path)
    assert recipe.path == path
    assert recipe.name == "mini"
    assert recipe.description == ""
    assert recipe.build.commands == ("make",)
    assert recipe.build.timeout_s == DEFAULT_BUILD_TIMEOUT_S == 600.0
    assert recipe.build.env == {}
    assert len(recipe.benchmarks) == 1
    bench = recipe.benchmarks[0]
    assert bench.name == "b"
    assert bench.runner == "command"
    assert bench.command == ("./b", "{reps}")
    assert bench.unit == "s"
    assert bench.direction is Direction.LOWER
    assert bench.timeout_s == DEFAULT_RUN_TIMEOUT_S == 120.0
    assert bench.reps == DEFAULT_REPS == 10
    assert bench.min_change_pct == DEFAULT_BISECT_MIN_CHANGE_PCT == 2.0
    assert bench.block_statistic == BLOCK_STATISTICS[0] == "faster_half"
    assert recipe.benchmark(None) is bench
    assert recipe.benchmark("b") is bench


def test_every_key_given_is_used(tmp_path: Path) -> None:
    text = recipe_text(
        top=TOP + 'description = "d"\n',
        build='[build]\ncommands = ["a", "b c"]\ntimeout_s = 30\nenv = { X = "1", Y = "" }\n',
        bench=BENCH
        + 'unit = "GB/s"\ndirection = "higher"\ntimeout_s = 7.5\nreps = 3\nmin_change_pct = 5\nblock_statistic = "all"\n',
    )
    recipe = load_recipe(write(tmp_path, text))
    assert recipe.description == "d"
    assert recipe.build == BuildSpec(commands=("a", "b c"), timeout_s=30.0, env={"X": "1", "Y": ""})
    bench = recipe.benchmarks[0]
    assert bench.unit == "GB/s"
    assert bench.direction is Direction.HIGHER
    assert bench.timeout_s == 7.5
    assert bench.reps == 3
    assert bench.min_change_pct == 5.0
    assert bench.block_statistic == "all"
    # integers in the file become floats where the field is a float
    assert isinstance(recipe.build.timeout_s, float)
    assert isinstance(bench.min_change_pct, float)


def test_several_benchmarks_are_kept_in_order_and_chosen_by_name(tmp_path: Path) -> None:
    second = BENCH.replace('name = "b"', 'name = "second"')
    recipe = load_recipe(write(tmp_path, recipe_text(bench=BENCH + "\n" + second)))
    assert [b.name for b in recipe.benchmarks] == ["b", "second"]
    assert recipe.benchmark("second") is recipe.benchmarks[1]
    assert recipe.benchmark("b") is recipe.benchmarks[0]


def test_demo_recipe_file_matches_the_embedded_text_and_loads() -> None:
    path = REPO_ROOT / "recipes" / "demo-cpu.toml"
    assert path.read_text() == DEMO_RECIPE
    recipe = load_recipe(path)
    assert recipe.name == "demo-cpu"
    assert recipe.build.commands == ("make bench",)
    assert recipe.build.timeout_s == 120.0
    assert recipe.build.env == {"CFLAGS": "-O2"}
    bench = recipe.benchmark(None)
    assert bench.name == "loop"
    assert bench.argv() == ["./bench", "10"]
    assert bench.direction is Direction.LOWER
    assert bench.min_change_pct == 5.0  # above what a shared CPU resolves at 2 % (the recipe says why)


# --- rejected recipes ----------------------------------------------------------------------

# (id, recipe text, dotted key, texts the message must contain)
BAD_RECIPES = [
    ("unknown-top-key", recipe_text(top=TOP + 'colour = "red"\n'), "colour", ["unknown key", "name"]),
    ("unknown-build-key", recipe_text(build=BUILD + "xyz = 1\n"), "build.xyz", ["unknown key", "commands"]),
    ("unknown-bench-key", recipe_text(bench=BENCH + "xyz = 1\n"), "benchmark[0].xyz", ["unknown key", "runner"]),
    (
        "unknown-key-second-bench",
        recipe_text(bench=BENCH + "\n" + BENCH.replace('"b"', '"c"') + "xyz = 1\n"),
        "benchmark[1].xyz",
        ["unknown key"],
    ),
    ("missing-name", recipe_text(top="schema = 1\n"), "name", ["missing", "a non-empty string"]),
    ("missing-schema", recipe_text(top='name = "x"\n'), "schema", ["missing", "the integer 1"]),
    ("empty-name", recipe_text(top='schema = 1\nname = ""\n'), "name", ["a non-empty string"]),
    (
        "missing-build-commands",
        recipe_text(build="[build]\ntimeout_s = 5\n"),
        "build.commands",
        ["missing", "a non-empty list of non-empty strings"],
    ),
    ("missing-build", recipe_text(build=""), "build", ["missing", "a table [build]"]),
    ("build-not-a-table", recipe_text(top=TOP + 'build = "make"\n', build=""), "build", ["a table [build]"]),
    (
        "missing-bench-command",
        recipe_text(bench='[[benchmark]]\nname = "b"\nrunner = "command"\n'),
        "benchmark[0].command",
        ["missing", "a non-empty list of non-empty strings"],
    ),
    (
        "missing-bench-runner",
        recipe_text(bench='[[benchmark]]\nname = "b"\ncommand = ["x"]\n'),
        "benchmark[0].runner",
        ["missing", '"command"'],
    ),
    (
        "missing-bench-name",
        recipe_text(bench='[[benchmark]]\nrunner = "command"\ncommand = ["x"]\n'),
        "benchmark[0].name",
        ["missing"],
    ),
    (
        "timeout-string",
        recipe_text(build=BUILD + 'timeout_s = "abc"\n'),
        "build.timeout_s",
        ["a positive number", "'abc'"],
    ),
    ("timeout-zero", recipe_text(build=BUILD + "timeout_s = 0\n"), "build.timeout_s", ["a positive number"]),
    ("timeout-bool", recipe_text(build=BUILD + "timeout_s = true\n"), "build.timeout_s", ["a positive number"]),
    (
        "bench-timeout-negative",
        recipe_text(bench=BENCH + "timeout_s = -1.5\n"),
        "benchmark[0].timeout_s",
        ["a positive number", "-1.5"],
    ),
    (
        "commands-string",
        recipe_text(build='[build]\ncommands = "make"\n'),
        "build.commands",
        ["a non-empty list of non-empty strings", "'make'"],
    ),
    ("commands-empty", recipe_text(build="[build]\ncommands = []\n"), "build.commands", ["a non-empty list"]),
    ("commands-empty-item", recipe_text(build='[build]\ncommands = [""]\n'), "build.commands", ["non-empty strings"]),
    ("commands-number", recipe_text(build="[build]\ncommands = [1]\n"), "build.commands", ["non-empty strings"]),
    ("env-number", recipe_text(build=BUILD + "env = { A = 1 }\n"), "build.env", ["a table of string values"]),
    ("reps-zero", recipe_text(bench=BENCH + "reps = 0\n"), "benchmark[0].reps", ["a positive integer", "0"]),
    ("reps-float", recipe_text(bench=BENCH + "reps = 2.5\n"), "benchmark[0].reps", ["a positive integer"]),
    ("reps-bool", recipe_text(bench=BENCH + "reps = true\n"), "benchmark[0].reps", ["a positive integer"]),
    (
        "min-change-zero",
        recipe_text(bench=BENCH + "min_change_pct = 0\n"),
        "benchmark[0].min_change_pct",
        ["a positive number"],
    ),
    (
        "direction-sideways",
        recipe_text(bench=BENCH + 'direction = "sideways"\n'),
        "benchmark[0].direction",
        ['"lower"', '"higher"', "'sideways'"],
    ),
    (
        "runner-nope",
        recipe_text(bench=BENCH.replace('runner = "command"', 'runner = "nope"')),
        "benchmark[0].runner",
        ['one of "command"', "'nope'"],
    ),
    (
        "bench-command-string",
        recipe_text(bench=BENCH.replace('command = ["./b", "{reps}"]', 'command = "./b"')),
        "benchmark[0].command",
        ["a non-empty list of non-empty strings"],
    ),
    (
        "block-statistic-median",
        recipe_text(bench=BENCH + 'block_statistic = "median"\n'),
        "benchmark[0].block_statistic",
        ['"faster_half"', '"all"', "'median'"],
    ),
    ("unit-empty", recipe_text(bench=BENCH + 'unit = ""\n'), "benchmark[0].unit", ["a non-empty string"]),
    ("description-number", recipe_text(top=TOP + "description = 3\n"), "description", ["a string"]),
    ("schema-2", recipe_text(top='schema = 2\nname = "x"\n'), "schema", ["the integer 1", "got 2"]),
    ("no-benchmark", recipe_text(bench=""), "benchmark", ["missing", "at least one [[benchmark]] table"]),
    ("benchmark-empty-array", recipe_text(top=TOP + "benchmark = []\n", bench=""), "benchmark", ["at least one"]),
    (
        "benchmark-single-table",
        recipe_text(bench=BENCH.replace("[[benchmark]]", "[benchmark]")),
        "benchmark",
        ["at least one [[benchmark]] table"],
    ),
    ("benchmark-not-tables", recipe_text(top=TOP + 'benchmark = ["b"]\n', bench=""), "benchmark[0]", ["a table"]),
    (
        "duplicate-benchmark-names",
        recipe_text(bench=BENCH + "\n" + BENCH),
        "benchmark[1].name",
        ["duplicate", "'b'"],
    ),
]


@pytest.mark.parametrize(("text", "key", "expected"), [r[1:] for r in BAD_RECIPES], ids=[r[0] for r in BAD_RECIPES])
def test_invalid_recipe_is_one_line_error_naming_file_key_and_expectation(
    tmp_path: Path, text: str, key: str, expected: list[str]
) -> None:
    path = write(tmp_path, text)
    assert_one_line_error(load_error(path), path, key, *expected)


def test_invalid_toml_syntax(tmp_path: Path) -> None:
    path = write(tmp_path, 'schema = 1\nname = "x\n[build\n')
    err = load_error(path)
    assert_one_line_error(err, path, "", "not valid TOML")


def test_invalid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'schema = 1\nname = "caf\xe9"\n')
    assert_one_line_error(load_error(path), path, "", "not valid TOML")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "recipe.toml"
    assert_one_line_error(load_error(path), path, "", "not found")


def test_directory_instead_of_file(tmp_path: Path) -> None:
    assert_one_line_error(load_error(tmp_path), tmp_path, "", "cannot read recipe")


def test_unknown_benchmark_name(tmp_path: Path) -> None:
    path = write(tmp_path, recipe_text(bench=BENCH + "\n" + BENCH.replace('"b"', '"other"')))
    recipe = load_recipe(path)
    with pytest.raises(ConfigError) as info:
        recipe.benchmark("nope")
    assert_one_line_error(info.value, path, "benchmark", "'nope'", "b, other")


def test_unknown_benchmark_name_with_a_single_benchmark(tmp_path: Path) -> None:
    path = write(tmp_path, recipe_text())
    with pytest.raises(ConfigError) as info:
        load_recipe(path).benchmark("B")
    assert_one_line_error(info.value, path, "benchmark", "'B'")


def test_no_benchmark_chosen_among_several(tmp_path: Path) -> None:
    path = write(tmp_path, recipe_text(bench=BENCH + "\n" + BENCH.replace('"b"', '"other"')))
    recipe = load_recipe(path)
    with pytest.raises(ConfigError) as info:
        recipe.benchmark(None)
    assert_one_line_error(info.value, path, "benchmark", "several benchmarks", "b, other", "--benchmark")


@pytest.mark.parametrize("schema", ["true", "1.0"])
def test_schema_must_be_the_integer_one(tmp_path: Path, schema: str) -> None:
    path = write(tmp_path, recipe_text(top=f'schema = {schema}\nname = "x"\n'))
    assert_one_line_error(load_error(path), path, "schema", "the integer 1")


def test_error_stays_one_line_for_a_key_with_a_newline(tmp_path: Path) -> None:
    path = write(tmp_path, recipe_text(build=BUILD + '"a\\nb" = 1\n'))
    msg = str(load_error(path))
    assert "\n" not in msg, msg


# --- specs ---------------------------------------------------------------------------------


def test_argv_substitutes_reps() -> None:
    bench = BenchmarkSpec(name="b", runner="command", command=("./b", "{reps}", "--n={reps}x", "plain"), reps=7)
    assert bench.argv() == ["./b", "7", "--n=7x", "plain"]
    assert bench.argv(3) == ["./b", "3", "--n=3x", "plain"]
    assert bench.command == ("./b", "{reps}", "--n={reps}x", "plain")  # the spec itself is untouched


def test_argv_without_placeholder_is_the_command() -> None:
    bench = BenchmarkSpec(name="b", runner="command", command=("run", "--fast"))
    assert bench.argv() == ["run", "--fast"]
    assert bench.argv(99) == ["run", "--fast"]


def test_cache_identity_is_stable_for_equal_specs() -> None:
    a = BuildSpec(commands=("make", "make install"), timeout_s=60.0, env={"A": "1", "B": "2"})
    b = BuildSpec(commands=("make", "make install"), timeout_s=60.0, env={"B": "2", "A": "1"})
    assert a.cache_identity() == b.cache_identity() == a.cache_identity()
    assert len(a.cache_identity()) == 64
    int(a.cache_identity(), 16)  # hex digest


@pytest.mark.parametrize(
    "changed",
    [
        BuildSpec(commands=("make",), timeout_s=60.0, env={"A": "1", "B": "2"}),
        BuildSpec(commands=("make install", "make"), timeout_s=60.0, env={"A": "1", "B": "2"}),
        BuildSpec(commands=("make", "make  install"), timeout_s=60.0, env={"A": "1", "B": "2"}),
        BuildSpec(commands=("make", "make install"), timeout_s=61.0, env={"A": "1", "B": "2"}),
        BuildSpec(commands=("make", "make install"), timeout_s=60.0, env={"A": "1"}),
        BuildSpec(commands=("make", "make install"), timeout_s=60.0, env={"A": "1", "B": "3"}),
        BuildSpec(commands=("make", "make install"), timeout_s=60.0, env={"A": "1", "C": "2"}),
        BuildSpec(commands=("make", "make install"), timeout_s=60.0),
    ],
)
def test_cache_identity_changes_with_commands_env_or_timeout(changed: BuildSpec) -> None:
    base = BuildSpec(commands=("make", "make install"), timeout_s=60.0, env={"A": "1", "B": "2"})
    assert changed.cache_identity() != base.cache_identity()


def test_cache_identity_of_loaded_recipes(tmp_path: Path) -> None:
    def identity(build: str, name: str) -> str:
        return load_recipe(write(tmp_path, recipe_text(build=build), name)).build.cache_identity()

    base = identity('[build]\ncommands = ["make"]\ntimeout_s = 120\n', "a.toml")
    # the same build written differently, or with other top-level/benchmark settings
    assert identity('[build]\ntimeout_s = 120.0\ncommands = ["make"]\n', "b.toml") == base
    assert identity('[build]\ncommands = ["make"]\ntimeout_s = 120\nenv = {}\n', "c.toml") == base
    # a real change
    assert identity('[build]\ncommands = ["make"]\ntimeout_s = 121\n', "d.toml") != base
    assert identity('[build]\ncommands = ["make"]\ntimeout_s = 120\nenv = { X = "" }\n', "e.toml") != base
    assert identity('[build]\ncommands = ["make", "true"]\ntimeout_s = 120\n', "f.toml") != base


def test_artifacts_search_paths_and_budget_are_parsed(tmp_path):
    build = BUILD + 'artifacts = ["bench", "lib/*.so"]\n'
    search = '[search]\npaths = ["kernels/", "include/"]\nbudget = "30m"\n'
    r = load_recipe(write(tmp_path, recipe_text(build=build) + "\n" + search))
    assert r.build.artifacts == ("bench", "lib/*.so")
    assert r.search_paths == ("kernels/", "include/") and r.budget_s == 1800.0
    # declaring no artifacts keeps the build cache keys recipes had before the key existed
    plain = load_recipe(write(tmp_path, recipe_text(), "plain.toml"))
    assert plain.build.artifacts == () and plain.search_paths == () and plain.budget_s is None


@pytest.mark.parametrize(
    ("extra_build", "search", "key", "expected"),
    [
        ('artifacts = ["/abs/bench"]\n', "", "build.artifacts", "globs relative to the checkout"),
        ("artifacts = []\n", "", "build.artifacts", "non-empty list of globs"),
        ("", '[search]\npaths = "kernels/"\n', "search.paths", "list of paths"),
        ("", '[search]\nbudget = "soon"\n', "search.budget", 'a duration such as "30m"'),
        ("", "[search]\nwhen = 1\n", "search.when", "unknown key"),
    ],
)
def test_bad_artifacts_or_search_keys_are_one_line_errors(tmp_path, extra_build, search, key, expected):
    path = write(tmp_path, recipe_text(build=BUILD + extra_build) + "\n" + search)
    assert_one_line_error(load_error(path), path, key, expected)
