"""The result's JSON document: writing the current schema, reading every schema attrib wrote.

Reading migrates step by step (schema 1 -> 2 -> ...) on the plain JSON, as pyperf and asv
do, then decodes the current schema into the typed records; anything that does not fit is
a ResultFormatError naming the file and the field. tests/fixtures/ keeps documents of the
old schemas, so every migration stays tested.

Schema 2 (from schema 1): a `kind` (bisect | compare); an unresolved range's `why` and
`resolve` sentences became structured `causes` (the report writes the sentences; a schema-1
document's sentences are kept as a cause of kind `text`); `environment.gpu` is always a
list; optional culprit fields (`static_diff`, `static_diff_unavailable`, `via_merge`...)
are written as null instead of being left out.

Schema 3 (from schema 2): notes are records (a schema-2 sentence is kept as a note of kind
`text`); `settings.search` (the search method) and `settings.ignore_below_pct` (the
indifference zone's lower edge; null for the sequential search, which had none), and each
culprit's `below_minimum` (its estimate below min_change_pct). A schema-2 document came from the
sequential search; its culprits' `below_minimum` is computed from their written change.

Schema 4 (from schema 3): groups. `members`, one per benchmark of the group, each with what a
bisection of it alone reports (its status, culprits, commits, comparisons, ...); each culprit of
the group lists the `members` it moved, with their change, CI and posterior. A single benchmark
is a group of one whose member is written as its name alone: its measurements are the top
level's, written once (a document that holds them twice, as schema 4 was first written, reads
the same). A schema-3 document is such a group of one, and each culprit lists that member.

Schema 5 (from schema 4): the environment fingerprint (core/environment.py: `values`,
`unavailable`, `where`), read where the work ran: `environment.fingerprint` of a bisection, and
`environment` of a comparison; null in a migrated schema-4 document (none was read).

Schema 6 (from schema 5): status `partial` (culprits named, but what they leave of the whole
change could not be decided and its interval reaches the minimum) and its `remainder` record, at
the top and per member; null in a migrated schema-5 document (no schema-5 writer said partial).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from attrib.codec import decode, encode
from attrib.core.environment import Fingerprint
from attrib.core.model import Direction, SearchMethod
from attrib.core.stats import below_minimum, to_shift
from attrib.errors import FieldError, ResultFormatError
from attrib.evaluate.executors.base import ExecutorKind
from attrib.result.types import (
    MEMBER_FIELDS,
    RESULT_SCHEMA,
    BisectResult,
    CompareResult,
    ComparisonRecord,
    Environment,
    ExecutorInfo,
    Result,
    ResultKind,
)


def _flat_executor(ex: ExecutorInfo) -> dict[str, Any]:
    # `name` beside the description's keys, as every schema has written it
    return {"name": ex.name.value, **(encode(ex.description) if ex.description is not None else {})}


def _flat_environment(env: Environment) -> dict[str, Any]:
    fingerprint = {"fingerprint": encode(env.fingerprint)} if env.fingerprint is not None else {}
    return ({"gpu": encode(env.gpu)} if env.gpu else {}) | fingerprint | encode(env.extra)


def bisect_to_json(result: BisectResult) -> dict[str, Any]:
    body = encode(result)
    body["executor"] = _flat_executor(result.executor)
    body["environment"] = _flat_environment(result.environment)
    only = _only_member(body)
    if only is not None:
        # a single benchmark: its member's measurements are the top level's, written once
        # there (the document is schema 3's plus its member's name and each culprit's members)
        for name, value in _as_at_top(body).items():
            if only.get(name) == value:
                del only[name]
    return {"schema": RESULT_SCHEMA, "kind": ResultKind.BISECT.value, **body}


def _only_member(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The member of a single benchmark's document (a group of one), as written; None for a group."""
    members = doc.get("members")
    if isinstance(members, list) and len(members) == 1 and isinstance(members[0], dict):
        return members[0]
    return None


def _as_at_top(doc: dict[str, Any]) -> dict[str, Any]:
    """A single benchmark's member's fields as the top level holds them. The top's culprits list
    the members they moved; a member's own culprits list none."""
    shared = {name: doc[name] for name in MEMBER_FIELDS if name in doc}
    culprits = shared.get("culprits")
    if isinstance(culprits, list):
        shared["culprits"] = [c | {"members": []} if isinstance(c, dict) else c for c in culprits]
    return shared


def _member_filled(doc: dict[str, Any]) -> dict[str, Any]:
    """A single benchmark's member with the fields its document leaves to the top level."""
    only = _only_member(doc)
    if only is not None:
        for name, value in _as_at_top(doc).items():
            only.setdefault(name, copy.deepcopy(value))
    return doc


def compare_to_json(result: CompareResult) -> dict[str, Any]:
    # Flat, as schema 1 wrote it: `jq .verdict` keeps working on `attrib compare --json`.
    return {
        "schema": RESULT_SCHEMA, "kind": ResultKind.COMPARE.value, "benchmark": result.benchmark, **encode(result.comparison),
        "unit": result.unit, "direction": "" if result.direction is None else result.direction.value,
        "medians": dict(result.medians),
        "environment": None if result.environment is None else encode(result.environment),
    }  # fmt: skip


