"""Prebuilt binaries from GitHub Actions (`[build.prebuilt_github]`): a commit's build as the
artifact its CI uploaded, found and fetched through attrib/github_actions.py.

For a commit: the newest successful run of the recipe's workflow for that head sha, its artifact
of the recipe's name (`{sha}` replaced), not expired, no larger than MAX_ARCHIVE_BYTES; its zip
downloaded (the API's 302 followed without the token), checked against the `digest` GitHub
publishes for it where it does, and unpacked safely (evaluate/unpacking.py): members with an
absolute path, a `..`, a backslash, a drive or a `.git`, symbolic links, other special files and
encrypted members refuse the zip; it may have MAX_MEMBERS members, and its files may add up to
MAX_UNPACKED_BYTES. A zip of exactly one `.tar`/`.tar.gz`/`.tgz`/`.tar.xz`/`.tar.bz2` (the
way to keep file modes through upload-artifact, which drops them) is that tar, unpacked as
evaluate/prebuilt.py unpacks one. The result must hold every artifact glob.
The zip is written to a file in the build's scratch directory as it downloads, its digest is
computed over that file, and its members (the one tar too) are copied out a chunk at a time,
the size bound counted while copying, not taken from the zip's headers: memory does not grow
with the artifact.

Every other outcome is `Unusable` with one line, and the commit is built as without the key: no
token in the recipe's variable, 401, 403, a rate limit, no answer, no successful run, no artifact
of that name, an expired one, a digest that differs, a zip that does not unpack, a missing glob.

What the search asks (`among`: which commits of the range have an artifact, so that it prefers
them) is one lookup per commit, remembered for the run (and used again by the unpacking), at most
MAX_LOOKUPS commits spread over the range, and it stops at the first failure that is not about
the commit (credentials, rate limit, no answer): the rest would fail the same way.
"""

from __future__ import annotations

import os
import re
import stat
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from attrib.errors import PrebuiltUnavailable, ResponseTooLarge
from attrib.evaluate.artifacts import sha256_of
from attrib.evaluate.prebuilt import (
    MAX_ARCHIVE_BYTES,
    MAX_LOOKUPS,
    Unpacked,
    Unusable,
    emptied,
    install,
    spread,
    unpack_tar,
)
from attrib.evaluate.unpacking import (
    MAX_MEMBERS,
    MAX_UNPACKED_BYTES,
    Tree,
    check_zip_directory,
    chunks_of,
    file_mode,
    safe_parts,
)
from attrib.github_actions import NEED, Actions, Artifact, headers
from attrib.http import HttpClient, Sleep
from attrib.recipe import PrebuiltGithub

LOOKUP_DEADLINE_S = 30.0  # one commit's lookup, every request, retry and wait
ATTEMPTS = 3
BACKOFF_S = 0.5
MAX_WAIT_S = 10.0  # a rate limit asking for longer: this commit is built, said so
TIMEOUT_S = 30.0  # one connect or read
_TAR = re.compile(r".+\.(tar|tar\.gz|tgz|tar\.xz|tar\.bz2)")


@dataclass(frozen=True)
class _Found:
    run_id: int
    artifact: Artifact


