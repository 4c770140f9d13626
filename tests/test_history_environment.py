"""The environment in the nightly history (issue 41): rows say where they ran, the environment
never splits a series, and a change the environment made is filed once over every series it
moved instead of being bisected. A real uvicorn server on loopback, a real SQLite database and a
real git tree; no workers run, so what was queued can be counted exactly."""

from __future__ import annotations

import json
import random
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import spec
from history_data import first_parent
from test_daemon_api import SECRET, Daemon, running
from test_daemon_groups import RECIPE, _jobs

from attrib.core.detect import ChangeDirection, DetectSettings
from attrib.core.environment import EnvChange
from attrib.core.model import Direction
from attrib.daemon.auth import sign
from attrib.daemon.config import Settings
from attrib.daemon.nightly import environment_not_reproduced, origin
from attrib.demo import generate_tree
from attrib.errors import BadRows
from attrib.history.environment import EnvGroup, EnvShift, agree, attribute, attribute_all, env_change
from attrib.history.ingest import InputFormat, Options, SourceFile, ingest
from attrib.history.order import ordered
from attrib.history.projects import SERIES_NAME, HistoryConfig, MapRule, ProjectConfig
from attrib.history.schema import HISTORY_SCHEMA
from attrib.history.store import Change, FlagState, HistoryStore, Point, Series

N = 44
KERNELS = [f"k{i:02d}" for i in range(24)]
UPGRADE = 17  # the first commit measured only with the new toolkit
CODE = 30  # the commit that slows k00..k04
OLD, NEW = "nvcc 12.4.131", "nvcc 12.6.85"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory):
    return generate_tree(tmp_path_factory.mktemp("env") / "repo", spec(commits=N - 1, culprits=((CODE, 30),), broken=None))


def _settings(tmp_path: Path, tree) -> Settings:
    recipes = tmp_path / "recipes"
    recipes.mkdir(exist_ok=True)
    (recipes / "kernels.toml").write_text(RECIPE.format(names=", ".join(f'"{k}"' for k in KERNELS)))
    p = ProjectConfig(name="demo", repo=str(tree.path), map=(MapRule("k*", "kernels.toml", SERIES_NAME),),
                      detect=DetectSettings(), file_issue="dir:nightly")  # fmt: skip
    return Settings(state=tmp_path / "state", secret=SECRET, recipes_dir=recipes, workers=0,
                    history=HistoryConfig(projects={"demo": p}))  # fmt: skip


def _nights(line: list[str], rerun: bool = True) -> list[tuple[str, str]]:
    """(commit, compiler) of each night: one commit a night; with `rerun`, the night the toolkit
    was upgraded no commit landed, and the nightly measured the last one again."""
    nights = [(c, OLD if i < UPGRADE else NEW) for i, c in enumerate(line)]
    if rerun:
        nights.insert(UPGRADE, (line[UPGRADE - 1], NEW))
    return nights


def _csv(line: list[str], rerun: bool = True, seed: int = 3) -> str:
    """24 kernels; the new toolkit makes every one 6 % slower; commit CODE slows k00..k04 by 5 %."""
    rng = random.Random(seed)
    rows = ["commit,benchmark,value,unit,direction,timestamp,gpu,env.compiler,env.driver"]
    for n, k in enumerate(KERNELS):
        for day, (c, compiler) in enumerate(_nights(line, rerun)):
            level = (1.06 if compiler == NEW else 1.0) * (1.05 if n < 5 and line.index(c) >= CODE else 1.0)
            v = (1 + n / 10) * level * (1 + rng.gauss(0, 0.004))
            rows.append(f"{c},{k},{v:.9f},ms,lower,{1_780_000_000 + day * 86_400},H100,{compiler},560.35")
    return "\n".join(rows) + "\n"


