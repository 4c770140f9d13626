"""The recipe keys issue 19 adds: `[search] method` and `ignore_below_pct`."""

from __future__ import annotations

from pathlib import Path

import pytest

from attrib.core.model import SearchMethod
from attrib.errors import ConfigError
from attrib.recipe import load_recipe

TOP = 'schema = 1\nname = "mini"\n[build]\ncommands = ["make"]\n'
BENCH = '[[benchmark]]\nname = "b"\nrunner = "command"\ncommand = ["./b"]\nmin_change_pct = 3\n'


def _load(tmp_path: Path, text: str):
    path = tmp_path / "recipe.toml"
    path.write_text(text)
    return load_recipe(path), path


def test_defaults_posterior_search_and_half_the_minimum(tmp_path: Path) -> None:
    recipe, _ = _load(tmp_path, TOP + BENCH)
    assert recipe.search_method is SearchMethod.POSTERIOR
    assert recipe.benchmarks[0].ignore_pct == 1.5


def test_sequential_method_and_an_explicit_ignore_below(tmp_path: Path) -> None:
    # the sequential search is a method of the product (segment/sequential_search.py says why)
    recipe, _ = _load(tmp_path, TOP + '[search]\nmethod = "sequential"\n' + BENCH + "ignore_below_pct = 1\n")
    assert recipe.search_method is SearchMethod.SEQUENTIAL
    assert recipe.benchmarks[0].ignore_pct == 1.0


@pytest.mark.parametrize(
    ("extra_search", "extra_bench", "key"),
    [('method = "bayes"\n', "", "search.method"), ("", "ignore_below_pct = -1\n", "benchmark[0].ignore_below_pct"),
        ("", "ignore_below_pct = 3\n", "benchmark[0].ignore_below_pct"),  # not below the minimum
    ],
)
def test_bad_values_are_one_line_errors_naming_the_key(tmp_path: Path, extra_search, extra_bench, key) -> None:
    path = tmp_path / "recipe.toml"
    path.write_text(TOP + "[search]\n" + extra_search + BENCH + extra_bench)
    with pytest.raises(ConfigError) as info:
        load_recipe(path)
    assert info.value.key == key
    assert "\n" not in str(info.value)
