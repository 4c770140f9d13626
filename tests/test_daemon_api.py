"""The daemon's HTTP API against a real uvicorn server on 127.0.0.1 (an OS-chosen port), a real
SQLite store and a real git repository. No workers run here, so jobs stay queued and what the
API stored can be counted exactly."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from conftest import git
from daemon_proc import FORGE_REPO, github_repository, gitlab_project
from daemon_proc import send as _send

from attrib.daemon.auth import github_signature, sign
from attrib.daemon.config import Settings
from attrib.daemon.senders import WebhookRule
from attrib.daemon.server import create_app
from attrib.daemon.store import Store
from attrib.demo import DEMO_RECIPE

SECRET = "s3cret-for-tests-only-0123456789"


_git = git  # the shared test helper


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    path = tmp_path_factory.mktemp("api") / "repo"
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    shas = []
    for i in range(12):
        (path / "f.txt").write_text(f"{i}\n")
        _git(path, "add", "f.txt")
        _git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"c{i}")
        shas.append(_git(path, "rev-parse", "HEAD"))
    return path, shas


@dataclass
class Daemon:
    url: str
    store: Store
    settings: Settings

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any], dict[str, str]]:
        req = urllib.request.Request(self.url + path, data=body, method="POST", headers=headers)
        return _send(req)

    def flag(self, flag: dict[str, Any] | bytes, secret: str = SECRET) -> tuple[int, dict[str, Any], dict[str, str]]:
        body = flag if isinstance(flag, bytes) else json.dumps(flag).encode()
        return self.post("/v1/regressions", body, {"X-Attrib-Signature-256": sign(body, secret)})

    def get(self, path: str, secret: str | None = SECRET) -> tuple[int, Any, dict[str, str]]:
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        return _send(urllib.request.Request(self.url + path, headers=headers))


@contextmanager
def running(settings: Settings) -> Iterator[Daemon]:
    """A real uvicorn server on a loopback socket the OS numbered, in a thread of this process."""
    store = Store(settings.db_path, max_queue=settings.max_queue)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(create_app(store, settings), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    try:
        yield Daemon(f"http://127.0.0.1:{sock.getsockname()[1]}", store, settings)
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "demo.toml").write_text(DEMO_RECIPE)
    return Settings(state=tmp_path / "state", secret=SECRET, recipes_dir=recipes, workers=0)


@pytest.fixture
def daemon(settings: Settings) -> Iterator[Daemon]:
    with running(settings) as d:
        yield d


def webhook_rules(repo_path: Path) -> dict[str, WebhookRule]:
    """What daemon_proc.webhook_tables says, for an in-process daemon's settings."""
    return {f"{forge}:{FORGE_REPO}": WebhookRule(repos=(str(repo_path),)) for forge in ("github", "gitlab")}


def good_flag(repo: tuple[Path, list[str]], good: int = 0, bad: int = -1, **extra: Any) -> dict[str, Any]:
    path, shas = repo
    return {"repo": str(path), "good": shas[good], "bad": shas[bad], "recipe": "demo.toml", **extra}


def test_signed_flag_is_queued_and_readable(daemon: Daemon, repo):
    status, answer, _ = daemon.flag(good_flag(repo, source="ci job 17"))
    assert status == 202 and answer["duplicate_of"] is None
    status, job, _ = daemon.get(f"/v1/jobs/{answer['id']}")
    assert status == 200 and job["state"] == "queued" and job["result"] is None
    assert job["good"] == repo[1][0] and job["bad"] == repo[1][-1] and job["benchmark"] == "loop"
    status, listing, _ = daemon.get("/v1/jobs")
    assert status == 200 and [j["id"] for j in listing["jobs"]] == [answer["id"]]
    assert daemon.get("/v1/jobs?state=done")[1]["jobs"] == []


def test_unsigned_tampered_or_wrongly_signed_flags_are_refused_and_not_stored(daemon: Daemon, repo):
    body = json.dumps(good_flag(repo)).encode()
    cases = [
        {},  # no signature
        {"X-Attrib-Signature-256": sign(body + b" ", SECRET)},  # signed another body
        {"X-Attrib-Signature-256": sign(body, "not-the-secret-0123456789")},
        {"X-Attrib-Signature-256": sign(body, SECRET).upper()},  # not the exact value
        {"X-Hub-Signature-256": sign(body, SECRET)},  # GitHub's header on the wrong route
    ]
    for headers in cases:
        status, answer, _ = daemon.post("/v1/regressions", body, headers)
        assert status == 401, (headers, answer)
    tampered = body.replace(b'"good"', b'"good" ')
    assert daemon.post("/v1/regressions", tampered, {"X-Attrib-Signature-256": sign(body, SECRET)})[0] == 401
    assert daemon.store.counts()["flags"] == 0 and daemon.store.counts()["jobs"] == 0
    # Reading and cancelling need the bearer secret.
    assert daemon.get("/v1/jobs", secret=None)[0] == 401
    assert daemon.get("/v1/jobs", secret="wrong-secret-0123456789")[0] == 401
    assert daemon.get("/", secret=None)[0] == 401
    assert daemon.post(f"/v1/jobs/{'0' * 16}/cancel", b"", {})[0] == 401
    assert daemon.get("/docs")[0] == 404 and daemon.get("/openapi.json")[0] == 404