class GithubArtifacts:
    def __init__(
        self,
        source: PrebuiltGithub,
        artifacts: tuple[str, ...],
        environ: Mapping[str, str] = os.environ,
        sleep: Sleep | None = None,
    ) -> None:
        self.source = source
        self.artifacts = artifacts
        self.token = environ.get(source.token_env, "").strip()
        self.sleep = sleep
        self.lookups = 0  # commits asked about (tests and the curious)
        self._known: dict[str, _Found | Unusable] = {}  # the answers about a commit, not failures to ask

    def where(self, sha: str) -> str:
        s = self.source
        return f"github:{s.repo} {s.workflow} artifact {s.artifact_name(sha)}"

    def among(self, shas: list[str]) -> frozenset[str]:
        """The commits of `shas` (at most MAX_LOOKUPS of them, spread over the list) that have
        an artifact to unpack."""
        found: set[str] = set()
        for sha in spread(shas, MAX_LOOKUPS):
            got, about_the_commit = self._lookup(sha)
            if isinstance(got, _Found):
                found.add(sha)
            elif not about_the_commit:
                break
        return frozenset(found)

    def unpack(self, sha: str, checkout: Path, scratch: Path) -> Unpacked | Unusable:
        """`sha`'s artifact unpacked into `checkout`, or why not."""
        got, _ = self._lookup(sha)
        if isinstance(got, Unusable):
            return got
        art = got.artifact
        label = f"prebuilt artifact {art.name} (id {art.id}) of run {got.run_id} of github:{self.source.repo}"
        if art.size is not None and art.size > MAX_ARCHIVE_BYTES:
            return Unusable(f"{label}: {art.size} bytes, larger than {MAX_ARCHIVE_BYTES >> 20} MiB")
        with emptied(scratch):
            zipped = scratch / "artifact.zip"  # beside the tree it unpacks to; both go on return
            try:
                Actions(self._http(None), self.source.repo).download_to(art.id, zipped, MAX_ARCHIVE_BYTES)
            except (PrebuiltUnavailable, ResponseTooLarge) as exc:
                return Unusable(f"{label}: {exc}")
            if art.sha256 is not None and (digest := sha256_of(zipped)) != art.sha256:
                return Unusable(f"{label}: sha256 {digest[:12]}... but GitHub's digest says {art.sha256[:12]}...")
            bad = install(label, lambda into: unpack_zip(zipped, into), checkout, scratch / "tree", self.artifacts)
            return bad or Unpacked(checked=art.sha256 is not None)

    def _lookup(self, sha: str) -> tuple[_Found | Unusable, bool]:
        """The newest successful run's live artifact, or why there is none; and whether that is
        an answer about the commit (remembered) rather than a failure to ask."""
        s = self.source
        if not self.token:
            return Unusable(
                f"prebuilt from github:{s.repo}: no token: ${s.token_env} is not set (it needs {NEED})"
            ), False
        if sha in self._known:
            return self._known[sha], True
        self.lookups += 1
        actions = Actions(self._http(LOOKUP_DEADLINE_S), s.repo)
        name = s.artifact_name(sha)
        try:
            runs = actions.successful_runs(s.workflow, sha)
            listed = actions.artifacts(runs[0], name) if runs else []
        except (PrebuiltUnavailable, ResponseTooLarge) as exc:
            return Unusable(f"prebuilt artifact {name}: {exc}"), False
        live = [a for a in listed if not a.expired]
        got: _Found | Unusable
        if not runs:
            got = Unusable(
                f"no prebuilt artifact: github:{s.repo} has no successful run of {s.workflow} for {sha[:12]}"
            )
        elif live:
            got = _Found(runs[0], live[0])
        elif listed:
            got = Unusable(f"no prebuilt artifact: {name} of run {runs[0]} of github:{s.repo} has expired")
        else:
            got = Unusable(
                f"no prebuilt artifact: run {runs[0]} of {s.workflow} (github:{s.repo}) has no artifact named {name}"
            )
        self._known[sha] = got
        return got, True

    def _http(self, deadline_s: float | None) -> HttpClient:
        s = self.source
        return HttpClient(
            s.api_url, headers(self.token), target=f"github:{s.repo}", token_var=f"the token in ${s.token_env}",
            error=PrebuiltUnavailable, max_attempts=ATTEMPTS, backoff_s=BACKOFF_S, max_wait_s=MAX_WAIT_S,
            timeout_s=TIMEOUT_S, deadline_s=deadline_s, unreachable=lambda why: f"github:{s.repo}: no answer from {s.api_url} ({why})",
            **({} if self.sleep is None else {"sleep": self.sleep}),
        )  # fmt: skip


def unpack_zip(zipped: Path, into: Path) -> None:
    """The artifact's zip at `zipped` unpacked into `into` (evaluate/unpacking.py's checks and
    writes); a ValueError (or zipfile's own) for anything that would land outside it, a link,
    another special file, an encrypted member, more than MAX_MEMBERS members or more than
    MAX_UNPACKED_BYTES. A zip of one tar: that tar is copied out beside `zipped` (removed
    afterwards) and unpacked from there."""
    check_zip_directory(zipped)
    with zipfile.ZipFile(zipped) as zf:
        members = zf.infolist()
        if len(members) > MAX_MEMBERS:
            raise ValueError(f"more than {MAX_MEMBERS} members")
        files = [m for m in members if not m.is_dir()]
        if len(files) == 1 and _TAR.fullmatch(PurePosixPath(files[0].filename).name):
            inner = zipped.with_name(zipped.name + ".tar")
            try:
                with inner.open("wb") as out:
                    for chunk in _chunks(zf, files[0], MAX_ARCHIVE_BYTES):
                        out.write(chunk)
                unpack_tar(inner, into)
            finally:
                inner.unlink(missing_ok=True)
            return
        left = MAX_UNPACKED_BYTES
        with Tree(into) as tree:
            for m in members:
                parts = safe_parts(m.filename)
                mode = m.external_attr >> 16
                if stat.S_ISLNK(mode):
                    raise ValueError(f"{m.filename!r} is a symbolic link")
                if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
                    raise ValueError(
                        f"{m.filename!r} is a special file (mode {mode:o}): only regular files and directories are unpacked"
                    )
                if m.flag_bits & 0x1:
                    raise ValueError(f"{m.filename!r} is encrypted")
                if m.is_dir() or not parts:
                    tree.directory(parts)
                    continue
                # upload-artifact keeps no modes; a zip made on Unix may: at most rwxr-xr-x
                left -= tree.file(
                    parts, _chunks(zf, m, left), file_mode(mode) if stat.S_ISREG(mode) and mode & 0o777 else 0o644
                )


def _chunks(zf: zipfile.ZipFile, member: zipfile.ZipInfo, limit: int) -> Iterator[bytes]:
    """`member`'s bytes a chunk at a time, at most `limit` of them."""
    refusal = f"its files add up to more than {MAX_UNPACKED_BYTES >> 20} MiB (member {member.filename!r})"
    if member.file_size > limit:
        raise ValueError(refusal)
    with zf.open(member) as src:
        yield from chunks_of(src, limit, refusal)
