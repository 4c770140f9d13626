"""Time units of the tool runners: samples arrive in the unit the tool's output states and are
converted to the recipe's, so a commit that changes a benchmark's display unit (gbench's
`->Unit(benchmark::kMillisecond)`) is not a thousandfold regression."""

from __future__ import annotations

from attrib.recipe import TIME_UNITS


def convert(values: tuple[float, ...], unit: str, to: str) -> tuple[float, ...] | str:
    """`values` in `to`, or why not (a unit the tool should not have written)."""
    if unit not in TIME_UNITS:
        return f"time unit {unit!r} is not one of {', '.join(TIME_UNITS)}"
    factor = TIME_UNITS[unit] / TIME_UNITS[to]
    return tuple(v * factor for v in values)


def first_nonpositive(values: tuple[float, ...]) -> float | None:
    """attrib compares ratios (docs/recipes.md): a zero or negative time cannot be a sample."""
    return next((v for v in values if not v > 0), None)
