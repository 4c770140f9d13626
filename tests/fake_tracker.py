"""A strict local stand-in for the parts of the GitHub and GitLab REST APIs attrib uses.

A real HTTP server on 127.0.0.1 (ThreadingHTTPServer, port 0, in a thread). Strict about the
contract: 401 on a missing or wrong token, 422 (GitHub) / 400 (GitLab) on unknown fields or
wrong types in a JSON body, 404 on unknown routes or projects. It can be told to fail the next
N requests with 500 or 429 (+ Retry-After), or to process the next POST and then drop the
connection without answering (the case where a naive retry files twice). It records what it
received so tests assert on that, not on what the client believes it sent.

GitLab's project uploads (POST /projects/:id/uploads) are strict too: auth first, then 400
unless the body is multipart/form-data with exactly one part, named `file`, with a filename and
content that starts with the PNG magic bytes. Failures can be aimed at one route (`path=`), so a
test can fail the upload and let the issue through."""

from __future__ import annotations

import email.parser
import email.policy
import json
import re
import socket
import threading
import urllib.parse
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

GITHUB_ISSUE_FIELDS = {"title": str, "body": str, "labels": list, "assignees": list}
GITHUB_COMMENT_FIELDS = {"body": str}
GITLAB_ISSUE_FIELDS = {"title": str, "description": str, "labels": str}
GITLAB_NOTE_FIELDS = {"body": str}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@dataclass
class Issue:
    number: int
    title: str
    body: str
    labels: list[str]
    state: str = "open"
    comments: list[str] = field(default_factory=list)


@dataclass
class Received:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    headers: dict[str, str]
    raw: bytes = b""  # the body as sent (multipart uploads are not JSON)


@dataclass
class Upload:
    project: str
    filename: str
    content_type: str  # the part's own Content-Type
    content: bytes
    secret: str

    @property
    def url(self) -> str:
        return f"/uploads/{self.secret}/{self.filename}"


