"""Groups under careless and hostile flags (issue 40, point 6): a flag joins only a job of its own
filing target (a change point of project B joined project A's job and was filed to A's tracker);
a member's label names only configurations the recipe declares, and a group job holds at most
MAX_GROUP_MEMBERS benchmarks (12 flags of 1,000 made-up labels made one job of 12,000 members);
and a flag whose benchmarks an active job already bisects over the same range is that job (re-flagging the second member of a running group made a second job). The real app on
uvicorn, real SQLite, the real git tree of test_daemon_groups; no workers run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from history_data import first_parent
from test_daemon_api import SECRET, Daemon, running
from test_daemon_groups import KERNELS, RECIPE, _csv, _jobs, _settings
from test_daemon_groups import tree as tree  # noqa: F401  (the module-scoped git tree)

from attrib.core.detect import DetectSettings
from attrib.daemon.auth import sign
from attrib.daemon.config import DEFAULT_GROUP_WINDOW_S
from attrib.daemon.grouping import MAX_GROUP_MEMBERS
from attrib.history.projects import SERIES_NAME, HistoryConfig, MapRule, ProjectConfig


def _flag(d: Daemon, tree, good: int, bad: int, **fields: Any) -> tuple[int, dict[str, Any]]:  # noqa: F811
    line = first_parent(tree.path)
    status, answer, _ = d.flag({"repo": str(tree.path), "recipe": "kernels.toml", "good": line[good], "bad": line[bad], **fields})
    return status, answer


def test_a_ci_flag_joins_only_a_job_of_its_own_filing_target(tmp_path: Path, tree):  # noqa: F811
    with running(_settings(tmp_path, tree)) as d:
        status, a = _flag(d, tree, 15, 25, benchmark="k00", file_issue="dir:team-a")
        assert status == 202
        status, b = _flag(d, tree, 18, 30, benchmark="k05", file_issue="dir:team-b")  # overlapping, another target
        assert status == 202 and b["duplicate_of"] is None and b["id"] != a["id"], b
        status, a2 = _flag(d, tree, 18, 30, benchmark="k06", file_issue="dir:team-a")  # the same target joins
        assert status == 202 and a2["duplicate_of"] == a["id"], a2
        by_id = {j["id"]: j for j in _jobs(d)}
        assert by_id[a["id"]]["benchmarks"] == ["k00", "k06"] and by_id[b["id"]]["benchmark"] == "k05"


def test_a_change_point_of_another_project_never_joins_its_job(tmp_path: Path, tree):  # noqa: F811
    """Two projects of one repository and recipe, filed to two trackers: project b's overlapping
    change points are b's own job, filed to b's target."""
    settings = _settings(tmp_path, tree)
    rules = (MapRule("k*", "kernels.toml", SERIES_NAME),)
    projects = {
        name: ProjectConfig(name=name, repo=str(tree.path), map=rules, detect=DetectSettings(), file_issue=f"dir:{name}-perf")
        for name in ("alpha", "beta")
    }
    line = first_parent(tree.path)
    with running(settings.__class__(**{**settings.__dict__, "history": HistoryConfig(projects=projects)})) as d:
        for project, kernels, seed in (("alpha", KERNELS[:3], 1), ("beta", KERNELS[3:5], 7)):
            body = json.dumps({"project": project, "files": [{"name": "n.csv", "content": _csv(line, kernels, seed=seed)}]}).encode()
            status, answer, _ = d.post("/v1/results", body, {"X-Attrib-Signature-256": sign(body, SECRET)})
            assert status == 200, answer
        jobs = {j["id"]: j for j in _jobs(d)}
        assert len(jobs) == 2, jobs
        targets = {j["id"]: d.store.get(j["id"]).file_issue for j in jobs.values()}  # type: ignore[union-attr]
        by_target = {targets[i]: sorted(j["benchmarks"] or [j["benchmark"]]) for i, j in jobs.items()}
        assert by_target == {"dir:alpha-perf": KERNELS[:3], "dir:beta-perf": KERNELS[3:5]}


def test_a_label_names_only_a_configuration_the_recipe_declares(tmp_path: Path, tree):  # noqa: F811
    with running(_settings(tmp_path, tree)) as d:
        before = d.store.counts()
        for labels in (["k00[k=1]"], ["k00", "k01[gpu=H100]"], [f"k00[k={i}]" for i in range(1000)]):
            status, answer = _flag(d, tree, 15, 25, benchmarks=labels)
            assert status == 400 and answer["field"] == "benchmarks", answer
            assert "is not a configuration the recipe declares" in answer["error"] and "\n" not in answer["error"]
        assert d.store.counts() == before  # nothing stored


def test_a_group_job_holds_at_most_the_cap(tmp_path: Path, tree):  # noqa: F811
    settings = _settings(tmp_path, tree)
    names = [f"p{i:03d}" for i in range(MAX_GROUP_MEMBERS + 44)]
    (settings.recipes_dir / "kernels.toml").write_text(RECIPE.format(names=", ".join(f'"{n}"' for n in names)))
    with running(settings) as d:
        status, answer = _flag(d, tree, 15, 25, benchmarks=["*"])  # one flag selecting more than the cap
        assert status == 400 and answer["field"] == "benchmarks" and f"at most {MAX_GROUP_MEMBERS}" in answer["error"], answer
        assert d.store.counts()["flags"] == 0
        status, first = _flag(d, tree, 15, 25, benchmarks=names[:200])
        assert status == 202
        status, second = _flag(d, tree, 18, 30, benchmarks=names[200:300])  # would make 300: its own job
        assert status == 202 and second["duplicate_of"] is None, second
        status, third = _flag(d, tree, 18, 30, benchmarks=names[:10] + names[200:246])  # 246 in all: joins
        assert status == 202 and third["duplicate_of"] == first["id"], third
        sizes = sorted(len(j["benchmarks"]) for j in _jobs(d))
        assert sizes == [100, 246] and max(sizes) <= MAX_GROUP_MEMBERS


def test_reflagging_a_member_of_a_running_group_is_that_job(tmp_path: Path, tree):  # noqa: F811
    with running(_settings(tmp_path, tree)) as d:
        status, group = _flag(d, tree, 15, 25, benchmarks=["k00", "k01"])
        assert status == 202
        claimed = d.store.claim("worker", now=d.store.get(group["id"]).created + DEFAULT_GROUP_WINDOW_S + 1)  # type: ignore[union-attr]
        assert claimed is not None and claimed.id == group["id"]  # running now
        status, again = _flag(d, tree, 15, 25, benchmark="k01")  # its second member, over its range
        assert status == 202 and again["duplicate_of"] == group["id"], again
        status, again = _flag(d, tree, 15, 25, benchmarks=["k01", "k00"])
        assert status == 202 and again["duplicate_of"] == group["id"], again
        assert len(_jobs(d)) == 1
        # another range (even one inside the job's), or a benchmark it does not bisect, is work of its own
        assert _flag(d, tree, 16, 24, benchmark="k01")[1]["duplicate_of"] is None
        status, wider = _flag(d, tree, 10, 25, benchmark="k01")
        assert status == 202 and wider["duplicate_of"] is None, wider
        status, other = _flag(d, tree, 15, 25, benchmark="k02")  # joins a queued job, never the running one
        assert status == 202 and other["duplicate_of"] not in (None, group["id"]), other
        assert len(_jobs(d)) == 3
