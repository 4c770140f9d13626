"""`attrib history add` and `attrib detect` as a user runs them: the real CLI in a subprocess,
a real git tree (the demo generator), a real SQLite history file. The values are seeded
draws around a level that steps at a known commit."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from conftest import run_cli, spec
from history_data import HEADER, csv_text, first_parent, levels

from attrib.demo import generate_tree
from attrib.history.store import HistoryStore

STEP = 20  # index on the first-parent line where the level rises
N = 44


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory):
    # a merge on the main line: its side commits are history, but not on the first-parent line
    return generate_tree(tmp_path_factory.mktemp("hist") / "repo", spec(commits=N - 1, culprits=((STEP, 30),), broken=None, merge_at=8))


def _add(tmp_path: Path, tree, *files: Path) -> object:
    return run_cli("history", "add", *files, "--db", tmp_path / "h.db", "--repo", tree.path, "--project", "demo")


def _detect(tmp_path: Path, tree, *extra: str) -> list[dict[str, object]]:
    res = run_cli("detect", "--db", tmp_path / "h.db", "--repo", tree.path, "--project", "demo", "--json", *extra)
    assert res.code == 0, res.stderr
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def test_add_is_idempotent_and_detect_names_the_step(tmp_path: Path, tree):
    line = first_parent(tree.path)
    assert len(line) == N
    f = tmp_path / "nightly.csv"
    f.write_text(csv_text(line, levels(N, STEP, 1.3, seed=1)))
    first = _add(tmp_path, tree, f)
    assert first.code == 0 and first.stdout.strip() == f"{f}: {N} results added", first.stderr
    again = _add(tmp_path, tree, f)
    assert again.code == 0 and "already in the history; nothing added" in again.stdout
    assert HistoryStore(tmp_path / "h.db").counts()["results"] == N
    [cp] = _detect(tmp_path, tree)
    assert (cp["benchmark"], cp["before"], cp["after"], cp["direction"]) == ("loop", line[STEP - 1], line[STEP], "regression")
    lo, hi = cp["ci_pct"]  # type: ignore[misc]
    assert lo <= cp["change_pct"] <= hi and lo > 0  # type: ignore[operator]
    assert cp["config"] == {"machine": "ci-a100"} and cp["new"] is True and cp["recovered"] is False
    # decided: a second run finds the same point, not a new one
    [again_cp] = _detect(tmp_path, tree)
    assert (again_cp["after"], again_cp["new"]) == (line[STEP], False)
    assert _detect(tmp_path, tree, "--since", line[STEP]) == []
    assert _detect(tmp_path, tree, "--benchmark", "gemm*") == []


def test_bad_rows_store_nothing_and_each_gets_one_line(tmp_path: Path, tree):
    line = first_parent(tree.path)
    good = tmp_path / "good.csv"
    good.write_text(csv_text(line[:5], [1.0] * 5))
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + f"\n{line[0]},loop,1.0,s,lower,2026-01-01T02:00:00Z,a\n" f"{'f' * 40},loop,1.0,s,lower,2026-01-02T02:00:00Z,a\n" f"{line[2]},loop,x,s,lower,2026-01-03T02:00:00Z,a\n")
    res = _add(tmp_path, tree, good, bad)
    assert res.code == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 2, res.stderr
    assert f"{bad}: row 2: field 'commit': revision '{'f' * 40}': unknown" in lines[0]
    assert lines[1].startswith(f"{bad}: row 3: field 'value'")
    assert HistoryStore(tmp_path / "h.db").counts()["results"] == 0  # not even good.csv


def test_unit_of_a_series_cannot_change(tmp_path: Path, tree):
    line = first_parent(tree.path)
    (tmp_path / "a.csv").write_text(csv_text(line[:3], [1.0] * 3))
    assert _add(tmp_path, tree, tmp_path / "a.csv").code == 0
    (tmp_path / "b.csv").write_text(csv_text(line[3:5], [1.0] * 2).replace(",s,lower,", ",ms,lower,"))
    res = _add(tmp_path, tree, tmp_path / "b.csv")
    assert res.code == 2 and f"{tmp_path / 'b.csv'}: row 1: field 'unit': 'ms', but the series 'loop' is stored with 's'" in res.stderr


def test_order_is_first_parent_not_upload_and_side_commits_stay_out(tmp_path: Path, tree):
    line = first_parent(tree.path)
    values = levels(N, STEP, 1.3, seed=2)
    nights = list(zip(line, values, strict=True))
    random.Random(3).shuffle(nights)  # nights uploaded in any order, a few per file
    files = []
    for i in range(0, N, 6):
        chunk = nights[i : i + 6]
        files.append(tmp_path / f"night-{i}.csv")
        files[-1].write_text(csv_text([c for c, _ in chunk], [v for _, v in chunk], day0=1 + i))
    side = [s for s in _all_commits(tree.path) if s not in line]
    assert side  # the merge brought commits that are not on the first-parent line
    files.append(tmp_path / "side.csv")
    files[-1].write_text(csv_text(side[:1], [50.0]))  # wild, and must not matter
    assert _add(tmp_path, tree, *files).code == 0
    [cp] = _detect(tmp_path, tree)
    assert (cp["before"], cp["after"]) == (line[STEP - 1], line[STEP])


def test_incremental_nights_keep_the_point_and_report_recovery(tmp_path: Path, tree):
    line = first_parent(tree.path)
    back = 32
    values = levels(N, STEP, 1.3, seed=4, back_at=back)
    (tmp_path / "first.csv").write_text(csv_text(line[:back], values[:back]))
    assert _add(tmp_path, tree, tmp_path / "first.csv").code == 0
    tight = ("--setting", "min_segment=5", "--setting", "alpha=0.001")  # the defaults, through --setting
    [cp] = _detect(tmp_path, tree, *tight)
    assert cp["after"] == line[STEP] and cp["recovered"] is False
    for i in range(back, N, 4):  # a few nights per run: each run decides only what is new
        night = tmp_path / f"night-{i}.csv"
        night.write_text(csv_text(line[i : i + 4], values[i : i + 4], day0=i + 1))
        assert _add(tmp_path, tree, night).code == 0
        _detect(tmp_path, tree, *tight)
    found = _detect(tmp_path, tree, *tight)
    first = next(c for c in found if c["after"] == line[STEP])
    assert first["new"] is False and first["recovered"] is True and first["recovered_at"] == line[back]
    assert sum(1 for c in found if c["after"] == line[STEP]) == 1


def _all_commits(repo: Path) -> list[str]:
    import subprocess

    return subprocess.run(["git", "-C", str(repo), "rev-list", "--all"], check=True, capture_output=True, text=True).stdout.split()


def test_a_compare_json_adds_its_two_commits(tmp_path: Path, tree, demo_recipe: Path):
    line = first_parent(tree.path)
    out = tmp_path / "compare.json"
    res = run_cli("compare", line[STEP - 1], line[STEP], "--repo", tree.path, "--recipe", demo_recipe, "--workdir", tmp_path / "work", "--json", out)
    assert res.code in (0, 10, 11), res.stderr
    doc = json.loads(out.read_text())
    assert set(doc["medians"]) == {line[STEP - 1], line[STEP]} and doc["unit"] == "s"
    assert _add(tmp_path, tree, out).code == 0
    store = HistoryStore(tmp_path / "h.db")
    [series] = store.series("demo")
    assert (series.benchmark, series.config) == ("loop", {})
    assert sorted((p.commit, p.value) for p in store.points(series.id)) == sorted(doc["medians"].items())


def test_add_env_is_the_environment_of_every_row_and_splits_no_series(tmp_path: Path, tree):
    line = first_parent(tree.path)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(csv_text(line[:3], [1.0] * 3))
    b.write_text(csv_text(line[3:6], [1.0] * 3, day0=4))
    args = ("--db", tmp_path / "h.db", "--repo", tree.path, "--project", "demo")
    assert run_cli("history", "add", a, *args, "--env", "compiler=gcc-13").code == 0
    assert run_cli("history", "add", b, *args, "--env", "compiler=gcc-14", "--env", "driver=560").code == 0
    store = HistoryStore(tmp_path / "h.db")
    (s,) = store.series("demo")
    assert [p.environment for p in store.points(s.id)] == [{"compiler": "gcc-13"}] * 3 + [{"compiler": "gcc-14", "driver": "560"}] * 3
    bad = run_cli("history", "add", a, *args, "--env", "compiler")
    assert bad.code == 2 and "--env 'compiler': expected KEY=VALUE" in bad.stderr