class FakeTracker:
    def __init__(self, token: str, projects: tuple[str, ...] = ("acme/kernels",)) -> None:
        self.token = token
        self.issues: dict[str, list[Issue]] = {p: [] for p in projects}
        self.logins: dict[str, str] = {}  # commit sha -> GitHub login
        self.received: list[Received] = []
        self.uploads: list[Upload] = []  # GitLab project uploads that were accepted
        self.lock = threading.Lock()
        self._fail: list[tuple[int, str | None, str | None]] = []  # (status, Retry-After, path part)
        self._drop_posts = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeTracker:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def fail_next(self, n: int, status: int = 500, retry_after: str | None = None, path: str | None = None) -> None:
        """Fail the next n requests (only those whose path contains `path`, when given)."""
        with self.lock:
            self._fail += [(status, retry_after, path)] * n

    def drop_next_post(self, n: int = 1) -> None:
        """Process the next n POSTs (store what they create), then close without answering."""
        with self.lock:
            self._drop_posts += n

    def posts(self) -> list[Received]:
        return [r for r in self.received if r.method == "POST"]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        tracker = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet tests

            def _reply(self, status: int, data: Any = None, headers: dict[str, str] | None = None) -> None:
                raw = b"" if data is None else json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def _handle(self, method: str) -> None:
                parsed = urllib.parse.urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = ValueError
                headers = {k.lower(): v for k, v in self.headers.items()}  # header names are case-insensitive
                rec = Received(method, parsed.path, urllib.parse.parse_qs(parsed.query), body, headers, raw)
                with tracker.lock:
                    tracker.received.append(rec)
                    due = [i for i, (_, _, part) in enumerate(tracker._fail) if part is None or part in parsed.path]
                    fail = tracker._fail.pop(due[0])[:2] if due else None
                    drop = method == "POST" and tracker._drop_posts > 0 and fail is None
                    if drop:
                        tracker._drop_posts -= 1
                if fail is not None:
                    status, after = fail
                    return self._reply(status, {"message": "injected failure"}, {"Retry-After": after} if after else None)
                if parsed.path.startswith("/repos/"):
                    status, data = tracker._github(method, parsed.path, rec.query, body, self.headers)
                elif parsed.path.startswith("/projects/"):
                    status, data = tracker._gitlab(method, parsed.path, rec.query, body, self.headers, raw)
                else:
                    status, data = 404, {"message": "Not Found"}
                if drop and 200 <= status < 300:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)  # processed, but no answer arrives
                    return
                self._reply(status, data)

        return Handler

    # -- GitHub ---------------------------------------------------------------------------
    def _github(self, method: str, path: str, query: dict, body: Any, headers: Any) -> tuple[int, Any]:
        if headers.get("Authorization") not in (f"Bearer {self.token}", f"token {self.token}"):
            return 401, {"message": "Bad credentials"}
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/(issues|commits)(?:/([^/]+))?(?:/(comments))?", path)
        if not m or m.group(1) not in self.issues:
            return 404, {"message": "Not Found"}
        project, what, ident, sub = m.groups()
        issues = self.issues[project]
        with self.lock:
            if what == "commits" and method == "GET" and ident and not sub:
                if ident not in self.logins:
                    return 422, {"message": f"No commit found for SHA: {ident}"}
                return 200, {"sha": ident, "author": {"login": self.logins[ident]}}
            if what == "issues" and ident is None and method == "GET":
                state = query.get("state", ["open"])[0]
                label = query.get("labels", [None])[0]
                per_page, page = int(query.get("per_page", ["30"])[0]), int(query.get("page", ["1"])[0])
                hits = [i for i in issues if (state == "all" or i.state == state) and (label is None or label in i.labels)]
                hits = hits[(page - 1) * per_page : page * per_page]
                return 200, [self._gh_issue(project, i) for i in hits]
            if what == "issues" and ident is None and method == "POST":
                error = _check(body, GITHUB_ISSUE_FIELDS, required=("title",))
                if error:
                    return 422, {"message": "Validation Failed", "errors": [error]}
                issue = Issue(len(issues) + 1, body["title"], body.get("body", ""), list(body.get("labels", [])))
                issues.append(issue)
                return 201, self._gh_issue(project, issue)
            if what == "issues" and ident and ident.isdigit() and sub == "comments":
                issue = next((i for i in issues if i.number == int(ident)), None)
                if issue is None:
                    return 404, {"message": "Not Found"}
                if method == "GET":
                    return 200, [
                        {"id": n, "body": b, "html_url": f"https://github.test/{project}/issues/{issue.number}#c{n}"}
                        for n, b in enumerate(issue.comments, 1)
                    ]
                error = _check(body, GITHUB_COMMENT_FIELDS, required=("body",))
                if error:
                    return 422, {"message": "Validation Failed", "errors": [error]}
                issue.comments.append(body["body"])
                n = len(issue.comments)
                return 201, {"id": n, "body": body["body"], "html_url": f"https://github.test/{project}/issues/{issue.number}#c{n}"}
        return 404, {"message": "Not Found"}

    @staticmethod
    def _gh_issue(project: str, i: Issue) -> dict[str, Any]:
        return {
            "number": i.number,
            "title": i.title,
            "body": i.body,
            "state": i.state,
            "labels": [{"name": name} for name in i.labels],
            "html_url": f"https://github.test/{project}/issues/{i.number}",
        }

    # -- GitLab ---------------------------------------------------------------------------
    def _gitlab(self, method: str, path: str, query: dict, body: Any, headers: Any, raw: bytes) -> tuple[int, Any]:
        if self.token not in (headers.get("PRIVATE-TOKEN"), (headers.get("Authorization") or "").removeprefix("Bearer ")):
            return 401, {"message": "401 Unauthorized"}
        m = re.fullmatch(r"/projects/([^/]+)/uploads", path)
        if m and method == "POST" and urllib.parse.unquote(m.group(1)) in self.issues:
            return self._gl_upload(urllib.parse.unquote(m.group(1)), headers.get("Content-Type") or "", raw)
        # The project id is the URL-encoded path (group%2Fproject): a raw slash is another route.
        m = re.fullmatch(r"/projects/([^/]+)/issues(?:/(\d+)/(notes))?", path)
        if not m or urllib.parse.unquote(m.group(1)) not in self.issues:
            return 404, {"message": "404 Project Not Found"}
        project = urllib.parse.unquote(m.group(1))
        issues = self.issues[project]
        iid, sub = m.group(2), m.group(3)
        with self.lock:
            if iid is None and method == "GET":
                state = {"opened": "open", "closed": "closed"}.get(query.get("state", ["all"])[0])
                search = query.get("search", [""])[0]
                hits = [i for i in issues if (state is None or i.state == state) and search in i.body]
                return 200, [self._gl_issue(project, i) for i in hits]
            if iid is None and method == "POST":
                error = _check(body, GITLAB_ISSUE_FIELDS, required=("title",))
                if error:
                    return 400, {"error": error}
                labels = [x for x in body.get("labels", "").split(",") if x]
                issue = Issue(len(issues) + 1, body["title"], body.get("description", ""), labels)
                issues.append(issue)
                return 201, self._gl_issue(project, issue)
            issue = next((i for i in issues if i.number == int(iid or 0)), None)
            if issue is None or sub != "notes":
                return 404, {"message": "404 Not found"}
            if method == "GET":
                return 200, [{"id": n, "body": b} for n, b in reversed(list(enumerate(issue.comments, 1)))]
            error = _check(body, GITLAB_NOTE_FIELDS, required=("body",))
            if error:
                return 400, {"error": error}
            issue.comments.append(body["body"])
            return 201, {"id": len(issue.comments), "body": body["body"]}

    def _gl_upload(self, project: str, content_type: str, raw: bytes) -> tuple[int, Any]:
        parts = _multipart(content_type, raw)
        if isinstance(parts, str):
            return 400, {"error": parts}
        if [name for name, _, _, _ in parts] != ["file"]:
            return 400, {"error": f"expected exactly one part named 'file', got {[n for n, _, _, _ in parts]}"}
        [(_, filename, ctype, content)] = parts
        if not filename:
            return 400, {"error": "file is missing (the part has no filename)"}
        if not content.startswith(PNG_MAGIC):
            return 400, {"error": "file is not a PNG"}
        with self.lock:
            upload = Upload(project, filename, ctype, content, uuid.uuid4().hex)
            self.uploads.append(upload)
        alt = filename.rsplit(".", 1)[0]
        return 201, {
            "id": len(self.uploads),
            "alt": alt,
            "url": upload.url,
            "full_path": f"/-/project/1/uploads/{upload.secret}/{filename}",
            "markdown": f"![{alt}]({upload.url})",
        }

    @staticmethod
    def _gl_issue(project: str, i: Issue) -> dict[str, Any]:
        state = "opened" if i.state == "open" else i.state
        return {
            "iid": i.number,
            "title": i.title,
            "description": i.body,
            "state": state,
            "labels": i.labels,
            "web_url": f"https://gitlab.test/{project}/-/issues/{i.number}",
        }


