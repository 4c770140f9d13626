"""Signatures and shared-secret checks, shared by the server and the clients (no FastAPI here:
`attrib submit` in a CI job needs only the standard library). Every comparison is constant-time.

attrib's own scheme signs a timestamp with the body, as Stripe and Slack do, so a captured
request cannot be resent forever (issue 16):

    X-Attrib-Signature-256: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">

refused when t is more than the tolerance (default 300 s) from the daemon's clock. Within the
tolerance the daemon remembers each accepted request (`Verified.keys`, stored with its flag)
and answers a replay with the first answer. The old `sha256=<hex HMAC of the body>` form has no
time in it: refused unless a migration setting allows it. Forges sign their own way: GitHub's
X-Hub-Signature-256 (`sha256=`, no time: replays are known by X-GitHub-Delivery and by the
body), GitLab's X-Gitlab-Token (the secret itself: replays known by X-Gitlab-Event-UUID and the
body). Every check takes the headers and the raw body, before anything is parsed; any route
that takes signed bodies calls `verify_signature`.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

from attrib.errors import Unauthorized

SIGNATURE_HEADER = "X-Attrib-Signature-256"
GITHUB_SIGNATURE_HEADER = "X-Hub-Signature-256"
GITHUB_DELIVERY_HEADER = "X-GitHub-Delivery"
GITLAB_TOKEN_HEADER = "X-Gitlab-Token"
GITLAB_EVENT_UUID_HEADER = "X-Gitlab-Event-UUID"
DEFAULT_TOLERANCE_S = 300.0  # how far a signed timestamp may be from the daemon's clock
LEGACY_PREFIX = "sha256="
SCHEME = 'expected t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>"> (docs/daemon.md)'
_HEX64 = re.compile(r"[0-9a-f]{64}")
_MAX_DELIVERY_ID = 100  # characters of a forge's delivery id we keep (GitHub's and GitLab's are UUIDs)
# v1= values one header may carry: a sender rolling its secret signs with the old and the new
# one (Stripe's scheme); more serve nobody. Each must be well-formed, one must match.
MAX_SIGNATURES = 2

def _hmac(secret: str, data: bytes) -> str:
    return hmac.new(secret.encode(), data, hashlib.sha256).hexdigest()


def sign(body: bytes, secret: str, timestamp: int | None = None) -> str:
    """The value of X-Attrib-Signature-256 for `body`, signed now (or at `timestamp`)."""
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={_hmac(secret, str(t).encode() + b'.' + body)}"


def github_signature(body: bytes, secret: str) -> str:
    """GitHub's X-Hub-Signature-256 (and attrib's legacy form): sha256=<hex HMAC of the body>."""
    return LEGACY_PREFIX + _hmac(secret, body)


@dataclass(frozen=True)
class SignaturePolicy:
    secret: str
    tolerance_s: float = DEFAULT_TOLERANCE_S
    allow_legacy: bool = False  # the sha256= form, during a migration (docs/daemon.md)


@dataclass(frozen=True)
class Verified:
    """An authentic request: the keys that name it in the replay memory, and until when it
    must be remembered (None: it carries no signed time, so for as long as its flag)."""

    keys: tuple[str, ...]
    expires: float | None


def _header(headers: Mapping[str, str], name: str) -> str | None:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


def verify_signature(
    headers: Mapping[str, str], body: bytes, policy: SignaturePolicy, now: float | None = None
) -> Verified:
    """Check X-Attrib-Signature-256 against the raw body; Unauthorized (401) in one line otherwise."""
    value = (_header(headers, SIGNATURE_HEADER) or "").strip()
    if not value:
        raise Unauthorized(f"missing {SIGNATURE_HEADER} header")
    if value.startswith(LEGACY_PREFIX):
        if not policy.allow_legacy:
            raise Unauthorized(
                f"{SIGNATURE_HEADER}: the sha256= form carries no time and is refused; {SCHEME}"
                " (or set allow_legacy_signature during a migration)"
            )
        if not hmac.compare_digest(value.encode(), github_signature(body, policy.secret).encode()):
            raise Unauthorized(f"{SIGNATURE_HEADER} does not match the body")
        return Verified((f"attrib:sha256:{value[len(LEGACY_PREFIX) :]}",), None)
    parts: dict[str, list[str]] = {}
    for item in value.split(","):
        key, sep, val = item.strip().partition("=")
        if not sep:
            raise Unauthorized(f"{SIGNATURE_HEADER}: {SCHEME}")
        parts.setdefault(key, []).append(val)
    stamps, digests = parts.get("t", []), parts.get("v1", [])
    if len(stamps) != 1 or not stamps[0].isascii() or not stamps[0].isdigit() or len(stamps[0]) > 12 or not digests:
        raise Unauthorized(f"{SIGNATURE_HEADER}: {SCHEME}")
    if len(digests) > MAX_SIGNATURES or not all(_HEX64.fullmatch(d) for d in digests):
        raise Unauthorized(f"{SIGNATURE_HEADER}: at most {MAX_SIGNATURES} v1= values of 64 hex digits; {SCHEME}")
    t = int(stamps[0])
    expected = _hmac(policy.secret, stamps[0].encode() + b"." + body)
    # Every value is compared (constant time each), so which one matched is not timed out.
    matched = [hmac.compare_digest(d.encode(), expected.encode()) for d in digests]
    if not any(matched):
        raise Unauthorized(f"{SIGNATURE_HEADER} does not match the body")
    now = time.time() if now is None else now
    if abs(now - t) > policy.tolerance_s:
        # Rounded up: a request refused for being 300.4 s off must not read "300 s" against a 300 s tolerance.
        raise Unauthorized(
            f"{SIGNATURE_HEADER}: signed at t={t}, {math.ceil(abs(now - t))} s from the daemon's clock;"
            f" the tolerance is {policy.tolerance_s:g} s (sign each request when it is sent)"
        )
    return Verified((f"attrib:v1:{expected}",), t + policy.tolerance_s)


def _body_key(route: str, body: bytes) -> str:
    return f"{route}:body:{hashlib.sha256(body).hexdigest()}"


def _delivery_key(route: str, headers: Mapping[str, str], name: str) -> tuple[str, ...]:
    delivery = (_header(headers, name) or "").strip()[:_MAX_DELIVERY_ID]
    return (f"{route}:delivery:{delivery}",) if delivery else ()


def verify_github(headers: Mapping[str, str], body: bytes, secret: str) -> Verified:
    """GitHub's X-Hub-Signature-256. The delivery id is not signed, so a replay is also known
    by its body (GitHub's events differ in their payloads: ids, times)."""
    value = (_header(headers, GITHUB_SIGNATURE_HEADER) or "").strip()
    if not value:
        raise Unauthorized(f"missing {GITHUB_SIGNATURE_HEADER} header")
    if not hmac.compare_digest(value.encode(), github_signature(body, secret).encode()):
        raise Unauthorized(f"{GITHUB_SIGNATURE_HEADER} does not match the body")
    return Verified((*_delivery_key("github", headers, GITHUB_DELIVERY_HEADER), _body_key("github", body)), None)


def verify_gitlab(headers: Mapping[str, str], body: bytes, secret: str) -> Verified:
    """GitLab's X-Gitlab-Token is the secret itself; replays are known by X-Gitlab-Event-UUID
    and by the body."""
    check_token(_header(headers, GITLAB_TOKEN_HEADER), secret, GITLAB_TOKEN_HEADER)
    return Verified((*_delivery_key("gitlab", headers, GITLAB_EVENT_UUID_HEADER), _body_key("gitlab", body)), None)


def check_token(given: str | None, secret: str, name: str) -> None:
    if not given:
        raise Unauthorized(f"missing {name}")
    if not hmac.compare_digest(given.strip().encode(), secret.encode()):
        raise Unauthorized(f"wrong {name}")


def check_bearer(authorization: str | None, secret: str) -> None:
    scheme, _, token = (authorization or "").partition(" ")
    check_token(token if scheme.lower() == "bearer" else None, secret, "Authorization: Bearer secret")
