"""Groups in the daemon (issue 29): change points of one project and recipe whose ranges overlap
are one job (within one upload, and across uploads inside `group_window_s`), a group counts once
against max_bisections_per_day, a map rule hands the series' own name to the recipe, a CI flag
may name several benchmarks and joins a queued job of an overlapping range, and the status and
series pages show the group. A real uvicorn server on loopback, a real SQLite database and a
real git tree; no workers run, so what was queued can be counted exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import spec
from history_data import HEADER, first_parent, levels
from test_daemon_api import SECRET, Daemon, running

from attrib.core.detect import DetectSettings
from attrib.daemon.auth import sign
from attrib.daemon.config import DEFAULT_GROUP_WINDOW_S, Settings
from attrib.demo import generate_tree
from attrib.history.flagging import Span, groups
from attrib.history.projects import SERIES_NAME, HistoryConfig, MapRule, ProjectConfig
from attrib.history.store import HistoryStore

N = 44
KERNELS = [f"k{i:02d}" for i in range(8)]
# kernel -> (first night after its step, factor): two culprits, 5 + 2 kernels, one flat
STEPS = {**{k: (20, 1.3) for k in KERNELS[:5]}, **{k: (32, 1.25) for k in KERNELS[5:7]}}
RECIPE = """schema = 1
name = "kernels"
[build]
commands = ["true"]
[[benchmark]]
name = "kernels"
runner = "command"
command = ["sh", "-c", "true"]
names = [{names}]
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory):
    return generate_tree(tmp_path_factory.mktemp("groups") / "repo", spec(commits=N - 1, culprits=((20, 30),), broken=None))


def _settings(tmp_path: Path, tree, window: float = DEFAULT_GROUP_WINDOW_S, **project: Any) -> Settings:
    recipes = tmp_path / "recipes"
    recipes.mkdir(exist_ok=True)
    (recipes / "kernels.toml").write_text(RECIPE.format(names=", ".join(f'"{k}"' for k in KERNELS)))
    rules = (MapRule("k*", "kernels.toml", SERIES_NAME),)  # one rule for the whole recipe
    p = ProjectConfig(name="demo", repo=str(tree.path), map=rules, detect=DetectSettings(), **project)
    return Settings(state=tmp_path / "state", secret=SECRET, recipes_dir=recipes, workers=0, group_window_s=window,
                    history=HistoryConfig(projects={"demo": p}))  # fmt: skip


def _csv(line: list[str], kernels: list[str], seed: int = 1, day0: int = 1) -> str:
    rows = [HEADER]
    for n, k in enumerate(kernels):
        at, factor = STEPS.get(k, (None, 1.0))
        for i, (c, v) in enumerate(zip(line, levels(N, at, factor, seed=seed + n, noise=0.005), strict=True)):
            day = day0 + i
            rows.append(f"{c},{k},{v:.9f},s,lower,2026-{1 + (day - 1) // 28:02d}-{1 + (day - 1) % 28:02d}T02:00:00Z,ci-a100")
    return "\n".join(rows) + "\n"


def _post(d: Daemon, content: str) -> dict[str, Any]:
    body = json.dumps({"project": "demo", "files": [{"name": "nightly.csv", "content": content}]}).encode()
    status, answer, _ = d.post("/v1/results", body, {"X-Attrib-Signature-256": sign(body, SECRET)})
    assert status == 200, answer
    return answer


def _jobs(d: Daemon) -> list[dict[str, Any]]:
    status, answer, _ = d.get("/v1/jobs", SECRET)
    assert status == 200
    return answer["jobs"]


def test_one_upload_makes_one_job_per_overlapping_group_and_none_is_rate_limited(tmp_path: Path, tree):
    line = first_parent(tree.path)
    with running(_settings(tmp_path, tree)) as d:
        answer = _post(d, _csv(line, KERNELS))
        flags = {f["benchmark"]: f for f in answer["flags"]}
        assert sorted(flags) == sorted(STEPS)  # every regressed kernel's change point, nothing for k07
        assert not [f for f in flags.values() if f["flag"] == "rate_limited"]
        jobs = _jobs(d)
        assert len(jobs) == 2  # one per culprit's overlapping ranges, at the default limit of 5
        by_members = {frozenset(j["benchmarks"]): j for j in jobs}
        assert set(by_members) == {frozenset(KERNELS[:5]), frozenset(KERNELS[5:7])}
        for members, job in by_members.items():
            states = sorted(flags[k]["flag"] for k in members)
            assert states == ["grouped"] * (len(members) - 1) + ["queued"]  # the group counts once
            assert {flags[k]["job"] for k in members} == {job["id"]}
            assert line.index(job["good"]) < STEPS[next(iter(members))][0] <= line.index(job["bad"])
        assert HistoryStore(d.settings.db_path).queued_since("demo", 0) == 2
        # the status page shows each group and its members; the series page names the group
        status, page, _ = d.get("/", SECRET)
        assert status == 200 and page.count("group of 5") == 1 and page.count("group of 2") == 1
        assert all(f"<bdi>{k}</bdi>" in page for k in STEPS)
        status, series, _ = d.get("/series?project=demo", SECRET)
        assert status == 200 and series.count('class="group">group of 5') == 5 and series.count('class="group">group of 2') == 2


