"""The daemon's settings and the command-line edges: one clear line for bad input."""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import run_cli

from attrib.cli import daemon as cli_client
from attrib.daemon import auth
from attrib.daemon.auth import sign as real_sign
from attrib.daemon.config import settings
from attrib.errors import ClientError, InputError
from attrib.evaluate.executors import ExecutorKind

SECRET = "cli-secret-0123456789abcdef"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    path.write_text(SECRET + "\n")
    return path


def test_config_file_with_command_line_over_it(tmp_path: Path, secret: Path):
    cfg = tmp_path / "d.toml"
    cfg.write_text(f'state = "st"\nsecret_file = "{secret}"\nport = 9000\nworkers = 2\nlease_s = 5\n')
    s = settings({"port": 9100, "workers": None}, cfg)
    assert (s.state, s.port, s.workers, s.lease_s, s.secret) == ((tmp_path / "st").resolve(), 9100, 2, 5.0, SECRET)
    # the executor is parsed where the settings are made, not compared as text in each job
    assert s.executor is ExecutorKind.LOCAL
    assert settings({"executor": "docker"}, cfg).executor is ExecutorKind.DOCKER


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('stat = "x"', "key 'stat': unknown key"),
        ("port = 'x'", "key 'port': expected an integer, got 'x'"),
        ("lease_s = true", "key 'lease_s': expected a number"),
        ("workers = -1", "--workers -1: expected at least 0"),
        ('executor = "kubernetes"', "--executor 'kubernetes': expected one of: local, docker, slurm"),
        ("port = [", "not a TOML file"),
    ],
)
def test_bad_config_names_the_key(tmp_path: Path, secret: Path, text: str, message: str):
    cfg = tmp_path / "d.toml"
    cfg.write_text(f'state = "st"\nsecret_file = "{secret}"\n{text}\n')
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("(", r"\(")):
        settings({}, cfg)


def test_short_or_missing_secret(tmp_path: Path):
    short = tmp_path / "short"
    short.write_text("abc")
    with pytest.raises(InputError, match="at least 16 characters"):
        settings({"state": tmp_path, "secret_file": short}, None)
    with pytest.raises(InputError, match="no such file"):
        settings({"state": tmp_path, "secret_file": tmp_path / "nope"}, None)
    with pytest.raises(InputError, match="--secret-file: missing"):
        settings({"state": tmp_path}, None)


