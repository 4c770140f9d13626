"""Prebuilt binaries (`[build] prebuilt = "https://ci.example/builds/{sha}.tar.gz"` or a path).

Where CI has built a commit already, its archive is unpacked in place of the build: fetched
(a file, or HTTP GET through attrib/http.py with its bounds and retries), checked against
`<archive>.sha256` when one is published (its first word, hex), unpacked with tarfile's "data"
filter (no absolute paths, no `..`, no links out, no devices) into a scratch directory, which
must hold every artifact glob, and only then copied into the checkout. Anything else (no
archive, no answer, a digest that differs, an archive that does not unpack or lacks an
artifact) is `Unusable` with one line, and the commit is built as without the key.

The archive must be what this recipe's own build gives (the same commands, compiler and image):
attrib cannot tell another toolchain from a regression, which is why a culprit's end that was
prebuilt is built again here and compared (builds.CheckoutBuilder.differs_from_clean).
"""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from attrib.errors import PrebuiltUnavailable, ResponseTooLarge
from attrib.evaluate.artifacts import hash_artifacts
from attrib.http import HttpClient

MAX_ARCHIVE_BYTES = 2 << 30  # a prebuilt tree larger than this is built instead
DIGEST_SUFFIX = ".sha256"


@dataclass(frozen=True)
class Unusable:
    why: str  # one line: why the commit is built instead


@dataclass(frozen=True)
class Unpacked:
    checked: bool  # a published digest was there and matched


class PrebuiltArchives:
    def __init__(self, template: str, artifacts: tuple[str, ...], client: HttpClient | None = None) -> None:
        self.template = template
        self.artifacts = artifacts
        self.remote = template.startswith(("http://", "https://"))
        self.client = client

    def where(self, sha: str) -> str:
        return self.template.replace("{sha}", sha)

    def exists(self, sha: str) -> bool:
        """Whether `sha`'s archive is there (a file; an HTTP HEAD answered 2xx), not whether it
        is sound: unpacking checks that."""
        where = self.where(sha)
        if not self.remote:
            return Path(where).is_file()
        client = self.client or _client(where)
        try:
            return 200 <= client.send("HEAD", where[len(client.base_url) :], max_bytes=0).status < 300
        except (PrebuiltUnavailable, ResponseTooLarge):
            return False

    def unpack(self, sha: str, checkout: Path, scratch: Path) -> Unpacked | Unusable:
        """`sha`'s archive unpacked into `checkout`, or why not."""
        where = self.where(sha)
        archive = self._read(where, missing_ok=False)
        if isinstance(archive, Unusable):
            return archive
        published = self._read(where + DIGEST_SUFFIX, missing_ok=True)
        if isinstance(published, Unusable):
            return published
        if published:
            words = published.decode(errors="replace").split()
            want = words[0].lower() if words else ""
            got = hashlib.sha256(archive).hexdigest()
            if want != got:
                return Unusable(f"prebuilt {where}: sha256 {got[:12]}... but {where}{DIGEST_SUFFIX} says {want[:12] or 'nothing'}...")
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        try:
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(scratch, filter="data")
        except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
            shutil.rmtree(scratch, ignore_errors=True)
            return Unusable(f"prebuilt {where}: not an archive that unpacks ({type(exc).__name__}: {exc})")
        if self.artifacts:
            hashed = hash_artifacts(scratch, self.artifacts)
            if isinstance(hashed, str):
                shutil.rmtree(scratch, ignore_errors=True)
                return Unusable(f"prebuilt {where}: {hashed}")
        shutil.copytree(scratch, checkout, dirs_exist_ok=True, symlinks=True)
        shutil.rmtree(scratch, ignore_errors=True)
        return Unpacked(checked=bool(published))

    def _read(self, where: str, missing_ok: bool) -> bytes | Unusable:
        """The bytes at `where`; b"" when it is missing and that is fine (a digest)."""
        if not self.remote:
            try:
                path = Path(where)
                if path.stat().st_size > MAX_ARCHIVE_BYTES:
                    return Unusable(f"prebuilt {where}: larger than {MAX_ARCHIVE_BYTES >> 20} MiB")
                return path.read_bytes()
            except FileNotFoundError:
                return b"" if missing_ok else Unusable(f"no prebuilt archive at {where}")
            except OSError as exc:
                return Unusable(f"prebuilt {where}: cannot be read ({exc.strerror})")
        client = self.client or _client(where)
        try:
            answer = client.send("GET", where[len(client.base_url) :], max_bytes=MAX_ARCHIVE_BYTES)
        except (PrebuiltUnavailable, ResponseTooLarge) as exc:
            return Unusable(f"prebuilt {where}: {exc}")
        if answer.status == 404:
            return b"" if missing_ok else Unusable(f"no prebuilt archive at {where} (404)")
        if not 200 <= answer.status < 300:
            return Unusable(f"prebuilt {where}: HTTP {answer.status}")
        return answer.body


def _client(url: str) -> HttpClient:
    parts = urllib.parse.urlsplit(url)
    return HttpClient(
        f"{parts.scheme}://{parts.netloc}", {}, target=parts.netloc, token_var="", error=PrebuiltUnavailable,
        max_attempts=2, unreachable=lambda why: f"no answer ({why})",
    )  # fmt: skip

