"""The result of a bisection or a comparison: typed records (types.py), made by one writer
(writer.py) from the search driver's Outcome, stored as versioned JSON (schema.py; docs/result-schema.md)."""

from attrib.result.schema import dump, from_json, load_result, to_json
from attrib.result.types import RESULT_SCHEMA, BisectResult, CompareResult, Result, ResultKind

__all__ = ["RESULT_SCHEMA", "BisectResult", "CompareResult", "Result", "ResultKind", "dump", "from_json", "load_result", "to_json"]
