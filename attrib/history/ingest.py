"""From result files to stored history rows: pick the parser, resolve commits, check, store.

Shared by `attrib history add` (a file of its own) and the daemon's POST /v1/results (its
database). Every file of one call is parsed and checked before anything is written, and all
are stored in one transaction: one bad row anywhere stores nothing, and every bad row is
reported (BadRows, one line each naming file, row and field). Commits are resolved to full
shas in the project's repository here, so a typo in a sha is a bad row, not a series of one.

Google Benchmark and NVBench documents name no commit: the caller says which (`commit`).

Every row of every format passes one door here (`_check_row`): its text by the shared rule of
attrib/formats/text.py, its value any finite number (NaN and inf are refused with the row
named, before anything is stored). Zero, negative and huge values are real data (a spill
count, a signed delta, a FLOP/s figure above 1e15): detection chooses its scale per series,
ratios for a strictly positive one and differences otherwise, computed so that values near the
float limit cannot overflow its estimates (attrib/core/detect.py, issue 33).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from attrib.core.model import Direction
from attrib.errors import BadRows, IngestError, InputError, RepoError
from attrib.formats.result_row import ResultRow
from attrib.formats.results_csv import CsvRows, parse_results_csv
from attrib.formats.text import MAX_BENCHMARK, MAX_CONFIG_KEY, MAX_UNIT, check_text
from attrib.history.attrib_result import is_attrib_document, parse_attrib_json
from attrib.history.store import FileRows, HistoryStore, Ingested, StoredRow

MAX_CONFIG_KEYS = 32  # of configuration, and of environment, per row
ENV_PREFIX = "env."  # gbench's `--benchmark_context=env.KEY=VALUE`, as the CSV's env.KEY columns


class InputFormat(StrEnum):
    AUTO = "auto"
    CSV = "csv"
    ATTRIB = "attrib"  # attrib's result or compare JSON
    GBENCH = "gbench"
    NVBENCH = "nvbench"


@dataclass(frozen=True)
class SourceFile:
    name: str  # as the user gave it: errors name it
    text: str


@dataclass(frozen=True)
class Options:
    """What a file does not say about itself."""

    format: InputFormat = InputFormat.AUTO
    commit: str | None = None  # for gbench / nvbench documents (and overrides nothing else)
    config: Mapping[str, str] = field(default_factory=dict)  # machine class etc., for every row
    measured_at: float | None = None  # for documents without a time
    environment: Mapping[str, str] = field(default_factory=dict)  # where every row ran (--env)


def sniff(name: str, text: str) -> InputFormat:
    """The format of a file from its content (the name only breaks a tie for CSV)."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return InputFormat.CSV
    try:
        doc = json.loads(text)
    except ValueError:
        raise IngestError(name, "", "", "starts like JSON but is not JSON; expected CSV or a JSON results document") from None
    if isinstance(doc, dict):
        if is_attrib_document(doc):
            return InputFormat.ATTRIB
        if isinstance(doc.get("benchmarks"), list) and isinstance(doc.get("context"), dict):
            return InputFormat.GBENCH
        if isinstance(doc.get("meta"), dict) and "benchmarks" in doc:
            return InputFormat.NVBENCH
    raise IngestError(name, "", "", "JSON, but not an attrib result/compare, Google Benchmark or NVBench document")


def parse(src: SourceFile, opts: Options) -> tuple[InputFormat, list[ResultRow]]:
    fmt = sniff(src.name, src.text) if opts.format is InputFormat.AUTO else opts.format
    if fmt is InputFormat.CSV:
        return fmt, parse_results_csv(src.text, src.name)
    if fmt is InputFormat.ATTRIB:
        return fmt, parse_attrib_json(src.text, src.name)
    return fmt, _tool_rows(src, fmt, opts)


def _tool_rows(src: SourceFile, fmt: InputFormat, opts: Options) -> list[ResultRow]:
    """gbench / NVBench measurements as rows: times (lower is better); the state (NVBench's
    axis values) is configuration; skipped and failed benchmarks have no value and no row."""
    if opts.commit is None:
        raise IngestError(src.name, "", "commit", f"a {fmt.value} document names no commit: pass the commit it measured (--commit)")
    from attrib import formats  # issue 15's parsers
    from attrib.errors import FormatError

    try:
        found = formats.parse_gbench(src.text, src.name) if fmt is InputFormat.GBENCH else formats.parse_nvbench(src.text, src.name)
    except FormatError as exc:
        raise IngestError(src.name, "", "", str(exc).removeprefix(f"{src.name}: ")) from None
    rows = [
        ResultRow(f"benchmarks[{i}]", opts.commit, m.benchmark, m.value, m.unit, Direction.LOWER, None, dict(m.state), _tool_env(m.context))
        for i, m in enumerate(found)
        if m.usable
    ]
    if not rows:
        raise IngestError(src.name, "", "benchmarks", "no benchmark with a measured value (all skipped or failed)")
    return rows


