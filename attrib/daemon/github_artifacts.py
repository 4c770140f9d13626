"""The flag of a failed GitHub workflow run: its `attrib-flag` artifact, a zip of one flag.json.

GitHub puts no job output into workflow_run payloads, so the failing job uploads the flag as an
artifact (docs/daemon.md) and the daemon fetches it with the REST API (attrib/github_actions.py,
shared with the build's prebuilt artifacts):

  GET {api}/repos/{owner}/{repo}/actions/runs/{run_id}/artifacts?name=attrib-flag
  GET {api}/repos/{owner}/{repo}/actions/artifacts/{artifact_id}/zip   -> 302 to a storage host

through attrib.http's client (bounded retries; the token never follows the 302 to the
storage host). Everything is bounded: the zip's size (checked in the listing, then enforced
while reading), exactly one member named flag.json, its uncompressed size (read with a limit,
whatever the zip's header claims), the number of listing pages, every request's timeout and
attempts, and the whole fetch's deadline, which every read is held to (a server trickling a
byte every few seconds no longer keeps the thread past it). The server runs this in a small
thread pool.

A bad artifact is the flag's fault (FlagError naming `attrib-flag`, HTTP 400); GitHub that
cannot be reached or refuses is UpstreamError (HTTP 502) naming the repository and, for
401/403/404, the permission the token needs (actions:read).
"""

from __future__ import annotations

import io
import json
import zipfile
import zlib
from typing import Any

from attrib.daemon.flags import MAX_JSON_DEPTH, WorkflowRun
from attrib.daemon.scan import json_depth
from attrib.errors import FlagError, ResponseTooLarge, UpstreamError
from attrib.github_actions import NEED, Actions, headers
from attrib.http import HttpClient, Sleep

ARTIFACT_NAME = "attrib-flag"
MEMBER_NAME = "flag.json"
MAX_ZIP_BYTES = 64 << 10  # a flag is a few hundred bytes; its zip a little more
MAX_FLAG_BYTES = 64 << 10  # uncompressed: a zip bomb stops here
# One request: GitHub answers webhooks' callers in seconds, or it is having a bad day.
REQUEST_TIMEOUT_S = 10.0
ATTEMPTS = 3
BACKOFF_S = 0.5
MAX_WAIT_S = 5.0  # a rate limit asking for longer is a 502, not a hanging webhook
# The whole fetch: every request, retry, wait and read of its client (HttpClient's deadline_s),
# so the thread is free when the webhook is answered; the server waits DEADLINE_GRACE_S longer
# around it, as a backstop.
FETCH_DEADLINE_S = 30.0
DEADLINE_GRACE_S = 2.0
TOKEN_TEXT = f"the daemon's GitHub token (github_token_file or GITHUB_TOKEN, with {NEED})"


def client(api_url: str, token: str, repo: str, sleep: Sleep | None = None) -> HttpClient:
    kw: dict[str, Any] = {} if sleep is None else {"sleep": sleep}
    return HttpClient(
        api_url,
        headers(token),
        target=f"github:{repo}",
        token_var=TOKEN_TEXT,
        error=UpstreamError,
        max_attempts=ATTEMPTS,
        backoff_s=BACKOFF_S,
        max_wait_s=MAX_WAIT_S,
        timeout_s=REQUEST_TIMEOUT_S,
        deadline_s=FETCH_DEADLINE_S,
        **kw,
    )


def fetch_flag(run: WorkflowRun, api_url: str, token: str | None, sleep: Sleep | None = None) -> dict[str, Any] | None:
    """The flag in `run`'s attrib-flag artifact, or None when the run has none."""
    if not token:
        raise UpstreamError(f"github:{run.repo}: no GitHub token: set github_token_file or GITHUB_TOKEN (it needs {NEED})")
    actions = Actions(client(api_url, token, run.repo, sleep), run.repo)
    try:
        artifact = _find_artifact(actions, run)
        if artifact is None:
            return None
        data = actions.download(artifact, MAX_ZIP_BYTES)
    except ResponseTooLarge:
        raise FlagError(ARTIFACT_NAME, f"the artifact's zip is larger than {MAX_ZIP_BYTES} bytes") from None
    return flag_from_zip(data)


def _find_artifact(actions: Actions, run: WorkflowRun) -> int | None:
    """The id of the run's newest unexpired attrib-flag artifact (a re-run attempt adds one)."""
    found = next((a for a in actions.artifacts(run.run_id, ARTIFACT_NAME) if not a.expired), None)
    if found is None:
        return None
    if found.size is not None and found.size > MAX_ZIP_BYTES:
        raise FlagError(ARTIFACT_NAME, f"the artifact is {found.size} bytes; expected at most {MAX_ZIP_BYTES} (one small {MEMBER_NAME})")
    return found.id


def flag_from_zip(data: bytes) -> dict[str, Any]:
    """The JSON object in the zip's only member, flag.json; FlagError('attrib-flag') otherwise."""
    if len(data) > MAX_ZIP_BYTES:
        raise FlagError(ARTIFACT_NAME, f"the artifact's zip is larger than {MAX_ZIP_BYTES} bytes")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            members = zf.infolist()
            if len(members) != 1 or members[0].filename != MEMBER_NAME:
                names = ", ".join(m.filename for m in members[:5]) or "nothing"
                raise FlagError(ARTIFACT_NAME, f"expected exactly one file, {MEMBER_NAME}; the zip holds {len(members)}: {names}")
            info = members[0]
            if info.flag_bits & 0x1:
                raise FlagError(ARTIFACT_NAME, f"{MEMBER_NAME} is encrypted")
            if info.file_size > MAX_FLAG_BYTES:
                raise FlagError(ARTIFACT_NAME, f"{MEMBER_NAME} is {info.file_size} bytes; expected at most {MAX_FLAG_BYTES}")
            with zf.open(info) as member:
                raw = member.read(MAX_FLAG_BYTES + 1)  # the header may lie: the read is the bound
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError, OSError) as exc:
        raise FlagError(ARTIFACT_NAME, f"not a readable zip ({exc})") from None
    if len(raw) > MAX_FLAG_BYTES:
        raise FlagError(ARTIFACT_NAME, f"{MEMBER_NAME} is larger than {MAX_FLAG_BYTES} bytes")
    if json_depth(raw) > MAX_JSON_DEPTH:
        raise FlagError(ARTIFACT_NAME, f"{MEMBER_NAME}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        flag = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise FlagError(ARTIFACT_NAME, f"{MEMBER_NAME} is not JSON ({exc})") from None
    if not isinstance(flag, dict):
        raise FlagError(ARTIFACT_NAME, f"{MEMBER_NAME}: expected a JSON object (the flag)")
    return flag
