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

Then (issue 20) three probes of a daemon whose config names nightly-history projects:
* `--idle` sockets (default 500) are opened from other loopback addresses (127.0.0.2 and up,
  `--idle-per-address` each), half of them silent, half having sent an incomplete request head,
  and `--probe-flags` signed flags are sent one after another from 127.0.0.1 while they stay
  open: each flag's answer and latency (p50, p99) is printed, and how many of the sockets the
  daemon had closed by then;
* the series index (GET /series) of a project of `--index-series` series (one row each) is
  fetched while the daemon's VmRSS is sampled: its peak, the answer's size and time;
* upload time against project size: projects of 10, 1,000 and 10,000 series, then
  `--uploads-per-size` uploads of 3 rows touching one series of each; the median is printed.
Then (issue 33) the cost of an upload against change points waiting on the daily limit: a
daemon of its own gets `--waiting-jobs` CI jobs (distinct ranges of one recipe), then
`--uploads-per-size` uploads of 3 rows to an unrelated series are timed; then `--waiting` series
each regress at one commit (their project's max_bisections_per_day is 0, so every change point
waits), and the same uploads are timed again. `--only-waiting` runs this probe alone.
Figures are printed, not asserted: they depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
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


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _held_sockets(host: str, port: int, count: int, per_address: int) -> list[socket.socket]:
    """`count` connections from 127.0.0.2, 127.0.0.3, ... (`per_address` each): even ones never
    send a byte, odd ones send an incomplete request head and then nothing."""
    out = []
    for i in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((f"127.0.0.{2 + i // per_address}", 0))
        s.settimeout(10)
        try:
            s.connect((host, port))
            if i % 2:
                s.sendall(b"POST /v1/regressions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        except OSError:
            pass  # refused at once: counted as closed below
        out.append(s)
    return out


def _closed_by_peer(socks: list[socket.socket]) -> int:
    closed = 0
    for s in socks:
        try:
            s.setblocking(False)
            closed += s.recv(1) == b""
        except BlockingIOError:
            pass  # still open, nothing to read
        except OSError:
            closed += 1
    return closed


def _csv(rows: list[tuple[str, str, float]]) -> str:
    lines = ["commit,benchmark,value,unit,direction,timestamp"]
    lines += [f"{c},{b},{v:.6f},s,lower,2026-11-{1 + i % 28:02d}T02:00:00Z" for i, (c, b, v) in enumerate(rows)]
    return "\n".join(lines) + "\n"


def _post_results(url: str, project: str, text: str, name: str = "n.csv") -> tuple[int, float]:
    body = json.dumps({"project": project, "files": [{"name": name, "content": text}]}).encode()
    req = urllib.request.Request(url + "/v1/results", data=body, method="POST", headers={SIGNATURE_HEADER: sign(body, SECRET)})
    start = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            resp.read()
            status = int(resp.status)
    except urllib.error.HTTPError as exc:
        status = exc.code
    return status, time.monotonic() - start


def _fill(url: str, project: str, series: int, shas: list[str], batch: int = 4000) -> None:
    for start in range(0, series, batch):
        rows = [(shas[i % len(shas)], f"bench{i:06d}", 1.0) for i in range(start, min(series, start + batch))]
        status, _ = _post_results(url, project, _csv(rows), f"fill-{start}.csv")
        if status != 200:
            raise SystemExit(f"filling {project}: POST /v1/results answered {status}")


WAITING_LINE = 44  # commits of the waiting probe's repository
WAITING_STEP = 36  # where its series regress (the CI jobs' ranges all lie before it)


def _waiting_probe(root: Path, points: int, jobs: int, uploads: int) -> dict[str, object]:
    """Upload times with no change point waiting and with `points` waiting, `jobs` jobs queued."""
    shas = _repo(root / "wrepo", WAITING_LINE)
    (root / "wsecret").write_text(SECRET)
    (root / "w.toml").write_text(
        f'[history.projects.w]\nrepo = "{root / "wrepo"}"\nbranch = "main"\nmax_bisections_per_day = 0\n'
        'map = [ { pattern = "w*", recipe = "demo.toml" } ]\n'
    )
    state = root / "wstate"
    daemon = subprocess.Popen(
        [sys.executable, "-m", "attrib", "daemon", "--state", str(state), "--secret-file", str(root / "wsecret"),
         "--port", "0", "--workers", "0", "--recipes-dir", str(root / "recipes"), "--max-queue", str(jobs + 100),
         "--config", str(root / "w.toml")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(1200):
            if (state / "daemon.json").exists():
                break
            time.sleep(0.05)
        url = json.loads((state / "daemon.json").read_text())["url"]
        pairs = [(g, b) for b in range(1, WAITING_STEP - 1) for g in range(b)][:jobs]

        def flag(pair: tuple[int, int]) -> int:
            body = json.dumps({"repo": str(root / "wrepo"), "good": shas[pair[0]], "bad": shas[pair[1]], "recipe": "demo.toml"}).encode()
            req = urllib.request.Request(url + "/v1/regressions", data=body, method="POST", headers={SIGNATURE_HEADER: sign(body, SECRET)})
            with urllib.request.urlopen(req, timeout=120) as resp:
                return int(resp.status)

        with ThreadPoolExecutor(max_workers=4) as pool:
            flagged = list(pool.map(flag, pairs))

        def timed(tag: str) -> list[float]:
            times = []
            for k in range(uploads):
                rows = [(shas[j], "x-unrelated", 1.0 + 0.001 * k + 0.0001 * j) for j in range(3)]
                status, took = _post_results(url, "w", _csv(rows), f"{tag}-{k}.csv")
                if status != 200:
                    raise SystemExit(f"waiting probe: an upload answered {status}")
                times.append(took)
            return times

        none_waiting = timed("none")
        batch = 25
        filling = []
        for start in range(0, points, batch):
            rows = [(shas[j], f"w{i:04d}", (1.3 if j >= WAITING_STEP else 1.0) * (1 + 0.01 * random.Random(i * 1000 + j).gauss(0, 1)))
                    for i in range(start, min(points, start + batch)) for j in range(WAITING_LINE)]  # fmt: skip
            status, took = _post_results(url, "w", _csv(rows), f"fill-{start}.csv")
            if status != 200:
                raise SystemExit(f"waiting probe: filling answered {status}")
            filling.append(took)
        with_waiting = timed("waiting")
        conn = sqlite3.connect(state / "state.db")
        try:
            waiting = conn.execute("SELECT COUNT(*) FROM history_changes WHERE flag = 'rate_limited'").fetchone()[0]
            njobs = conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
        finally:
            conn.close()
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=120)
    return {"jobs": njobs, "flagged": sorted(set(flagged)), "waiting": waiting, "none": none_waiting,
            "with": with_waiting, "filling": filling}  # fmt: skip


def _print_waiting(w: dict[str, object], points: int) -> None:
    none, wait, filling = w["none"], w["with"], w["filling"]
    assert isinstance(none, list) and isinstance(wait, list) and isinstance(filling, list)
    print(f"waiting probe: {w['jobs']} jobs (flag answers {w['flagged']}), {w['waiting']} change points waiting on the daily limit"
          f" (of {points} series)")
    print(f"upload of 3 rows to an unrelated series, no change point waiting: median {_percentile(none, 0.5) * 1000:.0f} ms"
          f" (min {min(none) * 1000:.0f}, max {max(none) * 1000:.0f}; {len(none)} uploads)")
    print(f"the same with {w['waiting']} waiting: median {_percentile(wait, 0.5) * 1000:.0f} ms"
          f" (min {min(wait) * 1000:.0f}, max {max(wait) * 1000:.0f}; {len(wait)} uploads)")
    print(f"the {len(filling)} uploads that made them wait (25 series each): {sum(filling):.1f} s in all,"
          f" the last {filling[-1] * 1000:.0f} ms")


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
    ap.add_argument("--idle", type=int, default=500, help="idle or trickling sockets held open during the probe flags")
    ap.add_argument("--idle-per-address", type=int, default=25, help="of those, how many from each loopback address")
    ap.add_argument("--probe-flags", type=int, default=50, help="signed flags sent while the sockets are open")
    ap.add_argument("--index-series", type=int, default=10_000, help="series of the project whose index is fetched")
    ap.add_argument("--sizes", default="10,1000,10000", help="project sizes (series) for the upload times")
    ap.add_argument("--uploads-per-size", type=int, default=5)
    ap.add_argument("--waiting", type=int, default=300, help="change points waiting on the daily limit (issue 33)")
    ap.add_argument("--waiting-jobs", type=int, default=300, help="CI jobs queued beside them")
    ap.add_argument("--only-waiting", action="store_true", help="run only the waiting probe")
    args = ap.parse_args()
    if args.only_waiting:
        with tempfile.TemporaryDirectory(prefix="attrib-burst-") as tmp:
            (Path(tmp) / "recipes").mkdir()
            from attrib.demo import DEMO_RECIPE

            (Path(tmp) / "recipes" / "demo.toml").write_text(DEMO_RECIPE)
            w = _waiting_probe(Path(tmp), args.waiting, args.waiting_jobs, args.uploads_per_size)
        print(f"# attrib daemon burst (waiting probe): {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
        _print_waiting(w, args.waiting)
        return 0
    with tempfile.TemporaryDirectory(prefix="attrib-burst-") as tmp:
        root = Path(tmp)
        shas = _repo(root / "repo", args.distinct + 1)
        (root / "recipes").mkdir()
        from attrib.demo import DEMO_RECIPE

        (root / "recipes" / "demo.toml").write_text(DEMO_RECIPE)
        (root / "secret").write_text(SECRET)
        state = root / "state"
        sizes = [int(x) for x in args.sizes.split(",") if x]
        projects = "".join(
            f'[history.projects.p{n}]\nrepo = "{root / "repo"}"\nbranch = "main"\n' for n in sorted({args.index_series, *sizes})
        )
        (root / "daemon.toml").write_text(projects)
        daemon = subprocess.Popen(
            [sys.executable, "-m", "attrib", "daemon", "--state", str(state), "--secret-file", str(root / "secret"),
             "--port", "0", "--workers", "0", "--recipes-dir", str(root / "recipes"), "--max-queue", str(args.distinct),
             "--config", str(root / "daemon.toml")],
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

            # --- issue 20: idle and trickling sockets, the series index, upload time by size ---
            import resource

            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.idle + 256)), hard))
            held = _held_sockets(host, int(port), args.idle, args.idle_per_address)
            probe: list[tuple[int, float]] = []
            try:
                for i in range(args.probe_flags):
                    body = json.dumps(
                        {"repo": str(root / "repo"), "good": shas[0], "bad": shas[1], "recipe": "demo.toml", "source": f"probe {i}"}
                    ).encode()
                    t0 = time.monotonic()
                    probe.append((post(body), time.monotonic() - t0))
                closed_during = _closed_by_peer(held)
            finally:
                for s in held:
                    s.close()

            _fill(url, f"p{args.index_series}", args.index_series, shas)
            index_peak = [_rss_kib(daemon.pid)["VmRSS"]]
            index_before = index_peak[0]
            done = threading.Event()

            def sample_index() -> None:
                while not done.wait(SAMPLE_EVERY_S):
                    index_peak.append(_rss_kib(daemon.pid)["VmRSS"])

            sampler = threading.Thread(target=sample_index, daemon=True)
            sampler.start()
            t0 = time.monotonic()
            req = urllib.request.Request(url + f"/series?project=p{args.index_series}", headers={"Authorization": f"Bearer {SECRET}"})
            with urllib.request.urlopen(req, timeout=600) as resp:
                index_status, index_bytes = int(resp.status), len(resp.read())
            index_s = time.monotonic() - t0
            done.set()
            sampler.join()

            upload_times: dict[int, list[float]] = {}
            upload_statuses: set[int] = set()
            for n in sizes:
                if n != args.index_series:
                    _fill(url, f"p{n}", n, shas)
                times = []
                for k in range(args.uploads_per_size):
                    rows = [(shas[j], "bench000000", 1.0 + 0.001 * k + 0.0001 * j) for j in range(3)]
                    status, took = _post_results(url, f"p{n}", _csv(rows), f"night-{k}.csv")
                    upload_statuses.add(status)
                    times.append(took)
                upload_times[n] = times
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)
        waiting = _waiting_probe(root, args.waiting, args.waiting_jobs, args.uploads_per_size)
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
    lat = [t for _, t in probe]
    print(
        f"signed flags while {args.idle} sockets are held open ({args.idle_per_address} per address, half silent, half with an"
        f" incomplete head): answers {sorted({s for s, _ in probe})} ({sum(s == 202 for s, _ in probe)}/{len(probe)} accepted);"
        f" latency p50 {_percentile(lat, 0.5) * 1000:.0f} ms, p99 {_percentile(lat, 0.99) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms;"
        f" sockets the daemon had closed by the end: {closed_during}"
    )
    print(
        f"series index of a {args.index_series}-series project: {index_status}, {index_bytes / MIB:.2f} MiB in {index_s:.2f} s;"
        f" daemon VmRSS {index_before / 1024:.1f} MiB before, peak {max(index_peak) / 1024:.1f} MiB while it was served"
    )
    for n, times in upload_times.items():
        print(f"upload of 3 rows to a {n}-series project: median {_percentile(times, 0.5) * 1000:.0f} ms"
              f" (min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}; {len(times)} uploads)")
    print(f"upload answers: {sorted(upload_statuses)}")
    _print_waiting(waiting, args.waiting)
    ok = accepted == args.flags == flags and jobs == args.distinct and stored_by_uploads == 0
    print("check: every flag accepted and stored, one job per range, nothing stored by the uploads: " + ("yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
