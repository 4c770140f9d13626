"""attrib/http.py writing an answer to a file as it arrives (`download_to`, `send(into=)`): the
way a prebuilt archive or an artifact's zip of gigabytes is fetched without holding it.

Real HTTP servers on loopback (http.server in a thread); one drops its first connection halfway
through the body, as a proxy or a storage host restarting does.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from attrib.errors import PrebuiltUnavailable, ResponseTooLarge
from attrib.http import HttpClient

BODY = hashlib.sha256(b"seed").digest() * (3 << 13)  # 768 KiB: several reads of READ_CHUNK


class Served:
    """What the server answers at /blob: `body`; the first `drops` GETs end after half of it
    (the Content-Length promising all of it); /missing is a 404."""

    def __init__(self, body: bytes, drops: int = 0) -> None:
        self.body, self.drops, self.gets = body, drops, 0
        self.url = ""


@contextmanager
def serving(served: Served) -> Iterator[Served]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            served.gets += 1
            if self.path != "/blob":
                self.send_response(404)
                self.send_header("Content-Length", "9")
                self.end_headers()
                self.wfile.write(b"not here\n")
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(served.body)))
            self.end_headers()
            if served.gets <= served.drops:
                self.wfile.write(served.body[: len(served.body) // 2])
                self.close_connection = True  # HTTP/1.0: the socket closes after this handler
                return
            self.wfile.write(served.body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    served.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield served
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def _client(url: str, attempts: int = 3) -> HttpClient:
    return HttpClient(url, {}, target="store", token_var="", error=PrebuiltUnavailable, sleep=lambda s: None, max_attempts=attempts)


def test_a_download_is_written_to_the_file_whole(tmp_path):
    with serving(Served(BODY)) as served:
        dest = tmp_path / "archive"
        assert _client(served.url).download_to("/blob", dest, need="read", max_bytes=len(BODY)) == len(BODY)
    assert dest.read_bytes() == BODY


def test_a_connection_dropped_mid_body_is_retried_and_the_file_starts_again(tmp_path):
    """The first answer stops halfway; http.client's read1 says so only by ending early. Taken
    for the whole body, it was a truncated archive; appended to, the file would be 1.5x."""
    with serving(Served(BODY, drops=1)) as served:
        client = _client(served.url)
        dest = tmp_path / "archive"
        assert client.download_to("/blob", dest, need="read", max_bytes=len(BODY)) == len(BODY)
        assert dest.read_bytes() == BODY and client.attempts == 2 and served.gets == 2
        # into memory too: the bytes are whole, not the half that came first
        served.gets, served.drops = 0, 1
        assert client.download("/blob", need="read", max_bytes=len(BODY)) == BODY


def test_drops_that_outlast_the_retries_are_an_error_and_leave_no_file(tmp_path):
    with serving(Served(BODY, drops=5)) as served:
        dest = tmp_path / "archive"
        with pytest.raises(PrebuiltUnavailable, match=r"connection failed \(IncompleteRead\) after 2 attempts"):
            _client(served.url, attempts=2).download_to("/blob", dest, need="read", max_bytes=len(BODY))
    assert not dest.exists()


def test_a_too_long_answer_leaves_no_partial_file(tmp_path):
    with serving(Served(BODY)) as served:
        dest = tmp_path / "archive"
        with pytest.raises(ResponseTooLarge, match=r"store: GET /blob: the answer is longer than 100000 bytes"):
            _client(served.url).download_to("/blob", dest, need="read", max_bytes=100_000)
        assert not dest.exists()
        got = _client(served.url).send("GET", "/blob", max_bytes=len(BODY), into=dest)  # the same file, enough room
        assert got.status == 200 and got.body == b"" and dest.read_bytes() == BODY


def test_an_answer_that_is_not_2xx_leaves_no_file(tmp_path):
    with serving(Served(BODY)) as served:
        dest = tmp_path / "archive"
        with pytest.raises(PrebuiltUnavailable, match="404 Not Found"):
            _client(served.url).download_to("/missing", dest, need="read", max_bytes=len(BODY))
        assert not dest.exists()
        dest.write_bytes(b"an earlier file")
        got = _client(served.url).send("GET", "/missing", into=dest)
        assert got.status == 404 and got.body == b"not here\n" and not dest.exists()