def _tool_env(context: Mapping[str, str]) -> dict[str, str]:
    """The environment a tool's document states: gbench's `env.<key>` context entries; NVBench's
    own version (`nvbench`). The device's name is not environment: a series of another GPU is
    another series, named by configuration (`--config gpu=H100`)."""
    env = {k.removeprefix(ENV_PREFIX): v for k, v in context.items() if k.startswith(ENV_PREFIX) and v}
    if context.get("nvbench_version"):
        env.setdefault("nvbench", context["nvbench_version"])
    return env


def digest(project: str, rows: Sequence[StoredRow]) -> str:
    """The same rows are the same file, however they were written (a blank line, another
    order, a short sha for a full one): what identifies a row is what would be stored."""
    key = sorted(
        json.dumps(
            [r.commit, r.benchmark, sorted(r.config.items()), repr(r.value), r.unit, r.direction.value, r.measured_at]
            + ([sorted(r.environment.items())] if r.environment else [])  # rows without one digest as before
        )
        for r in rows
    )
    return hashlib.sha256(json.dumps([project, key]).encode()).hexdigest()


def _check_row(source: str, r: ResultRow, config: Mapping[str, str], env: Mapping[str, str]) -> None:
    """The door every row of every format passes (see the module's docstring)."""
    check_text(r.benchmark, MAX_BENCHMARK, source, r.row, "benchmark")
    check_text(r.unit, MAX_UNIT, source, r.row, "unit")
    for key, value in config.items():
        check_text(key, MAX_CONFIG_KEY, source, r.row, "config")
        check_text(value, MAX_BENCHMARK, source, r.row, key)
    if len(env) > MAX_CONFIG_KEYS:
        raise IngestError(source, r.row, "environment", f"{len(env)} keys; expected at most {MAX_CONFIG_KEYS}")
    for key, value in env.items():
        check_text(key, MAX_CONFIG_KEY, source, r.row, "environment")
        check_text(value, MAX_BENCHMARK, source, r.row, f"{ENV_PREFIX}{key}")
    if not math.isfinite(r.value):
        raise IngestError(source, r.row, "value", f"{r.value!r}: expected a finite number")


def prepare(project: str, files: Sequence[SourceFile], opts: Options, resolve: Callable[[str], str]) -> list[FileRows]:
    """Parse and resolve every file; BadRows with every bad row of every file, else the rows."""
    if len(opts.config) > MAX_CONFIG_KEYS:
        raise InputError(f"--config: at most {MAX_CONFIG_KEYS} keys")
    if len(opts.environment) > MAX_CONFIG_KEYS:
        raise InputError(f"--env: at most {MAX_CONFIG_KEYS} keys")
    bad: list[IngestError] = []
    out: list[FileRows] = []
    shas: dict[str, str | RepoError] = {}
    for src in files:
        file_bad: list[IngestError] = []
        try:
            fmt, rows = parse(src, opts)
        except BadRows as exc:  # the rows that parsed still get their commits checked
            fmt, rows, file_bad = InputFormat.CSV, [r for r in exc.parsed if isinstance(r, ResultRow)], list(exc.errors)
        except IngestError as exc:
            bad.append(exc)
            continue
        stored = []
        for r in rows:
            if r.commit not in shas:
                try:
                    shas[r.commit] = resolve(r.commit)
                except RepoError as exc:
                    shas[r.commit] = exc
            sha = shas[r.commit]
            if isinstance(sha, RepoError):
                file_bad.append(IngestError(src.name, r.row, "commit", str(sha)))
                continue
            config = {**opts.config, **r.config}
            env = {**opts.environment, **r.environment}  # the row's own word wins, as for config
            try:
                _check_row(src.name, r, config, env)
            except IngestError as exc:
                file_bad.append(exc)
                continue
            at = r.measured_at if r.measured_at is not None else opts.measured_at  # 0.0 is 1970-01-01, a time
            stored.append(StoredRow(r.row, sha, r.benchmark, config, r.value, r.unit, r.direction, at, env))
        bad += sorted(file_bad, key=lambda e: int(e.row) if e.row.isdigit() else -1)
        skipped = rows.skipped if isinstance(rows, CsvRows) else 0  # the CSV's empty values
        out.append(FileRows(src.name, fmt.value, digest(project, stored), stored, skipped))
    if bad:
        raise BadRows(bad)
    return out


def ingest(
    store: HistoryStore,
    project: str,
    files: Sequence[SourceFile],
    opts: Options,
    resolve: Callable[[str], str],
    max_series: int | None = None,
) -> list[Ingested]:
    return store.ingest(project, prepare(project, files, opts, resolve), max_series=max_series)
