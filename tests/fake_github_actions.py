"""A fake GitHub Actions on loopback, strict about the REST contract attrib/github_actions.py
uses (GitHub itself cannot be reached from here): tests/test_prebuilt_github.py,
tests/test_daemon_github_artifacts.py and benchmarks/prebuilt_builds.py.

Two real HTTP servers (http.server in threads, OS-chosen ports). The API answers only

  GET /repos/{repo}/actions/workflows/{workflow}/runs?head_sha=<40 hex>&status=success
  GET /repos/{repo}/actions/runs/{run_id}/artifacts?name=<name>
  GET /repos/{repo}/actions/artifacts/{artifact_id}/zip          -> 302 to the storage host

and only with `Authorization: Bearer <token>` (401 otherwise), `Accept:
application/vnd.github+json` and `X-GitHub-Api-Version: 2022-11-28` (400 otherwise); any other
path or a missing query parameter is 404/422. The storage host serves a zip only to a request
without an Authorization header (400 otherwise): a token must never follow the redirect.
`fail` makes the API answer that status; `rate_limited` answers 403 with GitHub's primary rate
limit headers (remaining 0, the reset an hour away). Every request is recorded in `seen`.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import re
import tarfile
import threading
import time
import urllib.parse
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = "ghs_prebuilt-test-token-0123456789"
REPO = "acme/kernels"
WORKFLOW = "build.yml"
ACCEPT = "application/vnd.github+json"
API_VERSION = "2022-11-28"


@dataclass
class Seen:
    server: str  # "api" or "storage"
    path: str
    query: dict[str, str]
    authorization: str | None


@dataclass
class FakeActions:
    token: str = TOKEN
    runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by head sha, newest first
    artifacts: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # by run id
    zips: dict[int, bytes] = field(default_factory=dict)  # by artifact id
    fail: int | None = None
    rate_limited: bool = False
    seen: list[Seen] = field(default_factory=list)
    api_url: str = ""
    storage_url: str = ""
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1000))

    def run(self, sha: str, conclusion: str = "success") -> int:
        run_id = next(self._ids)
        self.runs.setdefault(sha, []).insert(0, {"id": run_id, "head_sha": sha, "status": "completed", "conclusion": conclusion})
        return run_id

    def publish(self, sha: str, zipped: bytes, name: str, *, digest: str | None = "auto", expired: bool = False) -> int:
        """A successful run of `sha` with an artifact `name` holding `zipped`; `digest`: "auto"
        (the zip's sha256), None (an older server: no digest field) or the hex to claim."""
        run_id, artifact_id = self.run(sha), next(self._ids)
        item: dict[str, Any] = {
            "id": artifact_id, "name": name, "size_in_bytes": len(zipped), "expired": expired,
            "archive_download_url": f"{self.api_url}/repos/{REPO}/actions/artifacts/{artifact_id}/zip",
            "workflow_run": {"id": run_id, "head_sha": sha},
        }  # fmt: skip
        if digest is not None:
            item["digest"] = "sha256:" + (hashlib.sha256(zipped).hexdigest() if digest == "auto" else digest)
        self.artifacts.setdefault(run_id, []).append(item)
        self.zips[artifact_id] = zipped
        return artifact_id

    def add(self, run_id: int, artifact_id: int, zipped: bytes, name: str = "attrib-flag") -> None:
        """An artifact `name` of the run `run_id` the test names (a webhook's run): the
        daemon's case (tests/test_daemon_github_artifacts.py)."""
        self.artifacts.setdefault(run_id, []).append(
            {"id": artifact_id, "name": name, "size_in_bytes": len(zipped), "expired": False,
             "archive_download_url": f"{self.api_url}/repos/{REPO}/actions/artifacts/{artifact_id}/zip",
             "workflow_run": {"id": run_id}}
        )  # fmt: skip
        self.zips[artifact_id] = zipped

    def by(self, server: str, kind: str = "") -> list[Seen]:
        return [s for s in self.seen if s.server == server and kind in s.path]


def _handler(fake: FakeActions, server: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: bytes, kind: str = "application/json", extra: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for k, v in {"Content-Type": kind, "Content-Length": str(len(body)), **(extra or {})}.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, data: Any, extra: dict[str, str] | None = None) -> None:
            self._answer(status, json.dumps(data).encode(), extra=extra)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            url = urllib.parse.urlsplit(self.path)
            query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
            auth = self.headers.get("Authorization")
            fake.seen.append(Seen(server, url.path, query, auth))
            if server == "storage":
                m = re.fullmatch(r"/blob/(\d+)", url.path)
                if auth is not None:
                    return self._answer(400, b"credentials sent to the storage host", "text/plain")
                if m is None or int(m.group(1)) not in fake.zips or query.get("sig") != "signed":
                    return self._answer(404, b"no such blob", "text/plain")
                return self._answer(200, fake.zips[int(m.group(1))], "application/zip")
            if auth != f"Bearer {fake.token}":
                return self._json(401, {"message": "Bad credentials"})
            if self.headers.get("Accept") != ACCEPT or self.headers.get("X-GitHub-Api-Version") != API_VERSION:
                return self._json(400, {"message": "expected the GitHub media type and API version headers"})
            if fake.rate_limited:
                reset = str(int(time.time()) + 3600)
                return self._json(403, {"message": "API rate limit exceeded"}, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset})
            if fake.fail is not None:
                return self._json(fake.fail, {"message": "Resource not accessible by integration"})
            return self._route(url.path, query)

        def _route(self, path: str, query: dict[str, str]) -> None:
            repo = re.escape(REPO)
            if re.fullmatch(rf"/repos/{repo}/actions/workflows/{re.escape(WORKFLOW)}/runs", path):
                sha = query.get("head_sha", "")
                if not re.fullmatch(r"[0-9a-f]{40}", sha) or query.get("status") != "success":
                    return self._json(422, {"message": "expected head_sha and status=success"})
                runs = [r for r in fake.runs.get(sha, []) if r["conclusion"] == "success"]
                return self._json(200, {"total_count": len(runs), "workflow_runs": runs})
            if m := re.fullmatch(rf"/repos/{repo}/actions/runs/(\d+)/artifacts", path):
                if "name" not in query:
                    return self._json(422, {"message": "attrib always asks by name"})
                found = [a for a in fake.artifacts.get(int(m.group(1)), []) if a["name"] == query["name"]]
                return self._json(200, {"total_count": len(found), "artifacts": found})
            if (m := re.fullmatch(rf"/repos/{repo}/actions/artifacts/(\d+)/zip", path)) and int(m.group(1)) in fake.zips:
                return self._answer(302, b"", extra={"Location": f"{fake.storage_url}/blob/{m.group(1)}?sig=signed"})
            return self._json(404, {"message": "Not Found"})

    return Handler


@contextmanager
def serving() -> Iterator[FakeActions]:
    fake = FakeActions()
    servers = {name: ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake, name)) for name in ("api", "storage")}
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True) for s in servers.values()]
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


def zip_of(files: dict[str, bytes], mode: int = 0o755) -> bytes:
    """A zip as upload-artifact makes one: each file a member (here with a Unix mode)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o100000 | mode) << 16
            zf.writestr(info, data)
    return buf.getvalue()


def tar_gz(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def recipe_table(api_url: str, token_env: str, artifact: str = "bench-{sha}") -> str:
    return (
        f'prebuilt_github = {{ repo = "{REPO}", workflow = "{WORKFLOW}", artifact = "{artifact}", '
        f'api_url = "{api_url}", token_env = "{token_env}" }}\n'
    )
