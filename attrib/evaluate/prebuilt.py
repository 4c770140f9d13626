"""Prebuilt binaries (`[build] prebuilt = "https://ci.example/builds/{sha}.tar.gz"` or a path).

Where CI has built a commit already, its archive is unpacked in place of the build: fetched
(a file, or HTTP GET through attrib/http.py with its bounds and retries), checked against
`<archive>.sha256` when one is published (its first word, hex), unpacked by
evaluate/unpacking.py (regular files and directories only, every name inside, every size and
count within its caps, checked before anything is written) into a scratch directory, which must
hold every artifact glob, and only then copied into the checkout, following none of the
checkout's links. Anything else (no archive, no answer, a digest that differs, an archive that
does not unpack or lacks an artifact, a checkout it cannot be copied into) is `Unusable` with
one line, and the commit is built as without the key.

An archive is never held in memory: a directory's is read where it lies, an HTTP one is written
to a file in the build's scratch directory as it arrives (beside the tree it unpacks to, and
removed with it), and its digest is computed over that file a chunk at a time: what unpacking
one costs in memory does not grow with its size (benchmarks/prebuilt_memory.py).

The archive must be what this recipe's own build gives (the same commands, compiler and image):
attrib cannot tell another toolchain from a regression, which is why a culprit's end that was
prebuilt is built again here and compared (builds.CheckoutBuilder.differ_from_clean).
"""

from __future__ import annotations

import lzma
import shutil
import urllib.parse
import zipfile
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from attrib.errors import PrebuiltUnavailable, ResponseTooLarge
from attrib.evaluate.artifacts import hash_artifacts, sha256_of
from attrib.evaluate.unpacking import copy_into, unpack_tar
from attrib.http import HttpClient

MAX_LOOKUPS = 64  # commits of a range asked about over HTTP for the search's preference
MAX_ARCHIVE_BYTES = 2 << 30  # a prebuilt tree larger than this is built instead
MAX_DIGEST_BYTES = 64 << 10  # a published `.sha256`: one line, or a short listing
DIGEST_SUFFIX = ".sha256"
# what a broken archive raises while it is unpacked (unpacking.py, zipfile, the decompressors)
UNPACK_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    lzma.LZMAError,
    OSError,
    EOFError,
    ValueError,
    NotImplementedError,
    RuntimeError,
)


@dataclass(frozen=True)
class Unusable:
    why: str  # one line: why the commit is built instead


@dataclass(frozen=True)
class Unpacked:
    checked: bool  # a published digest was there and matched


class PrebuiltSource(Protocol):
    """Where a commit's build may already exist: archives by path or URL (here), a GitHub
    Actions artifact (evaluate/prebuilt_github.py)."""

    def where(self, sha: str) -> str: ...

    def among(self, shas: list[str]) -> frozenset[str]: ...

    def unpack(self, sha: str, checkout: Path, scratch: Path) -> Unpacked | Unusable: ...


@contextmanager
def emptied(scratch: Path) -> Iterator[Path]:
    """`scratch`, made empty, and removed afterwards whatever happens: a downloaded archive and
    the tree it unpacks to live there no longer than the unpacking."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def install(
    label: str, fill: Callable[[Path], None], checkout: Path, tree: Path, artifacts: tuple[str, ...]
) -> Unusable | None:
    """`fill` unpacks into the empty `tree`, which must then hold every artifact glob; only
    then is it copied into `checkout` (unpacking.copy_into: no link of the checkout followed, a
    path it cannot take refusing the copy before anything is written). Why not, as one line
    starting with `label`."""
    with emptied(tree):
        try:
            fill(tree)
        except UNPACK_ERRORS as exc:
            return Unusable(f"{label}: not an archive that unpacks ({type(exc).__name__}: {exc})")
        if artifacts:
            hashed = hash_artifacts(tree, artifacts)
            if isinstance(hashed, str):
                return Unusable(f"{label}: {hashed}")
        try:
            copy_into(tree, checkout)
        except (ValueError, OSError) as exc:
            return Unusable(f"{label}: not copied into the checkout ({exc})")
        return None


def prebuilt_archives(template: str, artifacts: tuple[str, ...], client: HttpClient | None = None) -> PrebuiltSource:
    """`[build] prebuilt`: archives served over HTTP(S), or lying in a directory."""
    if template.startswith(("http://", "https://")):
        return ArchiveServer(template, artifacts, client)
    return ArchiveDirectory(template, artifacts)


class _Archives(ABC):
    """What both places of archives share: the template, and unpacking a commit's archive
    after checking it against its published digest. Where the two bytes come from is the
    variant's (`_archive`, `_digest`)."""

    def __init__(self, template: str, artifacts: tuple[str, ...]) -> None:
        self.template = template
        self.artifacts = artifacts

    def where(self, sha: str) -> str:
        return self.template.replace("{sha}", sha)

    def unpack(self, sha: str, checkout: Path, scratch: Path) -> Unpacked | Unusable:
        """`sha`'s archive unpacked into `checkout`, or why not. An HTTP archive is downloaded
        into `scratch`, beside the tree it unpacks to; both go when this returns."""
        where = self.where(sha)
        with emptied(scratch):
            archive = self._archive(where, scratch / "archive")
            if isinstance(archive, Unusable):
                return archive
            published = self._digest(where + DIGEST_SUFFIX)
            if isinstance(published, Unusable):
                return published
            if published:
                words = published.decode(errors="replace").split()
                want = words[0].lower() if words else ""
                got = sha256_of(archive)
                if want != got:
                    return Unusable(
                        f"prebuilt {where}: sha256 {got[:12]}... but {where}{DIGEST_SUFFIX} says {want[:12] or 'nothing'}..."
                    )
            label = f"prebuilt {where}"
            bad = install(label, lambda into: unpack_tar(archive, into), checkout, scratch / "tree", self.artifacts)
            return bad or Unpacked(checked=bool(published))

    @abstractmethod
    def _archive(self, where: str, download: Path) -> Path | Unusable:
        """The archive's file (written to `download` when it has to be fetched), or why not."""

    @abstractmethod
    def _digest(self, where: str) -> bytes | Unusable:
        """The published digest file's bytes; b"" when there is none."""


