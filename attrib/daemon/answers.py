"""The daemon's JSON answers: no answer carries NaN or Infinity, which are not JSON and which
Starlette's encoder turns into a 500 after the work is done (issue 20: a series stepping from
0.0 gave change_pct = inf). One response class, the app's default, so every route is covered."""

from __future__ import annotations

import math
from typing import Any

from fastapi.responses import JSONResponse


def finite(value: Any) -> Any:
    """`value` with every non-finite float as null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


class FiniteJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return super().render(finite(content))