def _multipart(content_type: str, raw: bytes) -> list[tuple[str, str | None, str, bytes]] | str:
    """(name, filename, Content-Type, content) per part of a multipart/form-data body, or what
    is wrong with it. Strict RFC 7578 framing: CRLF line ends, the boundary from the header, a
    closing delimiter; nothing is guessed."""
    mtype, _, params = content_type.partition(";")
    if mtype.strip().lower() != "multipart/form-data":
        return f"Content-Type {mtype.strip()!r} is not multipart/form-data"
    found = re.fullmatch(r'\s*boundary="?([^";]+)"?\s*', params)
    if not found:
        return "multipart/form-data without a boundary"
    delim = b"--" + found.group(1).encode()
    closing = b"\r\n" + delim + b"--"
    body = raw.removesuffix(b"\r\n")
    if not body.startswith(delim + b"\r\n") or not body.endswith(closing):
        return "malformed multipart body (opening or closing delimiter missing)"
    inner = body[len(delim) + 2 : -len(closing)]
    parts = []
    for chunk in inner.split(b"\r\n" + delim + b"\r\n"):
        head, sep, content = chunk.partition(b"\r\n\r\n")
        if not sep:
            return "malformed multipart part (no blank line after its headers)"
        msg = email.parser.BytesHeaderParser(policy=email.policy.HTTP).parsebytes(head + b"\r\n\r\n")
        disposition = msg.get("Content-Disposition")
        if disposition is None or disposition.content_disposition != "form-data" or not disposition.params.get("name"):
            return "a part without Content-Disposition: form-data; name=..."
        parts.append((disposition.params["name"], disposition.params.get("filename"), msg.get_content_type(), content))
    return parts


def _check(body: Any, fields: dict[str, type], required: tuple[str, ...]) -> str | None:
    if not isinstance(body, dict):
        return "body is not a JSON object"
    for key, value in body.items():
        if key not in fields:
            return f"unknown field {key!r}"
        if not isinstance(value, fields[key]) or (fields[key] is list and not all(isinstance(v, str) for v in value)):
            return f"field {key!r} has the wrong type"
    missing = [k for k in required if k not in body]
    return f"missing {missing}" if missing else None
