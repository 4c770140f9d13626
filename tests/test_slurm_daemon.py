"""The daemon with `executor = "slurm"` against the real two-node test cluster: it names the
planted culprit after a kill -9 and a restart (the restarted daemon cancels the jobs its
killed self left in Slurm, and replays the recorded runs instead of measuring them again);
`attrib cancel` and a daemon stop leave none of its jobs in squeue."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import spec
from daemon_proc import write_config
from test_daemon_e2e import SECRET, _db, _get, _start, _wait
from test_slurm import REPS, STEP_PCT, _recipe, attrib_jobs, slurm  # noqa: F401 (slurm: the autouse fixture)

from attrib.demo import generate_tree

pytestmark = pytest.mark.slow

SAMPLES_BEFORE_KILL = 6


def _submit(tree: Any, env: dict[str, str]) -> str:
    sub = subprocess.run(
        [sys.executable, "-m", "attrib", "submit", "--repo", str(tree.path), "--good", tree.good, "--bad", tree.bad,
         "--recipe", "slurm.toml", "--source", "slurm test"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    return sub.stdout.split()[0]


def _ours(job_id: str) -> list[tuple[int, str, str]]:
    return [j for j in attrib_jobs() if j[1].startswith(f"attrib-d{job_id}-")]


def test_daemon_with_slurm_survives_kill_9_cancel_and_stop(tmp_path: Path):
    tree = generate_tree(tmp_path / "repo", spec(commits=12, culprits=((7, STEP_PCT),), broken=(3, 5)))
    recipes, state = tmp_path / "recipes", tmp_path / "state"
    recipes.mkdir()
    state.mkdir()
    _recipe(recipes / "slurm.toml", tmp_path / "where.log")
    config = write_config(tmp_path, SECRET, recipes, workers=1, executor="slurm", lease_s=2)
    log = tmp_path / "daemon.log"
    daemon = _start(config, state, log)
    try:
        url = json.loads((state / "daemon.json").read_text())["url"]
        env = {**os.environ, "ATTRIB_URL": url, "ATTRIB_SECRET_FILE": str(tmp_path / "secret")}
        job_id = _submit(tree, env)

        def recorded() -> int:
            with _db(state) as conn:
                n = conn.execute("SELECT COUNT(*) FROM samples WHERE job_id = ?", (job_id,)).fetchone()[0]
            return n if n >= SAMPLES_BEFORE_KILL else 0

        _wait("samples to be recorded", recorded)
        # kill it while a round's allocation runs, so that the restart has a leftover to find
        _wait("a running round", lambda: [j for j in _ours(job_id) if "-round-" in j[1] and j[2] == "RUNNING"], every_s=0.01)
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(timeout=60)
    with _db(state) as conn:
        at_kill = conn.execute("SELECT COUNT(*) FROM samples WHERE job_id = ?", (job_id,)).fetchone()[0]
    # a round's allocation sleeps until it is cancelled: the killed daemon's is still there.
    # One already COMPLETING was being cancelled by the daemon itself as it was killed (its
    # round had ended): no orphan for the restart to find.
    left_rounds = [j for j in _ours(job_id) if "-round-" in j[1] and j[2] != "COMPLETING"]

    daemon = _start(config, state, log)
    try:
        url = json.loads((state / "daemon.json").read_text())["url"]
        env["ATTRIB_URL"] = url

        def finished(jid: str) -> dict[str, Any] | None:
            answer = _get(url, f"/v1/jobs/{jid}")
            return answer if answer["state"] not in ("queued", "running") else None

        final = _wait("the job to finish", lambda: finished(job_id), every_s=0.5)
        assert final["state"] == "done", (final, log.read_text()[-3000:])
        result = final["result"]
        assert [c["commit"] for c in result["culprits"]] == tree.culprits
        assert final["progress"]["runs_replayed"] == at_kill  # nothing measured twice
        assert result["executor"]["orphans_cancelled"] >= len(left_rounds)
        assert all(name.startswith(f"attrib-d{job_id}-") for name in (j["name"] for j in result["executor"]["build_jobs"]))
        assert _ours(job_id) == []

        # attrib cancel while a round's allocation is running: no job of it stays in squeue
        second = _submit(tree, env)
        _wait("a round of the second job", lambda: [j for j in _ours(second) if "-round-" in j[1] and j[2] == "RUNNING"])
        res = subprocess.run([sys.executable, "-m", "attrib", "cancel", second], capture_output=True, text=True,
                             env=env, timeout=120)  # fmt: skip
        assert res.returncode == 0, res.stderr
        assert _wait("the cancel", lambda: finished(second), every_s=0.2)["state"] == "cancelled"
        _wait("squeue to drop the second job's jobs", lambda: _ours(second) == [], deadline_s=120)

        # a daemon stop (SIGTERM) mid-round: its jobs are cancelled, the job goes back to the queue
        third = _submit(tree, env)
        _wait("a round of the third job", lambda: [j for j in _ours(third) if "-round-" in j[1] and j[2] == "RUNNING"])
    finally:
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(timeout=180)
    assert code == 0, log.read_text()[-2000:]
    assert attrib_jobs() == []
    with _db(state) as conn:
        assert conn.execute("SELECT state FROM jobs WHERE id = ?", (third,)).fetchone()[0] == "queued"
    assert "cancelling" in log.read_text() or not left_rounds  # the restart said what it cancelled
