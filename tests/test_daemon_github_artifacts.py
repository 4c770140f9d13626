"""workflow_run webhooks: the daemon fetches the failed run's `attrib-flag` artifact from GitHub.

GitHub is tests/fake_github_actions.py, the loopback fake the prebuilt binaries' tests use too:
strict about the token (401 otherwise), the media type and API version headers, asked by name
for a run's artifacts, and answering the zip route with a 302 to a second loopback server, the
"storage host", which refuses (400) any request that carries an Authorization header, as a token
must never follow the redirect. The daemon is the real app on
uvicorn (tests/test_daemon_api.py's `running`), with no workers, so what it queued can be read."""

from __future__ import annotations

import io
import json
import random
import sqlite3
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import github_repository
from fake_github_actions import REPO, TOKEN, FakeActions, serving
from test_daemon_api import SECRET, Daemon, good_flag, running, webhook_rules
from test_daemon_api import repo as repo  # noqa: F401  (the module-scoped git repository fixture)
from test_daemon_api import settings as settings  # noqa: F401

from attrib.daemon.auth import github_signature
from attrib.daemon.config import Settings

PROJECT = REPO
RUN = 4242


@pytest.fixture
def github() -> Iterator[FakeActions]:
    with serving() as fake:
        yield fake


@pytest.fixture
def daemon(settings: Settings, github: FakeActions, tmp_path: Path, repo) -> Iterator[Daemon]:  # noqa: F811
    token_file = tmp_path / "github-token"
    token_file.write_text(TOKEN + "\n")
    with running(replace(settings, github_api_url=github.api_url, github_token_file=token_file, webhooks=webhook_rules(repo[0]))) as d:
        yield d


