"""Ingestion of the tools' own formats (issue 15's parsers) into a real SQLite history, with
commits resolved in a real git tree: Google Benchmark and NVBench files name no commit, so the
caller does; NVBench's axis values become the series' configuration."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import spec

from attrib.demo import generate_tree
from attrib.errors import BadRows
from attrib.formats import parse_gbench, parse_nvbench
from attrib.history.ingest import InputFormat, Options, SourceFile, ingest
from attrib.history.order import GitLine
from attrib.history.store import HistoryStore

FIXTURES = Path(__file__).parent / "fixtures"
GBENCH = FIXTURES / "gbench" / "bm_copy_libbenchmark-1.7.1.json"
NVBENCH = FIXTURES / "nvbench" / "axes_ref.json"


@pytest.fixture(scope="module")
def line(tmp_path_factory: pytest.TempPathFactory) -> GitLine:
    return GitLine(generate_tree(tmp_path_factory.mktemp("ingest") / "repo", spec(commits=3, culprits=(), broken=None)).path)


def test_gbench_and_nvbench_rows_with_the_commit_given(tmp_path: Path, line: GitLine):
    store = HistoryStore(tmp_path / "h.db")
    head = line.line()[-1]
    files = [SourceFile(str(GBENCH), GBENCH.read_text()), SourceFile(str(NVBENCH), NVBENCH.read_text())]
    got = ingest(store, "p", files, Options(commit="HEAD", config={"machine": "ci"}), line.resolve)
    measured_g = [m for m in parse_gbench(GBENCH.read_text(), "g") if m.usable]
    measured_n = [m for m in parse_nvbench(NVBENCH.read_text(), "n") if m.usable]
    assert [g.rows for g in got] == [len(measured_g), len(measured_n)]  # skipped / failed ones have no value
    series = store.series("p")
    assert {s.benchmark for s in series} == {m.benchmark for m in measured_g + measured_n}
    nv = next(s for s in series if s.benchmark == measured_n[0].benchmark and s.config == {"machine": "ci", **measured_n[0].state})
    assert [p.commit for p in store.points(nv.id)] == [head] and nv.unit == measured_n[0].unit
    # NVBench's own version is the environment it states (issue 41); the device is not
    assert store.points(nv.id)[0].environment == {"nvbench": measured_n[0].context["nvbench_version"]}
    assert ingest(store, "p", files, Options(commit="HEAD", config={"machine": "ci"}), line.resolve)[0].duplicate


def test_a_tool_file_without_a_commit_is_refused(tmp_path: Path, line: GitLine):
    with pytest.raises(BadRows) as info:
        ingest(HistoryStore(tmp_path / "h.db"), "p", [SourceFile("g.json", GBENCH.read_text())], Options(format=InputFormat.GBENCH), line.resolve)
    assert str(info.value) == "g.json: field 'commit': a gbench document names no commit: pass the commit it measured (--commit)"


def test_gitline_resolves_the_lines_commits_from_its_one_rev_list(line: GitLine, monkeypatch: pytest.MonkeyPatch):
    """Issue 21: a rev-parse per commit took 157 s for 50,000; the line's shas (full, or a
    prefix only one of them has) resolve without git, anything else still through git."""
    shas = line.line()
    calls: list[str] = []
    real = line.repo.resolve
    monkeypatch.setattr(line.repo, "resolve", lambda rev: calls.append(rev) or real(rev))
    assert [line.resolve(s) for s in shas] == shas
    assert [line.resolve(s[:12]) for s in shas] == shas
    assert calls == []
    assert line.resolve("HEAD") == real("HEAD") and calls == ["HEAD"]


def test_a_schema_2_database_gains_the_scale_column(tmp_path: Path):
    """Issue 33: history_series.scale. A database of schema 2 (as main wrote it) is migrated
    on open; its series read as not yet detected (scale None) until their next detection."""
    import sqlite3

    from attrib.history.schema import HISTORY_SCHEMA
    from attrib.history.store import HistoryStore

    db = tmp_path / "h.db"
    HistoryStore(db).close()
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("INSERT INTO history_series (project, benchmark, config, unit, direction) VALUES ('p', 'b', '{}', 's', 'lower')")
        conn.execute("ALTER TABLE history_series DROP COLUMN scale")
        conn.execute("ALTER TABLE history_results DROP COLUMN environment")  # schema 4's (issue 41)
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'history_schema'")
    conn.close()
    store = HistoryStore(db)
    [series] = store.series("p")
    assert series.scale is None and HISTORY_SCHEMA == 4
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT value FROM meta WHERE key = 'history_schema'").fetchone() == ("4",)
    conn.close()