class ArchiveDirectory(_Archives):
    """Archives by path: read where they lie, never copied."""

    def among(self, shas: list[str]) -> frozenset[str]:
        """The commits of `shas` whose archive is there (for the search's preference): every one."""
        return frozenset(s for s in shas if Path(self.where(s)).is_file())

    def _archive(self, where: str, download: Path) -> Path | Unusable:
        """The archive's file where it lies (opened, not copied; `download` is unused)."""
        path = Path(where)
        try:
            if path.stat().st_size > MAX_ARCHIVE_BYTES:
                return Unusable(f"prebuilt {where}: larger than {MAX_ARCHIVE_BYTES >> 20} MiB")
            with path.open("rb"):
                pass  # readable: a refusal is said here, not as an archive that does not unpack
            return path
        except FileNotFoundError:
            return Unusable(f"no prebuilt archive at {where}")
        except OSError as exc:
            return Unusable(f"prebuilt {where}: cannot be read ({exc.strerror})")

    def _digest(self, where: str) -> bytes | Unusable:
        """The published digest file's bytes; b"" when there is none."""
        path = Path(where)
        try:
            if path.stat().st_size > MAX_DIGEST_BYTES:
                return Unusable(f"prebuilt {where}: larger than {MAX_DIGEST_BYTES >> 10} KiB")
            return path.read_bytes()
        except FileNotFoundError:
            return b""
        except OSError as exc:
            return Unusable(f"prebuilt {where}: cannot be read ({exc.strerror})")


class ArchiveServer(_Archives):
    """Archives by URL, through attrib/http.py (its bounds and retries): a HEAD to ask, a GET
    written to a file as it arrives."""

    def __init__(self, template: str, artifacts: tuple[str, ...], client: HttpClient | None = None) -> None:
        super().__init__(template, artifacts)
        self.client = client

    def among(self, shas: list[str]) -> frozenset[str]:
        """The commits of `shas` whose archive is there (for the search's preference): at most
        MAX_LOOKUPS of them, spread over the list (a HEAD each), and none more after a server
        that does not answer. Whether one is there, not whether it is sound: unpacking checks."""
        found = set()
        for sha in spread(shas, MAX_LOOKUPS):
            there = self._head(sha)
            if there is None:
                break  # the rest would wait for the same silence
            if there:
                found.add(sha)
        return frozenset(found)

    def _head(self, sha: str) -> bool | None:
        """Whether an HTTP HEAD of `sha`'s archive answered 2xx; None: no answer."""
        where = self.where(sha)
        client = self.client or _client(where)
        try:
            return 200 <= client.send("HEAD", where[len(client.base_url) :], max_bytes=0).status < 300
        except (PrebuiltUnavailable, ResponseTooLarge):
            return None

    def _archive(self, where: str, download: Path) -> Path | Unusable:
        """`download`, with the HTTP answer's body written to it."""
        got = self._get(where, MAX_ARCHIVE_BYTES, download)
        if isinstance(got, Unusable):
            return got
        return download if got is not None else Unusable(f"no prebuilt archive at {where} (404)")

    def _digest(self, where: str) -> bytes | Unusable:
        """The published digest file's bytes; b"" when there is none."""
        got = self._get(where, MAX_DIGEST_BYTES, None)
        return b"" if got is None else got

    def _get(self, where: str, max_bytes: int, into: Path | None) -> bytes | Unusable | None:
        """An HTTP GET's 2xx body (written to `into` when given: then b""); None for a 404."""
        client = self.client or _client(where)
        try:
            answer = client.send("GET", where[len(client.base_url) :], max_bytes=max_bytes, into=into)
        except (PrebuiltUnavailable, ResponseTooLarge) as exc:
            return Unusable(f"prebuilt {where}: {exc}")
        if answer.status == 404:
            return None
        if not 200 <= answer.status < 300:
            return Unusable(f"prebuilt {where}: HTTP {answer.status}")
        return answer.body


def spread(shas: list[str], n: int) -> list[str]:
    """At most `n` of `shas`, evenly spread, the ends included."""
    if len(shas) <= n:
        return list(shas)
    return list(dict.fromkeys(shas[round(i * (len(shas) - 1) / (n - 1))] for i in range(n)))


def _client(url: str) -> HttpClient:
    parts = urllib.parse.urlsplit(url)
    return HttpClient(
        f"{parts.scheme}://{parts.netloc}", {}, target=parts.netloc, token_var="", error=PrebuiltUnavailable,
        max_attempts=2, unreachable=lambda why: f"no answer ({why})",
    )  # fmt: skip
