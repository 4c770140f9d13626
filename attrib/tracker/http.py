"""A small JSON-over-HTTP client on the standard library's urllib.request.

Why not httpx: attrib needs a handful of JSON requests with our own retry policy, and the
stdlib keeps the dependency list (and the surface a token passes through) small.

Retries: 5xx and connection errors back off exponentially (bounded attempts); 429, and a 403
that says it is a rate limit, wait as long as Retry-After asks (bounded). A request that may
have been processed before it failed (a dropped connection, a 5xx) is only re-sent after
`recheck` found nothing: that is how an issue is never filed twice. 401/403/404 end at once
with one line naming the target and what the token lacks. The token lives only in the request
headers: it is never part of a message, a repr or a log line, and it never follows a redirect
to another origin (an artifact download answers 302 to a storage host: that host gets no
token). Every answer is read with a byte bound.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from attrib.errors import ResponseTooLarge, TrackerError

MAX_ATTEMPTS = 5
BACKOFF_S = 1.0  # first wait; doubles per attempt
MAX_WAIT_S = 60.0  # a longer Retry-After is an error, not a silent hour-long hang
TIMEOUT_S = 30.0
MAX_RESPONSE_BYTES = 32 << 20  # a page of 100 issues with long bodies is a few MiB
MAX_ERROR_BYTES = 64 << 10  # what an error answer's message is read from

Sleep = Callable[[float], None]


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
        self.secret_headers = [name.capitalize() for name in secret_headers]  # urllib's spelling

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


class HttpClient:
    def __init__(
        self,
        base_url: str,
        auth_headers: Mapping[str, str],
        *,
        target: str,
        token_var: str,
        sleep: Sleep = time.sleep,
        max_attempts: int = MAX_ATTEMPTS,
        backoff_s: float = BACKOFF_S,
        max_wait_s: float = MAX_WAIT_S,
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._auth = dict(auth_headers)
        self.target, self.token_var = target, token_var
        self.sleep, self.max_attempts = sleep, max_attempts
        self.backoff_s, self.max_wait_s, self.timeout_s = backoff_s, max_wait_s, timeout_s
        self.attempts = 0  # every request sent, retries included (tests and the curious)
        self._opener = urllib.request.build_opener(_Redirects(list(self._auth)))

    def __repr__(self) -> str:  # never the headers: they carry the token
        return f"HttpClient({self.base_url!r}, target={self.target!r})"

    def _send(self, method: str, url: str, body: Any, max_bytes: int) -> tuple[int, dict[str, str], bytes]:
        headers = {"Accept": "application/json", "User-Agent": "attrib", **self._auth}
        data = None
        if isinstance(body, Payload):
            data, headers["Content-Type"] = body.data, body.content_type
        elif body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        self.attempts += 1
        try:
            with self._opener.open(req, timeout=self.timeout_s) as resp:
                raw = resp.read(max_bytes + 1)
                if len(raw) > max_bytes:
                    raise ResponseTooLarge(f"{self.target}: {method} {url[len(self.base_url):]}: the answer is longer than {max_bytes} bytes")
                return resp.status, dict(resp.headers.items()), raw
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers.items()) if exc.headers else {}, exc.read(MAX_ERROR_BYTES)

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
        return self._exchange(method, path, need, body, params, recheck, max_bytes, lambda raw: json.loads(raw) if raw.strip() else None)

    def download(self, path: str, *, need: str, max_bytes: int, params: Mapping[str, str | int] | None = None) -> bytes:
        """The raw body of a GET's 2xx answer, at most `max_bytes` (ResponseTooLarge beyond),
        after any redirects (to another origin without the credentials)."""
        data: bytes = self._exchange("GET", path, need, None, params, None, max_bytes, lambda raw: raw)
        return data

    def _exchange(
        self,
        method: str,
        path: str,
        need: str,
        body: Any,
        params: Mapping[str, str | int] | None,
        recheck: Callable[[], Any] | None,
        max_bytes: int,
        decode: Callable[[bytes], Any],
    ) -> Any:
        url = self.base_url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        last = ""
        for attempt in range(1, self.max_attempts + 1):
            if attempt > 1 and recheck is not None:
                done = recheck()
                if done is not None:
                    return done
            wait = self.backoff_s * 2 ** (attempt - 1)
            try:
                status, headers, raw = self._send(method, url, body, max_bytes)
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                reason = getattr(exc, "reason", None) or exc.__class__.__name__
                last = f"connection failed ({reason})"
            else:
                if 200 <= status < 300:
                    return decode(raw)
                asked = _retry_after(headers, time.time())
                if status == 429 or (status == 403 and asked is not None):
                    last = f"{status} rate limited"
                    wait = asked if asked is not None else wait
                elif status >= 500:
                    last = f"{status} server error"
                else:
                    raise TrackerError(self._message(status, need, raw))
            if attempt == self.max_attempts:
                break
            if wait > self.max_wait_s:
                raise TrackerError(f"{self.target}: {last}; the server asks to wait {wait:.0f} s, longer than {self.max_wait_s:.0f} s")
            self.sleep(wait)
        raise TrackerError(f"{self.target}: {method} {path}: {last} after {self.max_attempts} attempts")

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


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