@pytest.mark.parametrize(
    ("change", "field", "text"),
    [
        ({"good": None}, "good", "missing"),
        ({"recipe": None}, "recipe", "missing"),
        ({"good": "--upload-pack=touch /tmp/pwned"}, "good", "not a valid revision"),
        ({"bad": "HEAD; rm -rf /"}, "bad", "not a valid revision"),
        ({"bad": "no-such-branch"}, "bad", "unknown"),
        ({"good": 5}, "good", "expected a non-empty string"),
        ({"recipe": "../../etc/passwd"}, "recipe", "recipes directory"),
        ({"recipe": "nope.toml"}, "recipe", "no such recipe"),
        ({"benchmark": "nope"}, "benchmark", "no benchmark named"),
        ({"repo": "relative/path"}, "repo", "absolute path"),
        ({"repo": "0\n0"}, "repo", "'0\\n0': expected an absolute path"),  # found by test_daemon_fuzz
        ({"recipe": "a\nb.toml"}, "recipe", "'a\\nb.toml': no such recipe"),
        ({"repo": "/no/such/repo"}, "repo", "no such directory"),
        ({"repo": "ext::sh -c touch% /tmp/pwned"}, "repo", "expected a local path"),
        ({"file_issue": "jira:X"}, "file_issue", "github:OWNER/REPO"),
        ({"file_issue": "dir:/etc/cron.d"}, "file_issue", "plain name"),
        ({"file_issue": "dir:../../home"}, "file_issue", "plain name"),
        ({"colour": "red"}, "colour", "unknown field"),
    ],
)
def test_bad_flags_get_400_naming_the_field(daemon: Daemon, repo, change, field, text):
    flag = {k: v for k, v in {**good_flag(repo), **change}.items() if v is not None}
    status, answer, _ = daemon.flag(flag)
    assert status == 400, answer
    assert answer["field"] == field and text in answer["error"], answer
    assert "\n" not in answer["error"], answer  # one line, whatever the client sent
    assert daemon.store.counts()["flags"] == 0


def test_git_url_is_mirrored_under_state_and_deduplicated(daemon: Daemon, repo):
    url = "file://" + str(repo[0])
    status, first, _ = daemon.flag(good_flag(repo) | {"repo": url, "good": "main~11", "bad": "main"})
    assert status == 202, first
    job = daemon.store.get(first["id"])
    assert job is not None and job.repo == url and job.good == repo[1][0]
    assert Path(job.repo_path).parent == daemon.settings.state / "repos"
    status, second, _ = daemon.flag(good_flag(repo) | {"repo": url})  # fetched again, same shas
    assert status == 202 and second["duplicate_of"] == first["id"]


def test_malformed_json_and_reversed_range(daemon: Daemon, repo):
    status, answer, _ = daemon.flag(b'{"repo": ')
    assert status == 400 and answer["field"] == "body" and "not JSON" in answer["error"]
    assert daemon.flag(b"[1, 2]")[1]["field"] == "body"
    status, answer, _ = daemon.flag(good_flag(repo, good=-1, bad=0))
    assert status == 400 and answer["field"] == "good" and "not an ancestor" in answer["error"]


def test_duplicates_by_sha_and_the_queue_bound(settings: Settings, repo):
    path, shas = repo
    with running(replace(settings, max_queue=2)) as daemon:
        first = daemon.flag(good_flag(repo))[1]
        # The same range named differently: resolved to shas first, so it is the same job.
        status, dup, _ = daemon.flag(good_flag(repo) | {"good": "main~11", "bad": "main"})
        assert status == 202 and dup["duplicate_of"] == first["id"] and dup["id"] == first["id"]
        assert daemon.flag(good_flag(repo, bad=5))[0] == 202
        status, full, headers = daemon.flag(good_flag(repo, bad=6))
        assert status == 429 and "queue is full" in full["error"] and headers["retry-after"] == "30"
        # (another source: the same body signed in the same second would be a replay of the first)
        assert daemon.flag(good_flag(repo, bad=5, source="again"))[0] == 202  # a duplicate adds no work: still accepted
        counts = daemon.store.counts()
        assert counts["jobs"] == 2 and counts["flags"] == 4


