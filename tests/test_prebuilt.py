"""Issue 31: prebuilt binaries ([build] prebuilt = a directory or URL template over {sha}).

Real git trees from attrib.demo built by the real builder; archives made with tarfile from
those builds; a real HTTP server on loopback (http.server) for the URL form.
"""

from __future__ import annotations

import hashlib
import io
import random
import tarfile
import threading
import tomllib
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import spec

from attrib.core.model import BuildHow
from attrib.demo import DEMO_RECIPE
from attrib.errors import ConfigError
from attrib.evaluate import prebuilt
from attrib.evaluate.builds import CheckoutBuilder
from attrib.evaluate.executors.local import LocalExecutor
from attrib.evaluate.prebuilt import MAX_LOOKUPS, PrebuiltSource, prebuilt_archives
from attrib.gitrepo import GitRepo, Mirror
from attrib.recipe import BuildSpec, parse_recipe
from attrib.workdir import WorkDir

COMMAND = "make bench"


def _builder(tmp_path: Path, repo: Path, name: str, prebuilt: str | None) -> CheckoutBuilder:
    work = WorkDir((tmp_path / name).resolve())
    build = BuildSpec(commands=(COMMAND,), env={"CFLAGS": "-O2"}, artifacts=("bench",), prebuilt=prebuilt)
    return CheckoutBuilder(work, Mirror(work.mirror, GitRepo(repo)), LocalExecutor(), build)


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _publish(store: Path, sha: str, archive: bytes, digest: str | None = "auto") -> None:
    store.mkdir(parents=True, exist_ok=True)
    (store / f"{sha}.tar.gz").write_bytes(archive)
    if digest is not None:
        text = hashlib.sha256(archive).hexdigest() if digest == "auto" else digest
        (store / f"{sha}.tar.gz.sha256").write_text(f"{text}  {sha}.tar.gz\n")


@pytest.fixture
def built(make_tree, tmp_path):
    """A tree, its commits, and each commit's `bench` as a clean build gives it."""
    tree = make_tree(spec(commits=5, culprits=((3, 10),), broken=None, gpu_culprit=False))
    repo = GitRepo(tree.path)
    commits = [repo.info(s) for s in repo.first_parent_chain(tree.good, tree.bad)]
    plain = _builder(tmp_path, tree.path, "plain", None)
    records = {c.sha: plain.build(c) for c in commits}
    benches = {sha: (Path(r.checkout) / "bench").read_bytes() for sha, r in records.items()}
    return tree, commits, records, benches


def test_the_key_parses_and_a_bad_template_names_it():
    extra = 'artifacts = ["bench"]\nprebuilt = "https://ci.example/b/{sha}.tar.gz"\n'
    r = parse_recipe(tomllib.loads(DEMO_RECIPE.replace("[build]\n", "[build]\n" + extra, 1)), Path("r.toml"))
    assert r.build.prebuilt == "https://ci.example/b/{sha}.tar.gz"
    for bad in ('"https://ci.example/b/latest.tar.gz"', '"builds/{sha}.tar.gz"'):
        text = DEMO_RECIPE.replace("[build]\n", f"[build]\nprebuilt = {bad}\n", 1)
        with pytest.raises(ConfigError, match=r"build\.prebuilt.*\{sha\}"):
            parse_recipe(tomllib.loads(text), Path("r.toml"))


def test_an_archive_replaces_the_build_and_a_missing_one_is_built(built, tmp_path):
    tree, commits, records, benches = built
    store = tmp_path / "store"
    with_archive = commits[::2]
    for c in with_archive:
        _publish(store, c.sha, _tar({"bench": benches[c.sha]}))
    builder = _builder(tmp_path, tree.path, "w", f"{store}/{{sha}}.tar.gz")
    for c in commits:
        rec = builder.build(c)
        assert rec.ok and rec.artifact == records[c.sha].artifact, rec  # the same binary either way
        log = Path(rec.log_path).read_text()
        if c in with_archive:
            assert rec.how is BuildHow.PREBUILT and rec.note == ""
            assert "checked against its published sha256" in log and "$ make bench" not in log
        else:
            assert rec.how is BuildHow.CLEAN and rec.note == f"no prebuilt archive at {store}/{c.sha}.tar.gz"
            assert "$ make bench" in log
    assert builder.fresh_builds == len(commits)  # records; what ran: the log's commands
    # a culprit's end that was unpacked is built here and compared: the same binary, no warning
    assert builder.differ_from_clean([(with_archive[0], builder.build(with_archive[0]))])[0][with_archive[0].sha] is False


