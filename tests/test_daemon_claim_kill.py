"""A kill -9 between claiming a change point's bisection and recording its job (issue 33, point
2), against a real `attrib daemon` process, a real git tree and its real SQLite state.

The window is hit deterministically, without a hook in the daemon: the daemon's PATH starts with
a `git` that, while a pause file exists, stops on `merge-base --is-ancestor` (what validating a
flag asks git, after the history has found the change point) and says so; the test then sends
the daemon a real SIGKILL. Before issue 33 the claim was its own transaction, committed before
that git call: the killed daemon left the change point `queued` with no job, never retried, and
holding a slot of `max_bisections_per_day`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import spec
from daemon_proc import write_config
from history_data import csv_text, first_parent, levels

from attrib.daemon.auth import sign
from attrib.demo import DEMO_RECIPE, generate_tree

SECRET = "claim-kill-secret-0123456789abcdef"
N = 24
STEP = 12
DEADLINE_S = 120.0  # generous: the machine may be busy

GIT_PAUSE = """#!/bin/sh
case " $* " in
  *" --is-ancestor "*)
    if [ -e "{pause}" ]; then echo $$ > "{reached}.tmp" && mv "{reached}.tmp" "{reached}"; exec sleep 120; fi ;;
esac
exec "{git}" "$@"
"""


def _wait(what: str, check: Any, deadline_s: float = DEADLINE_S) -> Any:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if value := check():
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _start(config: Path, state: Path, log: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    (state / "daemon.json").unlink(missing_ok=True)  # stale after a kill -9
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "attrib", "daemon", "--config", str(config)], stdout=out, stderr=out, env=env)

    def up() -> bool:
        assert proc.poll() is None, log.read_text()
        return (state / "daemon.json").exists()

    _wait("the daemon to listen", up)
    return proc, json.loads((state / "daemon.json").read_text())["url"]


def _upload(url: str, text: str) -> tuple[int, Any]:
    import urllib.error
    import urllib.request

    body = json.dumps({"project": "demo", "files": [{"name": "night.csv", "content": text}]}).encode()
    req = urllib.request.Request(url + "/v1/results", data=body, method="POST", headers={"X-Attrib-Signature-256": sign(body, SECRET)})
    try:
        with urllib.request.urlopen(req, timeout=DEADLINE_S) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _changes(state: Path) -> list[tuple[str, str | None, str]]:
    conn = sqlite3.connect(f"file:{state / 'state.db'}?mode=ro", uri=True, timeout=30)
    try:
        return [tuple(r) for r in conn.execute("SELECT flag, job_id, note FROM history_changes WHERE direction = 'regression'")]
    finally:
        conn.close()


def _jobs(state: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(f"file:{state / 'state.db'}?mode=ro", uri=True, timeout=30)
    try:
        return [tuple(r) for r in conn.execute("SELECT id, good, bad FROM jobs")]
    finally:
        conn.close()


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, Path, list[str], dict[str, str], Path]:
    tree = generate_tree(tmp_path / "repo", spec(commits=N - 1, culprits=((STEP, 30),), broken=None))
    line = first_parent(tree.path)
    recipes, state = tmp_path / "recipes", tmp_path / "state"
    recipes.mkdir()
    state.mkdir()
    (recipes / "demo.toml").write_text(DEMO_RECIPE)
    config = write_config(
        tmp_path, SECRET, recipes,
        tables=f'[history.projects.demo]\nrepo = "{tree.path}"\nbranch = "main"\nmax_bisections_per_day = 1\n'
        'map = [ { pattern = "loop*", recipe = "demo.toml", benchmark = "loop" } ]\n',
    )  # fmt: skip  (workers 0: the job stays queued, so what was stored is exact)
    bin_dir, pause = tmp_path / "bin", tmp_path / "pause"
    bin_dir.mkdir()
    real_git = shutil.which("git")
    assert real_git
    wrapper = bin_dir / "git"
    wrapper.write_text(GIT_PAUSE.format(pause=pause, reached=tmp_path / "reached", git=real_git))
    wrapper.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return config, state, tmp_path / "daemon.log", line, env, pause


def test_a_kill_9_while_the_flag_is_validated_leaves_the_change_point_waiting_and_it_is_retried(setup):
    config, state, log, line, env, pause = setup
    reached = pause.parent / "reached"
    text = csv_text(line, levels(N, STEP, 1.3, seed=7))
    pause.touch()
    daemon, url = _start(config, state, log, env)
    answers: list[tuple[int, Any] | BaseException] = []

    def upload() -> None:
        try:
            answers.append(_upload(url, text))
        except BaseException as exc:  # noqa: BLE001  (the daemon is killed under this request)
            answers.append(exc)

    sender = threading.Thread(target=upload, daemon=True)
    sender.start()
    try:
        _wait("the daemon to validate the change point's flag", reached.exists)
        daemon.send_signal(signal.SIGKILL)  # a real kill -9, inside the window
        daemon.wait(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(timeout=60)
        if reached.exists():
            try:
                os.kill(int(reached.read_text()), signal.SIGKILL)  # the paused git, orphaned by the kill
            except ProcessLookupError:
                pass
    sender.join(DEADLINE_S)
    assert answers and not isinstance(answers[0], tuple), answers  # the upload died with the daemon
    [(flag, job_id, _)] = _changes(state)
    assert _jobs(state) == []
    # Nothing was claimed: the point waits for a decision, without a job, and holds no slot.
    assert (flag, job_id) == ("detected", None), (flag, job_id)

    pause.unlink()
    daemon, url = _start(config, state, log, env)
    try:
        status, answer = _upload(url, text)  # the same file again: a duplicate, and the point is retried
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    assert status == 200, answer
    assert answer["files"][0]["duplicate"] is True
    [job] = _jobs(state)
    assert [(f["flag"], f["job"]) for f in answer["flags"]] == [("queued", job[0])], answer["flags"]
    assert _changes(state) == [("queued", job[0], "")]
    assert job[1:] == (line[STEP - 1], line[STEP])


def test_a_claim_left_without_its_job_by_an_older_daemon_is_released_at_start_up(setup):
    """What the old code left after such a kill (a point `queued` with no job): the next start
    gives it back to the waiting points, so the next upload queues it and the day's slot is free."""
    config, state, log, line, env, _ = setup
    text = csv_text(line, levels(N, STEP, 1.3, seed=7))
    daemon, url = _start(config, state, log, env)
    try:
        status, answer = _upload(url, text)
        assert status == 200 and [f["flag"] for f in answer["flags"]] == ["queued"], answer
        conn = sqlite3.connect(state / "state.db", timeout=30)
        with conn:  # the state a kill between the old claim and its job left behind
            conn.execute("DELETE FROM flags")
            conn.execute("DELETE FROM transitions")
            conn.execute("DELETE FROM jobs")
            conn.execute("UPDATE history_changes SET job_id = NULL WHERE flag = 'queued'")
        conn.close()
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    daemon, url = _start(config, state, log, env)
    try:
        # released while the daemon starts (daemon.json is written a moment before)
        [(flag, job_id, note)] = _wait("the claim to be released", lambda: [c for c in _changes(state) if c[0] != "queued"])
        assert (flag, job_id) == ("detected", None) and "never recorded" in note
        status, answer = _upload(url, text)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    [job] = _jobs(state)
    assert [(f["flag"], f["job"]) for f in answer["flags"]] == [("queued", job[0])], answer
    assert "never recorded" in log.read_text()
