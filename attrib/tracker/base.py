"""What every sink offers the filing logic, and the markers a filed report carries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

FINGERPRINT_MARK = "attrib-fingerprint"
RUN_MARK = "attrib-run"
MEMBERS_MARK = "attrib-members"  # the benchmarks an issue or comment names, as a JSON list
MAX_PAGES = 10  # bounded scans: at 100 per page, 1000 open issues or comments


@dataclass(frozen=True)
class Posted:
    number: int
    url: str
    fingerprint: str = ""  # find_open: which of the fingerprints asked for the issue carries
    text: str = ""  # find_open: the body, and its comments where the sink has them


@dataclass(frozen=True)
class Attached:
    """What a sink made of the plot, for the body. One of: `link`, a path or URL the report links
    as its image (dir:); `markdown`, the tracker's own markdown for an upload (GitLab); or
    `missing`, the start of the line saying why there is no plot ("The plot could not be attached
    (upload failed: ...)"); the filing adds where the PNG is."""

    link: str | None = None
    markdown: str | None = None
    missing: str | None = None


def marker(kind: str, value: str) -> str:
    return f"<!-- {kind}: {value} -->"


class Sink(Protocol):
    target: str  # "github:acme/kernels": named in every message
    project: str  # the part of the fingerprint that says where: "acme/kernels"

    def find_open(self, fingerprints: Sequence[str], label: str | None) -> Posted | None:
        """The open issue carrying one of `fingerprints` (the first matches first), with its text."""
        ...

    def create(self, title: str, body: str, labels: list[str], run_id: str) -> Posted: ...

    def comment(self, number: int, body: str, run_id: str) -> Posted: ...

    def handle(self, sha: str) -> str | None:
        """The culprit author's account name on this tracker, when it can be found."""
        ...

    def attach(self, plot: Path, fingerprint: str) -> Attached:
        """The plot, made visible from the body where the tracker allows it. Never raises for a
        plot that could not be attached: the report is filed without it (`missing` says why)."""
        ...
