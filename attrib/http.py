"""attrib's one HTTP client, on the standard library's urllib.request: the trackers (filing
issues), the GitHub artifact fetch, and the daemon's own clients (`attrib submit`, `jobs`,
`status`, `cancel`, `history push`) all send through HttpClient.

Why not httpx: a retry policy there is a transport's connection retries (httpx has no status- or
Retry-After-aware retries without a further package), while attrib's rules are its own: a
request that may have been processed is re-sent only after `recheck` found nothing, a signed
body is signed again for each attempt, a Retry-After longer than the caller allows is an error.
Those rules would be hand-written on httpx too. The stdlib keeps the dependency list, and the
surface a token passes through, small, and the daemon's clients run in a CI job with no extra.

Retries: 5xx and connection errors back off exponentially (bounded attempts); 429, a 403 that
says it is a rate limit, and a 5xx that carries Retry-After wait as long as it asks (bounded). A
request that may have been processed before it failed (a dropped connection, a 5xx) is only
resent after `recheck` found nothing: that is how an issue is never filed twice. 401/403/404 end
at once with one line naming the target and what the token lacks. The token lives only in the
request headers: it is never part of a message, a repr or a log line, and it never follows a
redirect to another origin (an artifact download answers 302 to a storage host: that host gets
no token, nor any header a signer added). Every answer is read with a byte bound. Each caller
names the error its boundary raises (`error`: TrackerError, UpstreamError, ClientError); a
too-long answer is ResponseTooLarge for all of them.

A large answer (a prebuilt archive, an artifact's zip: gigabytes) is written to a file as it
arrives (`download_to`, `send(into=)`), so memory holds one chunk whatever its size. A retry
starts the file again; an error leaves no file. A body shorter than its Content-Length (a
connection dropped mid-answer, which http.client's read1 reports only as an early end) is a
connection failure and retried like one, never taken for the whole answer.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from attrib.errors import AttribError, ResponseTooLarge

MAX_ATTEMPTS = 5
BACKOFF_S = 1.0  # first wait; doubles per attempt
MAX_WAIT_S = 60.0  # a longer Retry-After is an error, not a silent hour-long hang
TIMEOUT_S = 30.0
MAX_RESPONSE_BYTES = 32 << 20  # a page of 100 issues with long bodies is a few MiB
MAX_ERROR_BYTES = 64 << 10  # what an error answer's message is read from
READ_CHUNK = 64 << 10

Sleep = Callable[[float], None]
# Headers computed for each attempt from the body as sent: a signature with the time of sending.
Signer = Callable[[bytes], Mapping[str, str]]


@dataclass(frozen=True)
class Answer:
    """What the server answered, any status: for a caller that words its own errors by status."""

    status: int
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class Payload:
    """A request body that is not JSON: the bytes as sent and their Content-Type."""

    data: bytes
    content_type: str


def multipart(field: str, filename: str, content: bytes, content_type: str) -> Payload:
    """multipart/form-data (RFC 7578) with one file part. The names are ours (no quoting needed);
    the boundary is drawn until it does not occur in the content."""
    if any(c in name for name in (field, filename) for c in '"\\\r\n'):
        raise ValueError(f"multipart: {field!r}/{filename!r}: quotes, backslashes and line breaks are not supported")
    boundary = f"attrib-{uuid.uuid4().hex}"
    while boundary.encode() in content:
        boundary = f"attrib-{uuid.uuid4().hex}"
    head = (
        f"--{boundary}\r\n"
        f'Content-Disposition: form-data; name="{field}"; filename="{filename}"\r\n'
        f"Content-Type: {content_type}\r\n\r\n"
    )
    data = head.encode() + content + f"\r\n--{boundary}--\r\n".encode()
    return Payload(data, f"multipart/form-data; boundary={boundary}")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects (urllib bounds their number) only to http(s), and drops the
    credentials when the redirect leaves the origin they were meant for. urllib itself copies
    every header to the next request, whatever its host."""

    def __init__(self, secret_headers: list[str]) -> None:
        super().__init__()
        self.secret_headers = {name.capitalize() for name in secret_headers}  # urllib's spelling

    def keep_secret(self, names: list[str]) -> None:
        """Headers a signer adds are credentials too: a signature replays within its tolerance."""
        self.secret_headers.update(name.capitalize() for name in names)

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        if urllib.parse.urlsplit(newurl).scheme.lower() not in ("http", "https"):
            raise urllib.error.HTTPError(req.full_url, code, f"redirect to a non-HTTP URL refused: {msg}", headers, fp)
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(newurl) != _origin(req.full_url):
            for name in self.secret_headers:
                new.remove_header(name)
        return new


