"""POST /v1/results and the series view against a real uvicorn server on loopback, a real
SQLite database and a real git tree. No workers run, so the jobs a change point queues stay
queued and can be counted exactly. The browser test drives Debian's real chromium."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import spec
from history_data import csv_text, first_parent, levels
from test_daemon_api import SECRET, Daemon, _send, running

from attrib.core.detect import DetectSettings
from attrib.daemon.auth import sign
from attrib.daemon.config import Settings
from attrib.daemon.nightly import Nightly
from attrib.demo import DEMO_RECIPE, generate_tree
from attrib.history.flagging import DAY_S
from attrib.history.projects import HistoryConfig, MapRule, ProjectConfig
from attrib.history.store import HistoryStore

N, STEP = 44, 20
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
)  # fmt: skip


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory):
    return generate_tree(tmp_path_factory.mktemp("results") / "repo", spec(commits=N - 1, culprits=((STEP, 30),), broken=None))


def _settings(tmp_path: Path, tree, **project: Any) -> Settings:
    recipes = tmp_path / "recipes"
    recipes.mkdir(exist_ok=True)
    (recipes / "demo.toml").write_text(DEMO_RECIPE)
    p = ProjectConfig(name="demo", repo=str(tree.path), map=(MapRule("loop*", "demo.toml", None),), detect=DetectSettings())
    return Settings(state=tmp_path / "state", secret=SECRET, recipes_dir=recipes, workers=0,
                    history=HistoryConfig(projects={"demo": replace(p, **project)}))  # fmt: skip


def _post(d: Daemon, files: dict[str, str], project: str = "demo", secret: str = SECRET) -> tuple[int, dict[str, Any]]:
    body = json.dumps({"project": project, "files": [{"name": n, "content": c} for n, c in files.items()]}).encode()
    status, answer, _ = d.post("/v1/results", body, {"X-Attrib-Signature-256": sign(body, secret)})
    return status, answer


def _counts(d: Daemon) -> tuple[int, int, int]:
    c, h = d.store.counts(), HistoryStore(d.settings.db_path).counts()
    return c["jobs"], c["flags"], h["results"]


def test_results_need_the_signature_and_bad_rows_store_nothing(tmp_path: Path, tree):
    line = first_parent(tree.path)
    with running(_settings(tmp_path, tree)) as d:
        body = json.dumps({"project": "demo", "files": [{"name": "n.csv", "content": csv_text(line[:3], [1.0] * 3)}]}).encode()
        assert d.post("/v1/results", body, {})[0] == 401
        assert d.post("/v1/results", body, {"X-Attrib-Signature-256": sign(body, "wrong-secret-0123456789")})[0] == 401
        bad = csv_text(line[:3], [1.0] * 3).replace(f"{line[1]},loop,", f"{'e' * 40},loop,")
        status, answer = _post(d, {"ok.csv": csv_text(line[3:6], [1.0] * 3), "bad.csv": bad})
        assert status == 400 and answer["errors"] == [f"bad.csv: row 2: field 'commit': revision '{'e' * 40}': unknown in {tree.path}"]
        status, answer = _post(d, {"n.csv": csv_text(line[:3], [1.0] * 3)}, project="other")
        assert status == 400 and answer["field"] == "project"
        assert _counts(d) == (0, 0, 0)


def test_a_regression_becomes_one_job_and_overlaps_do_not(tmp_path: Path, tree):
    line = first_parent(tree.path)
    with running(_settings(tmp_path, tree, file_issue="dir:nightly")) as d:
        first = csv_text(line, levels(N, STEP, 1.3, seed=11))
        status, answer = _post(d, {"loop.csv": first})
        assert status == 200, answer
        [change] = answer["changes"]
        assert (change["before"], change["after"], change["direction"]) == (line[STEP - 1], line[STEP], "regression")
        [flag] = answer["flags"]
        assert flag["flag"] == "queued"
        job = d.store.get(flag["job"])
        assert job is not None and (job.good, job.bad, job.benchmark, job.file_issue) == (line[STEP - 1], line[STEP], "loop", "dir:nightly")
        assert job.source is not None and job.source.startswith("detected in nightly history: demo loop [machine=ci-a100]")
        # the same file again: nothing new; a second series with the same step: the open job covers it
        status, again = _post(d, {"loop.csv": first})
        assert status == 200 and again["files"][0]["duplicate"] is True and again["flags"] == []
        status, other = _post(d, {"copy.csv": csv_text(line, levels(N, STEP, 1.25, seed=12), benchmark="loop-copy")})
        assert [(f["flag"], f["job"]) for f in other["flags"]] == [("duplicate", job.id)]
        # not mapped, and an improvement: recorded, never queued
        status, rest = _post(
            d,
            {"x.csv": csv_text(line, levels(N, STEP, 1.3, seed=13), benchmark="gemm"), "y.csv": csv_text(line, levels(N, STEP, 0.7, seed=14), benchmark="loop-fast")},
        )
        assert sorted(f["flag"] for f in rest["flags"]) == ["recorded", "unmapped"]
        assert _counts(d)[:2] == (1, 1)  # one job, one flag


def test_a_ci_flag_over_the_range_is_an_open_job(tmp_path: Path, tree):
    line = first_parent(tree.path)
    with running(_settings(tmp_path, tree)) as d:
        status, ci, _ = d.flag({"repo": str(tree.path), "good": line[10], "bad": line[30], "recipe": "demo.toml"})
        assert status == 202
        status, answer = _post(d, {"loop.csv": csv_text(line, levels(N, STEP, 1.3, seed=15))})
        assert [(f["flag"], f["job"]) for f in answer["flags"]] == [("duplicate", ci["id"])]
        assert _counts(d)[:2] == (1, 1)


def test_rate_limit_holds_the_rest_until_the_next_day(tmp_path: Path, tree):
    line = first_parent(tree.path)
    settings = _settings(tmp_path, tree, max_bisections_per_day=1)
    with running(settings) as d:
        # two series regressing at different commits: two ranges that do not overlap
        status, answer = _post(
            d,
            {"a.csv": csv_text(line, levels(N, STEP, 1.3, seed=16)), "b.csv": csv_text(line, levels(N, 28, 1.3, seed=17), benchmark="loop-b")},
        )
        assert sorted(f["flag"] for f in answer["flags"]) == ["queued", "rate_limited"]
        nightly = Nightly(d.store, settings)
        later = nightly.flag_pending(settings.history.projects["demo"], tree.path, line, now=__import__("time").time() + DAY_S + 1)
        assert [f["flag"] for f in later] == ["queued"]
        assert _counts(d)[:2] == (2, 2)


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_series_view_in_a_real_browser(tmp_path: Path, tree):
    line = first_parent(tree.path)
    with running(_settings(tmp_path, tree)) as d:
        status, answer = _post(d, {"loop.csv": csv_text(line, levels(N, STEP, 1.3, seed=18))})
        job_id = answer["flags"][0]["job"]
        status, page, _ = d.get("/series")
        assert status == 200 and '<svg xmlns="http://www.w3.org/2000/svg" class="series"' in page
        assert f'href="/v1/jobs/{job_id}/report"' in page and page.count('class="point"') == N
        basic = base64.b64encode(f"viewer:{SECRET}".encode()).decode()
        assert _send_get(d, "/series", f"Basic {basic}")[0] == 200
        status, _, headers = _send_get(d, "/series", "Basic " + base64.b64encode(b"viewer:wrong").decode())
        assert status == 401 and headers.get("www-authenticate", "").startswith("Basic")
        sid = answer["changes"][0]["series"]
        status, svg, headers = _send_get(d, f"/series/{sid}.svg", f"Bearer {SECRET}")
        assert status == 200 and headers["content-type"].startswith("image/svg+xml") and "change regression" in svg
        browser = _chromium()
        if browser is None:
            pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)")
        url = d.url.replace("http://", f"http://viewer:{SECRET}@") + "/series"
        common = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium'}"]
        env = {**os.environ, "HOME": str(tmp_path)}
        dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=120, env=env)
        assert dom.returncode == 0, dom.stderr[-2000:]
        assert "attrib: nightly series" in dom.stdout and 'class="series"' in dom.stdout
        assert f'href="/v1/jobs/{job_id}/report"' in dom.stdout and f'href="/v1/jobs/{job_id}"' in dom.stdout
        shot = tmp_path / "series.png"
        done = subprocess.run([*common, f"--screenshot={shot}", "--window-size=900,700", url], capture_output=True, timeout=120, env=env)
        assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the artifact stays in tmp_path


def _send_get(d: Daemon, path: str, authorization: str) -> tuple[int, Any, dict[str, str]]:
    import urllib.request

    headers = {k.lower(): v for k, v in {"Authorization": authorization}.items()}
    status, body, h = _send(urllib.request.Request(d.url + path, headers=headers))
    return status, body, {k.lower(): v for k, v in h.items()}


# --- issue 33, point 4: waiting change points cost what they touch, and expire ------------------------


def _waiting(d: Daemon, tree, points: int, jobs: int) -> list[str]:
    """`points` series regressing at STEP, all waiting on a daily limit of 0, and `jobs` CI jobs
    of the same recipe over ranges before the step (none covers the points)."""
    line = first_parent(tree.path)
    pairs = [(g, b) for b in range(1, STEP - 1) for g in range(b)][:jobs]
    assert len(pairs) == jobs
    for g, b in pairs:
        status, answer, _ = d.flag({"repo": str(tree.path), "good": line[g], "bad": line[b], "recipe": "demo.toml"})
        assert status == 202 and answer["duplicate_of"] is None, answer
    files = {f"w{i}.csv": csv_text(line, levels(N, STEP, 1.3, seed=40 + i), benchmark=f"loop-w{i}") for i in range(points)}
    status, answer = _post(d, files)
    assert status == 200 and [f["flag"] for f in answer["flags"]] == ["rate_limited"] * points, answer["flags"]
    return line


def test_an_upload_reads_the_jobs_once_whatever_waits(tmp_path: Path, tree, monkeypatch):
    """The old upload read every job (results parsed) once per waiting change point, and wrote
    each point again: 20 points x 30 jobs made 20 reads of 30 jobs and 20 writes. Counted here,
    not timed: an upload to an unrelated series reads the jobs at most once and rewrites no
    point whose decision did not change."""
    from attrib.daemon.store import Store

    with running(_settings(tmp_path, tree, max_bisections_per_day=0)) as d:
        line = _waiting(d, tree, points=20, jobs=30)
        reads, writes = [], []
        for name in ("jobs", "ranges"):
            if hasattr(Store, name):
                original = getattr(Store, name)
                monkeypatch.setattr(Store, name, lambda self, *a, _o=original, **k: reads.append(1) or _o(self, *a, **k))
        settle = HistoryStore.settle_waiting
        monkeypatch.setattr(HistoryStore, "settle_waiting", lambda self, *a, **k: writes.append(1) or settle(self, *a, **k))
        status, answer = _post(d, {"other.csv": csv_text(line[:3], [1.0, 1.0, 1.0], benchmark="unrelated")})
        assert status == 200
        assert len(reads) <= 1 and writes == [], (len(reads), len(writes))
        assert answer["flags"] == [], answer


def test_waiting_change_points_expire_after_a_week(tmp_path: Path, tree):
    from attrib.history.store import WAITING_EXPIRY_S, FlagState

    assert WAITING_EXPIRY_S == 7 * DAY_S  # the documented time (docs/history.md)
    settings = _settings(tmp_path, tree, max_bisections_per_day=0)
    with running(settings) as d:
        line = _waiting(d, tree, points=2, jobs=0)
        nightly = Nightly(d.store, settings)
        project = settings.history.projects["demo"]
        soon = nightly.flag_pending(project, tree.path, line, now=__import__("time").time() + WAITING_EXPIRY_S - 60)
        assert soon == []  # still waiting, for the same reason: nothing new to say
        later = nightly.flag_pending(project, tree.path, line, now=__import__("time").time() + WAITING_EXPIRY_S + 60)
        assert [f["flag"] for f in later] == ["expired", "expired"] and "7 days" in later[0]["note"]
        assert HistoryStore(settings.db_path).waiting_changes("demo") == []
        states = {c.flag for s in HistoryStore(settings.db_path).series("demo") for c in HistoryStore(settings.db_path).changes(s.id)}
        assert states == {FlagState.EXPIRED}
