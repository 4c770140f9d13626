"""attrib's own documents as history rows: the bisection result (`attrib bisect --json`,
docs/result-schema.md) and the comparison (`attrib compare --json`), read by the one reader of
attrib's result (result/schema.from_json: every schema attrib wrote, migrated, typed), so the
history takes exactly the documents `attrib report` takes.

A result holds the median of every commit it measured (`commits[].median`, in `unit`); a
comparison holds the median of its two sides (`medians`: sha -> value). Neither records when
it was measured, so their rows carry no time (ingestion uses the time it received the file).
A comparison written before `medians` existed holds only relative shifts: refused, by name.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from attrib.core.model import Direction
from attrib.errors import IngestError, ResultFormatError
from attrib.formats.result_row import ResultRow
from attrib.result import BisectResult, from_json
from attrib.result.schema import document_kind


def is_attrib_document(doc: object) -> bool:
    """Whether `doc` says it is one of attrib's documents (sniffing; reading checks the rest)."""
    return document_kind(doc) is not None


def parse_attrib_json(text: str, source: str) -> list[ResultRow]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise IngestError(source, "", "", f"not JSON ({exc})") from None
    try:
        result = from_json(doc, source)
    except ResultFormatError as exc:
        raise IngestError(source, "", exc.field, exc.expected) from None
    _nonempty(result.benchmark, "benchmark", source)
    _nonempty(result.unit, "unit", source)
    if isinstance(result, BisectResult):
        # every member of a group is its own series (schema 4); a single benchmark's are the
        # document's own commits, as every schema wrote them
        views = [(f"members[{m}].", member) for m, member in enumerate(result.members)] if result.group else [("", None)]
        out = []
        for at, member in views:
            one = result if member is None else result.view(member)
            config = {} if member is None else member.config
            pairs = [(f"{at}commits[{i}]", r.commit, r.median) for i, r in enumerate(one.commits) if r.median is not None]
            # a commit that did not build has no value, and no row
            out += _rows(pairs, member.benchmark if member else result.benchmark, one.unit, one.direction, config, source)
    else:
        direction = result.direction
        if direction is None:  # a comparison written before it recorded its direction
            raise IngestError(source, "", "direction", "missing: expected lower or higher (re-run `attrib compare --json`)")
        if not result.medians:
            raise IngestError(
                source, "", "medians", "missing: this comparison holds only relative shifts (re-run `attrib compare --json`)"
            )
        pairs = [(f"medians.{sha}", sha, v) for sha, v in result.medians.items()]
        out = _rows(pairs, result.benchmark, result.unit, direction, {}, source)
    if not out:
        raise IngestError(source, "", "commits", "no measured commit (every median is null)")
    return out


def _rows(
    pairs: list[tuple[str, str, float]], benchmark: str, unit: str, direction: Direction, config: Mapping[str, str], source: str
) -> list[ResultRow]:
    out = []
    for where, sha, value in pairs:
        if not math.isfinite(value):
            raise IngestError(source, where, "median", f"expected a finite number, got {value}")
        out.append(ResultRow(where, sha, benchmark, value, unit, direction, None, dict(config)))
    return out


def _nonempty(value: str, key: str, source: str) -> None:
    if not value:
        raise IngestError(source, "", key, "expected a non-empty string")
