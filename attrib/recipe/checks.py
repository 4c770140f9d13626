"""The checks a recipe table is validated with: each a predicate and the words for what it
expects, so every error names the key and the expectation in one line (RecipeError)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from attrib.errors import RecipeError

Check = tuple[Callable[[Any], bool], str]

_STR: Check = (lambda v: isinstance(v, str) and v != "", "a non-empty string")
_OPT_STR: Check = (lambda v: isinstance(v, str), "a string")
_POS_NUM: Check = (
    lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
    "a positive number",
)
_POS_INT: Check = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0, "a positive integer")
_STR_LIST: Check = (
    lambda v: isinstance(v, list) and len(v) > 0 and all(isinstance(x, str) and x for x in v),
    "a non-empty list of non-empty strings",
)
_STR_TABLE: Check = (
    lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
    "a table of string values",
)


def _enum(values: tuple[str, ...]) -> Check:
    return (lambda v: v in values, "one of " + ", ".join(f'"{x}"' for x in values))


_BOOL: Check = (lambda v: isinstance(v, bool), "true or false")
_NON_NEG_INT: Check = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a non-negative integer")
_OPT_STR_LIST: Check = (
    lambda v: isinstance(v, list) and all(isinstance(x, str) and x for x in v),
    "a list of non-empty strings",
)


def _check_table(path: Path, prefix: str, table: dict[str, Any], spec: dict[str, tuple[Check, bool]]) -> None:
    for key in table:
        if key not in spec:
            known = ", ".join(spec)
            raise RecipeError(path, prefix + key, f"unknown key (expected one of: {known})")
    for key, ((ok, expected), required) in spec.items():
        if key not in table:
            if required:
                raise RecipeError(path, prefix + key, f"missing; expected {expected}")
            continue
        if not ok(table[key]):
            raise RecipeError(path, prefix + key, f"expected {expected}, got {table[key]!r}")