def _post(d: Daemon, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    raw = json.dumps({"project": "demo", **body}).encode()
    status, answer, _ = d.post("/v1/results", raw, {"X-Attrib-Signature-256": sign(raw, SECRET)})
    return status, answer


def test_a_toolkit_upgrade_is_one_environment_issue_and_the_code_change_one_job(tmp_path: Path, tree):
    line = first_parent(tree.path)
    with running(_settings(tmp_path, tree)) as d:
        status, answer = _post(d, {"files": [{"name": "nightly.csv", "content": _csv(line)}]})
        assert status == 200, answer
        history = HistoryStore(d.settings.db_path)
        assert len(history.series("demo")) == 24  # the environment split no series
        # the code change: one job, exactly the five kernels it slowed, over its commit
        (job,) = _jobs(d)
        assert sorted(job["benchmarks"]) == KERNELS[:5]
        assert line.index(job["good"]) < CODE <= line.index(job["bad"])
        # the toolkit: one environment change over all 24 series, nothing bisected
        (env,) = answer["environment"]
        assert env["keys"] == {"compiler": {"before": OLD, "after": NEW}}  # driver did not change
        assert env["series"] == 24 and sorted(b["benchmark"] for b in env["benchmarks"]) == KERNELS
        assert {(b["before"], b["after"]) for b in env["benchmarks"]} == {(line[UPGRADE - 1], line[UPGRADE])}
        assert 5.5 < env["change_pct"] < 6.5 and env["ci_pct"][0] < env["change_pct"] < env["ci_pct"][1]
        assert env["title"].startswith(f"compiler {OLD} -> {NEW}: 24 series +6.")
        flags = [f for f in answer["flags"] if f["flag"] == "environment"]
        assert len(flags) == 24 and all(f["job"] is None and f"compiler {OLD} -> {NEW}" in f["note"] for f in flags)
        # the filed issue: one, naming the keys and every series
        (report,) = (d.settings.state / "filed" / "nightly").glob("*/report.md")
        text = report.read_text()
        assert f"<!-- title: {env['title']} -->" in text and f"| `compiler` | `{OLD}` | `{NEW}` |" in text
        assert all(f"| {k} [gpu=H100] |" in text for k in KERNELS)
        assert env["issue"] == f"issue opened: {report}"
        # the series view marks the environment's change points by their keys
        status, page, _ = d.get("/series?project=demo", SECRET)
        assert status == 200 and page.count('class="change regression environment"') == 24
        assert page.count(f"compiler {OLD} -&gt; {NEW}") >= 24
        # the same nights again add nothing, file nothing and queue nothing
        status, again = _post(d, {"files": [{"name": "nightly.csv", "content": _csv(line)}]})
        assert again["environment"] == [] and again["flags"] == [] and len(_jobs(d)) == 1
        # another machine's nights, the same upgrade: the open issue gets a comment naming them
        h200 = _csv(line, seed=4).replace(",H100,", ",H200,")
        status, other = _post(d, {"files": [{"name": "h200.csv", "content": h200}]})
        assert status == 200 and [e["series"] for e in other["environment"]] == [24]
        assert other["environment"][0]["issue"] == f"issue commented: {report}#comment-1"
        text = report.read_text()
        assert "attrib saw this environment change move 24 more series" in text and "| k23 [gpu=H200] |" in text
        assert len(list((d.settings.state / "filed" / "nightly").glob("*/report.md"))) == 1


def test_an_environment_change_with_commits_between_is_bisected_and_named(tmp_path: Path, tree):
    """No night measured the old code in the new environment: the code may explain the step, so
    it is bisected (its preflight rebuilds both ends in today's environment)."""
    line = first_parent(tree.path)
    with running(_settings(tmp_path, tree)) as d:
        status, answer = _post(d, {"files": [{"name": "nightly.csv", "content": _csv(line, rerun=False)}]})
        assert status == 200, answer
        assert answer["environment"] == []
        spans = sorted((line.index(j["good"]), line.index(j["bad"]), len(j["benchmarks"])) for j in _jobs(d))
        assert [(g, b, n) for g, b, n in spans if g < UPGRADE <= b] == [(UPGRADE - 1, UPGRADE, 24)]
        # the report of that bisection says the environment changed too, by its keys
        (upgrade,) = [j for j in _jobs(d) if line.index(j["good"]) < UPGRADE <= line.index(j["bad"])]
        detected = origin(d.settings, upgrade["id"])
        assert len(detected) == 24 and {x.environment for x in detected} == {f"compiler {OLD} -> {NEW}"}
        (code,) = [j for j in _jobs(d) if j is not upgrade and line.index(j["good"]) < CODE <= line.index(j["bad"])]
        assert {x.environment for x in origin(d.settings, code["id"])} == {""}
        # its preflight (both ends rebuilt today) did not reproduce it: the environment's after all
        said = environment_not_reproduced(d.settings, upgrade["id"])
        (report,) = (d.settings.state / "filed" / "nightly").glob("*/report.md")
        assert said.startswith(f"environment compiler {OLD} -> {NEW}: 24 series +6.") and said.endswith(f"issue opened: {report}")
        assert "did not reproduce it: the code between them did not make it" in report.read_text()
        history = HistoryStore(d.settings.db_path)
        marked = history.changes(job_id=upgrade["id"])
        assert len(marked) == 24 and {c.flag for c in marked} == {FlagState.ENVIRONMENT}
        assert environment_not_reproduced(d.settings, code["id"]) == ""  # the code's change: nothing filed
        assert environment_not_reproduced(d.settings, upgrade["id"]).endswith(f"{report} lists every series already")


def test_environment_arrives_by_every_door_and_is_checked_like_other_text(tmp_path: Path, tree):
    line = first_parent(tree.path)
    with running(_settings(tmp_path, tree)) as d:
        csv = f"commit,benchmark,value,unit,direction,timestamp\n{line[0]},k00,1.0,ms,lower,1780000000\n"
        status, answer = _post(d, {"files": [{"name": "a.csv", "content": csv}], "environment": {"driver": "560.35"}})
        assert status == 200, answer
        status, answer = _post(d, {"files": [{"name": "b.csv", "content": csv}], "environment": {"driver": "bad\x1b[31m"}})
        assert status == 400 and answer["errors"] == ["b.csv: row 1: field 'env.driver': character 4 is the control character U+001B; expected printable text"]
        for bad in (["driver=1"], {"driver": 560}, {f"k{i}": "v" for i in range(33)}):
            status, answer = _post(d, {"files": [{"name": "c.csv", "content": csv}], "environment": bad})
            assert status == 400 and answer["field"] == "environment", answer
        (p,) = HistoryStore(d.settings.db_path).points(HistoryStore(d.settings.db_path).series("demo")[0].id)
        assert p.environment == {"driver": "560.35"}


def test_gbench_context_and_the_option_give_the_environment(tmp_path: Path, tree):
    line = first_parent(tree.path)
    doc = {
        "context": {"date": "2026-12-01", "library_version": "v1.9.1", "json_schema_version": 1, "env.compiler": NEW},
        "benchmarks": [{"name": "BM_k", "run_name": "BM_k", "run_type": "iteration", "repetitions": 1,
                        "repetition_index": 0, "threads": 1, "iterations": 10, "real_time": 5.0, "cpu_time": 5.0, "time_unit": "ns"}],
    }  # fmt: skip
    store = HistoryStore(tmp_path / "h.db")
    opts = Options(InputFormat.AUTO, line[0], {}, None, {"driver": "560.35", "compiler": OLD})
    ingest(store, "p", [SourceFile("g.json", json.dumps(doc))], opts, lambda r: r)
    (s,) = store.series("p")
    assert s.config == {} and store.points(s.id)[0].environment == {"compiler": NEW, "driver": "560.35"}  # the file's word wins
    with pytest.raises(BadRows, match=r"a.csv: row header: field 'env.': an environment column needs a key"):
        ingest(store, "p", [SourceFile("a.csv", "commit,benchmark,value,unit,direction,timestamp,env.\nx,k,1,ms,lower,1780000000,a\n")],
               Options(), lambda r: r)  # fmt: skip


def test_an_old_history_file_migrates_and_keeps_its_rows(tmp_path: Path):
    db = tmp_path / "h.db"
    store = HistoryStore(db)
    ingest(store, "p", [SourceFile("a.csv", "commit,benchmark,value,unit,direction,timestamp\nab,k,1,ms,lower,1780000000\n")],
           Options(), lambda r: r)  # fmt: skip
    store.close()
    with sqlite3.connect(db) as c:  # what a history of schema 3 held: no environment column
        c.execute("ALTER TABLE history_results DROP COLUMN environment")
        c.execute("UPDATE meta SET value = '3' WHERE key = 'history_schema'")
    again = HistoryStore(db)
    (s,) = again.series("p")
    assert [p.environment for p in again.points(s.id)] == [{}]
    assert again._conn().execute("SELECT value FROM meta WHERE key = 'history_schema'").fetchone()[0] == str(HISTORY_SCHEMA)


def _change(before: str, after: str, before_mean: float = 1.0, after_mean: float = 1.06) -> Change:
    return Change(1, 1, before, after, ChangeDirection.REGRESSION, 6.0, (5.5, 6.5), 1e-6, before_mean, after_mean, 0.0, None,
                  FlagState.DETECTED, None, "")  # fmt: skip


def test_the_decision_is_the_environment_only_where_the_old_code_moved_with_it():
    old, new = {"compiler": OLD, "host": "a"}, {"compiler": NEW}
    assert agree(old, {"compiler": OLD}) and not agree(old, new)
    assert env_change(old, new) == EnvShift((EnvChange("compiler", OLD, NEW),)) and env_change(new, {"driver": "1"}) is None
    pts = [Point("a", 1.0, 1, old), Point("b", 1.0, 2, old), Point("b", 1.06, 3, new), Point("c", 1.06, 4, new)]
    got = attribute(pts, _change("b", "c"))
    assert got.environment and got.change is not None and got.change.label == f"compiler {OLD} -> {NEW}"
    stays = attribute([*pts[:2], Point("b", 1.001, 3, new), pts[3]], _change("b", "c"))  # the old code did not move
    assert not stays.environment and stays.change is not None and "+0.10 % on the old code" in stays.why and "the code moved it too" in stays.why
    unknown = attribute([pts[0], pts[1], pts[3]], _change("b", "c"))  # nobody measured b in the new environment
    assert not unknown.environment and "no value of b" in unknown.why
    assert attribute([Point("b", 1.0, 1, old), Point("c", 1.06, 2, old)], _change("b", "c")).change is None
    # one environment change over three series: its effect is their re-runs' median (+6 %); the
    # series whose change is 11 % moved with the code too, and is bisected
    def series_of(step: float, rerun: float) -> tuple[list[Point], Change]:
        nights = [Point(f"c{i}", 1.0 + 0.001 * (i % 3), i, old) for i in range(10)] + [Point("c9", rerun, 10, new)]
        nights += [Point(f"d{i}", step + 0.001 * (i % 3), 11 + i, new) for i in range(10)]
        return nights, _change("c9", "d0", 1.001, step) if step < 1.1 else replace(_change("c9", "d0", 1.001, step), change_pct=11.0, ci_pct=(10.4, 11.6))

    verdicts = attribute_all([series_of(1.06, 1.06), series_of(1.06, 1.062), series_of(1.11, 1.058)])
    assert [v.environment for v in verdicts] == [True, True, False] and "the code moved it too" in verdicts[2].why
    # the series keeps a commit's first environment: the re-run is the environment's evidence
    assert ordered(pts, ["a", "b", "c"]).values == [1.0, 1.0, 1.06]
    series = Series(1, "p", "k", {"gpu": "H100"}, "ms", Direction.LOWER)
    g = EnvGroup("p", got.change, ((series, _change("b", "c")),) * 2)
    assert g.title == f"compiler {OLD} -> {NEW}: 2 series +6.0 % [5.5, 6.5]"
