"""The daemon under hostile and careless input, round three (issue 33): each probe against a
real `attrib daemon` process on loopback (tests/daemon_proc.py), written to fail on the code
before the issue. Every wait is bounded; the only clocks are the clients' timeouts, which the
old code ran past (a stall) and the new one does not come near."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import spec
from daemon_proc import Proc, daemon_process, github_repository, webhook_tables
from test_daemon_api import good_flag
from test_daemon_api import repo as repo  # noqa: F401  (the module-scoped git repository fixture)

from attrib.daemon.server import MAX_PER_CLIENT
from attrib.demo import DEMO_RECIPE, generate_tree

SECRET = "careless-secret-0123456789abcdef"


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory, repo) -> Iterator[Proc]:  # noqa: F811
    recipes = tmp_path_factory.mktemp("careless-recipes")
    (recipes / "demo.toml").write_text(DEMO_RECIPE)
    with daemon_process(tmp_path_factory.mktemp("careless"), SECRET, recipes, tables=webhook_tables(repo[0])) as p:
        yield p


# --- 1. untrusted text is read in linear time, off the event loop -------------------------------


def _check_run(text: str) -> bytes:
    run = {"conclusion": "failure", "output": {"title": "perf", "summary": "s", "text": text}}
    return json.dumps({"action": "completed", "check_run": run, "repository": github_repository()}).encode()


def test_a_hostile_check_run_does_not_stall_the_daemon(proc: Proc, repo):
    """GitHub allows 65,535 characters of output text: all newlines after an opening fence
    took the old pattern hours. The client's timeout (60 s) is the only clock here: the old
    daemon answered neither request within it."""
    hostile = _check_run("```attrib-flag\n" + "\n" * 65_500)
    answers: dict[str, object] = {}
    sender = threading.Thread(target=lambda: answers.update(hostile=proc.github(hostile)[:2]))
    sender.start()
    status, page, _ = proc.get("/v1/jobs", SECRET)  # sent while the hostile one is in flight
    sender.join(120)
    assert status == 200 and page == {"jobs": []}
    assert answers["hostile"] == (200, {"id": None, "duplicate_of": None, "ignored": "the check run's output has no ```attrib-flag block"})
    # and a real block in the same place is still a flag
    text = "perf regressed\n```attrib-flag\n" + json.dumps(good_flag(repo)) + "\n```\n"
    status, answer, _ = proc.github(_check_run(text))
    assert status == 202 and answer["id"], answer


def test_a_hostile_body_of_escaped_quotes_is_answered(proc: Proc):
    """A signed body that opens a string and escapes every quote after it: the old nesting
    check took quadratic time (1 MiB: hours) before the parser refused it."""
    body = b'{"a": "' + b'\\"' * ((1 << 20) // 2 - 8)
    status, answer, _ = proc.flag(body)
    assert status == 400 and answer["field"] == "body" and "not JSON" in answer["error"], answer



# --- 5. a filing target that cannot be a file name, and a filing that fails ------------------------


def test_a_dir_name_no_file_system_takes_is_refused_at_the_door(proc: Proc, repo):
    before = proc.rows()
    status, answer, _ = proc.flag(good_flag(repo, file_issue="dir:" + "a" * 300))
    assert status == 400 and answer["field"] == "file_issue", answer
    assert "300 bytes; expected at most 255" in answer["error"] and "\n" not in answer["error"]
    assert proc.rows() == before
    status, answer, _ = proc.flag(good_flag(repo, file_issue="dir:" + "a" * 255))
    assert status == 202, answer


def _wait(what: str, check: Callable[[], Any], deadline_s: float = 600.0) -> Any:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_filing_that_fails_keeps_the_result_with_the_job(tmp_path: Path):
    """The real bisection of a planted regression, filed to dir:gone, where --state/filed/gone
    is a dangling link: the tracker's write fails with an OSError. The job is done, its result
    and report are served, and `filing` says what failed (the old worker failed the job and
    dropped its result)."""
    tree = generate_tree(tmp_path / "repo", spec(commits=8, culprits=((5, 10),), broken=None))
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "demo.toml").write_text(DEMO_RECIPE)
    with daemon_process(tmp_path / "d", SECRET, recipes, workers=1, executor="local") as p:
        (p.state / "filed").mkdir(exist_ok=True)
        (p.state / "filed" / "gone").symlink_to(tmp_path / "no" / "such" / "place")
        flag = {"repo": str(tree.path), "good": "main~8", "bad": "main", "recipe": "demo.toml", "file_issue": "dir:gone"}
        status, answer, _ = p.flag(flag)
        assert status == 202, answer

        def finished() -> dict[str, Any] | None:
            job = p.get(f"/v1/jobs/{answer['id']}", SECRET)[1]
            return job if job["state"] in ("done", "failed", "cancelled") else None

        job = _wait("the job to finish", finished)
        assert job["state"] == "done", job
        assert job["result"] is not None and [c["commit"] for c in job["result"]["culprits"]] == [tree.culprits[0]]
        assert job["filing"].startswith("filing to dir:") and "failed" in job["filing"] and "\n" not in job["filing"], job
        assert p.get(f"/v1/jobs/{answer['id']}/report", SECRET)[0] == 200


# --- 6. one repository, one identity ---------------------------------------------------------------


def test_spellings_of_one_repository_url_are_one_job_and_one_mirror(proc: Proc, repo):
    path, shas = repo
    spellings = [f"file://{path}", f"file://{path}/", f"file://{path}//", f"file:///{path}",
                 f"file://{str(path).replace('/', '/./')}", f"file://localhost{path}", f"file://{path}/.git"]  # fmt: skip
    ids = set()
    for url in spellings:
        status, answer, _ = proc.flag({"repo": url, "good": shas[2], "bad": shas[9], "recipe": "demo.toml"})
        assert status == 202, (url, answer)
        ids.add(answer["id"])
    assert len(ids) == 1, ids
    assert len(list((proc.state / "repos").glob("*.git"))) == 1
    status, job, _ = proc.get(f"/v1/jobs/{ids.pop()}", SECRET)
    assert job["repo"] == f"file://{path}"


# --- 8. two framings: answer, then close --------------------------------------------------------


def _read_to_end(sock: socket.socket, deadline_s: float = 20.0) -> tuple[bytes, bool]:
    """What the daemon sent until it closed the connection (True) or the deadline passed (False)."""
    sock.settimeout(1.0)
    data, end = b"", time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            return data, True
        data += chunk
    return data, False


def test_a_request_with_content_length_and_transfer_encoding_closes_its_connection(proc: Proc):
    """The request after it on the same connection (here a pipelined GET) is never served: a
    proxy that framed the first by Content-Length would have sent it as part of the body."""
    smuggled = f"GET /v1/jobs HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {SECRET}\r\n\r\n".encode()
    first = (b"POST /v1/regressions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
             b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")  # fmt: skip
    with socket.create_connection(proc.address, timeout=30) as sock:
        sock.sendall(first + smuggled)
        data, closed = _read_to_end(sock)
    assert closed, data
    assert data.count(b"HTTP/1.1 ") == 1 and data.startswith(b"HTTP/1.1 401 "), data
    assert b"connection: close" in data.lower()
    # one framing is served as before, and the connection stays open for the next request
    with socket.create_connection(proc.address, timeout=30) as sock:
        sock.sendall(smuggled + smuggled)
        data, closed = _read_to_end(sock, deadline_s=3.0)
    assert data.count(b"HTTP/1.1 200 ") == 2 and not closed, data


# --- 9. one address behind a proxy: the oldest idle connection makes room ----------------------------


def _closed(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True  # reset
    finally:
        s.setblocking(True)


def test_a_flag_from_an_address_at_its_cap_takes_the_oldest_idle_connections_place(proc: Proc, repo):
    """Behind a proxy every client has one address: with MAX_PER_CLIENT idle keep-alive sockets
    open from it, the old daemon reset the next connection (a signed flag) at once."""
    socks = [socket.create_connection(proc.address, timeout=30) for _ in range(MAX_PER_CLIENT)]
    try:
        socks[-1].sendall(b"GET /v1/jobs HTTP/1.1\r\nHost: t\r\n")  # an unfinished head is idle too
        time.sleep(0.5)  # every one registered before the flag (a bounded wait, not a speed figure)
        assert not any(_closed(s) for s in socks)
        status, answer, _ = proc.flag(good_flag(repo, bad=5, source="one address, cap reached"))
        assert status == 202, answer
        closed = _wait("the oldest idle socket to be closed", lambda: [i for i, s in enumerate(socks) if _closed(s)], 30.0)
        assert closed == [0], closed
    finally:
        for s in socks:
            s.close()


# --- 7. a deadline covers the whole fetch, reads included --------------------------------------------


class _Trickle:
    """A fake GitHub on loopback whose artifact download sends its zip one byte a second."""

    def __init__(self) -> None:
        self.dropped: list[float] = []  # when the reader went away (monotonic)
        trickle = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path.startswith("/repos/acme/kernels/actions/runs/7/artifacts"):
                    body = json.dumps({"artifacts": [{"id": 9, "name": "attrib-flag", "size_in_bytes": 300, "expired": False}]}).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(200)
                self.send_header("Content-Length", "300")
                self.end_headers()
                try:
                    for _ in range(300):
                        self.wfile.write(b"P")
                        self.wfile.flush()
                        time.sleep(1.0)
                except OSError:
                    trickle.dropped.append(time.monotonic())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_a_trickling_artifact_download_ends_with_its_deadline(tmp_path: Path):
    """The fetch answers 502 at its deadline, and the thread that read it has stopped reading
    then too: the old client kept reading a byte every second (its 10 s timeout was per read),
    holding one of the pool's 4 threads long after the webhook was answered."""
    trickle = _Trickle()
    token = tmp_path / "token"
    token.write_text("ghs_test-token\n")
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    try:
        with daemon_process(tmp_path / "d", SECRET, recipes, github_api_url=trickle.url, github_token_file=str(token)) as p:
            run = {"id": 7, "conclusion": "failure", "html_url": "https://github.com/acme/kernels/actions/runs/7", "head_repository": github_repository()}
            body = json.dumps({"action": "completed", "workflow_run": run, "repository": github_repository()}).encode()
            status, answer, _ = p.github(body, event="workflow_run")
            answered = time.monotonic()
            assert status == 502 and "acme/kernels" in answer["error"], answer
            _wait("the trickled download to be dropped", lambda: trickle.dropped, deadline_s=10.0)
            assert trickle.dropped[0] - answered < 10.0
    finally:
        trickle.server.shutdown()