@pytest.mark.parametrize(
    "corrupt, why",
    [
        ("digest", "sha256"),
        ("garbage", "not an archive that unpacks"),
        ("no-artifact", "matched no file"),
        ("escape", "not an archive that unpacks"),
    ],
)
def test_a_corrupt_archive_is_built_instead_and_says_why(built, tmp_path, corrupt, why):
    tree, commits, records, benches = built
    c, store = commits[1], tmp_path / "store"
    good = _tar({"bench": benches[c.sha]})
    match corrupt:
        case "digest":  # the archive is not what was published: another build's binary
            _publish(store, c.sha, _tar({"bench": benches[commits[0].sha] + b"x"}), hashlib.sha256(good).hexdigest())
        case "garbage":
            _publish(store, c.sha, b"\x1f\x8b not a gzip stream", None)
        case "no-artifact":
            _publish(store, c.sha, _tar({"README": b"the binary is elsewhere\n"}))
        case "escape":
            _publish(store, c.sha, _tar({"../../outside": b"#!/bin/sh\n", "bench": benches[c.sha]}))
    builder = _builder(tmp_path, tree.path, "w", f"{store}/{{sha}}.tar.gz")
    rec = builder.build(c)
    assert rec.ok and rec.how is BuildHow.CLEAN and why in rec.note, rec.note
    assert rec.artifact == records[c.sha].artifact  # built here: the clean binary
    assert f"# {rec.note}: building it" in Path(rec.log_path).read_text()
    assert not (tmp_path / "outside").exists() and not (tmp_path / "w" / "outside").exists()


def test_a_wrong_binary_that_was_published_is_named_by_the_ends_check(built, tmp_path):
    """An archive with a matching digest that is another toolchain's (here: another commit's)
    binary unpacks; the check of a culprit's end built here finds it."""
    tree, commits, records, benches = built
    c, store = commits[2], tmp_path / "store"
    _publish(store, c.sha, _tar({"bench": benches[commits[0].sha] + b"\0"}))
    builder = _builder(tmp_path, tree.path, "w", f"{store}/{{sha}}.tar.gz")
    rec = builder.build(c)
    assert rec.how is BuildHow.PREBUILT and rec.artifact != records[c.sha].artifact
    assert builder.differ_from_clean([(c, rec)])[0][c.sha] is True


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    handler = partial(SimpleHTTPRequestHandler, directory=str(root))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        thread.join(5)


def test_archives_over_http(built, tmp_path, server):
    tree, commits, records, benches = built
    root, url = server
    _publish(root, commits[0].sha, _tar({"bench": benches[commits[0].sha]}), digest=None)
    builder = _builder(tmp_path, tree.path, "w", url + "/{sha}.tar.gz")
    first, second = builder.build(commits[0]), builder.build(commits[1])
    assert first.how is BuildHow.PREBUILT and first.note == "prebuilt, no digest published"
    assert first.artifact == records[commits[0].sha].artifact
    assert second.how is BuildHow.CLEAN and second.note.endswith("(404)") and second.artifact == records[commits[1].sha].artifact


def test_over_http_the_search_asks_a_bounded_spread_of_the_range(tmp_path):
    """The search's preference asked every commit of the range one HEAD each; a range of 200
    commits is now at most MAX_LOOKUPS HEADs, spread over it, ends included."""
    root = tmp_path / "served"
    root.mkdir()
    shas = [hashlib.sha1(str(i).encode()).hexdigest() for i in range(200)]
    for sha in shas[::3]:
        (root / f"{sha}.tar.gz").write_bytes(b"x")
    asked: list[str] = []

    class Counting(SimpleHTTPRequestHandler):
        def do_HEAD(self) -> None:
            asked.append(self.path.strip("/").removesuffix(".tar.gz"))
            super().do_HEAD()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Counting, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        found = prebuilt_archives(url + "/{sha}.tar.gz", ("bench",)).among(shas)
    finally:
        httpd.shutdown()
        thread.join(5)
    assert len(asked) == MAX_LOOKUPS and asked[0] == shas[0] and asked[-1] == shas[-1]
    assert found == {s for s in asked if s in shas[::3]} and found


