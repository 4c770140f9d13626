"""No benchmark outlives a kill -9 of the daemon (issue 33, point 3), against a real `attrib
daemon` process bisecting a real git repository with the local executor and the command runner
(and, with the docker executor, the containers a killed daemon left, on the real engine).

The benchmark (a real process, with a child of its own) hangs while a file says so: the daemon
is SIGKILLed while it hangs, and both processes must be gone within a bounded wait. A process of
the job that left its group (started here by the test with the job's token) is ended by the
restarted daemon before it resumes the job; every benchmark run takes an exclusive lock for as long as it
measures, so a run that found the lock taken measured beside another one (an orphan), and
says so in a file the test reads."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import write_config
from test_local_guard import _gone, _kill, _wait_gone

from attrib.daemon.auth import sign
from attrib.evaluate.executors.processes import TOKEN_ENV

SECRET = "orphans-secret-0123456789abcdef"
COMMITS = 6
STEP_AT = 3
DEADLINE_S = 600.0  # generous: the machine may be busy; the job takes well under a minute

BENCH = """
import fcntl, os, random, subprocess, sys, time
from pathlib import Path
d = Path({dir!r})
lock = open(d / "lock", "w")
try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    with open(d / "overlap", "a") as f:
        f.write(f"{{os.getpid()}} measured while another benchmark ran\\n")
if (d / "hang").exists():
    child = subprocess.Popen(["sleep", "3600"])
    (d / "hung.tmp").write_text(f"{{os.getpid()}} {{child.pid}}\\n")
    os.replace(d / "hung.tmp", d / "hung")
    time.sleep(3600)
level = float(Path("level").read_text())
for _ in range(int(sys.argv[1])):
    print(level * (1 + random.gauss(0, 0.005)))
"""

RECIPE = """schema = 1
name = "sleepy"

[build]
commands = ["true"]
timeout_s = 60

[[benchmark]]
name = "sleepy"
runner = "command"
command = [{python}, {bench}, "{{reps}}"]
unit = "s"
direction = "lower"
timeout_s = 3000
reps = 5
min_change_pct = 5.0
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _repo(path: Path) -> list[str]:
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    shas = []
    for i in range(COMMITS):
        (path / "level").write_text("1.3\n" if i >= STEP_AT else "1.0\n")
        (path / "n").write_text(f"{i}\n")
        _git(path, "add", "-A")
        _git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"commit {i}")
        shas.append(_git(path, "rev-parse", "HEAD"))
    return shas


def _wait(what: str, check: Any, deadline_s: float = DEADLINE_S) -> Any:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if value := check():
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _start(config: Path, state: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    (state / "daemon.json").unlink(missing_ok=True)  # stale after a kill -9
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "attrib", "daemon", "--config", str(config)], stdout=out, stderr=out)

    def up() -> bool:
        assert proc.poll() is None, log.read_text()
        return (state / "daemon.json").exists()

    _wait("the daemon to listen", up, 120)
    return proc, json.loads((state / "daemon.json").read_text())["url"]


