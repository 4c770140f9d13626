"""The nightly history under hostile and careless input (issue 20), against a real `attrib
daemon` process on loopback with a real git tree and its real SQLite state: values the detector
cannot use and text that would break the page are refused at the door with the row named and
nothing stored; a series that cannot be analysed is reported and never blocks another; the
daily bisection limit holds under concurrent uploads; a project's series are capped and its
index paged; every page and SVG carries the security headers."""

from __future__ import annotations

import json
import sqlite3
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import spec
from daemon_proc import Proc, daemon_process
from history_data import HEADER, csv_text, first_parent, levels, result_doc

from attrib.daemon.auth import MAX_SIGNATURES, SignaturePolicy, Unauthorized, sign, verify_signature
from attrib.daemon.nightly import SERIES_PER_PAGE
from attrib.demo import DEMO_RECIPE, generate_tree
from attrib.errors import IngestError
from attrib.formats.text import MAX_UNIT

SECRET = "history-hostile-secret-0123456789"
N = 44
STEPS = (8, 12, 16, 20, 24, 28, 32, 36)  # eight regressions, eight ranges that do not overlap
REAL_STEP = 6  # another range, for the series next to a broken one
LIMIT = 2


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory):
    return generate_tree(tmp_path_factory.mktemp("hh") / "repo", spec(commits=N - 1, culprits=((20, 30),), broken=None))


@pytest.fixture(scope="module")
def line(tree) -> list[str]:
    return first_parent(tree.path)


def _tables(tree) -> str:
    common = f'repo = "{tree.path}"\nbranch = "main"\n'
    return (
        f"[history.projects.demo]\n{common}"
        'map = [ { pattern = "loop*", recipe = "demo.toml", benchmark = "loop" } ]\n'
        f"[history.projects.limited]\n{common}max_bisections_per_day = {LIMIT}\n"
        'map = [ { pattern = "loop*", recipe = "demo.toml", benchmark = "loop" } ]\n'
        f"[history.projects.capped]\n{common}max_series = 5\n"
        f"[history.projects.wide]\n{common}max_series = 200\n"
    )


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory, tree) -> Iterator[Proc]:
    root = tmp_path_factory.mktemp("history-hostile")
    recipes = root / "recipes"
    recipes.mkdir()
    (recipes / "demo.toml").write_text(DEMO_RECIPE)
    with daemon_process(root, SECRET, recipes, tables=_tables(tree)) as p:
        assert p.get("/series", secret=SECRET)[0] == 200  # serving: its history tables exist
        yield p


def post(proc: Proc, files: dict[str, str], project: str = "demo", **envelope: Any) -> tuple[int, Any]:
    body = json.dumps({"project": project, "files": [{"name": n, "content": c} for n, c in files.items()], **envelope}).encode()
    status, answer, _ = proc.post("/v1/results", body, {"X-Attrib-Signature-256": sign(body, SECRET)})
    return status, answer


def db(proc: Proc) -> sqlite3.Connection:
    return sqlite3.connect(proc.state / "state.db", timeout=30)


def history_rows(proc: Proc) -> tuple[int, int, int]:
    conn = db(proc)
    try:
        return tuple(conn.execute(f"SELECT COUNT(*) FROM history_{t}").fetchone()[0] for t in ("series", "files", "results"))  # type: ignore[return-value]
    finally:
        conn.close()


def refused(proc: Proc, status: int, answer: Any, before: tuple[int, int, int]) -> list[str]:
    assert status == 400, answer
    assert all("\n" not in e for e in answer["errors"]), answer
    assert history_rows(proc) == before, "a refused upload stored something"
    return list(answer["errors"])


def rows(commits: list[str], values: list[float], benchmark: str = "loop") -> str:
    return "\n".join([HEADER] + [f"{c},{benchmark},{v!r},s,lower,2026-11-{1 + i % 28:02d}T02:00:00Z,ci" for i, (c, v) in enumerate(zip(commits, values, strict=True))]) + "\n"


