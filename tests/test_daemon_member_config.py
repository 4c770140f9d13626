"""A series' configuration reaches a job's members through the daemon (issue 29, items 5 and 6):
nightly results of one benchmark on two GPU classes (a `gpu` column) become one job whose two
members are that benchmark with gpu=H100 and with gpu=H200, each a Member with its config in
the result, as the recipe's [slurm.classes] place them. A real uvicorn server on loopback, real
SQLite, a real git tree, and the daemon's own worker running the job with the local executor
(which runs every class on this machine: the configuration places rounds only under Slurm)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from conftest import spec
from history_data import first_parent, levels
from test_daemon_api import SECRET, running

from attrib.core.detect import DetectSettings
from attrib.daemon.auth import sign
from attrib.daemon.config import Settings
from attrib.daemon.worker import Worker
from attrib.demo import DEMO_RECIPE, generate_tree
from attrib.history.projects import SERIES_NAME, HistoryConfig, MapRule, ProjectConfig

N = 24
WINDOW_S = 1.0  # the grouping window: short, so that the test's worker may claim the job
CLASSES = """
[slurm]
[slurm.classes."gpu=H100"]
constraint = "h100"
[slurm.classes."gpu=H200"]
constraint = "h200"
"""


def _csv(line: list[str]) -> str:
    """`loop` on two GPU classes, both slower from night 15 on (the tree's culprit); `machine`
    is configuration too, but names no class of the recipe."""
    rows = ["commit,benchmark,value,unit,direction,timestamp,gpu,machine"]
    for n, gpu in enumerate(("H100", "H200")):
        for i, (c, v) in enumerate(zip(line, levels(N, 15, 1.3, seed=3 + n, noise=0.005), strict=True)):
            rows.append(f"{c},loop,{v:.9f},s,lower,2026-01-{1 + i:02d}T02:00:00Z,{gpu},ci-{n}")
    return "\n".join(rows) + "\n"


def test_a_series_configuration_that_names_a_machine_class_reaches_the_members(tmp_path: Path):
    tree = generate_tree(tmp_path / "repo", spec(commits=N - 1, culprits=((15, 30),), broken=None))
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "demo.toml").write_text(DEMO_RECIPE + CLASSES)
    rule = MapRule("loop", "demo.toml", SERIES_NAME)
    project = ProjectConfig(name="demo", repo=str(tree.path), map=(rule,), detect=DetectSettings())
    settings = Settings(state=tmp_path / "state", secret=SECRET, recipes_dir=recipes, workers=0, group_window_s=WINDOW_S,
                        history=HistoryConfig(projects={"demo": project}))  # fmt: skip
    with running(settings) as d:
        body = json.dumps({"project": "demo", "files": [{"name": "nightly.csv", "content": _csv(first_parent(tree.path))}]}).encode()
        status, answer, _ = d.post("/v1/results", body, {"X-Attrib-Signature-256": sign(body, SECRET)})
        assert status == 200, answer
        assert sorted(f["flag"] for f in answer["flags"]) == ["grouped", "queued"]
        status, listing, _ = d.get("/v1/jobs", SECRET)
        (job,) = listing["jobs"]
        # one job, the benchmark once per class; `machine` names no class and stays out
        assert job["benchmarks"] == ["loop[gpu=H100]", "loop[gpu=H200]"]
        time.sleep(max(0.0, job["created"] + WINDOW_S - time.time()) + 0.1)  # the grouping window ends
        worker = Worker(d.store, d.settings, threading.Event(), 0)  # the daemon's own worker, run here
        claimed = d.store.claim(worker.owner, d.settings.lease_s)
        assert claimed is not None and claimed.id == job["id"]
        worker.process(claimed)
        status, done, _ = d.get(f"/v1/jobs/{job['id']}", SECRET)
        assert done["state"] == "done", done
    result: dict[str, Any] = json.loads((settings.job_dir(job["id"]) / "result.json").read_text())
    members = {m["benchmark"] + json.dumps(m["config"], sort_keys=True): m for m in result["members"]}
    assert sorted(members) == ['loop{"gpu": "H100"}', 'loop{"gpu": "H200"}']
    for m in members.values():
        assert [c["commit"] for c in m["culprits"]] == [tree.culprits[0]], m["status"]
