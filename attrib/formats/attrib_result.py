"""attrib's own documents as history rows: the bisection result (`attrib bisect --json`,
docs/result-schema.md) and the comparison (`attrib compare --json`).

A result holds the median of every commit it measured (`commits[].median`, in `unit`); a
comparison holds the median of its two sides (`medians`: sha -> value). Neither records when
it was measured, so their rows carry no time (ingestion uses the time it received the file).
A comparison written before `medians` existed holds only relative shifts: refused, by name.
"""

from __future__ import annotations

import json
import math
from enum import StrEnum
from typing import Any

from attrib.core.model import Direction
from attrib.errors import IngestError
from attrib.formats.result_row import ResultRow

# The result schemas whose rows are read here: all keep `commits[].median`, `unit` and
# `direction`, and a compare document flat (result/schema.py writes 3, reads 1 to 3).
SCHEMAS = (1, 2, 3)


class AttribDoc(StrEnum):
    RESULT = "result"
    COMPARE = "compare"


def attrib_doc_kind(doc: dict[str, Any]) -> AttribDoc | None:
    """Which of attrib's documents `doc` is, or None when it is neither."""
    if doc.get("schema") not in SCHEMAS:
        return None
    if "culprits" in doc and "commits" in doc:
        return AttribDoc.RESULT
    if "candidate" in doc and "reference" in doc and "verdict" in doc:
        return AttribDoc.COMPARE
    return None


def parse_attrib_json(text: str, source: str) -> list[ResultRow]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise IngestError(source, "", "", f"not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise IngestError(source, "", "", "expected a JSON object")
    kind = attrib_doc_kind(doc)
    if kind is None:
        raise IngestError(source, "", "schema", f"expected an attrib result or compare document with schema {' or '.join(map(str, SCHEMAS))}")
    benchmark = _text(doc, "benchmark", source, "")
    unit = _text(doc, "unit", source, "")
    try:
        direction = Direction(str(doc.get("direction")))
    except ValueError:
        raise IngestError(source, "", "direction", "expected lower or higher") from None
    if kind is AttribDoc.COMPARE:
        medians = doc.get("medians")
        if not isinstance(medians, dict):
            raise IngestError(
                source, "", "medians", "missing: this comparison holds only relative shifts (re-run `attrib compare --json`)"
            )
        pairs = [(f"medians.{sha}", sha, v) for sha, v in medians.items()]
    else:
        rows = doc.get("commits")
        if not isinstance(rows, list):
            raise IngestError(source, "", "commits", "expected a list")
        pairs = []
        for i, r in enumerate(rows):
            if not isinstance(r, dict) or not isinstance(r.get("commit"), str):
                raise IngestError(source, f"commits[{i}]", "commit", "expected an object with a commit sha")
            if r.get("median") is not None:  # a commit that did not build has no value
                pairs.append((f"commits[{i}]", r["commit"], r["median"]))
    out = []
    for where, sha, value in pairs:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise IngestError(source, where, "median", f"expected a finite number, got {json.dumps(value)[:40]}")
        out.append(ResultRow(where, sha, benchmark, float(value), unit, direction, None))
    if not out:
        raise IngestError(source, "", "commits", "no measured commit (every median is null)")
    return out


def _text(doc: dict[str, Any], key: str, source: str, row: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise IngestError(source, row, key, "expected a non-empty string")
    return value
