"""Headers every answer of the daemon carries (issue 20): its pages and SVGs show text that came
from outside (benchmark names, units, notes), escaped and isolated; these headers are the
second line, so that nothing a browser is sent can run script, be read as another type or be
framed by another site.

  Content-Security-Policy   nothing but same-origin images and inline styles (the pages have
                            no script at all); no framing (frame-ancestors), no forms, no <base>
  X-Content-Type-Options    nosniff: an SVG or JSON answer is never sniffed into HTML
  X-Frame-Options           DENY, for browsers older than frame-ancestors
"""

from __future__ import annotations

from attrib.daemon.bodies import ASGIApp, Message, Receive, Scope, Send

CSP = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
)


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []), *((k, v) for k, v in HEADERS if k not in names)]
            await send(message)

        await self.app(scope, receive, with_headers)
