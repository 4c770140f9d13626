"""Connections that never become requests (issue 20), against a real `attrib daemon` on
loopback: silent sockets and incomplete request heads must not take the room real requests
need, one address cannot hold more than its share, and a head that does not arrive in time
ends its connection. The attacking sockets come from other loopback addresses (127.0.0.2 and
up: Linux routes all of 127/8 to lo) so that the real requests from 127.0.0.1 are another
client. Every wait is a bounded poll; every socket is closed when the test ends."""

from __future__ import annotations

import json
import resource
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from daemon_proc import Proc, daemon_process
from test_daemon_api import good_flag
from test_daemon_api import repo as repo  # noqa: F401  (the module-scoped git repository fixture)

from attrib.daemon.server import MAX_PER_CLIENT
from attrib.demo import DEMO_RECIPE

SECRET = "connections-secret-0123456789abcdef"
HELD = 500
PER_ADDRESS = 25  # below MAX_PER_CLIENT: these sockets test the shared budget, not the cap
PARTIAL_HEAD = b"POST /v1/regressions HTTP/1.1\r\nHost: x\r\nX-Slow: "


@pytest.fixture(scope="module", autouse=True)
def _files_for_the_sockets() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = HELD + MAX_PER_CLIENT + 200
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"the hard limit on open files is {hard}; this test holds {wanted}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture(scope="module")
def recipes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("recipes")
    (path / "demo.toml").write_text(DEMO_RECIPE)
    return path


@contextmanager
def held(proc: Proc, count: int, first_address: int, per_address: int) -> Iterator[list[socket.socket]]:
    """`count` connections from 127.0.0.<first_address> on; even ones silent, odd ones having
    sent part of a request head."""
    with ExitStack() as stack:
        socks = []
        for i in range(count):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind((f"127.0.0.{first_address + i // per_address}", 0))
            s.settimeout(30)
            s.connect(proc.address)
            if i % 2:
                s.sendall(PARTIAL_HEAD)
            socks.append(s)
        yield socks


def closed_by_daemon(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True  # reset
    finally:
        s.setblocking(True)


def count_closed(socks: list[socket.socket], expected: int, wait_s: float = 30.0) -> int:
    """How many the daemon closed, polled until `expected` or the wait ends (bounded)."""
    end = time.monotonic() + wait_s
    while True:
        closed = sum(closed_by_daemon(s) for s in socks)
        if closed >= expected or time.monotonic() > end:
            return closed
        time.sleep(0.1)


def test_idle_and_trickling_sockets_leave_room_for_a_signed_flag(tmp_path: Path, recipes: Path, repo):
    # A long head deadline: what is shown here is room, not sockets timed out before the flag.
    with daemon_process(tmp_path, SECRET, recipes, head_timeout_s=600.0) as proc, held(proc, HELD, 2, PER_ADDRESS) as socks:
        status, answer, _ = proc.flag(good_flag(repo, bad=3, source="under 500 idle sockets"))
        assert status == 202, answer
        status, jobs, _ = proc.get("/v1/jobs", secret=SECRET)
        assert status == 200 and [j["id"] for j in jobs["jobs"]] == [answer["id"]]
        assert count_closed(socks, 0, wait_s=0) == 0, "the daemon dropped held sockets instead of making room"


def test_one_address_holds_at_most_its_share(tmp_path: Path, recipes: Path, repo):
    with daemon_process(tmp_path, SECRET, recipes, head_timeout_s=600.0) as proc:
        extra = 8
        with held(proc, MAX_PER_CLIENT + extra, 200, MAX_PER_CLIENT + extra) as socks:
            assert count_closed(socks, extra) == extra
            time.sleep(0.5)  # and no more than those (a bounded look, not a speed figure)
            assert count_closed(socks, extra + 1, wait_s=0) == extra
            assert proc.flag(good_flag(repo, bad=4, source="another address"))[0] == 202
        # The closed ones were counted out: the address may connect again.
        with held(proc, MAX_PER_CLIENT, 200, MAX_PER_CLIENT) as again:
            assert count_closed(again, 1, wait_s=1.0) == 0


def test_a_head_that_does_not_arrive_in_time_ends_its_connection(tmp_path: Path, recipes: Path, repo):
    with daemon_process(tmp_path, SECRET, recipes, head_timeout_s=1.0) as proc, held(proc, 4, 2, 4) as socks:
        assert count_closed(socks, len(socks), wait_s=60.0) == len(socks)
        # A complete request is answered, and its connection, idle afterwards, is ended too.
        with socket.create_connection(proc.address, timeout=30) as s:
            s.sendall(b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\n\r\n")
            reader = s.makefile("rb")
            assert reader.readline().startswith(b"HTTP/1.1 401")
            while reader.readline() not in (b"\r\n", b""):
                pass
            assert json.loads(reader.read1(4096))["error"].startswith("missing Authorization")
            assert count_closed([s], 1, wait_s=60.0) == 1
        assert "Traceback" not in proc.log.read_text()
