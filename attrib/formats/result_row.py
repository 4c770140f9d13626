"""The record a history-format parser returns: one measured value of one benchmark at one commit.

The tools' own formats (Google Benchmark, NVBench: attrib/formats/gbench.py, nvbench.py) say
nothing about commits; the formats written for a history (attrib's result and compare JSON,
the documented CSV) do. Both end up as ResultRows, so history ingestion checks and stores one
shape (attrib/history/ingest.py).

`config` names the series (gpu=H100 and gpu=H200 are two series); `environment` says where a
value was measured (compiler, driver, image) and never splits a series: a toolkit upgrade moves
a series, it does not start a new one (docs/history.md, "The environment").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from attrib.core.model import Direction


@dataclass(frozen=True)
class ResultRow:
    row: str  # where in the file: the CSV data row (1-based) or the JSON path; errors name it
    commit: str  # as written: a sha, a short sha or any revision; ingestion resolves it
    benchmark: str
    value: float
    unit: str
    direction: Direction
    measured_at: float | None  # unix time the file says the value was measured, or None
    config: Mapping[str, str] = field(default_factory=dict)  # configuration / machine class
    # where it ran (toolkit, driver, image...): stored with the row, never part of the series
    environment: Mapping[str, str] = field(default_factory=dict)