def test_cancel_and_status_page_escapes_everything(daemon: Daemon, repo):
    evil = '<script>alert("x")</script>'
    job = daemon.flag(good_flag(repo, source=evil))[1]["id"]
    status, page, headers = daemon.get("/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert evil not in page and html_escaped(evil) in page and job in page
    status, answer, _ = daemon.post(f"/v1/jobs/{job}/cancel", b"", {"Authorization": f"Bearer {SECRET}"})
    assert status == 202 and answer["state"] == "cancelled"
    assert daemon.get(f"/v1/jobs/{job}")[1]["state"] == "cancelled"
    assert daemon.post(f"/v1/jobs/{'f' * 16}/cancel", b"", {"Authorization": f"Bearer {SECRET}"})[0] == 404
    assert daemon.get("/v1/jobs/not-an-id")[0] == 404


def html_escaped(text: str) -> str:
    import html

    return html.escape(text)


def test_github_check_run_webhook(settings: Settings, repo):
    flag = good_flag(repo)
    payload = {
        "action": "completed",
        "check_run": {
            "conclusion": "failure",
            "output": {"title": "perf", "summary": "slower", "text": f"see below\n```attrib-flag\n{json.dumps(flag)}\n```\n"},
        },
        "repository": github_repository(),
    }
    with running(replace(settings, webhooks=webhook_rules(repo[0]))) as daemon:
        _check_run_answers(daemon, payload)


def _check_run_answers(daemon: Daemon, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    hook = {"X-GitHub-Event": "check_run", "X-Hub-Signature-256": github_signature(body, SECRET)}
    assert daemon.post("/v1/webhooks/github", body, {"X-GitHub-Event": "check_run"})[0] == 401
    assert daemon.post("/v1/webhooks/github", body, {**hook, "X-Hub-Signature-256": github_signature(body + b"x", SECRET)})[0] == 401
    assert daemon.store.counts()["flags"] == 0
    status, answer, _ = daemon.post("/v1/webhooks/github", body, hook)
    assert status == 202 and answer["duplicate_of"] is None
    passed = json.dumps({**payload, "check_run": {**payload["check_run"], "conclusion": "success"}}).encode()
    status, answer, _ = daemon.post(
        "/v1/webhooks/github", passed, {"X-GitHub-Event": "check_run", "X-Hub-Signature-256": github_signature(passed, SECRET)}
    )
    assert status == 200 and answer["id"] is None and "only completed failures" in answer["ignored"]
    assert daemon.store.counts()["flags"] == 1


def test_gitlab_pipeline_webhook(settings: Settings, repo):
    flag = good_flag(repo)
    payload = {
        "object_kind": "pipeline",
        "object_attributes": {"status": "failed", "source": "push", "variables": [{"key": "ATTRIB_FLAG", "value": json.dumps(flag)}]},
        "merge_request": None,
        "project": gitlab_project(),
    }
    with running(replace(settings, webhooks=webhook_rules(repo[0]))) as daemon:
        _pipeline_answers(daemon, payload)


def _pipeline_answers(daemon: Daemon, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    assert daemon.post("/v1/webhooks/gitlab", body, {})[0] == 401
    assert daemon.post("/v1/webhooks/gitlab", body, {"X-Gitlab-Token": "wrong-token-0123456789"})[0] == 401
    assert daemon.store.counts()["flags"] == 0
    status, answer, _ = daemon.post("/v1/webhooks/gitlab", body, {"X-Gitlab-Token": SECRET, "X-Gitlab-Event": "Pipeline Hook"})
    assert status == 202 and answer["id"]
    bad = json.dumps({**payload, "object_attributes": {"status": "failed", "variables": [{"key": "ATTRIB_FLAG", "value": "{"}]}})
    status, answer, _ = daemon.post("/v1/webhooks/gitlab", bad.encode(), {"X-Gitlab-Token": SECRET})
    assert status == 400 and answer["field"] == "body"


def test_burst_of_signed_flags_with_duplicates(daemon: Daemon, repo):
    """A few hundred signed flags from several threads, 10 distinct ranges: every one accepted
    and stored, one job per range. (benchmarks/daemon_burst.py measures the rate and memory.)"""
    distinct = [good_flag(repo, bad=b) for b in range(2, 12)]
    # Each flag its own source: the same body signed in the same second would be one request (a replay).
    flags = [{**distinct[i % len(distinct)], "source": f"burst {i}"} for i in range(200)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(daemon.flag, flags))
    assert [a[0] for a in answers] == [202] * len(flags), {a[0] for a in answers}
    by_range: dict[str, set[str]] = {}
    for flag, (_, answer, _) in zip(flags, answers, strict=True):
        by_range.setdefault(flag["bad"], set()).add(answer["id"])
    assert all(len(ids) == 1 for ids in by_range.values())  # each range is one job
    counts = daemon.store.counts()
    assert counts["flags"] == len(flags) and counts["jobs"] == len(distinct) and counts["jobs_queued"] == len(distinct)
    assert sum(a[1]["duplicate_of"] is None for a in answers) == len(distinct)
    assert daemon.store.integrity() == "ok"
