"""GitLab REST v4 issues: search by fingerprint, create, add a note; the plot goes up through
the project uploads API and the issue embeds the markdown GitLab answers with."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attrib.errors import TrackerError
from attrib.http import HttpClient, Sleep, multipart
from attrib.tracker.base import Attached, Posted, marker

DEFAULT_API = "https://gitlab.com/api/v4"
TOKEN_VAR = "GITLAB_TOKEN"
NEED_READ = "read_api scope and at least the Guest role"
NEED_WRITE = "api scope and at least the Reporter role"
UPLOAD_NAME = "plot.png"  # what the issue shows: ![plot](/uploads/<secret>/plot.png)


class GitLab:
    def __init__(self, project: str, env: dict[str, str] | None = None, sleep: Sleep | None = None) -> None:
        env = dict(os.environ) if env is None else env
        self.project = project
        self.target = f"gitlab:{project}"
        token = env.get(TOKEN_VAR, "")
        if not token:
            raise TrackerError(f"{self.target}: {TOKEN_VAR} is not set; filing needs a token with the {NEED_WRITE}")
        base = env.get("CI_API_V4_URL") or DEFAULT_API  # GitLab CI sets it; self-hosted works
        kw: dict[str, Any] = {} if sleep is None else {"sleep": sleep}
        self.http = HttpClient(base, {"PRIVATE-TOKEN": token}, target=self.target, token_var=TOKEN_VAR, error=TrackerError, **kw)
        self.path = "/projects/" + urllib.parse.quote(project, safe="")

    def find_open(self, fingerprints: Sequence[str], label: str | None) -> Posted | None:
        # GitLab searches by words: one search per fingerprint, in order, the exact marker checked
        for fingerprint in fingerprints:
            mark = marker("attrib-fingerprint", fingerprint)
            params: dict[str, str | int] = {"state": "opened", "search": fingerprint, "in": "description", "per_page": 100}
            for issue in self.http.request("GET", f"{self.path}/issues", params=params, need=NEED_READ):
                body = issue.get("description") or ""
                if mark in body:
                    params = {"sort": "asc", "order_by": "created_at", "per_page": 100}
                    notes = self.http.request("GET", f"{self.path}/issues/{issue['iid']}/notes", params=params, need=NEED_READ)
                    text = "\n".join([body, *(n.get("body") or "" for n in notes)])
                    return Posted(issue["iid"], issue["web_url"], fingerprint, text)
        return None

    def create(self, title: str, body: str, labels: list[str], run_id: str) -> Posted:
        fingerprint = body.split("attrib-fingerprint: ", 1)[1].split(" ", 1)[0]
        data = self.http.request(
            "POST",
            f"{self.path}/issues",
            body={"title": title, "description": body, "labels": ",".join(labels)},
            need=NEED_WRITE,
            recheck=lambda: self.find_open([fingerprint], None),
        )
        return data if isinstance(data, Posted) else Posted(data["iid"], data["web_url"])

    def _find_note(self, iid: int, run_id: str) -> Posted | None:
        mark = marker("attrib-run", run_id)
        params: dict[str, str | int] = {"sort": "desc", "order_by": "created_at", "per_page": 100}
        for note in self.http.request("GET", f"{self.path}/issues/{iid}/notes", params=params, need=NEED_READ):
            if mark in (note.get("body") or ""):
                return Posted(iid, f"#note_{note['id']}")
        return None

    def comment(self, number: int, body: str, run_id: str) -> Posted:
        data = self.http.request(
            "POST",
            f"{self.path}/issues/{number}/notes",
            body={"body": body},
            need=NEED_WRITE,
            recheck=lambda: self._find_note(number, run_id),
        )
        return data if isinstance(data, Posted) else Posted(number, f"#note_{data['id']}")

    def handle(self, sha: str) -> str | None:
        return None  # GitLab's commit API gives a name and e-mail, not an account: mention by name

    def attach(self, plot: Path, fingerprint: str) -> Attached:
        """POST /projects/:id/uploads (multipart, field `file`). No recheck: a retried upload at
        worst leaves an unused copy of the PNG in the project, never a second issue. Any failure
        is the reason the body gives, not the end of filing."""
        try:
            content = plot.read_bytes()
        except OSError as exc:
            return Attached(missing=f"The plot could not be attached ({plot.name}: {exc.strerror or exc})")
        try:
            data = self.http.request(
                "POST",
                f"{self.path}/uploads",
                body=multipart("file", UPLOAD_NAME, content, "image/png"),
                need=NEED_WRITE,
            )
        except TrackerError as exc:
            return Attached(
                missing=f"The plot could not be attached (upload failed: {str(exc).removeprefix(self.target + ': ')})"
            )
        markdown = data.get("markdown") if isinstance(data, dict) else None
        if not isinstance(markdown, str) or not markdown.startswith("![") or "\n" in markdown:
            return Attached(missing="The plot could not be attached (the upload's answer carried no image markdown)")
        return Attached(markdown=markdown)
