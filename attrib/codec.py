"""Typed records to JSON values and back, validated against their type hints: attrib's one decoder,
for every TOML table it reads (the recipe, the daemon's config and its [history] table, detection
settings) and every JSON document (the result).

One generic walk instead of a hand-written reader per table: what `decode` accepts is exactly
what the types say, and a value that does not fit fails with a `FieldError` carrying the dotted
path of the field (`culprits[0].change_pct`, `benchmark[1].reps`) and what was expected there;
each boundary turns it into its own one-line error naming the file (ResultFormatError,
ConfigError). It knows the few shapes attrib uses: str, int, float, bool, None, Path (from a
string), StrEnum, tuple[X, ...], fixed tuples, Mapping[str, X], Any (a value kept as it is),
unions of these, dataclasses, and `Annotated[X, Rule(...)]`: a condition on the decoded value
with the words for what it expects ("a positive number"), which also word the error when the
value is not even an X.

Two modes, because the two kinds of input differ in what an unknown key means:
- a document (`strict=False`): unknown keys are ignored, so a reader accepts a result from a
  newer attrib of the same schema (fields may be added, never renamed);
- a configuration (`strict=True`): an unknown key is refused, naming the keys there are (a
  typo must not silently fall back to a default), and a missing key says what was expected.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

from attrib.errors import ConfigError, FieldError


@dataclasses.dataclass(frozen=True)
class Rule:
    """`Annotated[float, Rule(lambda v: v > 0, "a positive number")]`: the decoded value must
    satisfy `ok`; `expected` words it, in the error for a value of the wrong type too."""

    ok: Callable[[Any], bool]
    expected: str


# The rules every configuration uses; a table's own rules live beside its records.
NonEmptyStr = Annotated[str, Rule(lambda v: v != "", "a non-empty string")]
PositiveNumber = Annotated[float, Rule(lambda v: v > 0, "a positive number")]
PositiveInt = Annotated[int, Rule(lambda v: v > 0, "a positive integer")]


def encode(value: Any) -> Any:
    """A JSON value: dataclasses become objects in field order, enums their values, tuples lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [encode(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


def _got(data: Any, strict: bool = False) -> str:
    if data is None:
        return "null"
    if isinstance(data, dict):
        return "a table" if strict else "an object"
    if isinstance(data, list) and not strict:
        return "a list"
    text = repr(data)
    return text if len(text) <= 40 else text[:37] + "..."


def _join(path: str, name: str | int) -> str:
    if isinstance(name, int):
        return f"{path}[{name}]"
    return f"{path}.{name}" if path else name


def expectation(tp: Any) -> str:
    """What a value of `tp` is, in the words of the error messages."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        rules = [r for r in tp.__metadata__ if isinstance(r, Rule)]
        return rules[0].expected if rules else expectation(typing.get_args(tp)[0])
    if origin is typing.Union or origin is types.UnionType:
        return " or ".join(expectation(a) for a in typing.get_args(tp) if a is not type(None))
    if isinstance(tp, type) and issubclass(tp, Enum):
        return "one of " + ", ".join(f'"{m.value}"' for m in tp)
    words = {bool: "true or false", int: "an integer", float: "a number", str: "a string", Path: "a path string"}
    if tp in words:
        return words[tp]
    if origin is tuple:
        return "a list"
    return "a table"


def decode(tp: Any, data: Any, path: str = "", *, strict: bool = False) -> Any:
    """`data` as an instance of `tp`; raises FieldError naming the first field that does not fit."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return data
    if origin is Annotated:
        return _decode_annotated(tp, data, path, strict)
    if origin is typing.Union or origin is types.UnionType:
        return _decode_union(typing.get_args(tp), data, path, strict)
    if dataclasses.is_dataclass(tp):
        return _decode_dataclass(tp, data, path, strict)
    if isinstance(tp, type) and issubclass(tp, Enum):
        try:
            return tp(data)
        except ValueError:
            values = ", ".join(f'"{m.value}"' if strict else str(m.value) for m in tp)
            raise FieldError(path, f"expected one of {values}, got {_got(data, strict)}") from None
    if tp is bool:
        if isinstance(data, bool):
            return data
        raise FieldError(path, f"expected true or false, got {_got(data, strict)}")
    if tp is int:
        if isinstance(data, int) and not isinstance(data, bool):
            return data
        raise FieldError(path, f"expected an integer, got {_got(data, strict)}")
    if tp is float:
        if isinstance(data, int | float) and not isinstance(data, bool):
            return float(data)
        raise FieldError(path, f"expected a number, got {_got(data, strict)}")
    if tp is str:
        if isinstance(data, str):
            return data
        raise FieldError(path, f"expected a string, got {_got(data, strict)}")
    if tp is Path:
        if isinstance(data, str) and data:
            return Path(data)
        raise FieldError(path, f"expected a path string, got {_got(data, strict)}")
    if origin is tuple:
        return _decode_tuple(typing.get_args(tp), data, path, strict)
    if origin in (Mapping, dict):
        if not isinstance(data, dict):
            raise FieldError(path, f"expected {'a table' if strict else 'an object'}, got {_got(data, strict)}")
        _, value_tp = typing.get_args(tp)
        return {str(k): decode(value_tp, v, _join(path, str(k)), strict=strict) for k, v in data.items()}
    raise TypeError(f"codec: unsupported type {tp!r} at {path}")  # a bug in the declared types


def _holds_records(tp: Any) -> bool:
    if dataclasses.is_dataclass(tp):
        return True
    return any(_holds_records(a) for a in typing.get_args(tp) if a is not Ellipsis and not isinstance(a, Rule))


def _decode_annotated(tp: Any, data: Any, path: str, strict: bool) -> Any:
    inner = typing.get_args(tp)[0]
    rules = [r for r in tp.__metadata__ if isinstance(r, Rule)]
    try:
        value = decode(inner, data, path, strict=strict)
    except FieldError as exc:
        # The rule's words say what the whole value should be ("a non-empty list of non-empty
        # strings"): clearer than the inner complaint, except inside a table or list of records,
        # whose own fields (and checks) name the place better.
        deeper = exc.path != path or (dataclasses.is_dataclass(inner) and isinstance(data, dict))
        if not rules or (deeper and _holds_records(inner)):
            raise
        raise FieldError(path, f"expected {rules[0].expected}, got {_got(data, strict)}") from None
    for rule in rules:
        if not rule.ok(value):
            raise FieldError(path, f"expected {rule.expected}, got {_got(data, strict)}")
    return value


def _decode_union(args: tuple[Any, ...], data: Any, path: str, strict: bool) -> Any:
    if data is None and type(None) in args:
        return None
    first: FieldError | None = None
    for arg in (a for a in args if a is not type(None)):
        try:
            return decode(arg, data, path, strict=strict)
        except FieldError as exc:
            first = first or exc
    assert first is not None
    if type(None) in args and first.path == path and not strict:  # a TOML file has no null
        raise FieldError(path, first.expected.replace("expected ", "expected null or ", 1))
    raise first


def _decode_tuple(args: tuple[Any, ...], data: Any, path: str, strict: bool) -> tuple[Any, ...]:
    if not isinstance(data, list):
        raise FieldError(path, f"expected a list, got {_got(data, strict)}")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(decode(args[0], v, _join(path, i), strict=strict) for i, v in enumerate(data))
    if len(data) != len(args):
        raise FieldError(path, f"expected a list of {len(args)}, got {len(data)} items")
    return tuple(decode(a, v, _join(path, i), strict=strict) for i, (a, v) in enumerate(zip(args, data, strict=True)))


def decode_table(
    keys: Mapping[str, Any], required: Collection[str], data: Any, path: str = "", *, strict: bool = True
) -> dict[str, Any]:
    """A table whose keys are declared one by one (`keys`: name -> type): the decoded values of
    the keys it has. Strict by default: this is how a configuration's tables are read."""
    if not isinstance(data, dict):
        raise FieldError(path, f"expected {'a table' if strict else 'an object'}, got {_got(data, strict)}")
    if strict:
        for key in data:
            if key not in keys:
                raise FieldError(_join(path, str(key)), f"unknown key (expected one of: {', '.join(keys)})")
    out: dict[str, Any] = {}
    for key, tp in keys.items():
        if key not in data:
            if key in required:
                raise FieldError(_join(path, key), f"missing; expected {expectation(tp)}" if strict else "missing")
            continue
        out[key] = decode(tp, data[key], _join(path, key), strict=strict)
    return out


def _decode_dataclass(tp: Any, data: Any, path: str, strict: bool) -> Any:
    hints = typing.get_type_hints(tp, include_extras=True)
    fields = dataclasses.fields(tp)
    required = {f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    kwargs = decode_table({f.name: hints[f.name] for f in fields}, required, data, path, strict=strict)
    try:
        return tp(**kwargs)
    except ValueError as exc:  # a record that checks its own ranges (core/detect.DetectSettings)
        raise FieldError(path, str(exc)) from None


@contextmanager
def config_errors(source: object) -> Iterator[None]:
    """The boundary of a configuration: a FieldError inside becomes the one-line ConfigError
    naming `source` (the file, or the option the text came from) and the dotted key."""
    try:
        yield
    except FieldError as exc:
        raise ConfigError(source, exc.path, exc.expected) from None