def _retry_after(headers: Mapping[str, str], now: float) -> float | None:
    value = headers.get("Retry-After")
    if value:
        value = value.strip()
        if value.isdigit():
            return float(value)
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - now)
    # GitHub's primary rate limit: remaining 0 and the reset time as epoch seconds.
    if headers.get("X-RateLimit-Remaining") == "0" and (reset := headers.get("X-RateLimit-Reset", "")).isdigit():
        return max(0.0, float(reset) - now)
    return None


class _Sockets:
    """The socket of the connection an opener made last (redirects make new ones): its timeout
    is per read, so before each read it is given only what the whole operation has left."""

    def __init__(self) -> None:
        self.last: socket.socket | None = None


def _recording(base: type[http.client.HTTPConnection], sockets: _Sockets) -> type[http.client.HTTPConnection]:
    class Recording(base):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            super().connect()
            sockets.last = self.sock  # for https, the TLS socket HTTPSConnection.connect made

    return Recording


class _Http(urllib.request.HTTPHandler):
    def __init__(self, sockets: _Sockets) -> None:
        super().__init__()
        self._connection = _recording(http.client.HTTPConnection, sockets)

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)


class _Https(urllib.request.HTTPSHandler):
    def __init__(self, sockets: _Sockets) -> None:
        super().__init__()
        self._connection = _recording(http.client.HTTPSConnection, sockets)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req, context=self._context, check_hostname=self._check_hostname)  # type: ignore[attr-defined]


