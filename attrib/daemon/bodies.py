"""Request bodies, bounded before any route sees them (issue 16).

An ASGI middleware in front of the whole app reads every request body itself: at most
`max_bytes` from any framing (Content-Length or chunked), refused with 413 as soon as it is
larger, with 408 when it trickles in slower than `read_timeout_s`, and at most
`max_concurrent` bodies are being read at once (a request that waits longer than `slot_wait_s`
for its turn gets 503). Unread bytes stay in the socket (the server stops reading a connection
whose buffer is full), so memory holds at most `max_concurrent` bodies of `max_bytes` however
many clients send. The route then gets the buffered body; authentication and parsing happen
on it, after this. A request framed both by Content-Length and by Transfer-Encoding is
answered, then its connection is closed (RFC 9112 section 6.3: what follows it may have been
framed differently by a proxy in front). Nothing here knows about flags or signatures.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from enum import Enum
from typing import Any

from attrib.errors import FlagError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

RETRY_AFTER_S = 5  # what a 503 for a busy intake tells the sender


class _Unread(Enum):
    """Why a body was not read whole: an outcome of the read, not an error anyone sees."""

    TOO_LARGE = "too large"
    DISCONNECTED = "disconnected"


async def _refuse(send: Send, status: int, message: str, headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    body = json.dumps({"error": message, "field": "body"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                # The rest of the body is never read: the connection cannot carry another request.
                (b"connection", b"close"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _closing(send: Send) -> Send:
    """`send` with `Connection: close` on the answer: h11 then ends the connection after it."""

    async def closing(message: Message) -> None:
        if message["type"] == "http.response.start":
            kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
            message = {**message, "headers": [*kept, (b"connection", b"close")]}
        await send(message)

    return closing


class BoundedBodies:
    def __init__(self, app: ASGIApp, *, max_bytes: int, max_concurrent: int, slot_wait_s: float, read_timeout_s: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.slot_wait_s = slot_wait_s
        self.read_timeout_s = read_timeout_s
        self.reading = 0  # bodies being read now
        self._slots = asyncio.Semaphore(max_concurrent)

    def _too_large(self) -> str:
        return str(FlagError("body", f"larger than {self.max_bytes} bytes"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and b"transfer-encoding" in headers:
            # Two framings (RFC 9112 section 6.3): the server read it one way, a proxy in front
            # may have read it the other, so what follows on this connection may be a smuggled
            # request. Answer this one, then close the connection.
            send = _closing(send)
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            await _refuse(send, 413, self._too_large())
            return
        try:
            await asyncio.wait_for(self._slots.acquire(), self.slot_wait_s)
        except TimeoutError:
            await _refuse(send, 503, "too many request bodies at once; try again", ((b"retry-after", str(RETRY_AFTER_S).encode()),))
            return
        self.reading += 1
        try:
            body = await asyncio.wait_for(self._read(receive), self.read_timeout_s)
        except TimeoutError:
            await _refuse(send, 408, str(FlagError("body", f"not received within {self.read_timeout_s:g} s")))
            return
        finally:
            self.reading -= 1
            self._slots.release()
        if body is _Unread.TOO_LARGE:
            await _refuse(send, 413, self._too_large())
            return
        if body is _Unread.DISCONNECTED:
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the disconnect, when it comes

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive) -> bytes | _Unread:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return _Unread.DISCONNECTED
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return _Unread.TOO_LARGE
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
