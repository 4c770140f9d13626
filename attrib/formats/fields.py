"""Typed field access for the format parsers: every miss is one FormatError naming the field.

Kept apart from the parsers so that gbench.py and nvbench.py read as the schema they check.
"""

from __future__ import annotations

import builtins
import json
import math
from typing import Any

from attrib.errors import FormatError


def load_json(text: str, source: str, what: str) -> dict[str, Any]:
    """The document as a dict, or one line saying why it is not `what` at all."""
    if not text.strip():
        raise FormatError(source, "", "", f"empty output; expected {what}")
    try:
        root = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(
            source, "", "", f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); expected {what}"
        ) from None
    if not isinstance(root, dict):
        raise FormatError(source, "", "", f"top level is a JSON {type(root).__name__}; expected {what} (an object)")
    return root


class Reader:
    """Reads fields of one JSON object; errors name `source`, `benchmark` and the dotted path."""

    def __init__(self, source: str, benchmark: str, path: str, node: Any) -> None:
        self.source, self.benchmark, self.path = source, benchmark, path
        if not isinstance(node, dict):
            raise FormatError(source, benchmark, path, f"expected an object, got {_shown(node)}")
        self.node: dict[str, Any] = node

    def _name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: str, expected: str) -> FormatError:
        return FormatError(self.source, self.benchmark, self._name(key), expected)

    def has(self, key: str) -> bool:
        return key in self.node

    def raw(self, key: str) -> Any:
        if key not in self.node:
            raise self.fail(key, "missing")
        return self.node[key]

    def str(self, key: str, *, allow_empty: bool = True) -> str:
        v = self.raw(key)
        if not isinstance(v, str) or (not allow_empty and not v):
            raise self.fail(key, f"expected a {'non-empty ' if not allow_empty else ''}string, got {_shown(v)}")
        return v

    def int(self, key: builtins.str) -> builtins.int:
        v = self.raw(key)
        if type(v) is not int:
            raise self.fail(key, f"expected an integer, got {_shown(v)}")
        return v

    def bool(self, key: builtins.str) -> builtins.bool:
        v = self.raw(key)
        if not isinstance(v, bool):
            raise self.fail(key, f"expected true or false, got {_shown(v)}")
        return v

    def number(self, key: builtins.str) -> float:
        """A finite number (Google Benchmark writes NaN and Infinity bare; those fail here)."""
        v = self.raw(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self.fail(key, f"expected a finite number, got {_shown(v)}")
        return float(v)

    def list(self, key: builtins.str, *, null_is_empty: builtins.bool = False) -> builtins.list[Any]:
        v = self.raw(key)
        if v is None and null_is_empty:
            return []
        if not isinstance(v, list):
            raise self.fail(key, f"expected a list, got {_shown(v)}")
        return v

    def child(self, key: builtins.str, benchmark: builtins.str | None = None) -> Reader:
        return Reader(self.source, self.benchmark if benchmark is None else benchmark, self._name(key), self.raw(key))

    def item(self, key: builtins.str, index: builtins.int, node: Any, benchmark: builtins.str | None = None) -> Reader:
        b = self.benchmark if benchmark is None else benchmark
        return Reader(self.source, b, f"{self._name(key)}[{index}]", node)


def _shown(v: Any) -> str:
    text = json.dumps(v) if not isinstance(v, float) or math.isfinite(v) else repr(v)
    return text if len(text) <= 40 else text[:37] + "..."
