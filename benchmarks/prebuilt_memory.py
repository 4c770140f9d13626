"""Issue 31: what unpacking one prebuilt archive costs in memory, before and after archives
streamed through files (s38).

    .venv/bin/python benchmarks/prebuilt_memory.py --old /tmp/attrib-old [--new .] [--mib 512]
        [--trials 2] [--work /tmp/attrib-prebuilt-memory] [--out OUT.json]

One archive: a tar of one file `bench` of `--mib` MiB of random bytes (incompressible), unpacked
by `prebuilt_archives(...).unpack` / `GithubArtifacts.unpack` of each source tree (`--old`: a tree of
attrib before the change, e.g. `git archive <rev> attrib | tar -x -C /tmp/attrib-old`; `--new`:
this one), each measurement in a fresh subprocess (PYTHONPATH = that tree; the child prints the
`attrib` it imported), three ways:

- `dir`: `[build] prebuilt` naming a directory holding the tar and its `.sha256`;
- `http`: the same files served by a loopback http.server (this process);
- `github`: `[build.prebuilt_github]`: a zip (stored, not deflated: random bytes do not shrink)
  holding the tar, as the way to keep modes through upload-artifact, served by the strict fake
  GitHub of the tests (tests/fake_github_actions.py) with its digest, in a process of its own
  (`--serve-github ZIP`) that holds the zip in memory.

The figure is the child's peak RSS (resource.getrusage(RUSAGE_SELF).ru_maxrss) after the unpack,
and, beside it, the same after its imports (what any child holds before an archive). Linux keeps
a process's high-water mark across exec, so a child's starts at what this process held when it
forked: this process holds no archive (the fake that does is another process). Sources are
interleaved per way, old new old new for `--trials 2`. Disk: the tar (or the zip, only in the
fake's memory) and per measurement the downloaded archive, a zip's tar, the unpacked tree and the
checkout: under 2.5 GiB at 512 MiB; all of it is deleted as it goes and at the end. Writes OUT.json.

Figures: benchmarks/REAL.md, "Fourth session (s38): the memory of one prebuilt unpack".
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_github_actions import REPO, TOKEN, WORKFLOW, serving  # noqa: E402

SHA = "5e" * 20
CHUNK = 1 << 20

CHILD = r"""
import json, resource, sys
from pathlib import Path
import attrib
from attrib.evaluate.prebuilt import prebuilt_archives
from attrib.evaluate.prebuilt_github import GithubArtifacts
from attrib.recipe import PrebuiltGithub

way, where, work, sha = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]
checkout = work / "checkout"
checkout.mkdir(parents=True)
if way == "github":
    api, repo, workflow, token = where.split(" ")
    source = GithubArtifacts(PrebuiltGithub(repo, workflow, "bench-{sha}", api, "BENCH_TOKEN"), ("bench",), {"BENCH_TOKEN": token})
else:
    source = prebuilt_archives(where, ("bench",))
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
got = source.unpack(sha, checkout, work / "scratch" / "prebuilt-key")
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
bench = checkout / "bench"
print(json.dumps({"attrib": attrib.__file__, "got": repr(got), "base_kib": base, "peak_kib": peak,
                  "bench_bytes": bench.stat().st_size if bench.exists() else None}))
