"""A real `attrib daemon` process on 127.0.0.1 (an OS-chosen port) for the tests that probe it
as a client would: its memory is its own (/proc/PID), its log is a file, its exit is real.
--workers 0: jobs stay queued, so what a request stored can be counted exactly."""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attrib.daemon.auth import github_signature, sign

# The repository the tests' webhooks come from, shaped as GitHub's and GitLab's payloads give
# it (octokit/webhooks' payload examples; GitLab's "Pipeline events" docs): the daemon checks a
# webhook's flag against its sender (daemon/senders.py).
FORGE_REPO = "acme/kernels"
FORGE_ID = 186853002


def github_repository(name: str = FORGE_REPO, repo_id: int = FORGE_ID) -> dict[str, Any]:
    return {
        "id": repo_id, "name": name.split("/")[1], "full_name": name, "private": False, "fork": False,
        "html_url": f"https://github.com/{name}", "url": f"https://api.github.com/repos/{name}",
        "git_url": f"git://github.com/{name}.git", "ssh_url": f"git@github.com:{name}.git",
        "clone_url": f"https://github.com/{name}.git", "svn_url": f"https://github.com/{name}", "default_branch": "main",
    }  # fmt: skip


def gitlab_project(name: str = FORGE_REPO, project_id: int = 15) -> dict[str, Any]:
    return {
        "id": project_id, "name": name.split("/")[-1], "path_with_namespace": name, "web_url": f"https://gitlab.example.com/{name}",
        "git_ssh_url": f"git@gitlab.example.com:{name}.git", "git_http_url": f"https://gitlab.example.com/{name}.git",
        "namespace": name.split("/")[0], "visibility_level": 20, "default_branch": "main",
    }  # fmt: skip


def webhook_tables(repo_path: Path) -> str:
    """The daemon config letting FORGE_REPO's webhooks flag the tests' local repository."""
    return "".join(f'[webhooks."{forge}:{FORGE_REPO}"]\nrepos = ["{repo_path}"]\n' for forge in ("github", "gitlab"))


START_DEADLINE_S = 120.0  # generous: the machine may be busy; a start takes about a second
MIB = 1 << 20


@dataclass
class Proc:
    url: str
    pid: int
    state: Path
    log: Path
    secret: str
    popen: subprocess.Popen[bytes]

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        return host, int(port)

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
        return send(urllib.request.Request(self.url + path, data=body, method="POST", headers=headers))

    def flag(self, flag: dict[str, Any] | bytes, timestamp: int | None = None) -> tuple[int, Any, dict[str, str]]:
        body = flag if isinstance(flag, bytes) else json.dumps(flag).encode()
        return self.post("/v1/regressions", body, {"X-Attrib-Signature-256": sign(body, self.secret, timestamp)})

    def github(self, body: bytes, event: str = "check_run", delivery: str | None = None) -> tuple[int, Any, dict[str, str]]:
        headers = {"X-GitHub-Event": event, "X-Hub-Signature-256": github_signature(body, self.secret)}
        if delivery:
            headers["X-GitHub-Delivery"] = delivery
        return self.post("/v1/webhooks/github", body, headers)

    def gitlab(self, body: bytes, uuid: str | None = None) -> tuple[int, Any, dict[str, str]]:
        headers = {"X-Gitlab-Token": self.secret, "X-Gitlab-Event": "Pipeline Hook"}
        if uuid:
            headers["X-Gitlab-Event-UUID"] = uuid
        return self.post("/v1/webhooks/gitlab", body, headers)

    def get(self, path: str, secret: str | None = None) -> tuple[int, Any, dict[str, str]]:
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        return send(urllib.request.Request(self.url + path, headers=headers))

    def rows(self) -> dict[str, int]:
        """Rows of every table a request could add to."""
        conn = sqlite3.connect(f"file:{self.state / 'state.db'}?mode=ro", uri=True, timeout=30)
        try:
            return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("jobs", "flags", "deliveries", "transitions")}
        finally:
            conn.close()

    def memory_kib(self) -> dict[str, int]:
        out = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
        return out


def send(req: urllib.request.Request) -> tuple[int, Any, dict[str, str]]:
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            status, raw, headers = resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        status, raw, headers = exc.code, exc.read(), dict(exc.headers)
    if headers.get("content-type", "").startswith("application/json"):
        return status, json.loads(raw), headers
    return status, raw.decode(), headers


def write_config(root: Path, secret: str, recipes: Path, tables: str = "", **extra: Any) -> Path:
    """root/daemon.toml (state under root/state, the secret in root/secret): port 0, workers 0
    unless `extra` says otherwise; `tables` is TOML appended after the top-level keys."""
    (root / "secret").write_text(secret + "\n")
    lines = [f'state = "{root / "state"}"', f'secret_file = "{root / "secret"}"', f'recipes_dir = "{recipes}"']
    lines += [f"{k} = {json.dumps(v)}" for k, v in {"port": 0, "workers": 0, **extra}.items()]
    path = root / "daemon.toml"
    path.write_text("\n".join(lines) + "\n" + tables)
    return path


@contextmanager
def daemon_process(root: Path, secret: str, recipes: Path, **extra: Any) -> Iterator[Proc]:
    """Start `attrib daemon` with a config under `root`; SIGTERM and wait when done."""
    root.mkdir(parents=True, exist_ok=True)
    config = write_config(root, secret, recipes, **extra)
    state, log = root / "state", root / "daemon.log"
    with open(log, "ab") as out:
        popen = subprocess.Popen([sys.executable, "-m", "attrib", "daemon", "--config", str(config)], stdout=out, stderr=out)
    try:
        end = time.monotonic() + START_DEADLINE_S
        while not (state / "daemon.json").exists():
            assert popen.poll() is None, log.read_text()
            assert time.monotonic() < end, "the daemon did not start"
            time.sleep(0.05)
        url = json.loads((state / "daemon.json").read_text())["url"]
        yield Proc(url, popen.pid, state, log, secret, popen)
    finally:
        if popen.poll() is None:
            popen.send_signal(signal.SIGTERM)
            popen.wait(timeout=60)


def chunked_upload(address: tuple[str, int], mib: int, path: str = "/v1/regressions", headers: str = "") -> str:
    """A `Transfer-Encoding: chunked` POST of `mib` MiB in 1 MiB chunks, read while it is sent
    (the daemon answers before the upload ends); returns the answer's status line, or how the
    connection ended."""
    chunk = b"{" + b" " * (MIB - 2) + b"}"
    answer: list[str] = []
    with socket.create_connection(address, timeout=120) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n{headers}Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        reader = threading.Thread(target=lambda: answer.append(_first_line(sock)), daemon=True)
        reader.start()
        try:
            for _ in range(mib):
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # answered and closed before the upload ended
        reader.join(120)
    return answer[0] if answer else "no answer"


def _first_line(sock: socket.socket) -> str:
    try:
        return sock.makefile("rb").readline().decode("latin-1").strip() or "closed without an answer"
    except OSError as exc:
        return f"connection ended: {type(exc).__name__}"
