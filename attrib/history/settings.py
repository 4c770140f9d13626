"""Detection settings from text (`attrib detect --setting KEY=VALUE`, the daemon config's
`[history.projects.NAME.detect]` table): the keys are DetectSettings' own fields, so a
setting the detector gains is settable without touching this file."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from attrib.core.detect import DetectSettings
from attrib.errors import InputError


def detect_settings(values: Mapping[str, Any], where: str) -> DetectSettings:
    defaults = DetectSettings()
    known = {f.name: type(getattr(defaults, f.name)) for f in dataclasses.fields(DetectSettings)}
    out: dict[str, Any] = {}
    for key, raw in values.items():
        if key not in known:
            raise InputError(f"{where}: key '{key}': unknown detection setting; expected one of: {', '.join(known)}")
        kind = known[key]
        try:
            if kind is bool:
                value: Any = raw if isinstance(raw, bool) else {"true": True, "false": False}[str(raw).lower()]
            elif kind in (int, float) and isinstance(raw, bool):
                raise ValueError
            else:
                value = kind(raw)
        except (ValueError, TypeError, KeyError):
            raise InputError(f"{where}: key '{key}': {raw!r}: expected {kind.__name__}") from None
        out[key] = value
    try:
        return DetectSettings(**out)
    except (ValueError, TypeError) as exc:  # the detector checks its own ranges
        raise InputError(f"{where}: {exc}") from None


def parse_pairs(pairs: list[str] | None, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in pairs or []:
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            raise InputError(f"{option} {p!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out
