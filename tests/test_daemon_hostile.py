"""The daemon under hostile input (issue 16), probed as an attacker or a careless CI would:
a real `attrib daemon` process on loopback, a real SQLite store, a real git repository. Each
probe must be refused in one line with a 4xx and store nothing; memory must stay bounded
under oversized uploads; a replay stores and starts nothing; one daemon owns its --state.
Every wait is a bounded poll; no assertion depends on how fast the machine is."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from daemon_proc import MIB, Proc, chunked_upload, daemon_process, github_repository, gitlab_project, webhook_tables
from test_daemon_api import good_flag
from test_daemon_api import repo as repo  # noqa: F401  (the module-scoped git repository fixture)

from attrib.daemon.auth import github_signature
from attrib.daemon.server import MAX_BODIES, MAX_BODY_BYTES
from attrib.demo import DEMO_RECIPE

SECRET = "hostile-secret-0123456789abcdef"


@pytest.fixture(scope="module")
def recipes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("recipes")
    (path / "demo.toml").write_text(DEMO_RECIPE)
    return path


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory, recipes: Path, repo) -> Iterator[Proc]:  # noqa: F811
    with daemon_process(tmp_path_factory.mktemp("hostile"), SECRET, recipes, tables=webhook_tables(repo[0])) as p:
        yield p


def refused(proc: Proc, status: int, answer: Any, before: dict[str, int], code: int = 400, field: str | None = None) -> str:
    """The answer was `code`, one line, naming `field`, and nothing was stored."""
    assert status == code, answer
    message = answer["error"]
    assert "\n" not in message, message
    if field is not None:
        assert answer.get("field") == field, answer
    assert proc.rows() == before, "a refused request stored something"
    return str(message)


# --- 1. bodies are bounded before anything else ---------------------------------------------


def test_oversized_chunked_uploads_are_refused_early_with_bounded_memory(proc: Proc):
    before, hwm = proc.rows(), proc.memory_kib()["VmHWM"]
    uploads, mib = 8, 24  # 192 MiB offered; the daemon may hold at most MAX_BODIES bodies of 1 MiB
    with ThreadPoolExecutor(max_workers=uploads) as pool:
        answers = list(pool.map(lambda _: chunked_upload(proc.address, mib), range(uploads)))
    assert answers == ["HTTP/1.1 413 Request Entity Too Large"] * uploads, answers
    # The peak (VmHWM) grew by far less than what was sent: bodies were never read whole.
    grown_mib = (proc.memory_kib()["VmHWM"] - hwm) / 1024
    assert grown_mib < MAX_BODIES * MAX_BODY_BYTES / MIB + 24, f"peak memory grew {grown_mib:.0f} MiB"
    # Declared too large: refused without reading; a webhook route is bounded the same way.
    status, answer, _ = proc.post("/v1/webhooks/gitlab", b"x", {"Content-Length": str(MAX_BODY_BYTES + 1)})
    assert "larger than" in refused(proc, status, answer, before, 413, "body")
    assert chunked_upload(proc.address, 3, "/v1/webhooks/github") == "HTTP/1.1 413 Request Entity Too Large"
    assert proc.rows() == before


# --- 2. timestamped signatures and replays ------------------------------------------------------


def test_a_replay_is_answered_with_the_first_answer_and_stores_nothing(proc: Proc, repo):
    body = json.dumps(good_flag(repo, bad=3, source="replay probe")).encode()
    t = int(time.time())
    status, first, _ = proc.flag(body, t)
    assert status == 202, first
    after_first = proc.rows()
    for _ in range(5):
        status, again, headers = proc.flag(body, t)
        assert status == 202 and again == first and headers.get("x-attrib-replay") == "1"
    assert proc.rows() == after_first
    # The job ends; the replay still starts nothing new.
    status, _, _ = proc.post(f"/v1/jobs/{first['id']}/cancel", b"", {"Authorization": f"Bearer {SECRET}"})
    assert status == 202
    ended = proc.rows()
    status, again, _ = proc.flag(body, t)
    assert status == 202 and again == first and proc.rows() == ended
    # The same flag signed afresh is a new request: merged by the usual rules (a new job, as the old one ended).
    status, fresh, _ = proc.flag(body, t + 1)
    assert status == 202 and fresh["id"] != first["id"] and proc.rows()["flags"] == ended["flags"] + 1


def test_stale_future_and_legacy_signatures_are_refused(proc: Proc, repo):
    body = json.dumps(good_flag(repo, bad=4, source="stale")).encode()
    before = proc.rows()
    now = int(time.time())
    for t in (now - 301 - 60, now + 301 + 60):  # outside the 300 s tolerance, with a margin for a slow machine
        status, answer, _ = proc.flag(body, t)
        assert "tolerance is 300 s" in refused(proc, status, answer, before, 401)
    status, answer, _ = proc.post("/v1/regressions", body, {"X-Attrib-Signature-256": github_signature(body, SECRET)})
    assert "sha256= form" in refused(proc, status, answer, before, 401)
    for bad in ("t=abc,v1=00", f"t={now}", f"v1={'0' * 64}", f"t={now},v1={'0' * 64}"):
        status, answer, _ = proc.post("/v1/regressions", body, {"X-Attrib-Signature-256": bad})
        refused(proc, status, answer, before, 401)


def test_legacy_signature_when_the_setting_allows_it(tmp_path: Path, recipes: Path, repo):
    with daemon_process(tmp_path, SECRET, recipes, allow_legacy_signature=True) as p:
        body = json.dumps(good_flag(repo)).encode()
        status, first, _ = p.post("/v1/regressions", body, {"X-Attrib-Signature-256": github_signature(body, SECRET)})
        assert status == 202, first
        stored = p.rows()
        status, again, _ = p.post("/v1/regressions", body, {"X-Attrib-Signature-256": github_signature(body, SECRET)})
        assert status == 202 and again == first and p.rows() == stored  # no time in it: a replay forever


def test_forge_redeliveries_are_replays(proc: Proc, repo):
    flag = good_flag(repo, bad=5, source="forge replay")
    check_run = {"action": "completed", "check_run": {"conclusion": "failure", "output": {"text": f"```attrib-flag\n{json.dumps(flag)}\n```"}},
                 "repository": github_repository()}  # fmt: skip
    body = json.dumps(check_run).encode()
    status, first, _ = proc.github(body, delivery="72d3162e-cc78-11e3-81ab-4c9367dc0958")
    assert status == 202, first
    stored = proc.rows()
    status, again, _ = proc.github(body, delivery="72d3162e-cc78-11e3-81ab-4c9367dc0958")  # GitHub's redeliver
    assert status == 202 and again == first
    status, again, _ = proc.github(body, delivery="another-id")  # the id is not signed: the body is known too
    assert status == 202 and again == first and proc.rows() == stored
    pipeline = {"object_kind": "pipeline", "object_attributes": {"status": "failed", "source": "push", "variables": [
        {"key": "ATTRIB_FLAG", "value": json.dumps({**flag, "source": "gitlab replay"})}]}, "project": gitlab_project()}  # fmt: skip
    status, first, _ = proc.gitlab(json.dumps(pipeline).encode(), uuid="a8d4e5f7-1111-4c5e-9a1e-1234567890ab")
    assert status == 202, first
    stored = proc.rows()
    status, again, _ = proc.gitlab(json.dumps(pipeline).encode(), uuid="a8d4e5f7-1111-4c5e-9a1e-1234567890ab")
    assert status == 202 and again == first and proc.rows() == stored


def test_attrib_submit_and_the_docs_curl_example_sign_the_new_way(proc: Proc, repo, tmp_path: Path):
    path, shas = repo
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET)
    res = run_cli("submit", "--repo", path, "--good", shas[0], "--bad", shas[6], "--recipe", "demo.toml",
                  "--url", proc.url, "--secret-file", secret_file)  # fmt: skip
    assert res.code == 0 and res.stdout.strip().endswith("queued"), res.stderr
    if not (shutil.which("openssl") and shutil.which("curl")):
        pytest.skip("openssl or curl not installed: the docs' shell example cannot run here")
    docs = (Path(__file__).parent.parent / "docs" / "daemon.md").read_text()
    script = docs.split("```sh\nbody=")[1].split("```")[0]  # the example under "Authentication"
    flag = json.dumps(good_flag(repo, bad=7))
    script = "body=" + script.replace("$(cat secret)", "$SECRET").replace("http://127.0.0.1:8765", proc.url)
    script = script.split("\n", 1)[1]  # our own flag instead of the example's
    out = subprocess.run(["bash", "-c", script], env={**os.environ, "body": flag, "SECRET": SECRET},
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    answer = json.loads(out.stdout)
    assert answer.get("id") and answer["duplicate_of"] is None, (out.stdout, out.stderr)


# --- 3. nesting is checked before the parser recurses --------------------------------------------


def test_deeply_nested_json_is_a_400_on_every_route(proc: Proc):
    deep = b"[" * 10_000 + b"]" * 10_000
    before = proc.rows()
    status, answer, _ = proc.flag(deep)
    assert "nested deeper than" in refused(proc, status, answer, before, 400, "body")
    status, answer, _ = proc.github(b'{"action": "completed", "check_run": ' + deep + b"}")
    assert "nested deeper than" in refused(proc, status, answer, before, 400, "body")
    status, answer, _ = proc.gitlab(b'{"object_kind": ' + b'{"a": ' * 10_000 + b"1" + b"}" * 10_001)
    assert "nested deeper than" in refused(proc, status, answer, before, 400, "body")
    # Inside a payload that is itself shallow: the flag in ATTRIB_FLAG is checked the same way.
    inner = {"object_kind": "pipeline", "object_attributes": {"status": "failed", "variables": [{"key": "ATTRIB_FLAG", "value": deep.decode()}]}}
    status, answer, _ = proc.gitlab(json.dumps(inner).encode())
    assert "nested deeper than" in refused(proc, status, answer, before, 400, "body")
    assert "RecursionError" not in proc.log.read_text() and "Traceback" not in proc.log.read_text()


# --- 4. filing targets are checked at the door -----------------------------------------------------


@pytest.mark.parametrize(
    ("target", "text"),
    [
        ("github:a/b/c", "expected github:OWNER/REPO"),
        ("github:../..", "owner '..'"),
        ("gitlab:../..", "path '..'"),
        ("gitlab:group/p.git", "path 'p.git'"),
        ("github:-acme/kernels", "owner '-acme'"),
        ("dir:../../etc", "plain name"),
    ],
)
def test_a_filing_target_that_names_no_project_is_refused(proc: Proc, repo, target: str, text: str):
    before = proc.rows()
    status, answer, _ = proc.flag(good_flag(repo, file_issue=target))
    assert text in refused(proc, status, answer, before, 400, "file_issue")


# --- 5. repository URLs -------------------------------------------------------------------------------


def test_plain_http_and_unfetchable_urls_say_what_is_wrong(proc: Proc, repo):
    before = proc.rows()
    status, answer, _ = proc.flag(good_flag(repo) | {"repo": "http://127.0.0.1:9/kernels.git"})
    assert "plain http:// is refused" in refused(proc, status, answer, before, 400, "repo")
    status, answer, _ = proc.flag(good_flag(repo) | {"repo": "file:///etc"})
    message = refused(proc, status, answer, before, 400, "repo")
    assert "'/etc' does not appear to be a git repository" in message and "repository exists" not in message


def test_http_urls_when_the_setting_allows_them(tmp_path: Path, recipes: Path, repo):
    with daemon_process(tmp_path, SECRET, recipes, allow_http_repos=True) as p:
        status, answer, _ = p.flag(good_flag(repo) | {"repo": "http://127.0.0.1:9/kernels.git"})
        # Now git is asked (and finds nobody listening on the discard port): its reason, in one line.
        assert status == 400 and "cannot fetch" in answer["error"] and "plain http" not in answer["error"], answer


# --- 6. one daemon per state directory ----------------------------------------------------------------


def test_a_second_daemon_on_the_same_state_exits_2_naming_the_first(tmp_path: Path, recipes: Path):
    with daemon_process(tmp_path / "one", SECRET, recipes) as first:
        config = tmp_path / "one" / "daemon.toml"
        res = run_cli("daemon", "--config", config, "--port", "0", timeout=120)
        assert res.code == 2, res.stderr
        assert res.stderr.strip() == (
            f"attrib: error: --state {first.state}: already served by the daemon with pid {first.pid} at {first.url};"
            " stop it or use another --state"
        )
        assert json.loads((first.state / "daemon.json").read_text()) == {"pid": first.pid, "url": first.url}
        first.popen.send_signal(signal.SIGTERM)
        assert first.popen.wait(timeout=60) == 0
    assert not (first.state / "daemon.json").exists()  # no address pointing at a dead process
    with daemon_process(tmp_path / "one", SECRET, recipes) as again:  # the lock went with the process
        assert again.pid != first.pid


def test_the_lock_does_not_outlive_a_killed_daemon(tmp_path: Path, recipes: Path):
    with daemon_process(tmp_path, SECRET, recipes) as first:
        first.popen.send_signal(signal.SIGKILL)
        first.popen.wait(timeout=60)
    (tmp_path / "state" / "daemon.json").unlink()  # stale after a kill -9: the next start rewrites it
    with daemon_process(tmp_path, SECRET, recipes) as again:
        assert json.loads((again.state / "daemon.json").read_text())["pid"] == again.pid


# --- 7. the smaller ones -------------------------------------------------------------------------------------


def test_a_malformed_query_is_401_before_it_is_400(proc: Proc):
    status, answer, _ = proc.get("/v1/jobs?limit=abc")
    assert status == 401, answer
    status, answer, _ = proc.get("/v1/jobs?limit=abc", secret=SECRET)
    assert status == 400 and answer["field"] == "limit" and "expected an integer from 1 to 1000" in answer["error"]
    assert proc.get("/v1/jobs?limit=2", secret=SECRET)[0] == 200


@pytest.mark.parametrize(
    ("change", "field", "text"),
    [
        ({"source": "ci\x00job"}, "source", "NUL character"),
        ({"source": "x" * 2001}, "source", "at most 2000 characters, got 2001"),
        ({"good": " main~11"}, "good", "no leading or trailing whitespace"),
        ({"bad": "main\n"}, "bad", "no leading or trailing whitespace"),
        ({"recipe": "demo.toml "}, "recipe", "no leading or trailing whitespace"),
    ],
)
def test_text_fields_say_what_is_wrong(proc: Proc, repo, change: dict[str, str], field: str, text: str):
    before = proc.rows()
    status, answer, _ = proc.flag(good_flag(repo) | change)
    assert text in refused(proc, status, answer, before, 400, field)


def test_daemon_help_shows_its_defaults():
    res = run_cli("daemon", "--help")
    assert res.code == 0
    text = " ".join(res.stdout.replace("│", " ").split())  # rich wraps the help in a box
    assert "Address to listen on (default: 127.0.0.1)" in text and "(default: 8765; 0: any free port)" in text, res.stdout


def test_the_bound_on_bodies_read_at_once(tmp_path: Path):
    """BoundedBodies in front of a tiny app on a real uvicorn: with two slots, two trickling
    uploads hold them, a third waits its turn and gets 503; a trickle slower than the read
    timeout gets 408. (The daemon's own bounds are the same code with larger numbers.)"""
    import socket
    import threading

    import uvicorn

    from attrib.daemon.bodies import BoundedBodies

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    bounded = BoundedBodies(app, max_bytes=1000, max_concurrent=2, slot_wait_s=0.5, read_timeout_s=5.0)
    server = uvicorn.Server(uvicorn.Config(bounded, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    end = time.monotonic() + 30
    while not server.started and time.monotonic() < end:
        time.sleep(0.02)
    address = sock.getsockname()

    def start_upload() -> socket.socket:
        s = socket.create_connection(address, timeout=30)
        s.sendall(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nab")  # 2 of 10 bytes, then nothing
        return s

    try:
        holders = [start_upload() for _ in range(2)]
        end = time.monotonic() + 30
        while bounded.reading < 2 and time.monotonic() < end:  # both are being read
            time.sleep(0.02)
        assert bounded.reading == 2
        third = start_upload()
        assert third.makefile("rb").readline().startswith(b"HTTP/1.1 503"), "the third body was read while two slots were held"
        for s in holders:  # the read timeout ends the trickles
            assert s.makefile("rb").readline().startswith(b"HTTP/1.1 408")
            s.close()
        third.close()
        fine = socket.create_connection(address, timeout=30)
        fine.sendall(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nok")
        assert fine.makefile("rb").readline().startswith(b"HTTP/1.1 200")
        fine.close()
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()