# --- 2. every finite value is data (issue 33), and one series that cannot be analysed ------------------


def _scales(proc: Proc) -> dict[str, str | None]:
    conn = db(proc)
    try:
        return dict(conn.execute("SELECT benchmark, scale FROM history_series WHERE project = 'demo'").fetchall())
    finally:
        conn.close()


def test_every_finite_value_is_taken_and_each_series_says_its_scale(proc: Proc, line):
    """Issue 33: real data the old door (1e-15..1e15) refused. A spill count of 0, a signed
    delta, a B200's FP8 FLOP/s, and the values the door was for: +-1e308 next to each other,
    which must not overflow an estimate (no series unanalysed, every number finite)."""
    n = 24
    series = {
        "spills": [0.0] * n,  # a static kernel metric
        "errors": [0.0] * 12 + [3.0] * 12,  # an error count that rose at line[12]
        "delta": [(-1) ** i * 0.1 - 0.5 for i in range(n)],  # a signed difference, never positive
        "flops": [4.5e15 * (1 + 0.001 * (i % 3)) for i in range(n)],
        "huge": [1e308, -1e308] * (n // 2),
        "near-limit": [1e300] * 12 + [1e308] * 12,
        "tiny": [5e-324 * (1 + i % 2) for i in range(n)],
    }
    files = {f"{name}.csv": rows(line[:n], values, name) for name, values in series.items()}
    status, answer = post(proc, files)
    assert status == 200, answer
    assert answer["unanalysed"] == [], answer["unanalysed"]
    json.dumps(answer, allow_nan=False)  # raises on a non-finite number
    scales = _scales(proc)
    assert {k: scales[k] for k in series} == {
        "spills": "difference", "errors": "difference", "delta": "difference", "huge": "difference",
        "flops": "ratio", "near-limit": "ratio", "tiny": "ratio",
    }  # fmt: skip
    found = {(c["benchmark"], c["after"]): c for c in answer["changes"]}
    errors = found[("errors", line[12])]
    assert errors["scale"] == "difference" and errors["direction"] == "regression"
    assert errors["before_mean"] == 0.0 and errors["after_mean"] == 3.0
    near = found[("near-limit", line[12])]
    assert near["scale"] == "ratio" and near["after_mean"] == 1e308 and near["change_pct"] > 1e9
    for c in answer["changes"]:
        for key in ("change_pct", "p_value", "before_mean", "after_mean"):
            assert c[key] is not None and abs(c[key]) <= 1.8e308, c
    status, page, _ = proc.get("/series?project=demo", SECRET)
    assert status == 200 and "steps read as differences" in page and "steps read as ratios" in page


@pytest.mark.parametrize(("value", "shown"), [("inf", "'inf'"), ("-inf", "'-inf'"), ("nan", "'nan'"), ("1e309", "'1e309'")])
def test_values_that_are_not_finite_numbers_are_refused_with_the_row(proc: Proc, line, value: str, shown: str):
    before = history_rows(proc)
    text = rows(line[:10], [1.0] * 10, "poison").replace(",1.0,", f",{value},", 1)
    status, answer = post(proc, {"poison.csv": text})
    errors = refused(proc, status, answer, before)
    assert errors[0] == f"poison.csv: row 1: field 'value': {shown}: expected a finite number", errors


def test_a_series_that_cannot_be_analysed_is_reported_and_blocks_no_other(proc: Proc, line):
    # A series stored before the door existed (or by hand): a value no detector can read.
    status, answer = post(proc, {"old.csv": rows(line[:12], [1.0] * 12, "broken")})
    assert status == 200, answer
    conn = db(proc)
    with conn:
        conn.execute("UPDATE history_results SET value = 'unreadable' WHERE rowid = (SELECT MIN(r.rowid) FROM history_results r"
                     " JOIN history_series s ON s.id = r.series_id WHERE s.benchmark = 'broken')")  # fmt: skip
        conn.execute("UPDATE history_series SET pending = 1 WHERE benchmark = 'broken'")
    # The next upload, with a real regression in another series: found, flagged, and the broken one named.
    status, answer = post(proc, {"loop.csv": csv_text(line, levels(N, REAL_STEP, 1.3, seed=3), benchmark="loop-real", machine="ci")})
    assert status == 200, answer
    assert [(c["benchmark"], c["after"]) for c in answer["changes"]] == [("loop-real", line[REAL_STEP])]
    assert [f["flag"] for f in answer["flags"]] == ["queued"]
    [bad] = answer["unanalysed"]
    assert bad["benchmark"] == "broken" and bad["retried"] == "with the next upload" and "\n" not in bad["error"]
    # It stays pending: the same rows again (a duplicate file) detect it again once it can be read.
    status, again = post(proc, {"old.csv": rows(line[:12], [1.0] * 12, "broken")})
    assert again["files"][0]["duplicate"] is True and [u["benchmark"] for u in again["unanalysed"]] == ["broken"]
    with conn:
        conn.execute("UPDATE history_results SET value = 1.0 WHERE value = 'unreadable'")
    status, healed = post(proc, {"old.csv": rows(line[:12], [1.0] * 12, "broken")})
    assert status == 200 and healed["unanalysed"] == []
    assert conn.execute("SELECT pending FROM history_series WHERE benchmark = 'broken'").fetchone()[0] == 0
    conn.close()
    assert "Traceback" in proc.log.read_text()  # logged once, with its cause, for whoever reads the log


# --- 3. the daily limit under concurrent uploads -------------------------------------------------------


def test_the_daily_limit_holds_under_eight_concurrent_uploads(proc: Proc, line):
    def one(i: int) -> tuple[int, Any]:
        text = csv_text(line, levels(N, STEPS[i], 1.3, seed=100 + i), benchmark=f"loop-c{i}", machine="ci")
        return post(proc, {f"n{i}.csv": text}, project="limited")

    jobs_before = proc.rows()["jobs"]
    with ThreadPoolExecutor(max_workers=len(STEPS)) as pool:
        answers = list(pool.map(one, range(len(STEPS))))
    assert all(status == 200 for status, _ in answers), answers
    conn = db(proc)
    try:
        flags = dict(conn.execute("SELECT flag, COUNT(*) FROM history_changes h JOIN history_series s ON s.id = h.series_id"
                                  " WHERE s.project = 'limited' GROUP BY flag").fetchall())  # fmt: skip
    finally:
        conn.close()
    assert flags == {"queued": LIMIT, "rate_limited": len(STEPS) - LIMIT}, flags
    assert proc.rows()["jobs"] == jobs_before + LIMIT


# --- 4. series cap and the paged index -------------------------------------------------------------------------


def test_a_project_past_its_series_cap_is_refused_in_one_line(proc: Proc, line):
    before = history_rows(proc)
    six = "\n".join([HEADER] + [f"{line[0]},b{i},1.0,s,lower,2026-11-01T02:00:00Z,ci" for i in range(6)]) + "\n"
    status, answer = post(proc, {"six.csv": six}, project="capped")
    [error] = refused(proc, status, answer, before)
    assert error == "six.csv: row 6: field 'benchmark': 'b5' would be a new series, and project capped has its limit of 5 series (max_series in its [history] config); nothing was stored"
    five = "\n".join(six.splitlines()[:6]) + "\n"
    assert post(proc, {"five.csv": five}, project="capped")[0] == 200
    # More rows for series it has are fine; a new one is not.
    assert post(proc, {"more.csv": five.replace(line[0], line[1])}, project="capped")[0] == 200
    # (the benchmark field only: a commit's sha may hold "b4" too)
    status, answer = post(proc, {"new.csv": five.replace(",b4,", ",b9,")}, project="capped")
    assert status == 400 and "limit of 5 series" in answer["error"]


def test_the_series_index_is_paged(proc: Proc, line):
    count = SERIES_PER_PAGE + 10
    many = "\n".join([HEADER] + [f"{line[0]},w{i:03d},1.0,s,lower,2026-11-01T02:00:00Z,ci" for i in range(count)]) + "\n"
    assert post(proc, {"many.csv": many}, project="wide")[0] == 200
    status, first, headers = proc.get("/series?project=wide", secret=SECRET)
    assert status == 200 and first.count('<section id="series-') == SERIES_PER_PAGE
    assert f"series 1-{SERIES_PER_PAGE} of {count}" in first and "page=2'>next</a>" in first and "<h2><bdi>demo" not in first
    status, second, _ = proc.get("/series?project=wide&page=2", secret=SECRET)
    assert second.count('<section id="series-') == 10 and "page=1'>previous</a>" in second and "next</a>" not in second
    assert proc.get("/series?project=wide&page=0", secret=SECRET)[0] == 400
    assert proc.get("/series?project=wide&page=abc")[0] == 401  # the secret first
    assert proc.get("/series?project=nope", secret=SECRET)[0] == 404


# --- 5. text that reaches HTML or SVG -------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "what"), [
    ("loop\x01x", "U+0001"), ("loop\u202eevil", "U+202E"), ("loop\x7f", "U+007F"), ("l" * 501, "at most 500 characters"),
])  # fmt: skip
def test_control_characters_and_long_names_are_refused_in_every_format(proc: Proc, line, name: str, what: str):
    before = history_rows(proc)
    csv = f"{HEADER}\n{line[0]},{name},1.0,s,lower,2026-11-01T02:00:00Z,ci\n"
    doc = json.loads((Path(__file__).parent / "fixtures" / "gbench" / "bm_copy_libbenchmark-1.7.1.json").read_text())
    doc["benchmarks"] = [{**b, "name": name, "run_name": name} for b in doc["benchmarks"][:1]]
    gbench = json.dumps(doc)
    result = json.dumps(result_doc([(line[0], 1.0)], benchmark=name))
    for files, extra in (({"n.csv": csv}, {}), ({"g.json": gbench}, {"commit": line[0]}), ({"r.json": result}, {})):
        status, answer = post(proc, files, **extra)
        errors = refused(proc, status, answer, before)
        assert "field 'benchmark'" in errors[0] and what in errors[0], errors
    long_unit = json.dumps(result_doc([(line[0], 1.0)], unit="u" * 100_000))
    status, answer = post(proc, {"r.json": long_unit})
    assert f"field 'unit': expected at most {MAX_UNIT} characters, got 100000" in refused(proc, status, answer, before)[0]
    status, answer = post(proc, {"bad\x00name.csv": csv.replace(name, "loop")})
    assert status == 400 and answer["field"] == "files[0].name"


