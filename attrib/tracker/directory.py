"""dir:PATH — the tracker for people without one (and for CI artifacts): a directory per
fingerprint holding report.md (+ plot.png); a repeat appends a comment section to it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from attrib.errors import InputError, TrackerError
from attrib.fsutil import atomic_write_text
from attrib.tracker.base import Attached, Posted, marker

FINGERPRINT_DIR_CHARS = 16


class Directory:
    def __init__(self, path: str) -> None:
        self.root = Path(path).expanduser()
        self.target = f"dir:{path}"
        self.project = str(self.root.resolve())
        try:
            blocked = self.root.exists() and not self.root.is_dir()
        except OSError as e:  # a name the file system cannot hold (ENAMETOOLONG), a loop of links
            raise InputError(f"--file-issue {self.target}: {e.strerror or e}") from None
        if blocked:
            raise InputError(f"--file-issue {self.target}: {self.root} exists and is not a directory")
        self._plots = 0

    def _dir(self, fingerprint: str) -> Path:
        return self.root / fingerprint[:FINGERPRINT_DIR_CHARS]

    @contextmanager
    def _writing(self, what: Path) -> Iterator[None]:
        # A folder that cannot be written (read-only, a name too long, a file in the way) is a
        # filing failure like a forge's refusal: one line naming the target, after the result
        # and the report were written, never a traceback.
        try:
            yield
        except OSError as e:
            raise TrackerError(f"{self.target}: cannot write {what}: {e.strerror or e}") from None

    def find_open(self, fingerprints: Sequence[str], label: str | None) -> Posted | None:
        for fingerprint in fingerprints:
            report = self._dir(fingerprint) / "report.md"
            text = report.read_text() if report.exists() else ""
            if marker("attrib-fingerprint", fingerprint) in text:
                return Posted(1, str(report), fingerprint, text)  # the comments are sections of it
        return None

    def create(self, title: str, body: str, labels: list[str], run_id: str) -> Posted:
        fingerprint = body.split("attrib-fingerprint: ", 1)[1].split(" ", 1)[0]
        report = self._dir(fingerprint) / "report.md"
        head = f"<!-- title: {title} -->\n<!-- labels: {', '.join(labels)} -->\n"
        with self._writing(report):
            atomic_write_text(report, head + body)
        return Posted(1, str(report))

    def comment(self, number: int, body: str, run_id: str) -> Posted:
        # number is meaningless here; the fingerprint in the body names the file
        fingerprint = body.split("attrib-fingerprint: ", 1)[1].split(" ", 1)[0]
        report = self._dir(fingerprint) / "report.md"
        text = report.read_text()
        n = text.count("\n## Comment ") + 1
        when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        with self._writing(report):
            atomic_write_text(report, text + f"\n\n---\n\n## Comment {n} ({when})\n\n{body}")
        return Posted(n, f"{report}#comment-{n}")

    def handle(self, sha: str) -> str | None:
        return None

    def attach(self, plot: Path, fingerprint: str) -> Attached:
        folder = self._dir(fingerprint)
        with self._writing(folder):
            folder.mkdir(parents=True, exist_ok=True)
        name = "plot.png"
        if (folder / name).exists():  # a comment's plot sits next to the first, never over it
            n = 2
            while (folder / f"plot-{n}.png").exists():
                n += 1
            name = f"plot-{n}.png"
        with self._writing(folder / name):
            shutil.copyfile(plot, folder / name)
        return Attached(link=name)