def test_a_later_upload_inside_the_window_joins_the_queued_group(tmp_path: Path, tree):
    line = first_parent(tree.path)
    with running(_settings(tmp_path, tree)) as d:
        _post(d, _csv(line, KERNELS[:3]))
        (job,) = _jobs(d)
        assert job["benchmarks"] == KERNELS[:3]
        answer = _post(d, _csv(line, KERNELS[3:5], seed=7))  # another machine's night, minutes later
        assert [f["flag"] for f in answer["flags"]] == ["grouped", "grouped"]
        (again,) = _jobs(d)
        assert again["id"] == job["id"] and again["benchmarks"] == KERNELS[:5]
        # the job waits for the window: no worker may claim it before
        assert d.store.claim("w") is None
        assert d.store.claim("w", now=job["created"] + DEFAULT_GROUP_WINDOW_S + 1) is not None


def test_without_a_window_a_later_upload_is_its_own_job(tmp_path: Path, tree):
    line = first_parent(tree.path)
    with running(_settings(tmp_path, tree, window=0)) as d:
        _post(d, _csv(line, KERNELS[:3]))
        _post(d, _csv(line, KERNELS[3:5], seed=7))
        assert sorted(len(j["benchmarks"]) for j in _jobs(d)) == [2, 3]
        assert d.store.claim("w") is not None  # nothing held


def test_a_group_counts_once_against_the_daily_limit(tmp_path: Path, tree):
    line = first_parent(tree.path)
    with running(_settings(tmp_path, tree, max_bisections_per_day=1)) as d:
        answer = _post(d, _csv(line, KERNELS))
        states = sorted(f["flag"] for f in answer["flags"])
        # the first group takes the day's one bisection (all 5 or both 2 of its points); the other waits
        assert states in (["grouped"] * 4 + ["queued"] + ["rate_limited"] * 2, ["grouped"] + ["queued"] + ["rate_limited"] * 5)
        assert len(_jobs(d)) == 1


def test_a_ci_flag_names_several_benchmarks_and_joins_a_queued_job_of_an_overlapping_range(tmp_path: Path, tree):
    line = first_parent(tree.path)
    with running(_settings(tmp_path, tree)) as d:
        base = {"repo": str(tree.path), "recipe": "kernels.toml"}
        status, first, _ = d.flag({**base, "good": line[15], "bad": line[25], "benchmarks": ["k00", "k0[12]"]})
        assert status == 202 and first["duplicate_of"] is None
        (job,) = _jobs(d)
        assert job["benchmarks"] == ["k00", "k01", "k02"]
        # another CI job's flag for an overlapping range and other benchmarks joins it, widened
        status, second, _ = d.flag({**base, "good": line[18], "bad": line[30], "benchmark": "k05"})
        assert status == 202 and second["id"] == job["id"] == second["duplicate_of"]
        (joined,) = _jobs(d)
        assert joined["benchmarks"] == ["k00", "k01", "k02", "k05"]
        assert (joined["good"], joined["bad"]) == (line[15], line[30])
        # a flag of a benchmark the job has stays its own job; so does a range that does not overlap
        assert d.flag({**base, "good": line[16], "bad": line[24], "benchmark": "k01"})[1]["duplicate_of"] is None
        assert d.flag({**base, "good": line[35], "bad": line[40], "benchmark": "k06"})[1]["duplicate_of"] is None
        assert len(_jobs(d)) == 3
        status, bad, _ = d.flag({**base, "good": line[1], "bad": line[2], "benchmarks": ["nope*"]})
        assert status == 400 and bad["field"] == "benchmarks" and "k00" in bad["error"]
        status, both, _ = d.flag({**base, "good": line[1], "bad": line[2], "benchmark": "k00", "benchmarks": ["k01"]})
        assert status == 400 and both["field"] == "benchmarks"


@pytest.mark.parametrize(
    ("spans", "expected"),
    [
        ([("r", Span(1, 2)), ("r", Span(1, 2)), ("r", Span(5, 6))], [[0, 1], [2]]),
        ([("r", Span(19, 20)), ("r", Span(20, 21)), ("r", Span(22, 23))], [[0, 1], [2]]),  # touching: a night late
        ([("r", Span(1, 4)), ("r", Span(3, 8)), ("r", Span(7, 9)), ("r", Span(10, 11))], [[0, 1, 2], [3]]),  # chained, then a gap
        ([("a", Span(1, 4)), ("b", Span(1, 4))], [[0], [1]]),  # another recipe is another group
        ([("r", Span(5, 6)), ("r", Span(1, 2)), ("r", Span(1, 3))], [[0], [1, 2]]),
    ],
)
def test_groups_are_overlapping_ranges_of_one_recipe(spans, expected):
    assert groups(spans) == expected


def test_attrib_submit_flags_a_group_with_a_repeated_benchmark(tmp_path: Path, tree):
    from conftest import run_cli

    line = first_parent(tree.path)
    secret = tmp_path / "secret"
    secret.write_text(SECRET)
    with running(_settings(tmp_path, tree)) as d:
        res = run_cli("submit", "--repo", tree.path, "--good", line[10], "--bad", line[25], "--recipe", "kernels.toml",
                      "--benchmark", "k00", "--benchmark", "k0[12]", "--url", d.url, "--secret-file", secret)  # fmt: skip
        assert res.code == 0 and res.stdout.strip().endswith("queued"), res.stderr
        (job,) = _jobs(d)
        assert job["benchmarks"] == ["k00", "k01", "k02"]
        listing = run_cli("jobs", "--url", d.url, "--secret-file", secret)
        assert listing.code == 0 and f"{job['id']}" in listing.stdout and "k00 and 2 more" in listing.stdout
