"""Progress for people: a live rich display on a terminal, plain log lines anywhere else."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from attrib.core.model import BuildRecord, CommitInfo, Decided, Phase, Verdict
from attrib.report.sentences import decided_text, phase_text

_VERDICT_STYLE = {Verdict.GOOD: "green", Verdict.BAD: "red", Verdict.SKIP: "yellow", Verdict.INCONCLUSIVE: "magenta"}


class PlainProgress:
    """One line per event, for logs and CI."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.start = time.monotonic()

    def _line(self, text: str, markup: str = "") -> None:
        print(f"[{time.monotonic() - self.start:7.1f}s] {text}", file=self.stream, flush=True)

    def phase(self, phase: Phase) -> None:
        self._line(phase_text(phase))

    def build_started(self, commit: CommitInfo) -> None:
        pass

    def build_finished(self, commit: CommitInfo, record: BuildRecord) -> None:
        state = "ok" if record.ok else f"FAILED ({record.reason})"
        cached = " (cached)" if record.cached else f" in {record.duration_s:.1f}s"
        self._line(f"build {commit.short} {state}{cached}")

    def round_done(self, candidate: CommitInfo, reference: CommitInfo, rounds: int, llr: float, samples: int) -> None:
        pass

    def verdict(self, candidate: CommitInfo, reference: CommitInfo, verdict: Verdict, detail: Decided) -> None:
        self._line(f"{candidate.short} vs {reference.short}: {verdict.value} ({decided_text(detail)}) {candidate.subject[:60]}")


class RichProgress(PlainProgress):
    """Finished events scroll above a live line that shows the comparison in progress."""

    def __init__(self, console: Console) -> None:
        super().__init__(console.file)  # type: ignore[arg-type]  # rich types it IO[str]
        self.console = console
        self.status = Text("starting")
        self.live = Live(self.status, console=console, transient=True, refresh_per_second=8)

    def __enter__(self) -> RichProgress:
        self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.stop()

    def _line(self, text: str, markup: str = "") -> None:
        self.console.print(f"[dim]{time.monotonic() - self.start:7.1f}s[/dim] {markup or escape(text)}", highlight=False)

    def _show(self, text: str) -> None:
        self.live.update(Text(text, style="cyan"))

    def build_started(self, commit: CommitInfo) -> None:
        self._show(f"building {commit.short} {commit.subject[:60]}")

    def round_done(self, candidate: CommitInfo, reference: CommitInfo, rounds: int, llr: float, samples: int) -> None:
        self._show(f"measuring {candidate.short} vs {reference.short}: round {rounds}, LLR {llr:+.2f}, {samples} samples")

    def verdict(self, candidate: CommitInfo, reference: CommitInfo, verdict: Verdict, detail: Decided) -> None:
        style = _VERDICT_STYLE[verdict]
        plain = f"{candidate.short} vs {reference.short}: {verdict.value} ({decided_text(detail)}) {candidate.subject[:60]}"
        rich = f"{candidate.short} vs {reference.short}: [{style}]{verdict.value}[/{style}] {escape(f'({decided_text(detail)}) {candidate.subject[:60]}')}"
        self._line(plain, rich)
