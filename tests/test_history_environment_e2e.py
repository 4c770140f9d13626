"""Issue 41's controlled comparison, end to end: a real `attrib daemon` process with one worker
gets nightly results whose step coincides with a toolkit change (env.compiler) but no night
measured the old code in the new environment, so the code may explain it and it is bisected.
The planted tree has no slowdown there: the bisection's preflight rebuilds both ends in today's
environment and does not reproduce it, and the daemon files it as the environment's, by its
keys, instead of a report nobody acts on. Bounded polls with a generous deadline."""

from __future__ import annotations

import json
import signal
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import spec
from history_data import first_parent, levels
from test_daemon_e2e import SECRET, _db, _get, _start, _wait
from test_nightly_e2e import demo_daemon

from attrib.daemon.auth import sign
from attrib.demo import generate_tree

pytestmark = pytest.mark.slow

COMMITS, UPGRADE = 30, 15
OLD, NEW = "gcc 12.2.0", "gcc 13.1.0"


def test_a_step_the_code_does_not_reproduce_is_filed_as_the_environment(tmp_path: Path):
    # the tree's only slowdown is far from the upgrade: the range (UPGRADE - 1, UPGRADE] is flat
    tree = generate_tree(tmp_path / "repo", spec(commits=COMMITS, culprits=((COMMITS - 2, 100),), broken=None))
    line = first_parent(tree.path)[: COMMITS - 4]
    config, state = demo_daemon(tmp_path, tree.path)
    log = tmp_path / "daemon.log"
    daemon = _start(config, state, log)
    try:
        url = json.loads((state / "daemon.json").read_text())["url"]
        rows = ["commit,benchmark,value,unit,direction,timestamp,env.compiler"]
        for i, (c, v) in enumerate(zip(line, levels(len(line), UPGRADE, 1.5, seed=5), strict=True)):
            rows.append(f"{c},loop,{v:.9f},s,lower,{1_780_000_000 + i * 86_400},{OLD if i < UPGRADE else NEW}")
        body = json.dumps({"project": "demo", "files": [{"name": "n.csv", "content": "\n".join(rows) + "\n"}]}).encode()
        req = urllib.request.Request(url + "/v1/results", data=body, method="POST", headers={"X-Attrib-Signature-256": sign(body, SECRET)})
        with urllib.request.urlopen(req, timeout=120) as r:
            answer = json.loads(r.read())
        assert answer["environment"] == [], answer  # no night measured the old code in the new environment
        (flag,) = answer["flags"]
        assert flag["flag"] == "queued" and (flag["before"], flag["after"]) == (line[UPGRADE - 1], line[UPGRADE])

        def finished() -> dict[str, Any] | None:
            got = _get(url, f"/v1/jobs/{flag['job']}")
            return got if got["state"] not in ("queued", "running") else None

        final = _wait("the bisection to finish", finished, every_s=0.5)
        assert final["state"] == "done" and final["result"]["status"] == "not_reproduced", (final, log.read_text()[-3000:])
        report = (state / "jobs" / flag["job"] / "report.md").read_text()
        assert f"the environment changed too: compiler {OLD} -> {NEW}" in report
        (filed,) = (state / "filed" / "nightly").glob("*/report.md")
        text = filed.read_text()
        assert f"<!-- title: compiler {OLD} -> {NEW}: 1 series +" in text and "did not reproduce it" in text
        assert f"environment compiler {OLD} -> {NEW}: 1 series" in final["filing"]
        with _db(state) as conn:
            (row,) = conn.execute("SELECT flag, job_id, note FROM history_changes").fetchall()
        assert (row[0], row[1]) == ("environment", flag["job"]) and f"compiler {OLD} -> {NEW}" in row[2]
    finally:
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(timeout=120)
    assert code == 0, log.read_text()[-2000:]
