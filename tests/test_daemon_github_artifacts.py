"""workflow_run webhooks: the daemon fetches the failed run's `attrib-flag` artifact from GitHub.

A real fake GitHub on 127.0.0.1 (http.server in a thread, an OS-chosen port) checks the token
strictly (401 otherwise), lists artifacts, and answers the zip route with a 302 to a second
loopback server, the "storage host", which refuses (400) any request that carries an
Authorization header, as a token must never follow the redirect. The daemon is the real app on
uvicorn (tests/test_daemon_api.py's `running`), with no workers, so what it queued can be read."""

from __future__ import annotations

import io
import json
import random
import re
import sqlite3
import threading
import urllib.parse
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from test_daemon_api import SECRET, Daemon, good_flag, running
from test_daemon_api import repo as repo  # noqa: F401  (the module-scoped git repository fixture)
from test_daemon_api import settings as settings  # noqa: F401

from attrib.daemon.auth import github_signature
from attrib.daemon.config import Settings

TOKEN = "ghs_test-token-0123456789abcdef"
PROJECT = "acme/kernels"
RUN = 4242


@dataclass
class Seen:
    server: str  # "api" or "storage"
    path: str
    authorization: str | None


@dataclass
class FakeGitHub:
    """Artifacts per run id, zips per artifact id; `fail` makes the API answer that status."""

    token: str = TOKEN
    artifacts: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    zips: dict[int, bytes] = field(default_factory=dict)
    fail: int | None = None
    seen: list[Seen] = field(default_factory=list)
    api_url: str = ""
    storage_url: str = ""

    def add(self, run_id: int, artifact_id: int, data: bytes, name: str = "attrib-flag") -> None:
        self.artifacts.setdefault(run_id, []).append(
            {"id": artifact_id, "name": name, "size_in_bytes": len(data), "expired": False,
             "archive_download_url": f"{self.api_url}/repos/{PROJECT}/actions/artifacts/{artifact_id}/zip"}
        )  # fmt: skip
        self.zips[artifact_id] = data

    def by(self, server: str) -> list[Seen]:
        return [s for s in self.seen if s.server == server]


def _handler(fake: FakeGitHub, server: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _answer(self, status: int, body: bytes, kind: str = "application/json", extra: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for k, v in {"Content-Type": kind, "Content-Length": str(len(body)), **(extra or {})}.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, data: Any) -> None:
            self._answer(status, json.dumps(data).encode())

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            auth = self.headers.get("Authorization")
            fake.seen.append(Seen(server, self.path, auth))
            url = urllib.parse.urlsplit(self.path)
            if server == "storage":
                m = re.fullmatch(r"/blob/(\d+)", url.path)
                if auth is not None:
                    return self._answer(400, b"credentials sent to the storage host", "text/plain")
                if m is None or int(m.group(1)) not in fake.zips:
                    return self._answer(404, b"no such blob", "text/plain")
                return self._answer(200, fake.zips[int(m.group(1))], "application/zip")
            if fake.fail is not None:
                return self._json(fake.fail, {"message": "Resource not accessible by integration"})
            if auth != f"Bearer {fake.token}":
                return self._json(401, {"message": "Bad credentials"})
            if m := re.fullmatch(rf"/repos/{PROJECT}/actions/runs/(\d+)/artifacts", url.path):
                name = urllib.parse.parse_qs(url.query).get("name", [None])[0]
                found = [a for a in fake.artifacts.get(int(m.group(1)), []) if name is None or a["name"] == name]
                return self._json(200, {"total_count": len(found), "artifacts": found})
            if (m := re.fullmatch(rf"/repos/{PROJECT}/actions/artifacts/(\d+)/zip", url.path)) and int(m.group(1)) in fake.zips:
                return self._answer(302, b"", extra={"Location": f"{fake.storage_url}/blob/{m.group(1)}?sig=signed"})
            return self._json(404, {"message": "Not Found"})

    return Handler


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    servers = {name: ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake, name)) for name in ("api", "storage")}
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers.values()]
    for t in threads:
        t.start()
    fake.api_url = f"http://127.0.0.1:{servers['api'].server_address[1]}"
    fake.storage_url = f"http://127.0.0.1:{servers['storage'].server_address[1]}"
    try:
        yield fake
    finally:
        for s in servers.values():
            s.shutdown()
            s.server_close()
        for t in threads:
            t.join(10)


