"""Burst benchmark of the daemon's intake: signed flags per second, and its memory at rest,
after a burst and under oversized uploads.

    .venv/bin/python benchmarks/daemon_burst.py [--flags 500] [--distinct 25] [--threads 8]
                                                [--uploads 8] [--upload-mib 32]

Starts a real `attrib daemon` process (--workers 0: it accepts and queues, nothing bisects, so
the figure is the intake alone: signature check, JSON, revision validation with git, SQLite
commit) on 127.0.0.1 with an OS-chosen port, sends the flags from several client threads over
loopback, checks that every flag was accepted and stored and that duplicates were merged, and
prints the rate and the daemon's resident memory (VmRSS/VmHWM from /proc) idle and after the
burst. Then `--uploads` connections at once each send an unsigned `Transfer-Encoding: chunked`
POST of `--upload-mib` MiB in 1 MiB chunks (the hostile case of issue 16); the daemon's peak
resident memory while they run, their answers and the rows they stored are printed.
Figures are printed, not asserted: they depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from attrib.daemon.auth import SIGNATURE_HEADER, sign

SECRET = "burst-benchmark-secret-0123456789"
MIB = 1 << 20
SAMPLE_EVERY_S = 0.02  # how often the memory sampler reads /proc during the uploads


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def _repo(path: Path, commits: int) -> list[str]:
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    shas = []
    for i in range(commits):
        (path / "f.txt").write_text(f"{i}\n")
        _git(path, "add", "f.txt")
        _git(path, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", f"c{i}")
        shas.append(_git(path, "rev-parse", "HEAD"))
    return shas


def _rss_kib(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def _chunked_upload(host: str, port: int, mib: int) -> str:
    """An unsigned chunked POST of `mib` MiB; returns the status line the daemon answered (or
    how the connection ended when it answered nothing)."""
    chunk = b"{" + b" " * (MIB - 2) + b"}"
    with socket.create_connection((host, port), timeout=300) as sock:
        sock.sendall(
            f"POST /v1/regressions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        try:
            for _ in range(mib):
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the daemon answered and closed before the upload ended: read its answer
        try:
            first = sock.makefile("rb").readline().decode("latin-1").strip()
        except OSError as exc:
            return f"connection ended: {type(exc).__name__}"
    return first or "connection closed without an answer"


def _counts(state: Path) -> tuple[int, int]:
    conn = sqlite3.connect(state / "state.db")
    try:
        return conn.execute("SELECT COUNT(*) FROM flags").fetchone()[0], conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
    finally:
        conn.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flags", type=int, default=500)
    ap.add_argument("--distinct", type=int, default=25, help="distinct (good, bad) ranges among the flags")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--uploads", type=int, default=8, help="concurrent oversized chunked uploads")
    ap.add_argument("--upload-mib", type=int, default=32, help="MiB each upload sends")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="attrib-burst-") as tmp:
        root = Path(tmp)
        shas = _repo(root / "repo", args.distinct + 1)
        (root / "recipes").mkdir()
        from attrib.demo import DEMO_RECIPE

        (root / "recipes" / "demo.toml").write_text(DEMO_RECIPE)
        (root / "secret").write_text(SECRET)
        state = root / "state"
        daemon = subprocess.Popen(
            [sys.executable, "-m", "attrib", "daemon", "--state", str(state), "--secret-file", str(root / "secret"),
             "--port", "0", "--workers", "0", "--recipes-dir", str(root / "recipes"), "--max-queue", str(args.distinct)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            for _ in range(600):
                if (state / "daemon.json").exists():
                    break
                time.sleep(0.05)
            url = json.loads((state / "daemon.json").read_text())["url"]
            host, port = url.removeprefix("http://").rsplit(":", 1)
            time.sleep(1.0)  # let the freshly started process settle before "idle"
            idle = _rss_kib(daemon.pid)
            bodies = [
                json.dumps(
                    {"repo": str(root / "repo"), "good": shas[0], "bad": shas[1 + i % args.distinct], "recipe": "demo.toml",
                     "source": f"burst flag {i}"}
                ).encode()
                for i in range(args.flags)
            ]  # fmt: skip

            def post(body: bytes) -> int:
                req = urllib.request.Request(
                    url + "/v1/regressions", data=body, method="POST", headers={SIGNATURE_HEADER: sign(body, SECRET)}
                )
                try:
                    with urllib.request.urlopen(req, timeout=120) as resp:
                        return int(resp.status)
                except urllib.error.HTTPError as exc:
                    return exc.code

            start = time.monotonic()
            with ThreadPoolExecutor(max_workers=args.threads) as pool:
                statuses = list(pool.map(post, bodies))
            elapsed = time.monotonic() - start
            after = _rss_kib(daemon.pid)
            flags, jobs = _counts(state)

            peak = [after["VmRSS"]]
            done = threading.Event()

            def sample() -> None:
                while not done.wait(SAMPLE_EVERY_S):
                    peak.append(_rss_kib(daemon.pid)["VmRSS"])

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            up_start = time.monotonic()
            with ThreadPoolExecutor(max_workers=args.uploads) as pool:
                answers = list(pool.map(lambda _: _chunked_upload(host, int(port), args.upload_mib), range(args.uploads)))
            up_elapsed = time.monotonic() - up_start
            done.set()
            sampler.join()
            after_uploads = _rss_kib(daemon.pid)
            flags_after_uploads, jobs_after_uploads = _counts(state)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)
    accepted = statuses.count(202)
    print(f"# attrib daemon burst: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"flags sent: {args.flags} from {args.threads} threads, {args.distinct} distinct ranges")
    print(f"accepted (202): {accepted}; other answers: {sorted({s for s in statuses if s != 202})}")
    print(f"stored: {flags} flags, {jobs} jobs (duplicates merged: {flags - jobs})")
    print(f"rate: {accepted / elapsed:.1f} flags/s accepted ({elapsed:.2f} s)")
    print(f"daemon memory: VmRSS idle {idle['VmRSS'] / 1024:.1f} MiB, after the burst {after['VmRSS'] / 1024:.1f} MiB")
    print(
        f"oversized uploads: {args.uploads} at once, unsigned, chunked, {args.upload_mib} MiB each ({up_elapsed:.2f} s); "
        f"answers: {sorted(set(answers))}"
    )
    print(
        f"daemon memory under the uploads: peak VmRSS {max(peak) / 1024:.1f} MiB (sampled every {SAMPLE_EVERY_S:g} s), "
        f"VmRSS after {after_uploads['VmRSS'] / 1024:.1f} MiB, VmHWM {after_uploads['VmHWM'] / 1024:.1f} MiB"
    )
    stored_by_uploads = (flags_after_uploads - flags) + (jobs_after_uploads - jobs)
    print(f"rows stored by the uploads: {stored_by_uploads}")
    ok = accepted == args.flags == flags and jobs == args.distinct and stored_by_uploads == 0
    print("check: every flag accepted and stored, one job per range, nothing stored by the uploads: " + ("yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
