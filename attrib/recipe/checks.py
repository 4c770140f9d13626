"""The types a recipe table is declared with: each an `Annotated` type whose `Rule` says what it
expects, decoded by attrib's one decoder (attrib/codec.py), so every error names the file, the
dotted key and the expectation in one line (ConfigError)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

from attrib.codec import NonEmptyStr, PositiveInt, PositiveNumber, Rule, config_errors, decode_table

# A key's declared type; a table is {key: (type, required)}.
Check = Any


def _rule(tp: Any, ok: Callable[[Any], bool], expected: str) -> Check:
    return Annotated[tp, Rule(ok, expected)]


def _anything(_: Any) -> bool:
    return True


def relative_path(v: str) -> bool:
    """A path inside the checkout: not absolute, no '..'."""
    return v != "" and not v.startswith("/") and ".." not in Path(v).parts


_STR: Check = NonEmptyStr
_OPT_STR: Check = _rule(str, _anything, "a string")
_POS_NUM: Check = PositiveNumber
_POS_INT: Check = PositiveInt
_NON_NEG_INT: Check = _rule(int, lambda v: v >= 0, "a non-negative integer")
_BOOL: Check = _rule(bool, _anything, "true or false")
_STR_LIST: Check = _rule(tuple[str, ...], lambda v: len(v) > 0 and all(v), "a non-empty list of non-empty strings")
_OPT_STR_LIST: Check = _rule(tuple[str, ...], all, "a list of non-empty strings")
_STR_TABLE: Check = _rule(Mapping[str, str], _anything, "a table of string values")


def _table(words: str) -> Check:
    return _rule(Mapping[str, Any], _anything, words)


def _enum(values: tuple[str, ...]) -> Check:
    return _rule(str, lambda v: v in values, "one of " + ", ".join(f'"{x}"' for x in values))


def _check_table(path: Path, prefix: str, table: Any, spec: dict[str, tuple[Check, bool]]) -> dict[str, Any]:
    """The table's keys decoded by their declared types (lists become tuples, integers floats
    where a number is declared); ConfigError on an unknown, missing or ill-typed key."""
    with config_errors(path):
        return decode_table({k: tp for k, (tp, _) in spec.items()}, {k for k, (_, req) in spec.items() if req}, table, prefix.rstrip("."))