@pytest.fixture
def daemon(settings: Settings, github: FakeGitHub, tmp_path: Path) -> Iterator[Daemon]:  # noqa: F811
    token_file = tmp_path / "github-token"
    token_file.write_text(TOKEN + "\n")
    with running(replace(settings, github_api_url=github.api_url, github_token_file=token_file)) as d:
        yield d


def zip_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def event(run_id: int = RUN, conclusion: str = "failure", action: str = "completed", **run: Any) -> dict[str, Any]:
    return {
        "action": action,
        "workflow_run": {"id": run_id, "conclusion": conclusion, "html_url": f"https://github.com/{PROJECT}/actions/runs/{run_id}", **run},
        "repository": {"full_name": PROJECT},
    }


def send(daemon: Daemon, payload: dict[str, Any], signed: bool = True) -> tuple[int, dict[str, Any]]:
    body = json.dumps(payload).encode()
    headers = {"X-GitHub-Event": "workflow_run", **({"X-Hub-Signature-256": github_signature(body, SECRET)} if signed else {})}
    status, answer, _ = daemon.post("/v1/webhooks/github", body, headers)
    return status, answer


def test_failed_run_with_a_flag_artifact_is_queued_once(daemon: Daemon, github: FakeGitHub, repo):  # noqa: F811
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


def test_artifacts_url_names_the_run_only_on_the_daemons_own_api(daemon: Daemon, github: FakeGitHub, repo):  # noqa: F811
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
def test_runs_that_did_not_fail_are_ignored_without_asking_github(daemon: Daemon, github: FakeGitHub, payload, why):
    status, answer = send(daemon, payload)
    assert status == 200 and answer["id"] is None and why in answer["ignored"], answer
    assert github.seen == [] and daemon.store.counts()["flags"] == 0


def test_a_run_without_the_artifact_is_ignored(daemon: Daemon, github: FakeGitHub):
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
def test_bad_artifacts_are_400_naming_attrib_flag(daemon: Daemon, github: FakeGitHub, files, text):
    data = b"PK\x03\x04 this is not a zip" if files is None else zip_of(files)
    assert len(data) < 64 << 10
    github.add(RUN, 10, data)
    status, answer = send(daemon, event())
    assert status == 400 and answer["field"] == "attrib-flag" and text in answer["error"], answer
    assert daemon.store.counts()["flags"] == 0


def test_an_oversize_zip_is_refused_from_the_listing(daemon: Daemon, github: FakeGitHub):
    github.add(RUN, 11, zip_of({"flag.json": random.Random(0).randbytes(80 << 10)}))  # does not compress: > 64 KiB
    status, answer = send(daemon, event())
    assert status == 400 and answer["field"] == "attrib-flag" and "bytes; expected at most" in answer["error"], answer
    assert github.by("storage") == []


def test_a_bad_flag_inside_gets_the_same_validation_as_a_direct_one(daemon: Daemon, github: FakeGitHub, repo):  # noqa: F811
    flag = good_flag(repo) | {"good": "--upload-pack=touch /tmp/pwned"}
    github.add(RUN, 12, zip_of({"flag.json": json.dumps(flag).encode()}))
    status, answer = send(daemon, event())
    assert status == 400 and answer["field"] == "good" and "not a valid revision" in answer["error"], answer
    assert daemon.store.counts()["flags"] == 0


@pytest.mark.parametrize("status", [401, 403, 404])
def test_github_refusing_is_502_naming_the_repo_and_actions_read(daemon: Daemon, github: FakeGitHub, repo, status):  # noqa: F811
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


def test_unsigned_or_wrongly_signed_events_are_401_and_github_is_not_asked(daemon: Daemon, github: FakeGitHub, repo):  # noqa: F811
    github.add(RUN, 14, zip_of({"flag.json": json.dumps(good_flag(repo)).encode()}))
    assert send(daemon, event(), signed=False)[0] == 401
    body = json.dumps(event()).encode()
    bad = {"X-GitHub-Event": "workflow_run", "X-Hub-Signature-256": github_signature(body, "not-the-secret-0123456789")}
    assert daemon.post("/v1/webhooks/github", body, bad)[0] == 401
    assert github.seen == [] and daemon.store.counts()["flags"] == 0


def test_malformed_run_payloads_name_the_field(daemon: Daemon, github: FakeGitHub):
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
