"""What a build produced, by content: the recipe's `[build] artifacts` globs, hashed.

Two commits whose artifacts are byte-identical run the same code, so they get one verdict and
the second costs no samples (evaluate/evaluation.py). That is only worth anything when builds
are reproducible, so this module also says *why* two artifacts differ when the difference is a
known trap: an embedded build date/time (`__DATE__`, `__TIME__`, a version stamp) or the
build's own path (`__FILE__`, debug info). It reports the trap; it never hides a difference.

Pure parts (`digest_files`, `explain_difference`) take digests, bytes and paths;
`hash_artifacts` is the thin edge that globs a checkout and hashes each file a chunk at a time
(a compiler tree's artifacts are gigabytes: they are never read into memory to be hashed).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from attrib.core.model import ArtifactTrap

MAX_DIFF_BYTES = 64 * 1024 * 1024  # larger artifacts are hashed, but not diagnosed byte by byte
# What a date or a time of day looks like where compilers and build scripts embed them.
_STAMPS = re.compile(
    rb"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d{4}"  # __DATE__
    rb"|\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?)?"  # ISO 8601
    rb"|\d{2}:\d{2}:\d{2}"  # __TIME__
    rb"|\b1[5-9]\d{8}\b"  # a Unix time
)


@dataclass(frozen=True)
class Artifacts:
    digest: str  # sha256 over (relative path, content sha256) of every matched file, sorted
    files: tuple[tuple[str, str], ...]  # (relative path, sha256)


def digest_files(files: Mapping[str, str]) -> Artifacts:
    """Content digest of a set of files, given each one's content sha256 (hex) by name: names
    and bytes, never times or permissions."""
    per = tuple(sorted(files.items()))
    blob = "\n".join(f"{name}\0{h}" for name, h in per)
    return Artifacts(hashlib.sha256(blob.encode()).hexdigest(), per)


def matched(root: Path, globs: Sequence[str]) -> list[Path]:
    out: set[Path] = set()
    for pattern in globs:
        out.update(p for p in root.glob(pattern) if p.is_file())
    return sorted(out)


def hash_artifacts(root: Path, globs: Sequence[str]) -> Artifacts | str:
    """The checkout's artifacts, or one line saying which globs matched nothing."""
    empty = [g for g in globs if not any(p.is_file() for p in root.glob(g))]
    if empty:
        return "[build] artifacts " + ", ".join(repr(g) for g in empty) + " matched no file after the build"
    return digest_files({str(p.relative_to(root)): sha256_of(p) for p in matched(root, globs)})


def sha256_of(path: Path) -> str:
    """The hex sha256 of the file at `path`, read a chunk at a time."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _normalised(data: bytes, paths: Sequence[bytes], traps: set[ArtifactTrap]) -> bytes:
    for path in paths:
        if path and path in data:
            data = data.replace(path, b"<build-path>")
            traps.add(ArtifactTrap.BUILD_PATH)
    out = _STAMPS.sub(b"<stamp>", data)
    if out != data:
        traps.add(ArtifactTrap.TIMESTAMP)
    return out


def explain_difference(a: bytes, b: bytes, path_a: str = "", path_b: str = "") -> tuple[ArtifactTrap, ...]:
    """The traps that account for *every* difference between two artifacts, or () when the
    difference is (also) something else, i.e. real code. `path_a`/`path_b` are the directories
    each was built in."""
    if a == b or max(len(a), len(b)) > MAX_DIFF_BYTES:
        return ()
    traps_a: set[ArtifactTrap] = set()
    traps_b: set[ArtifactTrap] = set()
    paths = [p.encode() for p in (path_a, path_b) if p]
    na, nb = _normalised(a, paths, traps_a), _normalised(b, paths, traps_b)
    if na != nb:
        return ()
    used = traps_a | traps_b
    # A stamp both sides carry identically is no difference: name only what differed.
    if ArtifactTrap.TIMESTAMP in used and _STAMPS.findall(a) == _STAMPS.findall(b):
        used.discard(ArtifactTrap.TIMESTAMP)
    return tuple(sorted(used))


def diagnose(root_a: Path, root_b: Path, a: Artifacts, b: Artifacts) -> tuple[ArtifactTrap, ...]:
    """For two checkouts whose artifacts differ: the traps that explain all of it, or (). A pair
    is read only when both files are regular and within MAX_DIFF_BYTES by their sizes (`_small`),
    and never past it: a pair of large artifacts costs two stats, not their bytes."""
    ha, hb = dict(a.files), dict(b.files)
    if set(ha) != set(hb):
        return ()
    traps: set[ArtifactTrap] = set()
    for name in ha:
        if ha[name] == hb[name]:
            continue
        pair = (root_a / name, root_b / name)
        try:
            if not all(_small(p) for p in pair):  # both sizes known before either is read
                return ()
            da, db = (_read_bounded(p) for p in pair)
        except OSError:
            return ()
        if da is None or db is None:
            return ()
        found = explain_difference(da, db, str(root_a), str(root_b))
        if not found:
            return ()
        traps.update(found)
    return tuple(sorted(traps))


def _small(path: Path) -> bool:
    """Whether `path` is a regular file of at most MAX_DIFF_BYTES, by its stat."""
    st = os.stat(path)
    return stat.S_ISREG(st.st_mode) and st.st_size <= MAX_DIFF_BYTES


def _read_bounded(path: Path) -> bytes | None:
    """`path`'s bytes, read no further than one byte past MAX_DIFF_BYTES; None when it has more
    (it grew since its stat)."""
    with path.open("rb") as f:
        data = f.read(MAX_DIFF_BYTES + 1)
    return data if len(data) <= MAX_DIFF_BYTES else None
