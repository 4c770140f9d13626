"""Issue 40, point 2: prebuilt archives as hostile input (evaluate/unpacking.py).

Each archive is crafted here byte for byte or with tarfile/zipfile's writers, published where a
recipe's `prebuilt` reads it (a directory) or served by the fake GitHub Actions on loopback
(tests/fake_github_actions.py), and unpacked through the real sources. Each refusal is one line
naming the member or path and what was expected; nothing lands outside the checkout, and a bomb
is stopped by a cap on members or bytes (counted as read, not timed).
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import os
import shutil
import stat
import subprocess
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_github_actions import REPO, TOKEN, WORKFLOW, serving, tar_gz, zip_of

from attrib.core.model import BuildHow
from attrib.evaluate import prebuilt_github, unpacking
from attrib.evaluate.builds import CheckoutBuilder
from attrib.evaluate.executors.local import LocalExecutor
from attrib.evaluate.prebuilt import Unpacked, Unusable, prebuilt_archives
from attrib.evaluate.prebuilt_github import GithubArtifacts
from attrib.gitrepo import GitRepo, Mirror
from attrib.recipe import BuildSpec, PrebuiltGithub
from attrib.workdir import WorkDir

SHA = "ab" * 20
TOKEN_ENV = "ATTRIB_TEST_UNPACKING_TOKEN"
BINARY = b"\x7fELF the binary CI built"


def _header(name: bytes, kind: bytes = b"0", size: bytes = b"%011o\0" % 0, linkname: bytes = b"") -> bytes:
    """One ustar header block, its fields as given (a size field may be anything, as an attacker's)."""
    block = bytearray(512)
    block[0 : len(name)] = name
    block[100:108] = b"0000755\0"
    block[108:124] = b"0000000\0" * 2
    block[124:136] = size
    block[136:148] = b"%011o\0" % 1_700_000_000
    block[156:157] = kind
    block[157 : 157 + len(linkname)] = linkname
    block[257:265] = b"ustar\x0000"
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def _member(name: bytes, data: bytes) -> bytes:
    return _header(name, size=b"%011o\0" % len(data)) + data + bytes(-len(data) % 512)


def _base256(n: int) -> bytes:
    """GNU's base-256 size field; a negative `n` as CVE-2025-8194's archives carry it."""
    return b"\xff" + (n % (1 << 88)).to_bytes(11, "big") if n < 0 else b"\x80" + n.to_bytes(11, "big")


def _tar(members: list[tarfile.TarInfo | tuple[str, bytes]], fmt: int = tarfile.PAX_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tar.addfile(m)
            else:
                info = tarfile.TarInfo(m[0])
                info.size, info.mode = len(m[1]), 0o755
                tar.addfile(info, io.BytesIO(m[1]))
    return buf.getvalue()


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def _dir(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, 0o777
    return info


def _zip(files: dict[str, bytes], modes: dict[str, int] | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (modes or {}).get(name, 0o100755) << 16
            zf.writestr(info, data)
    return buf.getvalue()


@pytest.fixture
def place(tmp_path):
    """A checkout, a scratch dir and an `outside` beside them that nothing may touch."""
    checkout, outside = tmp_path / "w" / "checkout", tmp_path / "outside"
    checkout.mkdir(parents=True)
    outside.mkdir()
    (outside / "flag").write_bytes(b"untouched\n")
    return checkout, tmp_path / "w" / "scratch" / "prebuilt-key", outside


def _from_directory(tmp_path: Path, archive: bytes, place) -> Unpacked | Unusable:
    checkout, scratch, _ = place
    store = tmp_path / "store"
    store.mkdir(exist_ok=True)
    (store / f"{SHA}.tar.gz").write_bytes(archive)
    return prebuilt_archives(f"{store}/{{sha}}.tar.gz", ("bench",)).unpack(SHA, checkout, scratch)


def _from_github(monkeypatch, zipped: bytes, place) -> Unpacked | Unusable:
    checkout, scratch, _ = place
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    with serving() as github:
        github.publish(SHA, zipped, f"bench-{SHA}")
        source = PrebuiltGithub(REPO, WORKFLOW, "bench-{sha}", github.api_url, TOKEN_ENV)
        return GithubArtifacts(source, ("bench",)).unpack(SHA, checkout, scratch)


def _untouched(place) -> None:
    checkout, scratch, outside = place
    assert sorted(p.name for p in outside.iterdir()) == ["flag"] and (outside / "flag").read_bytes() == b"untouched\n"
    assert not scratch.exists()


def _refused(got: Unpacked | Unusable, *phrases: str) -> str:
    assert isinstance(got, Unusable), got
    assert "\n" not in got.why and all(p in got.why for p in phrases), got.why
    return got.why


FORMS = ["tar", "zip", "zip-of-tar"]


def _published(form: str, files: dict[str, bytes], tmp_path, monkeypatch, place) -> Unpacked | Unusable:
    if form == "tar":
        return _from_directory(tmp_path, tar_gz(files), place)
    zipped = zip_of(files) if form == "zip" else zip_of({"bench.tar.gz": tar_gz(files)})
    return _from_github(monkeypatch, zipped, place)


@pytest.mark.parametrize("form", FORMS)
def test_a_directory_link_of_the_checkout_is_never_written_through(form, tmp_path, monkeypatch, place):
    """The commit's own tree holds `lib -> <outside>`: the archive's lib/libbench.so would land
    there. The copy is refused before anything is written, and the commit is built instead."""
    checkout, _, outside = place
    (checkout / "lib").symlink_to(outside)
    got = _published(form, {"bench": BINARY, "lib/libbench.so": b"a library"}, tmp_path, monkeypatch, place)
    why = _refused(
        got,
        "not copied into the checkout",
        f"'lib' in the checkout is a symbolic link (to '{outside}'), where the archive has a directory",
    )
    assert why.startswith(("prebuilt /", "prebuilt artifact bench-"))
    _untouched(place)
    assert sorted(p.name for p in checkout.iterdir()) == ["lib"]  # nothing half-copied: no bench either


@pytest.mark.parametrize("form", FORMS)
def test_a_file_link_of_the_checkout_is_never_written_through(form, tmp_path, monkeypatch, place):
    checkout, _, outside = place
    (checkout / "bench").symlink_to(outside / "flag")
    got = _published(form, {"bench": BINARY}, tmp_path, monkeypatch, place)
    _refused(got, f"'bench' in the checkout is a symbolic link (to '{outside / 'flag'}'), where the archive has a file")
    _untouched(place)


def test_a_link_made_after_the_check_is_still_not_followed(tmp_path):
    """Tree writes through directory descriptors opened with O_NOFOLLOW: even a link that
    appears between the check and the write is refused, not followed."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "lib").symlink_to(outside)
    with (
        unpacking.Tree(root) as tree,
        pytest.raises(ValueError, match=r"^'lib' is a symbolic link there, not a directory$"),
    ):
        tree.file(("lib", "x"), [b"data"], 0o644)
    (root / "bench").symlink_to(outside / "bench")
    with (
        unpacking.Tree(root) as tree,
        pytest.raises(ValueError, match=r"^'bench' is a symbolic link there, not a file$"),
    ):
        tree.file(("bench",), [b"data"], 0o644)
    assert not any(outside.iterdir())


def test_the_data_filter_bypass_of_cve_2025_4517_is_refused_at_its_first_link(tmp_path, place):
    """CPython's own reproducer of CVE-2025-4517 (Lib/test/test_tarfile.py,
    test_realpath_limit_attack): directories and links whose expansion overflows PATH_MAX, so
    that realpath stops resolving and the "data" filter passes `escape` -> outside; then a hard
    link through it and a file written through that. Python 3.11.7's filter lets it write
    outside the destination; here the first link refuses the archive."""
    checkout, scratch, outside = place
    steps = "abcdefghijklmnop"
    component = "d" * ((os.pathconf(tmp_path, "PC_PATH_MAX") - len(str(scratch / "tree")) - 1) // (len(steps) + 1))
    members: list[tarfile.TarInfo | tuple[str, bytes]] = []
    path = ""
    for step in steps:
        members += [_dir(os.path.join(path, component)), _link(os.path.join(path, step), component)]
        path = os.path.join(path, component)
    linkpath = os.path.join(*steps, "l" * 254)
    members.append(_link(linkpath, os.path.join(*[".."] * len(steps))))
    # from scratch/tree, up to `outside`: tree, prebuilt-key, scratch, w
    members.append(_link("escape", os.path.join(linkpath, "..", "..", "..", "..", "outside")))
    members += [
        _link("flaglink", "escape/flag", tarfile.LNKTYPE),
        ("flaglink", b"overwritten"),
        ("escape/newfile", b"new"),
        ("bench", BINARY),
    ]
    got = _from_directory(tmp_path, gzip.compress(_tar(members)), place)
    _refused(
        got,
        "not an archive that unpacks",
        f"member 'a' is a symbolic link (to '{component}'): only regular files and directories are unpacked",
    )
    _untouched(place)
    assert not any(checkout.iterdir())


@pytest.mark.parametrize(
    "members, phrase",
    [
        ([_link("bench", "/bin/sh")], "member 'bench' is a symbolic link (to '/bin/sh')"),
        ([("x", b"1"), _link("bench", "x", tarfile.LNKTYPE)], "member 'bench' is a hard link (to 'x')"),
        ([tarfile.TarInfo("dev")], None),  # made a character device below
        ([("../outside/new", b"x")], "'../outside/new' would land outside the checkout"),
        ([("/abs/new", b"x")], "'/abs/new' would land outside the checkout"),
        ([("a/../../new", b"x")], "'a/../../new' would land outside the checkout"),
        ([(".git/hooks/post-checkout", b"#!/bin/sh\n")], "'.git/hooks/post-checkout' would write into a .git"),
        (
            [("p" * 120 + "/../../x", b"x")],
            "would land outside the checkout",
        ),  # a pax path, as tarfile writes a long one
    ],
)
def test_members_other_than_files_and_directories_inside_refuse_the_archive(members, phrase, tmp_path, place):
    if phrase is None:
        members[0].type, phrase = tarfile.CHRTYPE, "member 'dev' is a character device"
    got = _from_directory(tmp_path, _tar(members), place)
    _refused(got, "not an archive that unpacks", phrase)
    _untouched(place)


def test_a_gnu_long_name_is_checked_as_any_name(tmp_path, place):
    got = _from_directory(tmp_path, _tar([("../" * 40 + "outside/new", b"x")], tarfile.GNU_FORMAT), place)
    _refused(got, "would land outside the checkout")
    _untouched(place)


@pytest.mark.parametrize("size", [-1, -512, -(1 << 40)])
def test_a_negative_member_size_is_refused_at_its_header(size, tmp_path, place):
    """CVE-2025-8194: a negative size moved tarfile's offset back onto a header it had read, so
    unpacking never ended and memory grew until it ran out."""
    archive = _member(b"bench", BINARY) + _header(b"evil", size=_base256(size)) + _member(b"more", b"x") + bytes(1024)
    got = _from_directory(tmp_path, archive, place)
    _refused(got, f"member 'evil' has a negative size ({size})")
    _untouched(place)


def test_a_negative_pax_size_is_refused(tmp_path, place):
    record = b"12 size=-99\n"
    archive = (
        _header(b"pax", b"x", b"%011o\0" % len(record))
        + record
        + bytes(512 - len(record))
        + _member(b"bench", BINARY)
        + bytes(1024)
    )
    _refused(_from_directory(tmp_path, archive, place), "member 'bench' has a negative size (-99)")


@contextlib.contextmanager
def _counting(monkeypatch) -> Iterator[list[int]]:
    """How many decompressed bytes unpacking read (the sum of its reads' answers)."""
    read: list[int] = [0]
    real = unpacking.decompressed

    class Counted:
        def __init__(self, stream):
            self.stream = stream

        def read(self, n: int = -1) -> bytes:
            got = self.stream.read(n)
            read[0] += len(got)
            return got

    @contextlib.contextmanager
    def spy(archive: Path):
        with real(archive) as stream:
            yield Counted(stream)

    monkeypatch.setattr(unpacking, "decompressed", spy)
    yield read


def test_a_bz2_bomb_is_refused_at_its_header_without_decompressing_it(monkeypatch, tmp_path, place):
    """A tar.bz2 of a few kilobytes whose member says (truly) it is 64 GiB of zeros: bzip2
    streams concatenated, each 45 MiB of zeros. Summing sizes read all of it; here its header is
    over the cap, and what was decompressed is that header."""
    zeros = bz2.compress(bytes(45 << 20), 9)
    count = (64 << 30) // (45 << 20) + 1
    bomb = bz2.compress(_header(b"bench", size=_base256(count * (45 << 20)))) + zeros * count
    assert len(bomb) < 128 << 10
    with _counting(monkeypatch) as read:
        got = _from_directory(tmp_path, bomb, place)
    _refused(got, f"its files add up to more than 8192 MiB (member 'bench': {count * (45 << 20)} bytes)")
    assert read[0] == 512  # the one header, not a byte of its data
    _untouched(place)


def test_files_that_add_up_past_the_cap_stop_it_when_they_pass(monkeypatch, tmp_path, place):
    """Each member within the cap, together more: refused at the member that passes it, having
    read no more than the cap and the headers."""
    monkeypatch.setattr(unpacking, "MAX_UNPACKED_BYTES", 4 << 20)
    archive = bz2.compress(b"".join(_member(b"f%d" % i, bytes(1 << 20)) for i in range(64)) + bytes(1024))
    with _counting(monkeypatch) as read:
        got = _from_directory(tmp_path, archive, place)
    _refused(got, "its files add up to more than 4 MiB (member 'f4': 1048576 bytes)")
    assert read[0] == (4 << 20) + 5 * 512
    _untouched(place)


def test_more_members_than_the_cap_stop_it_at_the_cap(monkeypatch, tmp_path, place):
    """A million empty members took 453 MiB and 80 s; the cap stops reading at MAX_MEMBERS + 1."""
    monkeypatch.setattr(unpacking, "MAX_MEMBERS", 100)
    archive = gzip.compress(b"".join(_header(b"e%07d" % i) for i in range(10_000)) + bytes(1024))
    with _counting(monkeypatch) as read:
        got = _from_directory(tmp_path, archive, place)
    _refused(got, "not an archive that unpacks", "more than 100 members")
    assert read[0] == 101 * 512
    _untouched(place)


def test_a_huge_extension_header_is_refused_before_it_is_read(monkeypatch, tmp_path, place):
    """A pax header is read whole to be parsed: one claiming gigabytes is refused at its header."""
    archive = bz2.compress(_header(b"pax", b"x", _base256(4 << 30)) + bytes(1 << 20))
    with _counting(monkeypatch) as read:
        got = _from_directory(tmp_path, archive, place)
    _refused(got, "an extension header of 4294967296 bytes after member 0 (at most 65536)")
    assert read[0] == 512


@pytest.mark.parametrize(
    "files, modes, phrase",
    [
        ({"dev": b""}, {"dev": stat.S_IFCHR | 0o644}, "'dev' is a special file (mode 20644)"),
        ({".git/config": b"[core]\n"}, {}, "'.git/config' would write into a .git"),
        ({f"f{i}": b"" for i in range(101)}, {}, "more than 100 members"),
    ],
)
def test_zip_members_are_held_to_the_same_rules(files, modes, phrase, monkeypatch, place):
    monkeypatch.setattr("attrib.evaluate.prebuilt_github.MAX_MEMBERS", 100)
    _refused(_from_github(monkeypatch, _zip(files, modes), place), "not an archive that unpacks", phrase)
    _untouched(place)


def test_a_zip_of_too_many_members_is_refused_by_its_end_record_before_zipfile_reads_them(monkeypatch, tmp_path):
    """zipfile makes an object of every central directory entry before anyone can count them (a
    million empty members: 585 MiB); the end record's count and directory size are read first.
    An end record that lies about the count is caught by the directory's size."""
    monkeypatch.setattr(unpacking, "MAX_MEMBERS", 100)
    zipped = tmp_path / "a.zip"
    zipped.write_bytes(_zip({f"e{i:07d}": b"" for i in range(1000)}))
    opened: list[object] = []
    monkeypatch.setattr(zipfile.ZipFile, "__init__", lambda self, *a, **k: opened.append(a))
    with pytest.raises(ValueError, match=r"^more than 100 members \(1000\)$"):
        prebuilt_github.unpack_zip(zipped, tmp_path)
    lying = bytearray(zipped.read_bytes())
    end = lying.rfind(b"PK\x05\x06")
    lying[end + 8 : end + 12] = b"\x01\x00\x01\x00"  # one member, it says
    zipped.write_bytes(lying)
    with pytest.raises(ValueError, match=r"^a central directory of 5\d{4} bytes, more than 100 members take$"):
        prebuilt_github.unpack_zip(zipped, tmp_path)
    assert opened == []


def _listing(root: Path) -> dict[str, tuple[bytes | None, int]]:
    return {
        str(p.relative_to(root)): (None if p.is_dir() else p.read_bytes(), stat.S_IMODE(p.stat().st_mode) & 0o111)
        for p in root.rglob("*")
    }  # fmt: skip


@pytest.mark.parametrize("how", ["gnu-gz", "pax-bz2", "posix-xz", "python-pax", "git-archive"])
def test_what_real_tools_make_unpacks_whole(how, tmp_path):
    """Archives made by GNU tar (its long-name headers), pax and ustar formats, tarfile (pax
    headers for a long, non-ASCII name), git archive (a global pax header): unpacked as made."""
    src = tmp_path / "src"
    deep = src / "lib" / ("long-directory-name-" * 8) / "ünïcode"
    deep.mkdir(parents=True)
    (src / "bench").write_bytes(BINARY)
    (src / "bench").chmod(0o755)
    (deep / ("kernel-" * 20 + ".cubin")).write_bytes(os.urandom(3000))
    (src / "empty").mkdir()
    archive, into = tmp_path / "a", tmp_path / "into"
    into.mkdir()
    match how:
        case "gnu-gz" | "pax-bz2" | "posix-xz":
            fmt, flag = {"gnu-gz": ("gnu", "z"), "pax-bz2": ("pax", "j"), "posix-xz": ("posix", "J")}[how]
            subprocess.run(["tar", f"--format={fmt}", f"-c{flag}f", str(archive), "-C", str(src), "."], check=True)
        case "python-pax":
            with tarfile.open(archive, "w:gz") as tar:
                tar.add(src, arcname=".")
        case "git-archive":
            for args in (
                ["init", "-q"],
                ["add", "-A"],
                ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                ["archive", "-o", str(archive), "HEAD"],
            ):
                subprocess.run(["git", "-C", str(src), *args], check=True)
            shutil.rmtree(src / ".git")  # the listing compares what was archived
            (src / "empty").rmdir()  # git keeps no empty directory
    unpacking.unpack_tar(archive, into)
    assert _listing(into) == _listing(src)


def test_a_commit_whose_tree_links_out_is_built_and_nothing_lands_outside(tmp_path, place):
    """End to end: a real commit whose tree holds `lib -> <outside>`, checked out by the real
    builder; its prebuilt archive has lib/libbench.so. The copy is refused in one line, the
    commit is built here instead (a prebuilt that cannot be used never ends a bisection)."""
    _, _, outside = place
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "Makefile").write_text("bench:\n\tprintf 'built here' > bench\n")
    (repo / "lib").symlink_to(outside)
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    git = GitRepo(repo)
    commit = git.info(git.resolve("HEAD"))
    store = tmp_path / "store"
    store.mkdir()
    (store / f"{commit.sha}.tar.gz").write_bytes(tar_gz({"bench": BINARY, "lib/libbench.so": b"a library"}))
    work = WorkDir((tmp_path / "work").resolve())
    build = BuildSpec(commands=("make bench",), artifacts=("bench",), prebuilt=f"{store}/{{sha}}.tar.gz")
    rec = CheckoutBuilder(work, Mirror(work.mirror, GitRepo(repo)), LocalExecutor(), build).build(commit)
    assert rec.ok and rec.how is BuildHow.CLEAN, rec
    assert rec.note.startswith(
        f"prebuilt {store}/{commit.sha}.tar.gz: not copied into the checkout ('lib' in the checkout is a symbolic link"
    )
    assert (Path(rec.checkout) / "bench").read_bytes() == b"built here"
    assert sorted(p.name for p in outside.iterdir()) == ["flag"]