def _job(url: str, job_id: str) -> dict[str, Any]:
    req = urllib.request.Request(f"{url}/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {SECRET}"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


def test_a_hung_benchmark_dies_with_the_killed_daemon_and_the_resumed_job_measures_alone(tmp_path: Path):
    shas = _repo(tmp_path / "repo")
    bench_dir, recipes, state = tmp_path / "bench", tmp_path / "recipes", tmp_path / "state"
    for d in (bench_dir, recipes, state):
        d.mkdir()
    (bench_dir / "bench.py").write_text(BENCH.format(dir=str(bench_dir)))
    (recipes / "sleepy.toml").write_text(RECIPE.format(python=json.dumps(sys.executable), bench=json.dumps(str(bench_dir / "bench.py"))))
    config = write_config(tmp_path, SECRET, recipes, workers=1, executor="local", lease_s=2)
    log = tmp_path / "daemon.log"
    (bench_dir / "hang").touch()
    daemon, url = _start(config, state, log)
    hung: list[int] = []
    try:
        body = json.dumps({"repo": str(tmp_path / "repo"), "good": shas[0], "bad": shas[-1], "recipe": "sleepy.toml"}).encode()
        req = urllib.request.Request(url + "/v1/regressions", data=body, method="POST", headers={"X-Attrib-Signature-256": sign(body, SECRET)})
        with urllib.request.urlopen(req, timeout=60) as resp:
            job_id = json.loads(resp.read())["id"]
        hung = [int(p) for p in _wait("the benchmark to hang", lambda: (bench_dir / "hung").exists() and (bench_dir / "hung").read_text()).split()]
        assert len(hung) == 2 and not any(_gone(p) for p in hung)
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(timeout=60)
        assert _wait_gone(hung) == [], "the hung benchmark (or its child) outlived the daemon's kill -9"
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(timeout=60)
        _kill(hung)

    # What the guard cannot reach: a process of the job that left its group (a server a build
    # step detached with setsid). Here it is the benchmark itself, hung and holding the lock.
    [ledger] = list(state.glob("work/*/processes/*"))
    env = {**os.environ, TOKEN_ENV: ledger.read_text().split()[0]}
    straggler = subprocess.Popen([sys.executable, str(bench_dir / "bench.py"), "5"], cwd=tmp_path / "repo", env=env, start_new_session=True)
    try:
        _wait("the straggler to hang", lambda: (bench_dir / "hung").read_text().split()[0] == str(straggler.pid), 120)
        (bench_dir / "hang").unlink()
        daemon, url = _start(config, state, log)
        try:
            final = _wait("the resumed job to finish", lambda: (j := _job(url, job_id))["state"] not in ("queued", "running") and j)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)
        assert straggler.wait(timeout=60) == -signal.SIGKILL  # ended by the restarted daemon
    finally:
        straggler.kill()
        _kill([int(p) for p in (bench_dir / "hung").read_text().split()])
    # The straggler, and its child when it had started one by then: the count is 1 or 2 by timing
    # (asserting exactly 2 failed about one run in two); that the straggler died is asserted above.
    ended = re.findall(r"ended (\d+) process\(es\) the local commands of a previous daemon left running", log.read_text())
    assert ended and int(ended[-1]) >= 1, log.read_text()[-3000:]
    assert final["state"] == "done", (final, log.read_text()[-3000:])
    assert final["attempts"] == 2
    assert final["result"]["status"] == "culprit_found"
    assert [c["commit"] for c in final["result"]["culprits"]] == [shas[STEP_AT]]
    assert not (bench_dir / "overlap").exists(), (bench_dir / "overlap").read_text()
    conn = sqlite3.connect(f"file:{state / 'state.db'}?mode=ro", uri=True, timeout=30)
    try:
        assert conn.execute("SELECT COUNT(*) FROM samples WHERE job_id = ?", (job_id,)).fetchone()[0] > 0
    finally:
        conn.close()
    assert list(state.glob("work/*/processes/*")) == []  # the job's ledger went with the job


def test_containers_a_killed_daemon_left_are_removed_when_the_next_one_starts(tmp_path: Path):
    """With the docker executor a job's commands run as execs in containers, which a kill -9 of
    the daemon leaves running (no close() runs). The next daemon removes the containers of its
    own work dirs before its workers start, and only those."""
    docker = pytest.importorskip("docker")
    from attrib.errors import InputError
    from attrib.evaluate.executors.docker import LABEL, WORKDIR_LABEL, connect

    try:
        client = connect()
        client.images.get("attrib/cpu:latest")
    except (InputError, docker.errors.ImageNotFound) as exc:
        pytest.skip(f"no docker engine or no attrib/cpu image here: {exc}")
    recipes, state = tmp_path / "recipes", tmp_path / "state"
    recipes.mkdir()
    state.mkdir()
    config = write_config(tmp_path, SECRET, recipes, executor="docker")

    def container(workdir: Path) -> Any:
        return client.containers.run("attrib/cpu:latest", ["sleep", "infinity"], detach=True, network_mode="none",
                                     labels={LABEL: "dead-daemon", WORKDIR_LABEL: str(workdir)})  # fmt: skip

    left = container((state / "work" / "repo-0123456789ab").resolve())  # a hung benchmark's container
    other = container((tmp_path / "elsewhere").resolve())  # a CLI bisection's, elsewhere: not the daemon's
    try:
        daemon, _ = _start(config, state, tmp_path / "daemon.log")
        try:
            # sparse: no inspect per container, which raced the daemon removing it (404)
            remaining = lambda: [c.id for c in client.containers.list(all=True, sparse=True, filters={"label": f"{LABEL}=dead-daemon"})]  # noqa: E731
            said = "removed 1 container(s) the jobs of a previous daemon left running"
            # the line comes after the removal: a SIGTERM sent as soon as the container is gone
            # could end the daemon before it (the full suite's load did, once)
            logged = lambda: said in (tmp_path / "daemon.log").read_text()  # noqa: E731
            assert _wait("the left container to be removed and said", lambda: remaining() == [other.id] and logged(), 120)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)
        assert remaining() == [other.id] and logged()
    finally:
        for c in (left, other):
            try:
                c.remove(force=True)
            except docker.errors.NotFound:
                pass
