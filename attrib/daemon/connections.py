"""Connections, bounded before any request exists (issue 20): a deadline for a request head and
a cap per client address, on uvicorn's own HTTP protocol.

uvicorn (0.54) bounds a head's size (h11_max_incomplete_event_size) and the idle time after a
response (timeout_keep_alive), but nothing times out a connection that never completes its
first head, and limit_concurrency counts silent sockets: 63 of them, or 200 trickling a header
a byte at a time, made every real request a 503. Its hook for this is `Config(http=<protocol
class>)`; `guarded_h11` returns a subclass of its h11 protocol that

* closes a connection whose request head is not complete `head_timeout_s` after the
  connection opened or after the previous answer ended (idle keep-alive included): a silent
  or trickling socket holds its slot for at most that long;
* holds at most `per_client` connections from one address: one address cannot fill the
  server, and the rest of the connection budget stays for others. A new connection from an
  address at its cap takes the place of that address's connection idle the longest (waiting
  for a request head, or between requests); only when every one of them is inside a request
  is the new one closed at once. Behind a proxy or a NAT every client has one address: 32
  idle keep-alive sockets from it must not lock out its next real request (issue 33).

The head is still parsed by h11 inside uvicorn; this class only watches when uvicorn starts a
request cycle (`self.cycle`) and when it finishes one (`on_response_complete`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol


def guarded_h11(head_timeout_s: float, per_client: int) -> type[asyncio.Protocol]:
    """A protocol class for one server: its per-address registry is its own."""
    # address -> its connections, in the order they last became idle (oldest first)
    by_client: dict[str, dict[GuardedH11, None]] = {}

    class GuardedH11(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_timer: asyncio.TimerHandle | None = None
            self._address: str | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            address = self.client[0] if self.client else None
            if address is not None:
                held = by_client.setdefault(address, {})
                if len(held) >= per_client:
                    victim = next((c for c in held if c._idle()), None)
                    if victim is None:
                        transport.abort()  # every one is inside a request; registered by nobody
                        return
                    victim._forget()
                    victim.transport.close()
                self._address = address
                held[self] = None
            self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._forget()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._await_head()  # the next request's head has its own deadline

        def _idle(self) -> bool:
            """Waiting for a request head (none yet, or the last one answered)."""
            return self.cycle is None or self.cycle.response_complete

        def _forget(self) -> None:
            if self._address is None:
                return
            held = by_client[self._address]
            held.pop(self, None)
            if not held:
                del by_client[self._address]
            self._address = None

        def _await_head(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            if self._address is not None:  # idle from now: the last in its address's order
                held = by_client[self._address]
                held.pop(self, None)
                held[self] = None
            self._head_timer = self.loop.call_later(head_timeout_s, self._head_deadline, self.cycle)

        def _head_deadline(self, cycle_then: object) -> None:
            # A new cycle means a complete head arrived in time (its body has its own bound in
            # bodies.py); the same one means nothing but a partial head, or nothing at all.
            self._head_timer = None
            waiting = self.cycle is cycle_then and (cycle_then is None or self.cycle.response_complete)
            if waiting and not self.transport.is_closing():
                self.transport.close()

    return GuardedH11