def test_over_http_a_server_that_does_not_answer_is_asked_about_one_commit(tmp_path):
    """A server that drops every connection: the preference stops at the first commit (its
    client's attempts) instead of waiting out every commit of the range."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted = []

    def drop() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(1)
            conn.close()

    thread = threading.Thread(target=drop, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        shas = [hashlib.sha1(str(i).encode()).hexdigest() for i in range(40)]
        assert prebuilt_archives(url + "/{sha}.tar.gz", ("bench",)).among(shas) == frozenset()
    finally:
        listener.close()
        thread.join(5)
    assert 1 <= len(accepted) <= 2  # one commit, its client's two attempts: not 40 commits' worth


def _unpack_spied(monkeypatch, source: PrebuiltSource, sha: str, tmp_path: Path):
    """`source.unpack` of `sha`, with what unpack_tar was handed (the path, whether it was a
    file then, its size); and whether the scratch dir was left behind."""
    seen: list[tuple[Path, bool, int]] = []
    real = prebuilt.unpack_tar

    def spy(archive: Path, into: Path) -> None:
        seen.append((archive, archive.is_file(), archive.stat().st_size))
        real(archive, into)

    monkeypatch.setattr(prebuilt, "unpack_tar", spy)
    checkout, scratch = tmp_path / "checkout", tmp_path / "work" / "scratch" / "prebuilt-key"
    checkout.mkdir(exist_ok=True)
    got = source.unpack(sha, checkout, scratch)
    return got, seen, scratch.exists(), checkout


def test_an_archive_is_unpacked_from_a_file_never_from_memory(monkeypatch, tmp_path, server):
    """A directory's archive is opened where it lies; an HTTP one is written to a file in the
    build's scratch dir, which is gone once the unpacking is done."""
    sha = "ab" * 20
    archive = _tar({"bench": b"\x7fELF a binary"})
    store = tmp_path / "store"
    _publish(store, sha, archive)
    got, seen, left, checkout = _unpack_spied(monkeypatch, prebuilt_archives(f"{store}/{{sha}}.tar.gz", ("bench",)), sha, tmp_path)
    assert got == prebuilt.Unpacked(checked=True) and (checkout / "bench").read_bytes() == b"\x7fELF a binary"
    assert seen == [(store / f"{sha}.tar.gz", True, len(archive))] and not left  # no copy of it

    root, url = server
    _publish(root, sha, archive)
    got, seen, left, _ = _unpack_spied(monkeypatch, prebuilt_archives(url + "/{sha}.tar.gz", ("bench",)), sha, tmp_path)
    assert got == prebuilt.Unpacked(checked=True)
    ((path, was_file, size),) = seen
    assert was_file and size == len(archive) and path.parent == tmp_path / "work" / "scratch" / "prebuilt-key"
    assert not left and not path.exists()  # removed with the scratch dir


def test_an_http_archive_whose_connection_drops_is_fetched_again_whole(tmp_path):
    """The first answer stops halfway through the archive (its Content-Length promising all of
    it). Taken as the whole archive it was refused (its digest differs, or it does not unpack)
    and the commit built; fetched again, it unpacks and matches its published digest."""
    sha = "cd" * 20
    binary = random.Random(31).randbytes(256 << 10)  # incompressible: the archive is as long
    archive = _tar({"bench": binary})
    digest = f"{hashlib.sha256(archive).hexdigest()}  {sha}.tar.gz\n".encode()
    gets: list[str] = []

    class Dropping(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            gets.append(self.path)
            body = archive if self.path.endswith(".tar.gz") else digest
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.path.endswith(".tar.gz") and gets.count(self.path) == 1:
                self.wfile.write(body[: len(body) // 2])
                self.close_connection = True
                return
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Dropping)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        source = prebuilt_archives(f"http://127.0.0.1:{httpd.server_address[1]}/{{sha}}.tar.gz", ("bench",))
        checkout = tmp_path / "checkout"
        checkout.mkdir()
        got = source.unpack(sha, checkout, tmp_path / "scratch")
    finally:
        httpd.shutdown()
        thread.join(5)
    assert got == prebuilt.Unpacked(checked=True), got
    assert gets == [f"/{sha}.tar.gz", f"/{sha}.tar.gz", f"/{sha}.tar.gz.sha256"]
    assert (checkout / "bench").read_bytes() == binary


def test_an_http_archive_too_large_is_refused_and_leaves_nothing(monkeypatch, tmp_path, server):
    root, url = server
    sha = "ef" * 20
    _publish(root, sha, _tar({"bench": random.Random(31).randbytes(64 << 10)}), digest=None)  # no compression helps
    monkeypatch.setattr(prebuilt, "MAX_ARCHIVE_BYTES", 4096)
    checkout, scratch = tmp_path / "checkout", tmp_path / "scratch"
    checkout.mkdir()
    got = prebuilt_archives(url + "/{sha}.tar.gz", ("bench",)).unpack(sha, checkout, scratch)
    assert isinstance(got, prebuilt.Unusable) and got.why.endswith("the answer is longer than 4096 bytes"), got
    assert got.why.startswith(f"prebuilt {url}/{sha}.tar.gz: ")
    assert not scratch.exists() and not any(checkout.iterdir())
