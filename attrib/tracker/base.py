"""What every sink offers the filing logic, and the markers a filed report carries."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

FINGERPRINT_MARK = "attrib-fingerprint"
RUN_MARK = "attrib-run"
MAX_PAGES = 10  # bounded scans: at 100 per page, 1000 open issues or comments


@dataclass(frozen=True)
class Posted:
    number: int
    url: str


def marker(kind: str, value: str) -> str:
    return f"<!-- {kind}: {value} -->"


class Sink(Protocol):
    target: str  # "github:acme/kernels": named in every message
    project: str  # the part of the fingerprint that says where: "acme/kernels"

    def find_open(self, fingerprint: str, label: str | None) -> Posted | None: ...

    def create(self, title: str, body: str, labels: list[str], run_id: str) -> Posted: ...

    def comment(self, number: int, body: str, run_id: str) -> Posted: ...

    def handle(self, sha: str) -> str | None:
        """The culprit author's account name on this tracker, when it can be found."""
        ...

    def attach(self, plot: Path, fingerprint: str) -> str | None:
        """Where the plot can be seen from the body (a path or URL), or None where it cannot."""
        ...
