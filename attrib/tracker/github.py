"""GitHub REST v3 issues: list/create/comment, and the commit's author login for a mention."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attrib.errors import TrackerError
from attrib.http import HttpClient, Sleep
from attrib.tracker.base import MAX_PAGES, Attached, Posted, marker

DEFAULT_API = "https://api.github.com"
TOKEN_VAR = "GITHUB_TOKEN"


class GitHub:
    def __init__(self, project: str, env: dict[str, str] | None = None, sleep: Sleep | None = None) -> None:
        env = dict(os.environ) if env is None else env
        self.project = project
        self.target = f"github:{project}"
        token = env.get(TOKEN_VAR, "")
        if not token:
            raise TrackerError(f"{self.target}: {TOKEN_VAR} is not set; filing needs a token with issues:write")
        base = env.get("GITHUB_API_URL") or DEFAULT_API  # GitHub Actions sets it; Enterprise works
        kw: dict[str, Any] = {} if sleep is None else {"sleep": sleep}
        self.http = HttpClient(
            base,
            {"Authorization": f"Bearer {token}", "X-GitHub-Api-Version": "2022-11-28"},
            target=self.target,
            token_var=TOKEN_VAR,
            error=TrackerError,
            **kw,
        )
        self.repo_path = f"/repos/{project}"

    def find_open(self, fingerprints: Sequence[str], label: str | None) -> Posted | None:
        # The list endpoint, not the search API: search is indexed with a delay, so an issue
        # created a moment ago (a POST whose answer was lost) would not be found there. One scan
        # for every fingerprint; the first of them found wins.
        marks = {marker("attrib-fingerprint", fp): fp for fp in fingerprints}
        params: dict[str, str | int] = {"state": "open", "per_page": 100}
        if label:
            params["labels"] = label
        found: dict[str, Posted] = {}
        for page in range(1, MAX_PAGES + 1):
            issues = self.http.request(
                "GET", f"{self.repo_path}/issues", params={**params, "page": page}, need="issues:read"
            )
            for issue in issues:
                body = issue.get("body") or ""
                for mark, fp in marks.items():
                    if "pull_request" not in issue and mark in body and fp not in found:
                        found[fp] = Posted(issue["number"], issue["html_url"], fp, body)
            if len(issues) < 100 or (fingerprints and fingerprints[0] in found):
                break
        hit = next((found[fp] for fp in fingerprints if fp in found), None)
        if hit is None:
            return None
        comments = self._comments(hit.number)
        return Posted(hit.number, hit.url, hit.fingerprint, "\n".join([hit.text, *comments]))

    def _comments(self, number: int) -> list[str]:
        out: list[str] = []
        for page in range(1, MAX_PAGES + 1):
            comments = self.http.request(
                "GET", f"{self.repo_path}/issues/{number}/comments", params={"per_page": 100, "page": page}, need="issues:read"
            )
            out += [c.get("body") or "" for c in comments]
            if len(comments) < 100:
                break
        return out

    def create(self, title: str, body: str, labels: list[str], run_id: str) -> Posted:
        fingerprint = _fingerprint_of(body)
        data = self.http.request(
            "POST",
            f"{self.repo_path}/issues",
            body={"title": title, "body": body, "labels": labels},
            need="issues:write",
            recheck=lambda: self.find_open([fingerprint], labels[0] if labels else None),
        )
        return data if isinstance(data, Posted) else Posted(data["number"], data["html_url"])

    def _find_comment(self, number: int, run_id: str) -> Posted | None:
        mark = marker("attrib-run", run_id)
        for page in range(1, MAX_PAGES + 1):
            comments = self.http.request(
                "GET",
                f"{self.repo_path}/issues/{number}/comments",
                params={"per_page": 100, "page": page},
                need="issues:read",
            )
            for c in comments:
                if mark in (c.get("body") or ""):
                    return Posted(number, c["html_url"])
            if len(comments) < 100:
                break
        return None

    def comment(self, number: int, body: str, run_id: str) -> Posted:
        data = self.http.request(
            "POST",
            f"{self.repo_path}/issues/{number}/comments",
            body={"body": body},
            need="issues:write",
            recheck=lambda: self._find_comment(number, run_id),
        )
        return data if isinstance(data, Posted) else Posted(number, data["html_url"])

    def handle(self, sha: str) -> str | None:
        try:
            data = self.http.request("GET", f"{self.repo_path}/commits/{sha}", need="contents:read")
        except TrackerError as exc:
            # Not pushed yet (422/404) or no access to contents: mention by name instead.
            if any(f": {code} " in str(exc) for code in (404, 422, 403)):
                return None
            raise
        author = data.get("author") or {}
        return author.get("login")

    def attach(self, plot: Path, fingerprint: str) -> Attached:
        # Issue attachments exist only in the web UI (an undocumented upload endpoint behind a
        # browser session); the REST API has none. The sparkline stands in, and the body says so.
        return Attached(missing="The plot is not attached on GitHub (its REST API takes no attachments)")


def _fingerprint_of(body: str) -> str:
    start = body.index("attrib-fingerprint: ") + len("attrib-fingerprint: ")
    return body[start : body.index(" ", start)]
