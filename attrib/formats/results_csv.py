"""The documented CSV for nightly results (docs/history.md): a header, then one value per row.

Required columns: commit, benchmark, value, unit, direction, timestamp. A column `env.<key>` is
the environment the value was measured in (`env.compiler`: the toolkit); an empty cell says
nothing about that key. Every other column is configuration (machine class, dtype, size): rows
that differ in it are different series; rows that differ in environment are not.
Exports as they come (issue 21): direction is `lower` or `higher`, or a lower-is-better flag
(`true`/`false`, `lower_is_better=True`); a `lower_is_better` column (Perfherder's) may stand
in for `direction`. The timestamp is ISO 8601 (a time without a zone is read as UTC) or unix
epoch seconds. A row with an empty value is skipped and counted (`CsvRows.skipped`), not
refused. Strict otherwise: a bad row is one IngestError naming the file, the row and every
bad field of it; the parser never guesses a value it cannot read.
"""

from __future__ import annotations

import csv
import io
import math
import re
from datetime import UTC, datetime

from attrib.core.model import Direction
from attrib.errors import BadRows, IngestError
from attrib.formats.result_row import ResultRow

ENV_PREFIX = "env."  # an environment column: env.compiler, env.driver
REQUIRED = ("commit", "benchmark", "value", "unit", "direction", "timestamp")
DIRECTION_ALIAS = "lower_is_better"  # Perfherder's column, accepted for `direction`
_FLAG = {"true": Direction.LOWER, "1": Direction.LOWER, "false": Direction.HIGHER, "0": Direction.HIGHER}


class CsvRows(list[ResultRow]):
    """The rows, and how many had an empty value (skipped: a night without a result)."""

    skipped: int = 0
MAX_FIELD = 500  # characters: a benchmark name or a configuration value is short


def parse_results_csv(text: str, source: str) -> CsvRows:
    """Every row, or BadRows with one line per bad row (a bad header is one IngestError)."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise IngestError(source, "", "", f"not CSV ({exc})") from None
    if header is None or not any(h.strip() for h in header):
        raise IngestError(source, "", "", f"empty; expected a header naming {', '.join(REQUIRED)}")
    names = [h.strip() for h in header]
    if "direction" not in names and DIRECTION_ALIAS in names:
        names = ["direction" if n == DIRECTION_ALIAS else n for n in names]
    missing = [r for r in REQUIRED if r not in names]
    if missing:
        raise IngestError(source, "header", missing[0], f"missing column; the header must name {', '.join(REQUIRED)}")
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None or "" in names:
        raise IngestError(source, "header", dup or "", "every column needs its own, non-empty name")
    if ENV_PREFIX in names:
        raise IngestError(source, "header", ENV_PREFIX, f"an environment column needs a key: expected {ENV_PREFIX}<key>, such as {ENV_PREFIX}compiler")
    extra = [n for n in names if n not in REQUIRED]
    rows = CsvRows()
    bad: list[IngestError] = []
    n = 0
    try:
        for n, cells in enumerate(reader, 1):
            if not cells or all(not c.strip() for c in cells):
                continue  # a blank line (a trailing newline twice) is not a row
            try:
                if len(cells) != len(names):
                    raise IngestError(source, str(n), "", f"{len(cells)} cells; the header has {len(names)} columns")
                row = _row(dict(zip(names, (c.strip() for c in cells), strict=True)), extra, str(n), source)
                if row is None:
                    rows.skipped += 1
                else:
                    rows.append(row)
            except IngestError as exc:
                bad.append(exc)
    except csv.Error as exc:
        bad.append(IngestError(source, str(n + 1), "", f"not CSV ({exc})"))
    if bad:
        raise BadRows(bad, list(rows))
    if not rows:
        what = f"all {rows.skipped} rows have an empty value" if rows.skipped else "a header but no rows"
        raise IngestError(source, "", "", what)
    return rows


def _row(cells: dict[str, str], extra: list[str], row: str, source: str) -> ResultRow | None:
    for name, text in cells.items():
        if len(text) > MAX_FIELD or "\x00" in text:
            raise IngestError(source, row, name, f"expected at most {MAX_FIELD} characters of text")
    if not cells["value"]:
        return None  # a night without a result: skipped and counted, not a bad row
    problems: dict[str, str] = {}  # every bad field of the row, reported in one line
    for name in ("commit", "benchmark", "unit"):
        if not cells[name]:
            problems[name] = "empty"
    value = math.nan
    try:
        value = float(cells["value"])
        if not math.isfinite(value):
            problems["value"] = f"{cells['value']!r}: expected a finite number"
    except ValueError:
        problems["value"] = f"{cells['value']!r}: expected a number"
    direction = parse_direction(cells["direction"])
    if direction is None:
        problems["direction"] = f"{cells['direction']!r}: expected lower or higher (or lower_is_better true/false)"
    measured_at = math.nan
    try:
        measured_at = parse_timestamp(cells["timestamp"], source, row, "timestamp")
    except IngestError as exc:
        problems["timestamp"] = str(exc).split("field 'timestamp': ", 1)[1]
    if problems:
        (first, why), *rest = problems.items()
        raise IngestError(source, row, first, "; ".join([why, *(f"field '{f}': {w}" for f, w in rest)]))
    assert direction is not None
    return ResultRow(
        row=row,
        commit=cells["commit"],
        benchmark=cells["benchmark"],
        value=value,
        unit=cells["unit"],
        direction=direction,
        measured_at=measured_at,
        config={k: cells[k] for k in extra if not k.startswith(ENV_PREFIX)},
        environment={k.removeprefix(ENV_PREFIX): cells[k] for k in extra if k.startswith(ENV_PREFIX) and cells[k]},
    )


def parse_direction(text: str) -> Direction | None:
    """`lower`/`higher`, or a lower-is-better flag as exports write it: `true`/`false` (any
    case, or 1/0), `lower_is_better=True`. None when it is none of these."""
    t = text.strip().lower()
    if t in (Direction.LOWER.value, Direction.HIGHER.value):
        return Direction(t)
    return _FLAG.get(t.removeprefix(f"{DIRECTION_ALIAS}=").strip())


_EPOCH = re.compile(r"\d{9,11}(\.\d+)?")  # unix seconds: 1973..5138, so no date is mistaken for one


def parse_timestamp(text: str, source: str, row: str, field: str) -> float:
    """ISO 8601 (`2026-11-30T02:00:00Z`, `...+01:00`; without a zone, read as UTC: exports such
    as Perfherder's write UTC without saying so) or unix epoch seconds, as unix time."""
    if _EPOCH.fullmatch(text):
        return float(text)
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise IngestError(
            source, row, field, f"{text!r}: expected an ISO 8601 time such as 2026-11-30T02:00:00Z, or epoch seconds"
        ) from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.timestamp()
