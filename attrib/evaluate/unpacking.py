"""Archives as hostile input: a tar's (plain, gzip, bzip2 or xz) or a zip's members written into
an empty directory, and that directory copied into a checkout, the same way on every Python
attrib supports (3.11 and later).

Nothing here leans on tarfile: its "data" filter is bypassed on 3.11.7 (CVE-2025-4517, a file at
an absolute path of the archive's choosing) and a negative member size makes it loop
(CVE-2025-8194). A tar is read here, one 512-byte header at a time, from a decompressing stream,
and every member is checked before a byte of it is written: its name (relative once `.` and
empty parts are dropped, no `..`, no backslash, no drive, no `.git`, at most MAX_NAME_BYTES),
its type (a regular file or a directory: a link, a device, a fifo, a sparse file refuses the
archive), its size (0 or more, within what is left of MAX_UNPACKED_BYTES), the count (at most
MAX_MEMBERS), an extension header's size (at most MAX_HEADER_BYTES). Reading stops at the end
marker, so what is decompressed is bounded by those caps: a bomb stops at them, however far its
stream would go on.

Files are written by `Tree`, never by an archive library: through directory descriptors opened
from the root down with O_NOFOLLOW, a file created afresh (O_EXCL, after unlinking a regular file
of that name), so no symbolic link is followed, whoever put it there. `copy_into` copies an
unpacked tree into a checkout the same way, after checking every path it will write: a directory
that the checkout has as a link (the commit's own `lib -> /elsewhere`), or a file where a
directory goes or the reverse, refuses the copy before anything is written.
"""

from __future__ import annotations

import bz2
import errno
import gzip
import io
import lzma
import os
import re
import stat
import struct
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

MAX_MEMBERS = 100_000  # files and directories of one archive
MAX_UNPACKED_BYTES = 8 << 30  # what its files may add up to once unpacked (a bomb stops here)
MAX_HEADER_BYTES = 64 << 10  # one pax or GNU long-name extension header
MAX_NAME_BYTES = 4096  # a member's name, its directories included (Linux's PATH_MAX)
MAX_EXTENSIONS = 3  # extension headers in a row before one member (GNU: long name, long link)
ZIP_ENTRY_BYTES = 160  # a zip's central directory per member allowed (46 fixed, name, extras)
COPY_CHUNK = 1 << 20
BLOCK = 512

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_REGULAR = (b"0", b"\0", b"7")
_EXTENSION = (b"x", b"g", b"L", b"K")
_KINDS = {
    b"1": "a hard link",
    b"2": "a symbolic link",
    b"3": "a character device",
    b"4": "a block device",
    b"6": "a fifo",
    b"S": "a sparse file",
}
_ONLY = "only regular files and directories are unpacked"
_PAX_RECORD = re.compile(rb"(\d+) ([^=\n]+)=")


class Readable(Protocol):
    def read(self, n: int = ..., /) -> bytes: ...


def safe_parts(name: str) -> tuple[str, ...]:
    """A member's name as the parts of a path under the root; a ValueError naming it when it would
    land outside (absolute, `..`, a backslash, a drive), in a `.git`, or is too long."""
    if len(os.fsencode(name)) > MAX_NAME_BYTES:
        raise ValueError(f"member {name[:64]!r}...: a name of more than {MAX_NAME_BYTES} bytes")
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if name.startswith("/") or "\\" in name or "\0" in name or ".." in parts or ":" in (parts[0] if parts else ""):
        raise ValueError(f"{name!r} would land outside the checkout")
    if ".git" in parts:
        raise ValueError(f"{name!r} would write into a .git")
    return parts


def file_mode(mode: int) -> int:
    """An archive's mode for a file written here: at most rwxr-xr-x, readable and writable by its
    owner, executable by the others only where by its owner (as tarfile's "data" filter)."""
    mode = (mode & 0o755) | 0o600
    return mode if mode & 0o100 else mode & ~0o111


