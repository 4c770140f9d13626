"""Signatures and shared-secret checks, shared by the server and the clients (no FastAPI here:
`attrib submit` in a CI job needs only the standard library). Every comparison is constant-time."""

from __future__ import annotations

import hashlib
import hmac

from attrib.errors import AttribError

SIGNATURE_HEADER = "X-Attrib-Signature-256"
GITHUB_SIGNATURE_HEADER = "X-Hub-Signature-256"
GITLAB_TOKEN_HEADER = "X-Gitlab-Token"


class Unauthorized(AttribError):
    """Missing or wrong signature, token or bearer secret (HTTP 401)."""


def sign(body: bytes, secret: str) -> str:
    """The value of X-Attrib-Signature-256 (and GitHub's X-Hub-Signature-256) for `body`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def check_signature(header: str | None, body: bytes, secret: str, name: str) -> None:
    if not header:
        raise Unauthorized(f"missing {name} header")
    if not hmac.compare_digest(header.strip().encode(), sign(body, secret).encode()):
        raise Unauthorized(f"{name} does not match the body")


def check_token(given: str | None, secret: str, name: str) -> None:
    if not given:
        raise Unauthorized(f"missing {name}")
    if not hmac.compare_digest(given.strip().encode(), secret.encode()):
        raise Unauthorized(f"wrong {name}")


def check_bearer(authorization: str | None, secret: str) -> None:
    scheme, _, token = (authorization or "").partition(" ")
    check_token(token if scheme.lower() == "bearer" else None, secret, "Authorization: Bearer secret")