def test_pages_and_svgs_isolate_user_text_and_carry_the_security_headers(proc: Proc, line):
    status, answer = post(proc, {"rtl.csv": rows(line[:6], [1.0] * 6, "loop-\u05d0\u05d1")})
    assert status == 200
    conn = db(proc)
    with conn:  # an older row holding a control character: the SVG must still be XML
        conn.execute("UPDATE history_series SET unit = 's\x01' WHERE benchmark = 'loop-\u05d0\u05d1'")
    sid = conn.execute("SELECT id FROM history_series WHERE benchmark = 'loop-\u05d0\u05d1'").fetchone()[0]
    conn.close()
    status, page, headers = proc.get("/series?project=demo", secret=SECRET)
    assert status == 200 and "<bdi>loop-\u05d0\u05d1 [machine=ci]</bdi>" in page
    svg_status, svg, svg_headers = proc.get(f"/series/{sid}.svg", secret=SECRET)
    assert svg_status == 200
    ET.fromstring(svg)  # well-formed
    status, index, index_headers = proc.get("/", secret=SECRET)
    for h in (headers, svg_headers, index_headers):
        h = {k.lower(): v for k, v in h.items()}
        assert "frame-ancestors 'none'" in h["content-security-policy"] and "script-src" not in h["content-security-policy"]
        assert h["x-content-type-options"] == "nosniff" and h["x-frame-options"] == "DENY"