def to_json(result: Result) -> dict[str, Any]:
    """The document of a result (docs/result-schema.md). A function here, not a method of the
    records: types.py stays the bottom of result/ and imports nothing of it."""
    if isinstance(result, BisectResult):
        return bisect_to_json(result)
    return compare_to_json(result)


def dump(result: Result) -> str:
    return json.dumps(to_json(result), indent=2) + "\n"


# --- reading ---------------------------------------------------------------------------------


def _migrate_1_to_2(doc: dict[str, Any]) -> dict[str, Any]:
    if "status" not in doc and "candidate" in doc:
        doc["kind"] = ResultKind.COMPARE.value
        return doc
    doc["kind"] = ResultKind.BISECT.value
    # Fields later schema-1 writers added; an early schema-1 document has none of them.
    for key, default in (("unresolved", []), ("drift", []), ("excluded_samples", {}), ("rounds", 0)):
        doc.setdefault(key, default)
    if isinstance(doc.get("settings"), dict):
        doc.setdefault("executor", {"name": doc["settings"].get("executor", "local")})
    for u in doc["unresolved"] if isinstance(doc["unresolved"], list) else []:
        if isinstance(u, dict) and "causes" not in u:
            u["causes"] = [{"kind": "text", "why": u.pop("why", ""), "resolve": u.pop("resolve", "")}]
    env = doc.get("environment")
    if isinstance(env, dict) and isinstance(env.get("gpu"), dict):
        env["gpu"] = [env["gpu"]]
    return doc


def _migrate_2_to_3(doc: dict[str, Any]) -> dict[str, Any]:
    # Notes were sentences until schema 3; they are kept as notes of kind text.
    notes = doc.get("notes")
    if isinstance(notes, list):
        doc["notes"] = [{"kind": "text", "text": n} if isinstance(n, str) else n for n in notes]
    if doc.get("kind") != ResultKind.BISECT.value:
        return doc
    settings = doc.get("settings")
    minimum = None
    if isinstance(settings, dict):
        # every schema-2 document came from the sequential search, which had no zone
        settings.setdefault("search", SearchMethod.SEQUENTIAL.value)
        settings.setdefault("ignore_below_pct", None)
        minimum = settings.get("min_change_pct")
    direction = doc.get("direction")
    for c in doc.get("culprits") or []:
        if isinstance(c, dict) and "below_minimum" not in c:
            c["below_minimum"] = _below(c.get("change_pct"), minimum, direction)
    return doc


def _below(change_pct: object, minimum: object, direction: object) -> bool:
    """A written culprit's estimate below the minimum change, compared as the writer does: as
    oriented log shifts (a 2 % slowdown of a higher-is-better value reads as -1.96 %)."""
    numbers = (int, float)
    if not isinstance(change_pct, numbers) or not isinstance(minimum, numbers) or isinstance(change_pct, bool):
        return False  # decoding names the field that does not fit
    if direction not in (Direction.LOWER.value, Direction.HIGHER.value) or change_pct <= -100:
        return False
    shift = to_shift(float(change_pct), Direction(direction))
    return below_minimum(shift, float(minimum))


def _migrate_3_to_4(doc: dict[str, Any]) -> dict[str, Any]:
    # A single benchmark's bisection is a group of one: the member is the document's own
    # fields (as the writer puts the lead member's at the top), and each culprit lists it.
    if doc.get("kind") != ResultKind.BISECT.value:
        return doc
    found = doc.get("settings")
    settings: dict[str, Any] = found if isinstance(found, dict) else {}
    # its measurements are the document's own, as schema 4 writes a single benchmark's (_member_filled)
    doc["members"] = [{"benchmark": doc.get("benchmark"), "config": {}, "min_change_pct": settings.get("min_change_pct"),
                       "ignore_below_pct": settings.get("ignore_below_pct")}]  # fmt: skip
    culprits = doc.get("culprits")
    for c in culprits if isinstance(culprits, list) else []:
        if isinstance(c, dict):
            c["members"] = [{"benchmark": doc.get("benchmark"), "config": {}, **{
                k: c.get(k) for k in ("change_pct", "ci_pct", "posterior", "confirmed", "below_minimum", "share")}}]  # fmt: skip
    return doc


def _migrate_4_to_5(doc: dict[str, Any]) -> dict[str, Any]:
    # Schema 5 added the environment fingerprint; no schema-4 writer read one, so a schema-4
    # document has none: null (nothing else changed; the readers' defaults say the same).
    if doc.get("kind") == ResultKind.COMPARE.value:
        doc["environment"] = None
    elif isinstance(doc.get("environment"), dict):
        doc["environment"]["fingerprint"] = None
    return doc


