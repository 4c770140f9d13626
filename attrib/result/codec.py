"""Frozen dataclasses to JSON values and back, validated against their type hints.

One generic walk instead of a hand-written reader per record: what `from_json` accepts is
exactly what the types say, and a value that does not fit fails with the dotted path of the
field (`culprits[0].change_pct`) and what was expected there. Unknown keys are ignored, so a
reader accepts a document from a newer attrib of the same schema (fields may be added,
never renamed). It knows the few shapes the result uses: str, int, float, bool, None,
StrEnum, tuple[X, ...], fixed tuples, Mapping[str, X], Any (a JSON value kept as it is),
unions of these, and dataclasses.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from enum import Enum
from typing import Any

from attrib.errors import FieldError


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
    return value


def _got(data: Any) -> str:
    if data is None:
        return "null"
    text = repr(data) if not isinstance(data, dict | list) else type(data).__name__.replace("dict", "an object").replace("list", "a list")
    return text if len(text) <= 40 else text[:37] + "..."


def _join(path: str, name: str | int) -> str:
    if isinstance(name, int):
        return f"{path}[{name}]"
    return f"{path}.{name}" if path else name


def decode(tp: Any, data: Any, path: str = "") -> Any:
    """`data` as an instance of `tp`; raises FieldError naming the first field that does not fit."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return data
    if origin is typing.Union or origin is types.UnionType:
        return _decode_union(typing.get_args(tp), data, path)
    if dataclasses.is_dataclass(tp):
        return _decode_dataclass(tp, data, path)
    if isinstance(tp, type) and issubclass(tp, Enum):
        try:
            return tp(data)
        except ValueError:
            raise FieldError(path, f"expected one of {', '.join(str(m.value) for m in tp)}, got {_got(data)}") from None
    if tp is bool:
        if isinstance(data, bool):
            return data
        raise FieldError(path, f"expected true or false, got {_got(data)}")
    if tp is int:
        if isinstance(data, int) and not isinstance(data, bool):
            return data
        raise FieldError(path, f"expected an integer, got {_got(data)}")
    if tp is float:
        if isinstance(data, int | float) and not isinstance(data, bool):
            return float(data)
        raise FieldError(path, f"expected a number, got {_got(data)}")
    if tp is str:
        if isinstance(data, str):
            return data
        raise FieldError(path, f"expected a string, got {_got(data)}")
    if origin is tuple:
        return _decode_tuple(typing.get_args(tp), data, path)
    if origin in (Mapping, dict):
        if not isinstance(data, dict):
            raise FieldError(path, f"expected an object, got {_got(data)}")
        _, value_tp = typing.get_args(tp)
        return {str(k): decode(value_tp, v, _join(path, str(k))) for k, v in data.items()}
    raise TypeError(f"codec: unsupported type {tp!r} at {path}")  # a bug in the result types


def _decode_union(args: tuple[Any, ...], data: Any, path: str) -> Any:
    if data is None and type(None) in args:
        return None
    first: FieldError | None = None
    for arg in (a for a in args if a is not type(None)):
        try:
            return decode(arg, data, path)
        except FieldError as exc:
            first = first or exc
    assert first is not None
    if type(None) in args and first.path == path:
        raise FieldError(path, first.expected.replace("expected ", "expected null or ", 1))
    raise first


def _decode_tuple(args: tuple[Any, ...], data: Any, path: str) -> tuple[Any, ...]:
    if not isinstance(data, list):
        raise FieldError(path, f"expected a list, got {_got(data)}")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(decode(args[0], v, _join(path, i)) for i, v in enumerate(data))
    if len(data) != len(args):
        raise FieldError(path, f"expected a list of {len(args)}, got {len(data)} items")
    return tuple(decode(a, v, _join(path, i)) for i, (a, v) in enumerate(zip(args, data, strict=True)))


def _decode_dataclass(tp: Any, data: Any, path: str) -> Any:
    if not isinstance(data, dict):
        raise FieldError(path, f"expected an object, got {_got(data)}")
    hints = typing.get_type_hints(tp)
    kwargs = {}
    for f in dataclasses.fields(tp):
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise FieldError(_join(path, f.name), "missing")
            continue
        kwargs[f.name] = decode(hints[f.name], data[f.name], _join(path, f.name))
    return tp(**kwargs)