# --- 6. the smaller ones ---------------------------------------------------------------------------------------------


def test_epoch_zero_is_a_time_and_the_duplicate_key_is_the_rows(proc: Proc, line):
    text = f"{HEADER}\n{line[0]},epoch,1.0,s,lower,1970-01-01T00:00:00Z,ci\n{line[1]},epoch,1.0,s,lower,1970-01-02T00:00:00Z,ci\n"
    status, answer = post(proc, {"e.csv": text})
    assert status == 200 and answer["files"][0]["duplicate"] is False
    conn = db(proc)
    try:
        times = [r[0] for r in conn.execute("SELECT measured_at FROM history_results r JOIN history_series s ON s.id = r.series_id"
                                             " WHERE s.benchmark = 'epoch' ORDER BY measured_at")]  # fmt: skip
    finally:
        conn.close()
    assert times == [0.0, 86400.0]
    for variant in (text.replace("\n", "\n\n", 1), text + "\n\n", text.replace(line[0], line[0][:12])):
        status, again = post(proc, {"e2.csv": variant})
        assert status == 200 and again["files"][0]["duplicate"] is True, variant


def test_a_revision_with_a_trailing_newline_is_refused(proc: Proc, tree, line):
    before = proc.rows()
    status, answer, _ = proc.flag({"repo": str(tree.path), "good": line[0], "bad": "HEAD\n", "recipe": "demo.toml"})
    assert status == 400 and answer["field"] == "bad", answer
    assert proc.rows() == before