def zip_of(files: dict[str, bytes]) -> bytes:
    """A compressed zip (the flag's size limit is on what is downloaded)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def event(run_id: int = RUN, conclusion: str = "failure", action: str = "completed", **run: Any) -> dict[str, Any]:
    return {
        "action": action,
        "workflow_run": {
            "id": run_id, "conclusion": conclusion, "event": "push", "html_url": f"https://github.com/{PROJECT}/actions/runs/{run_id}",
            "head_repository": github_repository(PROJECT), "pull_requests": [], **run,
        },  # fmt: skip
        "repository": github_repository(PROJECT),
    }


def send(daemon: Daemon, payload: dict[str, Any], signed: bool = True) -> tuple[int, dict[str, Any]]:
    body = json.dumps(payload).encode()
    headers = {"X-GitHub-Event": "workflow_run", **({"X-Hub-Signature-256": github_signature(body, SECRET)} if signed else {})}
    status, answer, _ = daemon.post("/v1/webhooks/github", body, headers)
    return status, answer


def test_failed_run_with_a_flag_artifact_is_queued_once(daemon: Daemon, github: FakeActions, repo):  # noqa: F811
    flag = good_flag(repo)
    github.add(RUN, 7, zip_of({"flag.json": json.dumps(flag).encode()}))
    status, first = send(daemon, event())
    assert status == 202 and first["duplicate_of"] is None, first
    job = daemon.store.get(first["id"])
    assert job is not None and (job.good, job.bad) == (flag["good"], flag["bad"]) and job.benchmark == "loop"
    assert job.source == f"https://github.com/{PROJECT}/actions/runs/{RUN}"  # the flag named none: the run's page
    # The token went to the API only; the storage host was asked without it and answered.
    assert {s.authorization for s in github.by("api")} == {f"Bearer {TOKEN}"}
    assert [(s.path.split("?")[0], s.authorization) for s in github.by("storage")] == [("/blob/7", None)]
    asked = len(github.by("api"))
    status, again = send(daemon, event())  # GitHub redelivers the same event: a replay
    assert status == 202 and again == first and len(github.by("api")) == asked  # the first answer, GitHub not asked
    status, second = send(daemon, event(run_attempt=2))  # a re-run fails the same way: merged into the job
    assert status == 202 and second["duplicate_of"] == first["id"] == second["id"]
    counts = daemon.store.counts()
    assert counts["jobs"] == 1 and counts["flags"] == 2
    with sqlite3.connect(daemon.settings.db_path) as db:  # what was flagged outlives the artifact
        rows = db.execute("SELECT route, body FROM flags").fetchall()
    assert [(r, json.loads(b)["workflow_run"], json.loads(b)["flag"]["bad"]) for r, b in rows] == [
        ("github-artifact", {"repository": PROJECT, "id": RUN}, flag["bad"])
    ] * 2


def test_artifacts_url_names_the_run_only_on_the_daemons_own_api(daemon: Daemon, github: FakeActions, repo):  # noqa: F811
    github.add(RUN, 8, zip_of({"flag.json": json.dumps(good_flag(repo, source="ci 1")).encode()}))
    run = {k: v for k, v in event()["workflow_run"].items() if k != "id"}
    ours = f"{github.api_url}/repos/{PROJECT}/actions/runs/{RUN}/artifacts"
    status, answer = send(daemon, {**event(), "workflow_run": {**run, "artifacts_url": ours}})
    assert status == 202, answer
    assert daemon.store.get(answer["id"]).source == "ci 1"  # type: ignore[union-attr]
    before = len(github.seen)
    elsewhere = f"http://127.0.0.1:1/repos/{PROJECT}/actions/runs/{RUN}/artifacts"
    status, answer = send(daemon, {**event(), "workflow_run": {**run, "artifacts_url": elsewhere}})
    assert status == 400 and answer["field"] == "workflow_run.id", answer
    assert len(github.seen) == before


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (event(conclusion="success"), "only completed failures"),
        (event(action="requested", conclusion=None), "only completed failures"),
    ],
)
def test_runs_that_did_not_fail_are_ignored_without_asking_github(daemon: Daemon, github: FakeActions, payload, why):
    status, answer = send(daemon, payload)
    assert status == 200 and answer["id"] is None and why in answer["ignored"], answer
    assert github.seen == [] and daemon.store.counts()["flags"] == 0


def test_a_run_without_the_artifact_is_ignored(daemon: Daemon, github: FakeActions):
    github.add(RUN, 9, zip_of({"report.txt": b"slow"}), name="perf-logs")
    status, answer = send(daemon, event())
    assert status == 200 and answer["id"] is None and "no unexpired attrib-flag artifact" in answer["ignored"], answer
    assert github.by("storage") == [] and daemon.store.counts()["flags"] == 0


@pytest.mark.parametrize(
    ("files", "text"),
    [
        ({"flag.json": b"{}", "extra.txt": b"x"}, "exactly one file"),
        ({"other.json": b"{}"}, "exactly one file"),
        ({"flag.json": b"{" + b" " * (100 << 10) + b"}"}, "expected at most 65536"),  # small zip, large member
        (None, "not a readable zip"),
        ({"flag.json": b"[1, 2]"}, "expected a JSON object"),
        ({"flag.json": b"{\"repo\": "}, "not JSON"),
    ],
)
def test_bad_artifacts_are_400_naming_attrib_flag(daemon: Daemon, github: FakeActions, files, text):
    data = b"PK\x03\x04 this is not a zip" if files is None else zip_of(files)
    assert len(data) < 64 << 10
    github.add(RUN, 10, data)
    status, answer = send(daemon, event())
    assert status == 400 and answer["field"] == "attrib-flag" and text in answer["error"], answer
    assert daemon.store.counts()["flags"] == 0


def test_an_oversize_zip_is_refused_from_the_listing(daemon: Daemon, github: FakeActions):
    github.add(RUN, 11, zip_of({"flag.json": random.Random(0).randbytes(80 << 10)}))  # does not compress: > 64 KiB
    status, answer = send(daemon, event())
    assert status == 400 and answer["field"] == "attrib-flag" and "bytes; expected at most" in answer["error"], answer
    assert github.by("storage") == []


def test_a_bad_flag_inside_gets_the_same_validation_as_a_direct_one(daemon: Daemon, github: FakeActions, repo):  # noqa: F811
    flag = good_flag(repo) | {"good": "--upload-pack=touch /tmp/pwned"}
    github.add(RUN, 12, zip_of({"flag.json": json.dumps(flag).encode()}))
    status, answer = send(daemon, event())
    assert status == 400 and answer["field"] == "good" and "not a valid revision" in answer["error"], answer
    assert daemon.store.counts()["flags"] == 0


@pytest.mark.parametrize("status", [401, 403, 404])
def test_github_refusing_is_502_naming_the_repo_and_actions_read(daemon: Daemon, github: FakeActions, repo, status):  # noqa: F811
    github.add(RUN, 13, zip_of({"flag.json": json.dumps(good_flag(repo)).encode()}))
    if status == 401:
        github.token = "another-token"
    else:
        github.fail = status
    code, answer = send(daemon, event())
    assert code == 502, answer
    assert answer["error"].startswith(f"github:{PROJECT}: {status} ") and "actions:read" in answer["error"], answer
    assert "\n" not in answer["error"] and TOKEN not in answer["error"]
    assert len(github.by("api")) == 1 and daemon.store.counts()["flags"] == 0  # 4xx: not retried


def test_unreachable_github_is_502(settings: Settings, tmp_path: Path):  # noqa: F811
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    (tmp_path / "t").write_text(TOKEN)
    with running(replace(settings, github_api_url=dead, github_token_file=tmp_path / "t")) as daemon:
        status, answer = send(daemon, event())
    assert status == 502 and "connection failed" in answer["error"] and f"github:{PROJECT}" in answer["error"], answer


def test_unsigned_or_wrongly_signed_events_are_401_and_github_is_not_asked(daemon: Daemon, github: FakeActions, repo):  # noqa: F811
    github.add(RUN, 14, zip_of({"flag.json": json.dumps(good_flag(repo)).encode()}))
    assert send(daemon, event(), signed=False)[0] == 401
    body = json.dumps(event()).encode()
    bad = {"X-GitHub-Event": "workflow_run", "X-Hub-Signature-256": github_signature(body, "not-the-secret-0123456789")}
    assert daemon.post("/v1/webhooks/github", body, bad)[0] == 401
    assert github.seen == [] and daemon.store.counts()["flags"] == 0


def test_malformed_run_payloads_name_the_field(daemon: Daemon, github: FakeActions):
    cases = [
        ({**event(), "repository": {"full_name": "../../etc"}}, "repository.full_name"),
        ({**event(), "repository": None}, "repository.full_name"),
        (event(run_id=-3), "workflow_run.id"),
        (event(run_id="4242"), "workflow_run.id"),  # type: ignore[arg-type]
    ]
    for payload, name in cases:
        status, answer = send(daemon, payload)
        assert status == 400 and answer["field"] == name, (payload, answer)
    assert github.seen == []


def test_settings_take_the_api_from_the_environment_and_check_the_token_file(tmp_path: Path, monkeypatch):
    from attrib.daemon.config import DEFAULT_GITHUB_API, github_token
    from attrib.daemon.config import settings as make_settings
    from attrib.errors import InputError

    (tmp_path / "secret").write_text(SECRET)
    base = {"state": tmp_path / "state", "secret_file": tmp_path / "secret", "recipes_dir": tmp_path}
    monkeypatch.delenv("GITHUB_API_URL", raising=False)
    assert make_settings(base, None).github_api_url == DEFAULT_GITHUB_API
    monkeypatch.setenv("GITHUB_API_URL", "https://ghe.example/api/v3/")
    assert make_settings(base, None).github_api_url == "https://ghe.example/api/v3"
    assert make_settings({**base, "github_api_url": "http://127.0.0.1:9"}, None).github_api_url == "http://127.0.0.1:9"
    with pytest.raises(InputError, match="expected an http"):
        make_settings({**base, "github_api_url": "file:///etc"}, None)
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(InputError, match="empty"):
        make_settings({**base, "github_token_file": tmp_path / "empty"}, None)
    with pytest.raises(InputError, match="cannot read"):
        make_settings({**base, "github_token_file": tmp_path / "missing"}, None)
    assert TOKEN not in repr(make_settings({**base, "github_token_file": _write(tmp_path / "tok", TOKEN)}, None))
    assert github_token(None, {"GITHUB_TOKEN": " abc "}) == "abc" and github_token(None, {}) is None


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