class HttpClient:
    def __init__(
        self,
        base_url: str,
        auth_headers: Mapping[str, str],
        *,
        target: str,
        token_var: str,
        error: type[AttribError],
        sleep: Sleep = time.sleep,
        max_attempts: int = MAX_ATTEMPTS,
        backoff_s: float = BACKOFF_S,
        max_wait_s: float = MAX_WAIT_S,
        timeout_s: float = TIMEOUT_S,
        unreachable: Callable[[str], str] | None = None,
        deadline_s: float | None = None,
    ) -> None:
        """`error` is the class every failure is raised as (the caller's boundary); `unreachable`
        words the failure when no answer came at all (it gets the reason), for `send`.
        `deadline_s`: everything this client does, every attempt, wait and read, ends within that
        long of its creation (`timeout_s` bounds one connect or one read: a server trickling a
        byte at a time would otherwise keep the caller's thread as long as it liked)."""
        self.base_url = base_url.rstrip("/")
        self._auth = dict(auth_headers)
        self.target, self.token_var, self.error, self.unreachable = target, token_var, error, unreachable
        self.sleep, self.max_attempts = sleep, max_attempts
        self.backoff_s, self.max_wait_s, self.timeout_s = backoff_s, max_wait_s, timeout_s
        self.attempts = 0  # every request sent, retries included (tests and the curious)
        self._redirects = _Redirects(list(self._auth))
        self._sockets = _Sockets()
        self._opener = urllib.request.build_opener(self._redirects, _Http(self._sockets), _Https(self._sockets))
        self.deadline_s = deadline_s
        self._ends = time.monotonic() + deadline_s if deadline_s is not None else None

    def __repr__(self) -> str:  # never the headers: they carry the token
        return f"HttpClient({self.base_url!r}, target={self.target!r})"

    def _send(
        self, method: str, url: str, body: Any, max_bytes: int, sign: Signer | None, into: BinaryIO | None
    ) -> tuple[int, dict[str, str], bytes]:
        """One attempt: the status, headers and body (a 2xx body written to `into` instead, from
        its start, when given: the body returned is then empty)."""
        headers = {"Accept": "application/json", "User-Agent": "attrib", **self._auth}
        data = None
        if isinstance(body, Payload):
            data, headers["Content-Type"] = body.data, body.content_type
        elif body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        if sign is not None:
            signed = dict(sign(data or b""))
            self._redirects.keep_secret(list(signed))
            headers.update(signed)
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        what = f"{method} {url[len(self.base_url):]}"
        self.attempts += 1
        try:
            with self._opener.open(req, timeout=self._left(what)) as resp:
                chunks: list[bytes] = []
                if into is not None:
                    into.seek(0)
                    into.truncate()  # a retry starts the file again
                size = self._pump(resp, max_bytes + 1, what, chunks.append if into is None else into.write)
                if size > max_bytes:
                    raise ResponseTooLarge(f"{self.target}: {what}: the answer is longer than {max_bytes} bytes")
                if resp.length:  # bytes of its Content-Length never came: the connection dropped
                    raise http.client.IncompleteRead(b"", resp.length)
                return resp.status, dict(resp.headers.items()), b"".join(chunks)
        except urllib.error.HTTPError as exc:
            chunks = []
            self._pump(exc, MAX_ERROR_BYTES, what, chunks.append)
            return exc.code, dict(exc.headers.items()) if exc.headers else {}, b"".join(chunks)

    def _left(self, what: str) -> float:
        """The timeout for the next connect or read: `timeout_s`, or less when the deadline is
        nearer; the caller's error once the deadline has passed."""
        if self._ends is None:
            return self.timeout_s
        left = self._ends - time.monotonic()
        if left <= 0:
            raise self.error(f"{self.target}: {what}: no complete answer within {self.deadline_s:g} s")
        return min(self.timeout_s, left)

    def _pump(self, resp: Any, limit: int, what: str, write: Callable[[bytes], object]) -> int:
        """At most `limit` bytes of the answer handed to `write` a chunk at a time, each read
        given only the time left; how many."""
        size = 0
        while size < limit:
            if self._sockets.last is not None:
                self._sockets.last.settimeout(self._left(what))
            chunk = resp.read1(min(READ_CHUNK, limit - size))
            if not chunk:
                break
            write(chunk)
            size += len(chunk)
        return size

    def request(
        self,
        method: str,
        path: str,
        *,
        need: str,
        body: Any = None,
        params: Mapping[str, str | int] | None = None,
        recheck: Callable[[], Any] | None = None,
        max_bytes: int = MAX_RESPONSE_BYTES,
    ) -> Any:
        """The decoded JSON of a 2xx answer. `need` names the permission the call requires, for
        the error message; `recheck` (for non-idempotent calls) returns the earlier attempt's
        result if the server did process it, or None to send again."""
        got = self._exchange(method, path, body, params, recheck, max_bytes, None, answer_last=False)
        if not isinstance(got, Answer):
            return got
        if not 200 <= got.status < 300:
            raise self.error(self._message(got.status, need, got.body))
        return json.loads(got.body) if got.body.strip() else None

    def download(self, path: str, *, need: str, max_bytes: int, params: Mapping[str, str | int] | None = None) -> bytes:
        """The raw body of a GET's 2xx answer, at most `max_bytes` (ResponseTooLarge beyond),
        after any redirects (to another origin without the credentials)."""
        return self._download(path, need, max_bytes, params, None).body

    def download_to(
        self, path: str, dest: Path, *, need: str, max_bytes: int, params: Mapping[str, str | int] | None = None
    ) -> int:
        """`download`, its body written to the file `dest` as it arrives (memory holds a chunk);
        how many bytes. A retry starts the file again; any error leaves no file at `dest`."""
        self._to_file(dest, lambda into: self._download(path, need, max_bytes, params, into))
        return dest.stat().st_size

    def _download(self, path: str, need: str, max_bytes: int, params: Mapping[str, str | int] | None, into: BinaryIO | None) -> Answer:
        got = self._exchange("GET", path, None, params, None, max_bytes, None, answer_last=False, into=into)
        assert isinstance(got, Answer)  # no recheck: an answer or an error
        if not 200 <= got.status < 300:
            raise self.error(self._message(got.status, need, got.body))
        return got

    def send(
        self,
        method: str,
        path: str,
        *,
        body: Payload | None = None,
        sign: Signer | None = None,
        max_bytes: int = MAX_RESPONSE_BYTES,
        into: Path | None = None,
    ) -> Answer:
        """The server's answer whatever its status, for a caller that words errors itself (the
        daemon's clients). Retried like `request`; when the retries are spent, or the server
        asks to wait longer than allowed, its last answer is returned. `sign` is called for
        every attempt, so a retried signed request carries the time it was sent at. With
        `into`, a 2xx body is written to that file as it arrives (the Answer's body is empty);
        any other answer or an error leaves no file there."""
        def exchange(f: BinaryIO | None) -> Any:
            return self._exchange(method, path, body, None, None, max_bytes, sign, answer_last=True, into=f)

        got = exchange(None) if into is None else self._to_file(into, exchange)
        assert isinstance(got, Answer)
        return got

    @staticmethod
    def _to_file(dest: Path, exchange: Callable[[BinaryIO], Any]) -> Any:
        """What `exchange` returns, given `dest` open for writing; `dest` removed unless that is
        a 2xx Answer (an error, a too-long answer, another status: no partial file stays)."""
        kept = False
        try:
            with dest.open("wb") as f:
                got = exchange(f)
            kept = isinstance(got, Answer) and 200 <= got.status < 300
            return got
        finally:
            if not kept:
                dest.unlink(missing_ok=True)

    def _exchange(
        self,
        method: str,
        path: str,
        body: Any,
        params: Mapping[str, str | int] | None,
        recheck: Callable[[], Any] | None,
        max_bytes: int,
        sign: Signer | None,
        *,
        answer_last: bool,
        into: BinaryIO | None = None,
    ) -> Any:
        """An Answer that needs no retry (2xx, or a status that retrying cannot change), or what
        `recheck` found. Retryable answers are retried; when the retries are spent (or the wait
        is too long) they end in an error, or, with `answer_last`, in the last answer."""
        url = self.base_url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        last, answer, reason = "", None, ""
        for attempt in range(1, self.max_attempts + 1):
            if attempt > 1 and recheck is not None:
                done = recheck()
                if done is not None:
                    return done
            wait = self.backoff_s * 2 ** (attempt - 1)
            try:
                status, headers, raw = self._send(method, url, body, max_bytes, sign, into)
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                reason = str(getattr(exc, "reason", None) or exc.__class__.__name__)
                last, answer = f"connection failed ({reason})", None
            else:
                answer = Answer(status, headers, raw)
                asked = _retry_after(headers, time.time())
                if status == 429 or (status == 403 and asked is not None):
                    last = f"{status} rate limited"
                    wait = asked if asked is not None else wait
                elif status >= 500:
                    last = f"{status} server error"  # a 503's Retry-After is heeded too (RFC 9110)
                    wait = asked if asked is not None else wait
                else:
                    return answer
            if attempt == self.max_attempts:
                break
            if self._ends is not None and time.monotonic() + wait >= self._ends:
                raise self.error(f"{self.target}: {method} {path}: {last}; no time left to retry within {self.deadline_s:g} s")
            if wait > self.max_wait_s:
                if answer_last and answer is not None:
                    return answer
                raise self.error(f"{self.target}: {last}; the server asks to wait {wait:.0f} s, longer than {self.max_wait_s:.0f} s")
            self.sleep(wait)
        if answer_last and answer is not None:
            return answer
        if answer is None and self.unreachable is not None:
            raise self.error(self.unreachable(f"{reason} ({self.max_attempts} attempts)"))
        raise self.error(f"{self.target}: {method} {path}: {last} after {self.max_attempts} attempts")

    def _message(self, status: int, need: str, raw: bytes) -> str:
        if status == 401:
            return f"{self.target}: 401 Unauthorized — {self.token_var} is wrong or expired"
        if status == 403:
            return f"{self.target}: 403 Forbidden — the token needs {need}"
        if status == 404:
            return f"{self.target}: 404 Not Found — no such project, or the token cannot see it (it needs {need})"
        try:
            data = json.loads(raw)  # GitHub says "message"; GitLab "message" or, for a bad parameter, "error"
            detail = data.get("message") or data.get("error") or raw.decode(errors="replace")
        except (ValueError, AttributeError):
            detail = raw.decode(errors="replace")
        detail = " ".join(str(detail).split())[:200]
        return f"{self.target}: {status} {http.client.responses.get(status, 'error')} — {detail}"
