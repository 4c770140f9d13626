"""Burst benchmark of the daemon's intake: signed flags per second accepted, and its memory.

    .venv/bin/python benchmarks/daemon_burst.py [--flags 500] [--distinct 25] [--threads 8]

Starts a real `attrib daemon` process (--workers 0: it accepts and queues, nothing bisects, so
the figure is the intake alone: signature check, JSON, revision validation with git, SQLite
commit) on 127.0.0.1 with an OS-chosen port, sends the flags from several client threads over
loopback, checks that every flag was accepted and stored and that duplicates were merged,
and prints the rate and the daemon's resident memory (VmRSS/VmHWM from /proc) after the burst.
Figures are printed, not asserted: they depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from attrib.daemon.auth import sign

SECRET = "burst-benchmark-secret-0123456789"


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flags", type=int, default=500)
    ap.add_argument("--distinct", type=int, default=25, help="distinct (good, bad) ranges among the flags")
    ap.add_argument("--threads", type=int, default=8)
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
                    url + "/v1/regressions", data=body, method="POST", headers={"X-Attrib-Signature-256": sign(body, SECRET)}
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
            conn = sqlite3.connect(state / "state.db")
            flags = conn.execute("SELECT COUNT(*) FROM flags").fetchone()[0]
            jobs = conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
            conn.close()
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)
    accepted = statuses.count(202)
    print(f"# attrib daemon burst: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"flags sent: {args.flags} from {args.threads} threads, {args.distinct} distinct ranges")
    print(f"accepted (202): {accepted}; other answers: {sorted({s for s in statuses if s != 202})}")
    print(f"stored: {flags} flags, {jobs} jobs (duplicates merged: {flags - jobs})")
    print(f"rate: {accepted / elapsed:.1f} flags/s accepted ({elapsed:.2f} s)")
    print(f"daemon memory: VmRSS {after['VmRSS'] / 1024:.1f} MiB after the burst (idle {idle['VmRSS'] / 1024:.1f} MiB), peak VmHWM {after['VmHWM'] / 1024:.1f} MiB")
    ok = accepted == args.flags == flags and jobs == args.distinct
    print("check: every flag accepted and stored, one job per range: " + ("yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