def test_signature_values_and_the_tolerance_message(proc: Proc, tree, line):
    body = json.dumps({"repo": str(tree.path), "good": line[0], "bad": line[5], "recipe": "demo.toml"}).encode()
    t = int(time.time())
    good = sign(body, SECRET, t).split("v1=")[1]
    other = "0" * 64
    # Two well-formed values, one matching: a sender rolling its secret (documented).
    assert proc.post("/v1/regressions", body, {"X-Attrib-Signature-256": f"t={t},v1={other},v1={good}"})[0] == 202
    for header in (f"t={t},v1={good},v1=zz", f"t={t}," + ",".join(f"v1={v}" for v in [other] * MAX_SIGNATURES + [good])):
        status, answer, _ = proc.post("/v1/regressions", body, {"X-Attrib-Signature-256": header})
        assert status == 401 and f"at most {MAX_SIGNATURES} v1= values" in answer["error"], answer
    policy = SignaturePolicy(SECRET, 300.0)
    signed = {"X-Attrib-Signature-256": sign(b"x", SECRET, 1_000_000)}
    with pytest.raises(Unauthorized, match="301 s from the daemon's clock; the tolerance is 300 s"):
        verify_signature(signed, b"x", policy, now=1_000_000 + 300.4)
    assert verify_signature(signed, b"x", policy, now=1_000_000 + 300.0).keys


def test_the_text_rule_is_one_function(tmp_path: Path):
    from attrib.formats.text import check_text

    with pytest.raises(IngestError, match=r"f.csv: row 3: field 'unit': character 2 is the control character U\+0009"):
        check_text("s\tx", 40, "f.csv", "3", "unit")
    check_text("\u05d0\u05d1 ms", 40, "f.csv", "3", "unit")


def test_the_daemons_json_answers_carry_no_non_finite_number() -> None:
    # The app's default response class, so a route's dict with an inf in it answers null
    # instead of a 500 from Starlette's encoder after the work was done.
    import json as _json

    from attrib.daemon.answers import FiniteJSONResponse

    body = FiniteJSONResponse({"change_pct": float("inf"), "v": [1.5, float("nan"), (float("-inf"),)]}).body
    assert _json.loads(body) == {"change_pct": None, "v": [1.5, None, [None]]}