"""


class RandomBytes:
    """A file-like source of `size` random bytes (seeded), read a chunk at a time."""

    def __init__(self, size: int, seed: int = 31) -> None:
        self.left, self.rng = size, random.Random(seed)

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return self.rng.randbytes(n)


def write_tar(out: object, size: int) -> None:
    """A plain tar of one file `bench` of `size` random bytes, streamed into `out`."""
    with tarfile.open(fileobj=out, mode="w|") as tar:  # type: ignore[call-overload]
        info = tarfile.TarInfo("bench")
        info.size, info.mode = size, 0o755
        tar.addfile(info, RandomBytes(size))


def sha256_of(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@contextlib.contextmanager
def http_serving(root: Path) -> Iterator[str]:
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def measure(tree: Path, way: str, where: str, work: Path, size: int) -> dict[str, object]:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
        done = subprocess.run(  # -P: not the current directory first, which may hold another attrib
            [sys.executable, "-P", "-c", CHILD, way, where, str(work), SHA], env=env, capture_output=True, text=True, timeout=900
        )
        if done.returncode != 0:
            raise SystemExit(f"{tree} {way}: the child failed:\n{done.stderr[-3000:]}")
        got = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not str(got["attrib"]).startswith(str(tree.resolve())):
        raise SystemExit(f"{tree}: the child imported {got['attrib']}, not this tree's attrib")
    if got["bench_bytes"] != size or "Unpacked" not in str(got["got"]):
        raise SystemExit(f"{tree} {way}: not unpacked whole: {got}")
    return {**got, "peak_mib": round(int(got["peak_kib"]) / 1024, 1), "base_mib": round(int(got["base_kib"]) / 1024, 1)}


def serve_github(zipped: Path) -> None:
    """The fake GitHub with `zipped` as the artifact of SHA's run, until stdin closes; its API's
    URL printed once it holds the zip (the file is removed: the disk holds one copy less)."""
    with serving() as fake:
        fake.publish(SHA, zipped.read_bytes(), f"bench-{SHA}")
        zipped.unlink()
        print(fake.api_url, flush=True)
        sys.stdin.read()


def main() -> None:
    if sys.argv[1:2] == ["--serve-github"]:
        return serve_github(Path(sys.argv[2]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--new", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--work", type=Path, default=Path("/tmp/attrib-prebuilt-memory"))
    ap.add_argument("--ways", default="dir,http,github")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    size = args.mib << 20
    sources = {"old": args.old, "new": args.new}
    ways = args.ways.split(",")
    rows: list[dict[str, object]] = []
    shutil.rmtree(args.work, ignore_errors=True)
    store = args.work / "store"
    store.mkdir(parents=True)

    def run(way: str, where: str) -> None:
        for trial in range(1, args.trials + 1):
            for name, tree in sources.items():
                got = measure(tree, way, where, args.work / "unpack", size)
                rows.append({"way": way, "source": name, "trial": trial, **got})
                print(f"{way:6} {name:3} trial {trial}: peak {got['peak_mib']} MiB (after imports {got['base_mib']} MiB)", flush=True)

    try:
        if {"dir", "http"} & set(ways):
            archive = store / f"{SHA}.tar"
            with archive.open("wb") as f:
                write_tar(f, size)
            (store / f"{SHA}.tar.sha256").write_text(f"{sha256_of(archive)}  {archive.name}\n")
            if "dir" in ways:
                run("dir", f"{store}/{{sha}}.tar")
            if "http" in ways:
                with http_serving(store) as url:
                    run("http", url + "/{sha}.tar")
            shutil.rmtree(store)
            store.mkdir()
        if "github" in ways:
            zipped = store / "artifact.zip"
            with zipfile.ZipFile(zipped, "w", zipfile.ZIP_STORED) as zf, zf.open("bench.tar", "w", force_zip64=True) as member:
                write_tar(member, size)
            server = subprocess.Popen(
                [sys.executable, __file__, "--serve-github", str(zipped)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            try:
                assert server.stdout is not None and server.stdin is not None
                api_url = server.stdout.readline().strip()  # once it holds the zip and removed the file
                if not api_url.startswith("http://"):
                    raise SystemExit(f"the fake GitHub did not start: {api_url!r}")
                run("github", f"{api_url} {REPO} {WORKFLOW} {TOKEN}")
            finally:
                if server.stdin is not None:
                    server.stdin.close()  # its signal to stop
                server.wait(30)
    finally:
        shutil.rmtree(args.work, ignore_errors=True)
    print(f"\n{args.mib} MiB archive; peak RSS of the unpacking child, MiB (per trial)")
    for way in ways:
        cells = {name: [r["peak_mib"] for r in rows if r["way"] == way and r["source"] == name] for name in sources}
        print(f"{way:6} old {cells['old']}  new {cells['new']}")
    if args.out is not None:
        args.out.write_text(json.dumps({"mib": args.mib, "trials": args.trials, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
