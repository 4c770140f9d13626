"""GitHub Actions over its REST API: a workflow's successful runs of a commit, a run's artifacts
by name, an artifact's zip. Two callers above it use it: the daemon (daemon/github_artifacts.py:
a failed run's `attrib-flag` artifact) and the build (evaluate/prebuilt_github.py: a commit's
binary that CI built, `[build.prebuilt_github]`). It sits below both, beside attrib/http.py,
so the build layer never imports the daemon.

The contract (docs.github.com, REST API version 2022-11-28):

  GET {api}/repos/{owner}/{repo}/actions/workflows/{workflow}/runs?head_sha=&status=success
  GET {api}/repos/{owner}/{repo}/actions/runs/{run_id}/artifacts?name=
  GET {api}/repos/{owner}/{repo}/actions/artifacts/{artifact_id}/zip   -> 302 to a storage host

each with `Authorization: Bearer <token>`, `Accept: application/vnd.github+json` and
`X-GitHub-Api-Version`. The 302 goes to a pre-signed URL on another host, which gets none of
those headers (attrib.http drops them off-origin). An artifact carries `expired`, its zip's
`size_in_bytes` and, on newer servers, `digest` ("sha256:<hex>" of the zip).

Nothing here trusts the server's filtering: a run must carry the asked head_sha and the success
conclusion, an artifact the asked name; anything else in a listing is skipped. A listing that is
not what the API documents is the caller's error class (HttpClient's `error`), one line naming
the repository and the path. Paging is bounded (MAX_PAGES of 100).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attrib.http import HttpClient

API_VERSION = "2022-11-28"
ACCEPT = "application/vnd.github+json"
NEED = "actions:read"  # the permission every call here needs
MAX_PAGES = 5  # pages of 100 a listing reads, when the server ignores its filter
PER_PAGE = 100
_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")


def headers(token: str) -> dict[str, str]:
    """The headers of every API call; HttpClient keeps them from any other origin."""
    return {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "X-GitHub-Api-Version": API_VERSION}


@dataclass(frozen=True)
class Artifact:
    id: int
    name: str
    expired: bool
    size: int | None  # the zip's size as GitHub lists it
    sha256: str | None  # hex, from `digest` where the server publishes one


class Actions:
    """One repository's workflow runs and artifacts, through `http` (whose base URL is the API)."""

    def __init__(self, http: HttpClient, repo: str) -> None:
        self.http = http
        self.repo = repo

    def successful_runs(self, workflow: str, sha: str) -> list[int]:
        """The ids of `workflow`'s successful runs of commit `sha`, newest first (by id: a run's
        id grows with its creation; a re-run attempt keeps it)."""
        path = f"/repos/{self.repo}/actions/workflows/{workflow}/runs"
        found: set[int] = set()
        for page in range(1, MAX_PAGES + 1):
            listing = self.http.request(
                "GET", path, params={"head_sha": sha, "status": "success", "per_page": PER_PAGE, "page": page}, need=NEED
            )
            runs = listing.get("workflow_runs") if isinstance(listing, dict) else None
            if not isinstance(runs, list):
                raise self.http.error(f"{self.http.target}: GET {path}: expected an object with a list of workflow_runs")
            for run in runs:
                if isinstance(run, dict) and run.get("head_sha") == sha and run.get("conclusion") == "success":
                    found.add(self._id(run, path))
            if found or len(runs) < PER_PAGE:
                break
        return sorted(found, reverse=True)

    def artifacts(self, run_id: int, name: str) -> list[Artifact]:
        """Run `run_id`'s artifacts named `name` (expired ones too), newest first."""
        path = f"/repos/{self.repo}/actions/runs/{run_id}/artifacts"
        found: dict[int, Artifact] = {}
        for page in range(1, MAX_PAGES + 1):
            listing = self.http.request("GET", path, params={"name": name, "per_page": PER_PAGE, "page": page}, need=NEED)
            items = listing.get("artifacts") if isinstance(listing, dict) else None
            if not isinstance(items, list):
                raise self.http.error(f"{self.http.target}: GET {path}: expected an object with a list of artifacts")
            for a in items:
                if isinstance(a, dict) and a.get("name") == name:
                    artifact_id = self._id(a, path)
                    size, digest = a.get("size_in_bytes"), a.get("digest")
                    hexdigest = m.group(1) if isinstance(digest, str) and (m := _DIGEST.fullmatch(digest.lower())) else None
                    found[artifact_id] = Artifact(
                        artifact_id, name, a.get("expired") is True,
                        size if isinstance(size, int) and not isinstance(size, bool) else None, hexdigest,
                    )  # fmt: skip
            if found or len(items) < PER_PAGE:
                break
        return [found[i] for i in sorted(found, reverse=True)]

    def download(self, artifact_id: int, max_bytes: int) -> bytes:
        """The artifact's zip (ResponseTooLarge beyond `max_bytes`), from wherever the API's 302
        sends, without the token."""
        return self.http.download(self._zip(artifact_id), need=NEED, max_bytes=max_bytes)

    def download_to(self, artifact_id: int, dest: Path, max_bytes: int) -> int:
        """`download`, the zip written to the file `dest` as it arrives; its size. No file is
        left at `dest` when it fails."""
        return self.http.download_to(self._zip(artifact_id), dest, need=NEED, max_bytes=max_bytes)

    def _zip(self, artifact_id: int) -> str:
        return f"/repos/{self.repo}/actions/artifacts/{artifact_id}/zip"

    def _id(self, item: dict[str, Any], path: str) -> int:
        value = item.get("id")
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.http.error(f"{self.http.target}: GET {path}: an item without an integer id")
        return value
