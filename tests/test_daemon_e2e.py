"""The issue's "done when": a real `attrib daemon` process takes a signed flag (`attrib submit`)
for a real repository with a planted regression, bisects it with the local executor and the
command runner, is killed with SIGKILL in the middle, is started again, and ends with the
planted culprit and a written report, having reused every sample recorded before the kill.

Every wait is a bounded poll with a generous deadline; nothing depends on how fast it runs."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import spec
from daemon_proc import write_config

from attrib.demo import DEMO_RECIPE, generate_tree

pytestmark = pytest.mark.slow

SECRET = "e2e-secret-0123456789abcdef"
SAMPLES_BEFORE_KILL = 12  # runner calls recorded before the kill: well inside the bisection
DEADLINE_S = 900.0  # generous: the machine may be busy; a healthy run takes well under a minute


def _wait(what: str, check: Any, deadline_s: float = DEADLINE_S, every_s: float = 0.1) -> Any:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out waiting for {what}")


def _start(config: Path, state: Path, log: Path) -> subprocess.Popen[bytes]:
    (state / "daemon.json").unlink(missing_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "attrib", "daemon", "--config", str(config)], stdout=out, stderr=out)

    def up() -> bool:
        assert proc.poll() is None, log.read_text()
        return (state / "daemon.json").exists()

    _wait("the daemon to listen", up)
    return proc


def _get(url: str, path: str) -> dict[str, Any]:
    req = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {SECRET}"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


def _db(state: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{state / 'state.db'}?mode=ro", uri=True, timeout=30)
    conn.row_factory = sqlite3.Row
    return conn


def test_daemon_survives_kill_9_and_finds_the_culprit(tmp_path: Path):
    # ~5 ms per repetition: each run is long enough that the kill lands mid-bisection.
    tree = generate_tree(tmp_path / "repo", spec(commits=24, culprits=((15, 10),), broken=(5, 7), work_base=5_000_000))
    recipes, state = tmp_path / "recipes", tmp_path / "state"
    recipes.mkdir()
    (recipes / "demo.toml").write_text(DEMO_RECIPE)
    config = write_config(tmp_path, SECRET, recipes, workers=1, executor="local", lease_s=2)
    state.mkdir()
    log = tmp_path / "daemon.log"
    daemon = _start(config, state, log)
    try:
        url = json.loads((state / "daemon.json").read_text())["url"]
        env = {**os.environ, "ATTRIB_URL": url, "ATTRIB_SECRET_FILE": str(tmp_path / "secret")}
        sub = subprocess.run(
            [sys.executable, "-m", "attrib", "submit", "--repo", str(tree.path), "--good", tree.good, "--bad", tree.bad,
             "--recipe", "demo.toml", "--source", "e2e test", "--file-issue", "dir:e2e"],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        assert sub.returncode == 0, sub.stderr
        job_id = sub.stdout.split()[0]

        def recorded() -> list[sqlite3.Row] | None:
            with _db(state) as conn:
                rows = conn.execute("SELECT key, n, samples, at FROM samples WHERE job_id = ? ORDER BY seq", (job_id,)).fetchall()
            return rows if len(rows) >= SAMPLES_BEFORE_KILL else None

        before = _wait("samples to be recorded", recorded)
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(timeout=60)
    with _db(state) as conn:
        job = conn.execute("SELECT state, attempts FROM jobs WHERE id = ?", (job_id,)).fetchone()
        at_kill = conn.execute("SELECT COUNT(*) FROM samples WHERE job_id = ?", (job_id,)).fetchone()[0]
        built_before = {r[0] for r in conn.execute("SELECT key FROM builds WHERE job_id = ? AND ok = 1", (job_id,))}
    assert (job["state"], job["attempts"]) == ("running", 1)  # killed mid-job, its lease still on the books
    assert built_before

    daemon = _start(config, state, log)
    try:
        url = json.loads((state / "daemon.json").read_text())["url"]

        def finished() -> dict[str, Any] | None:
            answer = _get(url, f"/v1/jobs/{job_id}")
            return answer if answer["state"] not in ("queued", "running") else None

        final = _wait("the job to finish", finished, every_s=0.5)
        assert final["state"] == "done", (final, log.read_text()[-3000:])
        result = final["result"]
        assert result["status"] == "culprit_found"
        assert [c["commit"] for c in result["culprits"]] == tree.culprits
        assert final["attempts"] == 2
        # The resumed attempt replayed every run recorded before the kill, measured only the rest.
        progress = final["progress"]
        assert progress["runs_recorded_before"] == at_kill and progress["runs_replayed"] == at_kill
        with _db(state) as conn:
            after = conn.execute("SELECT key, n, samples, at FROM samples WHERE job_id = ? ORDER BY seq", (job_id,)).fetchall()
            transitions = [r[0] for r in conn.execute("SELECT note FROM transitions WHERE job_id = ? ORDER BY id", (job_id,))]
            rebuilt = conn.execute(
                f"SELECT COUNT(*) FROM builds WHERE job_id = ? AND attempt = 2 AND cached = 0 AND key IN ({','.join('?' * len(built_before))})",
                (job_id, *built_before),
            ).fetchone()[0]
        assert [tuple(r) for r in after[: len(before)]] == [tuple(r) for r in before]  # same rows, same times: not re-measured
        assert len(after) == at_kill + progress["runs_measured"]
        assert rebuilt == 0  # every build of the first attempt came from the cache
        assert any("expired" in note for note in transitions)
        report = (state / "jobs" / job_id / "report.md").read_text()
        assert "Culprit found" in report and tree.culprits[0] in report
        assert json.loads((state / "jobs" / job_id / "result.json").read_text())["culprits"][0]["commit"] == tree.culprits[0]
        # filed through the real dir: tracker, under --state/filed/<name> (a flag names no path)
        filed = list((state / "filed" / "e2e").glob("*/report.md"))
        assert len(filed) == 1 and tree.culprits[0] in filed[0].read_text()
        assert final["filing"] and "failed" not in final["filing"], final["filing"]
    finally:
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(timeout=120)
    assert code == 0, log.read_text()[-2000:]


def test_daemon_bisects_a_flagged_url_repository_with_submodules_and_descends_into_the_roll(tmp_path: Path):
    """The flag names the kernel by a file:// URL; the daemon mirrors it, fetches its submodule
    from the URL its .gitmodules gives relative to the flag's (../compiler), under the flag's
    URL rules, and names the compiler's commit inside the roll."""
    from dependency_tree import chain_of, family, recipe_text

    fam = family("roll", tmp_path / "trees", relative=True)
    recipes, state = tmp_path / "recipes", tmp_path / "state"
    recipes.mkdir()
    (recipes / "kernel.toml").write_text(recipe_text())
    config = write_config(tmp_path, SECRET, recipes, workers=1, executor="local")
    state.mkdir()
    log = tmp_path / "daemon.log"
    daemon = _start(config, state, log)
    try:
        url = json.loads((state / "daemon.json").read_text())["url"]
        env = {**os.environ, "ATTRIB_URL": url, "ATTRIB_SECRET_FILE": str(tmp_path / "secret")}
        sub = subprocess.run(
            [sys.executable, "-m", "attrib", "submit", "--repo", fam.kernel.url, "--good", fam.good, "--bad", fam.bad,
             "--recipe", "kernel.toml"],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        assert sub.returncode == 0, sub.stderr
        job_id = sub.stdout.split()[0]

        def finished() -> dict[str, Any] | None:
            answer = _get(url, f"/v1/jobs/{job_id}")
            return answer if answer["state"] not in ("queued", "running") else None

        final = _wait("the job to finish", finished, every_s=0.5)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=120)
    assert final["state"] == "done", (final, log.read_text()[-3000:])
    shas, rolls = chain_of(final["result"]["culprits"][0])
    assert shas == list(fam.chain)
    assert rolls[0]["url"] == f"file://{tmp_path / 'trees' / 'compiler'}"  # ../compiler against the flag's URL
    assert list(state.rglob("submodules/compiler-*.git"))  # its mirror, in the job's work dir under --state