class Tree:
    """Writes under `root`, an existing directory, following no symbolic link on the way."""

    def __init__(self, root: Path) -> None:
        self.fd = os.open(root, _DIR)

    def __enter__(self) -> Tree:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)

    def directory(self, parts: tuple[str, ...]) -> None:
        os.close(self._walk(parts))

    def file(self, parts: tuple[str, ...], chunks: Iterable[bytes], mode: int, mtime: int | None = None) -> int:
        """`parts` written afresh from `chunks` (a link or a directory there refuses it); its size."""
        parent = self._walk(parts[:-1])
        try:
            name = parts[-1]
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise ValueError(f"{'/'.join(parts)!r} is {_kind(st.st_mode)} there, not a file")
            if st is not None:
                os.unlink(name, dir_fd=parent)  # not truncated: another link to it keeps its bytes
            size = 0
            with os.fdopen(os.open(name, _NEW, 0o600, dir_fd=parent), "wb") as out:
                for chunk in chunks:
                    size += out.write(chunk)
                os.fchmod(out.fileno(), mode)
                if mtime is not None and 0 <= mtime < 1 << 33:
                    os.utime(out.fileno(), (mtime, mtime))
            return size
        finally:
            os.close(parent)

    def _walk(self, parts: tuple[str, ...]) -> int:
        """A descriptor of the directory at `parts`, made where missing; a ValueError where one
        of them is anything else than a real directory."""
        fd = os.dup(self.fd)
        try:
            for i, part in enumerate(parts):
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                try:
                    below = os.open(part, _DIR, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                    raise ValueError(
                        f"{'/'.join(parts[: i + 1])!r} is {_kind(st.st_mode)} there, not a directory"
                    ) from None
                os.close(fd)
                fd = below
            return fd
        except BaseException:
            os.close(fd)
            raise


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "a file" if stat.S_ISREG(mode) else "a special file"


@dataclass(frozen=True)
class TarMember:
    name: str
    kind: bytes  # the header's type flag
    size: int
    mode: int
    mtime: int
    linkname: str


def unpack_tar(archive: Path, into: Path) -> None:
    """The tar at `archive` (plain, gzip, bzip2 or xz) unpacked into the empty `into`; a
    ValueError naming the member and what was expected, or the decompressor's own error."""
    left = MAX_UNPACKED_BYTES
    with decompressed(archive) as stream, Tree(into) as tree:
        for member in tar_members(stream):
            parts = safe_parts(member.name)
            if member.kind not in _REGULAR and member.kind != b"5":
                what = _KINDS.get(member.kind, f"of type {member.kind!r}")
                to = f" (to {member.linkname!r})" if member.linkname else ""
                raise ValueError(f"member {member.name!r} is {what}{to}: {_ONLY}")
            if member.kind == b"5":
                if member.size:
                    raise ValueError(f"member {member.name!r} is a directory with {member.size} bytes of data")
                tree.directory(parts)
                continue
            if not parts:
                raise ValueError(f"member {member.name!r} is a file without a name")
            if member.size > left:
                raise ValueError(
                    f"its files add up to more than {MAX_UNPACKED_BYTES >> 20} MiB (member {member.name!r}: {member.size} bytes)"
                )
            left -= member.size
            tree.file(parts, _data(stream, member), file_mode(member.mode), member.mtime)


@contextmanager
def decompressed(archive: Path) -> Iterator[io.BufferedIOBase]:
    """`archive`'s bytes, decompressed as they are read when its first bytes say gzip, bzip2 or xz."""
    with archive.open("rb") as raw:
        magic = raw.read(6)
        raw.seek(0)
        if magic.startswith(b"\x1f\x8b"):
            stream: io.BufferedIOBase = gzip.GzipFile(fileobj=raw)
        elif magic.startswith(b"BZh"):
            stream = bz2.BZ2File(raw)
        elif magic.startswith(b"\xfd7zXZ\x00"):
            stream = lzma.LZMAFile(raw)
        else:
            stream = raw
        with stream:
            yield stream


def tar_members(stream: Readable) -> Iterator[TarMember]:
    """The members of the tar read from `stream`, each with its extension headers (pax, GNU long
    names) applied. The caller reads a regular member's data (`_data`) before asking for the next.
    Stops at the end marker (or the stream's end on a header's boundary), reading nothing more."""
    count = extensions = 0
    pending: dict[str, str] = {}
    while True:
        block = _exact(stream, BLOCK, "a header", allow_end=True)
        if not block or block == bytes(BLOCK):
            return
        member = _header(block, count + 1)
        if member.kind in _EXTENSION:
            extensions += 1
            if extensions > MAX_EXTENSIONS:
                raise ValueError(f"more than {MAX_EXTENSIONS} extension headers in a row after member {count}")
            if not 0 <= member.size <= MAX_HEADER_BYTES:
                raise ValueError(
                    f"an extension header of {member.size} bytes after member {count} (at most {MAX_HEADER_BYTES})"
                )
            _extend(
                pending, member.kind, _exact(stream, _padded(member.size), "an extension header")[: member.size], count
            )
            continue
        count += 1
        if count > MAX_MEMBERS:
            raise ValueError(f"more than {MAX_MEMBERS} members")
        name = pending.get("path", member.name)
        size = _int(pending["size"], f"member {name!r}: pax size") if "size" in pending else member.size
        member = TarMember(name, member.kind, size, member.mode, member.mtime, pending.get("linkpath", member.linkname))
        pending, extensions = {}, 0
        if member.size < 0:
            raise ValueError(f"member {member.name!r} has a negative size ({member.size})")
        yield member


def _header(block: bytes, n: int) -> TarMember:
    """One ustar/GNU header block, read as a member (its name and link not yet extended)."""
    stored = _number(block[148:156], f"header {n}: checksum")
    unsigned = 256 + sum(block[:148]) + sum(block[156:])
    signed = unsigned - 256 * sum(1 for b in block[:148] + block[156:] if b > 127)
    if stored not in (unsigned, signed):
        raise ValueError(f"header {n} is not a tar header (its checksum differs)")
    name = _text(block[:100])
    kind = block[156:157]
    if block[257:265] == b"ustar\x0000" and (prefix := _text(block[345:500])):
        name = prefix + "/" + name
    if kind == b"\0" and name.endswith("/"):
        kind = b"5"  # an old tar's directory
    where = f"member {name!r}"
    return TarMember(
        name, kind, _number(block[124:136], f"{where}: size"), _number(block[100:108], f"{where}: mode"),
        _number(block[136:148], f"{where}: mtime"), _text(block[157:257]),
    )  # fmt: skip


def _extend(pending: dict[str, str], kind: bytes, data: bytes, count: int) -> None:
    """What an extension header says of the member after it, added to `pending`."""
    if kind == b"L":
        pending["path"] = _text(data)
    elif kind == b"K":
        pending["linkpath"] = _text(data)
    else:
        records = _pax(data, count)
        if kind == b"g":
            if {"path", "size"} & records.keys():
                raise ValueError(
                    f"a global pax header after member {count} sets {sorted({'path', 'size'} & records.keys())}"
                )
        elif any(k.startswith("GNU.sparse.") for k in records):
            raise ValueError(f"member {count + 1} is a sparse file: {_ONLY}")
        else:
            pending.update({k: v for k, v in records.items() if k in ("path", "size", "linkpath")})


def _pax(data: bytes, count: int) -> dict[str, str]:
    """A pax header's records ("<length> <key>=<value>\\n"), by key."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(data) and data[pos]:
        match = _PAX_RECORD.match(data, pos)
        end = pos + int(match.group(1)) if match else 0
        if match is None or end > len(data) or end <= match.end() or data[end - 1] != 0x0A:
            raise ValueError(f"the pax header after member {count} does not parse at byte {pos}")
        out[match.group(2).decode("utf-8", "surrogateescape")] = data[match.end() : end - 1].decode(
            "utf-8", "surrogateescape"
        )
        pos = end
    return out


def _data(stream: Readable, member: TarMember) -> Iterator[bytes]:
    """A regular member's `size` bytes a chunk at a time, then its padding read past."""
    left = member.size
    while left:
        chunk = _exact(stream, min(COPY_CHUNK, left), f"member {member.name!r}")
        left -= len(chunk)
        yield chunk
    _exact(stream, _padded(member.size) - member.size, f"member {member.name!r}")


def _exact(stream: Readable, n: int, what: str, allow_end: bool = False) -> bytes:
    """`n` bytes of `stream`; b"" at its end where `allow_end`; a ValueError where it ends sooner."""
    got = b""
    while len(got) < n:
        chunk = stream.read(n - len(got))
        if not chunk:
            break
        got += chunk
    if len(got) < n and not (allow_end and not got):
        raise ValueError(f"the archive ends inside {what}")
    return got


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


def _number(field: bytes, what: str) -> int:
    """A header's number: octal digits, or GNU's base-256 (whose first byte 0xff makes it negative)."""
    if field[:1] in (b"\x80", b"\xff"):
        value = int.from_bytes(field[1:], "big")
        return value - (1 << (8 * (len(field) - 1))) if field[0] == 0xFF else value
    digits = field.split(b"\0", 1)[0].strip(b" ")
    if not re.fullmatch(rb"[0-7]*", digits):
        raise ValueError(f"{what} is {digits!r}, not an octal number")
    return int(digits or b"0", 8)


def _int(text: str, what: str) -> int:
    if not re.fullmatch(r"-?\d{1,20}", text):
        raise ValueError(f"{what} is {text!r}, not a number")
    return int(text)


def _text(field: bytes) -> str:
    return field.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def copy_into(tree: Path, checkout: Path, only: Iterable[str] | None = None, source: str = "the archive") -> None:
    """Every directory and file under `tree` (written by this module: nothing else is there), or
    the files `only` names (paths relative to `tree`: an incremental tree's artifacts, which the
    commit's own build wrote), copied into `checkout`. Each path is checked first: where the
    checkout has a link, or a file where a directory goes or the reverse, or a named file that
    is no file of `tree` (a link out of it), a ValueError naming it and nothing is written."""
    dirs: list[tuple[str, ...]] = []
    files: list[tuple[str, ...]] = []
    if only is None:
        for top, subdirs, names in os.walk(tree):
            rel = Path(top).relative_to(tree).parts
            dirs.extend(rel + (d,) for d in sorted(subdirs))
            files.extend(rel + (f,) for f in sorted(names))
    else:
        files = sorted({Path(rel).parts for rel in only})
        dirs = sorted({f[:i] for f in files for i in range(1, len(f))}, key=len)
        inside = tree.resolve()
        for parts in files:
            path = tree.joinpath(*parts).resolve()
            if ".." in parts or not path.is_relative_to(inside) or not path.is_file():
                raise ValueError(f"{'/'.join(parts)!r} in {source} is no file of it")
    for parts, want in [(d, stat.S_ISDIR) for d in dirs] + [(f, stat.S_ISREG) for f in files]:
        try:
            st = os.lstat(checkout.joinpath(*parts))  # its parents were checked before it: no link follows
        except FileNotFoundError:
            continue
        if not want(st.st_mode):
            target = f" (to {os.readlink(checkout.joinpath(*parts))!r})" if stat.S_ISLNK(st.st_mode) else ""
            expected = "a directory" if want is stat.S_ISDIR else "a file"
            raise ValueError(
                f"{'/'.join(parts)!r} in the checkout is {_kind(st.st_mode)}{target}, where {source} has {expected}"
            )
    with Tree(checkout) as into:
        for parts in dirs:
            into.directory(parts)
        for parts in files:
            path = tree.joinpath(*parts).resolve()  # a link inside the tree: checked above
            st = os.stat(path)
            with path.open("rb") as f:
                into.file(parts, chunks_of(f), stat.S_IMODE(st.st_mode), int(st.st_mtime))


def chunks_of(f: Readable, limit: int | None = None, refusal: str = "") -> Iterator[bytes]:
    """`f`'s bytes a chunk at a time; ValueError(`refusal`) past `limit`, whatever a header said
    of its size: what is read is the bound."""
    size = 0
    while chunk := f.read(COPY_CHUNK if limit is None else min(COPY_CHUNK, limit + 1 - size)):
        size += len(chunk)
        if limit is not None and size > limit:
            raise ValueError(refusal)
        yield chunk


def check_zip_directory(zipped: Path) -> None:
    """A ValueError when the zip's end record says it has more than MAX_MEMBERS members, or a
    central directory longer than ZIP_ENTRY_BYTES each for them: zipfile reads all of it into
    objects before anyone can count them (a million empty members: 585 MiB). The record is found
    as zipfile finds it (the last signature in the file's last 64 KiB); one not found is left to
    zipfile to refuse."""
    with zipped.open("rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - (22 + 0xFFFF)))
        tail = f.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        return
    entries, size = struct.unpack("<10xHL6x", tail[at : at + 22])
    if at >= 76 and tail[at - 20 : at - 16] == b"PK\x06\x07" and tail[at - 76 : at - 72] == b"PK\x06\x06":
        entries, size = struct.unpack("<32xQQ8x", tail[at - 76 : at - 20])  # zip64's end record
    if entries > MAX_MEMBERS:
        raise ValueError(f"more than {MAX_MEMBERS} members ({entries})")
    if size > MAX_MEMBERS * ZIP_ENTRY_BYTES:
        raise ValueError(f"a central directory of {size} bytes, more than {MAX_MEMBERS} members take")