def test_clients_fail_with_one_line(tmp_path: Path, secret: Path):
    res = run_cli("jobs", "--url", "http://127.0.0.1:9")
    assert res.code == 2 and "no secret: set ATTRIB_SECRET" in res.stderr
    # A port nobody listens on: bind one and close it without listening.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run_cli("status", "0123456789abcdef", "--url", f"http://127.0.0.1:{port}", "--secret-file", secret)
    assert res.code == 1 and "cannot reach the daemon at" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_daemon_refuses_a_port_in_use(tmp_path: Path, secret: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        res = run_cli("daemon", "--state", tmp_path / "st", "--secret-file", secret, "--port", str(port), timeout=60)
    assert res.code == 1 and f"--port {port}: cannot listen" in res.stderr


class _Scripted:
    """A loopback stand-in for the daemon: answers each request with the next scripted
    (status, headers, body) and records what arrived, so the tests assert on the wire."""

    def __init__(self, script: list[tuple[int, dict[str, str], bytes]]) -> None:
        self.script, self.seen = list(script), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.seen.append((self.command, self.path, dict(self.headers.items()), body))
                status, headers, answer = outer.script.pop(0)
                self.send_response(status)
                for k, v in {**headers, "Content-Length": str(len(answer))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_client, "BACKOFF_S", 0.0)


def test_a_signed_post_is_retried_after_a_5xx_signed_again(monkeypatch: pytest.MonkeyPatch, no_backoff: None):
    # Each attempt is signed when it is sent: a clock that moves one second per signature
    # makes that visible (signing once would send the same header twice).
    ticks = itertools.count(int(time.time()))
    monkeypatch.setattr(auth, "sign", lambda body, secret: real_sign(body, secret, timestamp=next(ticks)))
    daemon = _Scripted([(502, {}, b'{"error": "bad gateway"}'), (202, {}, b'{"id": "j1", "duplicate_of": null}')])
    try:
        body = b'{"repo": "r", "good": "a", "bad": "b", "recipe": "x.toml"}'
        status, answer = cli_client.request(daemon.url, "POST", "/v1/regressions", SECRET, body, sign_body=True)
    finally:
        daemon.close()
    assert (status, answer["id"]) == (202, "j1")
    assert [(m, p, b) for m, p, _, b in daemon.seen] == [("POST", "/v1/regressions", body)] * 2
    signatures = [h[auth.SIGNATURE_HEADER] for _, _, h, _ in daemon.seen]
    assert signatures[0] != signatures[1]
    for headers in (h for _, _, h, _ in daemon.seen):
        auth.verify_signature(headers, body, auth.SignaturePolicy(SECRET))  # raises Unauthorized if not
        assert "Authorization" not in headers  # a signed request does not also send the secret


@pytest.mark.parametrize(
    ("status", "headers", "answer", "error", "message"),
    [
        (400, {}, b'{"error": "field \'good\': expected a revision"}', InputError, "^submit: field 'good'"),
        (401, {}, b'{"error": "bad signature"}', ClientError, r"^submit: the daemon refused the secret \(bad signature\)$"),
        (429, {"Retry-After": "30"}, b'{"error": "the queue is full"}', ClientError, "^submit: the queue is full$"),
        (503, {"Retry-After": "30"}, b'{"error": "database locked"}', ClientError, "^submit: HTTP 503: database locked$"),
    ],
)
def test_answers_retrying_cannot_change_are_shown_at_once(no_backoff: None, status, headers, answer, error, message):
    daemon = _Scripted([(status, headers, answer)])
    try:
        got = cli_client.request(daemon.url, "POST", "/v1/regressions", SECRET, b"{}", sign_body=True)
    finally:
        daemon.close()
    assert len(daemon.seen) == 1 and got[0] == status
    with pytest.raises(error, match=message):
        cli_client.check_answer(*got, "submit")


def test_a_bearer_get_sends_the_secret_only_in_its_header(no_backoff: None):
    daemon = _Scripted([(500, {}, b"oops"), (500, {}, b"oops"), (500, {}, b"oops")])
    try:
        status, answer = cli_client.request(daemon.url, "GET", "/v1/jobs?state=queued", SECRET)
    finally:
        daemon.close()
    assert (status, answer) == (500, {"error": "oops"})  # the last answer once the attempts are spent
    assert [(m, p) for m, p, _, _ in daemon.seen] == [("GET", "/v1/jobs?state=queued")] * cli_client.ATTEMPTS
    assert all(h["Authorization"] == f"Bearer {SECRET}" for _, _, h, _ in daemon.seen)


def test_history_push_goes_through_the_same_client(tmp_path: Path, secret: Path):
    # The real command line against the stand-in: a 502 first (retried; the second attempt is
    # signed again and verifies), then the daemon's answer, printed as `history push` words it.
    results = tmp_path / "night.csv"
    results.write_text("commit,benchmark,value\n0123456789abcdef0123456789abcdef01234567,bench,1.5\n")
    env = {"title": "driver 550.1 -> 560.35: 3 series +6.0 % [5.6, 6.4]", "issue": "issue opened: x"}
    answer = json.dumps({"files": [{"name": str(results), "duplicate": False, "rows": 1}], "changes": [], "environment": [env]}).encode()
    daemon = _Scripted([(502, {}, b"bad gateway"), (200, {}, answer)])
    try:
        res = run_cli("history", "push", results, "--project", "demo", "--env", "driver=560.35", "--url", daemon.url, "--secret-file", secret)
    finally:
        daemon.close()
    assert res.code == 0, res.stderr
    assert res.stdout.strip().splitlines() == [
        f"{results}: 1 results added", "environment driver 550.1 -> 560.35: 3 series +6.0 % [5.6, 6.4]: not bisected; issue opened: x"
    ]
    assert [(m, p) for m, p, _, _ in daemon.seen] == [("POST", "/v1/results")] * 2
    for _, _, headers, body in daemon.seen:
        auth.verify_signature(headers, body, auth.SignaturePolicy(SECRET))
        assert json.loads(body)["project"] == "demo" and json.loads(body)["environment"] == {"driver": "560.35"}


def test_a_signers_header_does_not_follow_a_redirect_to_another_origin():
    from attrib.http import HttpClient

    storage = _Scripted([(200, {}, b'{"ok": true}')])
    origin = _Scripted([(302, {"Location": storage.url + "/elsewhere"}, b"")])
    try:
        http = HttpClient(origin.url, {}, target="t", token_var="v", error=ClientError, sleep=lambda s: None)
        got = http.send("GET", "/v1/jobs", sign=lambda data: {"X-Attrib-Signature-256": "t=1,v1=ab"})
    finally:
        origin.close()
        storage.close()
    assert (got.status, got.body) == (200, b'{"ok": true}')
    assert origin.seen[0][2]["X-Attrib-Signature-256"] == "t=1,v1=ab"
    assert "X-Attrib-Signature-256" not in storage.seen[0][2] and storage.seen[0][1] == "/elsewhere"