def _migrate_5_to_6(doc: dict[str, Any]) -> dict[str, Any]:
    # Schema 6 added status partial and its remainder; a schema-5 writer said neither.
    if doc.get("kind") != ResultKind.BISECT.value:
        return doc
    doc["remainder"] = None
    members = doc.get("members")
    for m in members if isinstance(members, list) else []:
        if isinstance(m, dict):
            m["remainder"] = None
    return doc


def _migrate_6_to_7(doc: dict[str, Any]) -> dict[str, Any]:
    # Schema 7 added `blocks.reason` unneeded (a search that measured no block beyond the
    # preflight's never chose a size); a schema-6 writer never wrote it: nothing to change.
    return doc


# MIGRATIONS[n] turns a schema-n document into a schema-(n+1) one.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: _migrate_1_to_2, 2: _migrate_2_to_3, 3: _migrate_3_to_4, 4: _migrate_4_to_5, 5: _migrate_5_to_6,
    6: _migrate_6_to_7,
}  # fmt: skip


def _unflatten(doc: dict[str, Any]) -> dict[str, Any]:
    ex = doc.get("executor")
    if isinstance(ex, dict) and ex.get("name") in tuple(ExecutorKind):
        # the flat keys are the description of the executor `name` says (ExecutorInfo's field
        # of that name); a wrong name is left for the decoder to name
        doc["executor"] = {"name": ex["name"], ex["name"]: {k: v for k, v in ex.items() if k != "name"}}
    env = doc.get("environment")
    if isinstance(env, dict):
        doc["environment"] = {"gpu": env.get("gpu", []), "fingerprint": env.get("fingerprint"),
                              "extra": {k: v for k, v in env.items() if k not in ("gpu", "fingerprint")}}  # fmt: skip
    return doc


def document_kind(data: Any) -> ResultKind | None:
    """Which of attrib's documents `data` says it is, without reading it (from_json does that):
    None when it is none of them. For telling attrib's JSON from other formats (history ingestion)."""
    if not isinstance(data, dict):
        return None
    schema = data.get("schema")
    if isinstance(schema, bool) or not isinstance(schema, int) or not 1 <= schema <= RESULT_SCHEMA:
        return None
    if schema == 1:  # no `kind` yet: the fields tell, as in _migrate_1_to_2
        if "status" in data and "commits" in data:
            return ResultKind.BISECT
        return ResultKind.COMPARE if "candidate" in data and "verdict" in data else None
    kind = data.get("kind")
    return ResultKind(kind) if kind in tuple(ResultKind) else None


def from_json(data: Any, source: object = "result") -> Result:
    """The typed result of a document attrib wrote, of any schema it wrote; ResultFormatError
    (exit 2) naming `source` and the field otherwise."""
    if not isinstance(data, dict):
        got = "a list" if isinstance(data, list) else repr(data)[:40]
        raise ResultFormatError(source, "", f"expected a JSON object (an attrib result document), got {got}")
    schema = data.get("schema")
    readable = ", ".join(str(n) for n in (*MIGRATIONS, RESULT_SCHEMA))
    if "schema" not in data:
        raise ResultFormatError(source, "schema", f"missing: not an attrib result document (schemas {readable})")
    if isinstance(schema, bool) or not isinstance(schema, int) or not 1 <= schema <= RESULT_SCHEMA:
        raise ResultFormatError(source, "schema", f"expected one of {readable} (the schemas this attrib reads), got {schema!r}")
    doc = copy.deepcopy(data)
    while doc["schema"] < RESULT_SCHEMA:
        doc = MIGRATIONS[doc["schema"]](doc)
        doc["schema"] += 1
    try:
        kind = decode(ResultKind, doc.get("kind"), "kind")
        if kind is ResultKind.COMPARE:
            return CompareResult(
                decode(str, doc.get("benchmark"), "benchmark"),
                decode(ComparisonRecord, doc),
                decode(str, doc.get("unit", ""), "unit"),
                # "" (or absent): written before comparisons recorded it
                None if doc.get("direction", "") == "" else decode(Direction, doc["direction"], "direction"),
                decode(Mapping[str, float], doc.get("medians", {}), "medians"),
                decode(Fingerprint | None, doc.get("environment"), "environment"),
            )
        result: BisectResult = decode(BisectResult, _unflatten(_member_filled(doc)))
        return result
    except FieldError as exc:
        raise ResultFormatError(source, _flat_path(exc.path), exc.expected) from None


def _flat_path(path: str) -> str:
    """The field as the document spells it: `executor.slurm.rounds[0]` is `executor.rounds[0]`."""
    for kind in ExecutorKind:
        for inner in (f"executor.{kind.value}.", f"executor.{kind.value}"):
            if path.startswith(inner):
                return "executor" + ("." if inner.endswith(".") else "") + path[len(inner):]
    return path


def load_result(path: Path) -> Result:
    """Read a result file: one line naming the file (and the field) when it is not one."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ResultFormatError(path, "", "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultFormatError(path, "", f"cannot read it ({exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ResultFormatError(path, "", f"not JSON ({exc})") from None
    return from_json(data, path)
