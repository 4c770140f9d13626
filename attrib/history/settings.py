"""Detection settings from text (`attrib detect --setting KEY=VALUE`): the keys are
DetectSettings' own fields, decoded by the one decoder as the daemon config's
`[history.projects.NAME.detect]` table is, so a setting the detector gains is settable
without touching this file."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

from attrib.codec import config_errors, decode
from attrib.core.detect import DetectSettings
from attrib.errors import InputError


def detect_settings(values: Mapping[str, Any], source: str) -> DetectSettings:
    """Detection settings from `KEY=VALUE` text, each value read as its field's type, then
    decoded as the daemon config's detect table is (attrib/codec.py): ConfigError naming
    `source` and the key."""
    hints = typing.get_type_hints(DetectSettings)
    parsed = {key: _from_text(hints.get(key), raw) for key, raw in values.items()}
    with config_errors(source):
        settings: DetectSettings = decode(DetectSettings, parsed, strict=True)
    return settings


def _from_text(kind: Any, raw: Any) -> Any:
    # Text that does not read as the field's type stays text: the decoder then says what the
    # key expected and what it got.
    if not isinstance(raw, str):
        return raw
    if kind is bool:
        return {"true": True, "false": False}.get(raw.strip().lower(), raw)
    if kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            return raw
    return raw


def parse_pairs(pairs: list[str] | None, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in pairs or []:
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            raise InputError(f"{option} {p!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out
