"""The documented CSV for nightly results (docs/history.md): a header, then one value per row.

Required columns: commit, benchmark, value, unit, direction (lower | higher), timestamp
(ISO 8601; a time without a zone is refused: nightly machines do not share one). Every other
column is configuration (machine class, dtype, size): rows that differ in it are different
series. Strict: a bad row is one IngestError naming the file, the row and the field; the
parser never guesses a value it cannot read.
"""

from __future__ import annotations

import csv
import io
import math
from datetime import datetime

from attrib.core.model import Direction
from attrib.errors import BadRows, IngestError
from attrib.formats.result_row import ResultRow

REQUIRED = ("commit", "benchmark", "value", "unit", "direction", "timestamp")
MAX_FIELD = 500  # characters: a benchmark name or a configuration value is short


def parse_results_csv(text: str, source: str) -> list[ResultRow]:
    """Every row, or BadRows with one line per bad row (a bad header is one IngestError)."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise IngestError(source, "", "", f"not CSV ({exc})") from None
    if header is None or not any(h.strip() for h in header):
        raise IngestError(source, "", "", f"empty; expected a header naming {', '.join(REQUIRED)}")
    names = [h.strip() for h in header]
    missing = [r for r in REQUIRED if r not in names]
    if missing:
        raise IngestError(source, "header", missing[0], f"missing column; the header must name {', '.join(REQUIRED)}")
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None or "" in names:
        raise IngestError(source, "header", dup or "", "every column needs its own, non-empty name")
    extra = [n for n in names if n not in REQUIRED]
    rows: list[ResultRow] = []
    bad: list[IngestError] = []
    n = 0
    try:
        for n, cells in enumerate(reader, 1):
            if not cells or all(not c.strip() for c in cells):
                continue  # a blank line (a trailing newline twice) is not a row
            try:
                if len(cells) != len(names):
                    raise IngestError(source, str(n), "", f"{len(cells)} cells; the header has {len(names)} columns")
                rows.append(_row(dict(zip(names, (c.strip() for c in cells), strict=True)), extra, str(n), source))
            except IngestError as exc:
                bad.append(exc)
    except csv.Error as exc:
        bad.append(IngestError(source, str(n + 1), "", f"not CSV ({exc})"))
    if bad:
        raise BadRows(bad, list(rows))
    if not rows:
        raise IngestError(source, "", "", "a header but no rows")
    return rows


def _row(cells: dict[str, str], extra: list[str], row: str, source: str) -> ResultRow:
    for name, text in cells.items():
        if len(text) > MAX_FIELD or "\x00" in text:
            raise IngestError(source, row, name, f"expected at most {MAX_FIELD} characters of text")
    for name in ("commit", "benchmark", "unit"):
        if not cells[name]:
            raise IngestError(source, row, name, "empty")
    try:
        value = float(cells["value"])
    except ValueError:
        raise IngestError(source, row, "value", f"{cells['value']!r}: expected a number") from None
    if not math.isfinite(value):
        raise IngestError(source, row, "value", f"{cells['value']!r}: expected a finite number")
    try:
        direction = Direction(cells["direction"])
    except ValueError:
        raise IngestError(source, row, "direction", f"{cells['direction']!r}: expected lower or higher") from None
    return ResultRow(
        row=row,
        commit=cells["commit"],
        benchmark=cells["benchmark"],
        value=value,
        unit=cells["unit"],
        direction=direction,
        measured_at=parse_timestamp(cells["timestamp"], source, row, "timestamp"),
        config={k: cells[k] for k in extra},
    )


def parse_timestamp(text: str, source: str, row: str, field: str) -> float:
    """ISO 8601 with a zone (`2026-11-30T02:00:00Z`, `...+01:00`) as unix time."""
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise IngestError(source, row, field, f"{text!r}: expected an ISO 8601 time such as 2026-11-30T02:00:00Z") from None
    if at.tzinfo is None:
        raise IngestError(source, row, field, f"{text!r}: expected a time zone (Z or +HH:MM)")
    return at.timestamp()
