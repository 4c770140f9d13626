"""Filing a group: one issue per culprit (fingerprint: tracker project and culprit), its body a
table of every member the culprit moved, largest first, with the largest one's sparkline and
static kernel diff; a later bisection that finds the same culprit comments on that issue and
names the members it adds; an issue filed under the old per-benchmark fingerprint is still
found. Against the strict loopback server (fake_tracker.py) for GitHub and GitLab, and the dir:
sink on disk."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from fake_tracker import FakeTracker, Issue
from sim_results import simulated_group

from attrib.tracker import file_issues, fingerprint, named_members, open_sink, parse_target

TOKEN = "ghp_s3cret-t0ken-value"
GITHUB_BODY_LIMIT = 65536  # characters GitHub takes in an issue body


@pytest.fixture(scope="module")
def groups(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("group")
    full = simulated_group(tmp)
    # the largest member's runner reported a static kernel diff for the first culprit
    first = replace(full.culprits[0], static_diff={"registers": (96, 168), "spill_stores": (0, 24)})
    full = replace(full, culprits=(first, *full.culprits[1:]))
    return {"full": full, "fp16": simulated_group(tmp, ("gemm_fp16",)), "bf16": simulated_group(tmp, ("gemm_bf16",))}


@pytest.fixture
def server():
    with FakeTracker(TOKEN, projects=("acme/kernels", "gpu/compilers/nvcc")) as fake:
        yield fake


def _sink(kind, server, tmp_path):
    if kind == "dir":
        return open_sink(parse_target(f"dir:{tmp_path / 'filed'}"))
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": server.url} if kind == "github" else {"GITLAB_TOKEN": TOKEN, "CI_API_V4_URL": server.url}
    return open_sink(parse_target(f"{kind}:{'acme/kernels' if kind == 'github' else 'gpu/compilers/nvcc'}"), env, lambda s: None)


def _issues(kind, server, sink):
    """(title, body with its comments) of every issue the sink holds."""
    if kind == "dir":
        return [(p.read_text().split("\n", 1)[0], p.read_text()) for p in sorted(sink.root.glob("*/report.md"))]
    project = "acme/kernels" if kind == "github" else "gpu/compilers/nvcc"
    return [(i.title, i.body) for i in server.issues[project]]


def _comments(kind, server, sink):
    if kind == "dir":
        return [c for p in sorted(sink.root.glob("*/report.md")) for c in p.read_text().split("\n## Comment ")[1:]]
    project = "acme/kernels" if kind == "github" else "gpu/compilers/nvcc"
    return [c for i in server.issues[project] for c in i.comments]


def _table(body: str) -> list[tuple[str, float]]:
    return [(m.group(1), float(m.group(2))) for m in re.finditer(r"^\| `([^`]+)` \| \*\*([+-][0-9.]+) %\*\* \|", body, re.M)]


@pytest.mark.parametrize("kind", ["github", "gitlab", "dir"])
def test_one_issue_per_culprit_lists_its_members_largest_first(kind, server, tmp_path, groups):
    full = groups["full"]
    sink = _sink(kind, server, tmp_path)
    filed = file_issues(full, sink, ["performance-regression"])
    assert [f.action for f in filed] == ["opened", "opened"]
    issues = _issues(kind, server, sink)
    assert len(issues) == 2
    for c in full.culprits:
        (body,) = [b for _, b in issues if f"attrib-fingerprint: {fingerprint(sink.project, c.commit)}" in b]
        assert _table(body)[: len(c.members)] == [(ch.label, round(ch.change_pct, 2)) for ch in c.members]
        sizes = [abs(x) for _, x in _table(body)[: len(c.members)]]
        assert sizes == sorted(sizes, reverse=True)
        assert named_members(body) == {ch.label for ch in c.members}
        top = c.members[0].label
        assert f"`{top}`, the largest, per tested commit:" in body and "good " in body
        assert len(body) < GITHUB_BODY_LIMIT
    gemm = next(b for _, b in issues if "gemm_bf16" in b.split("## Benchmarks")[0])
    assert "| registers | 96 | 168 | +72 (+75 %) |" in gemm  # the static diff of the largest member
    if kind != "dir":
        titles = sorted(t for t, _ in issues)
        assert titles[0].startswith("attention: up to +") and titles[1].startswith("gemm_fp16, gemm_bf16: up to +")


@pytest.mark.parametrize("kind", ["github", "gitlab", "dir"])
def test_a_later_bisection_of_the_same_culprit_comments_and_names_the_members_it_adds(kind, server, tmp_path, groups):
    sink = _sink(kind, server, tmp_path)
    assert [f.action for f in file_issues(groups["fp16"], sink, ["performance-regression"])] == ["opened"]
    filed = file_issues(groups["full"], sink, ["performance-regression"])
    assert [f.action for f in filed] == ["commented", "opened"]  # culprit 17 known, 44 new
    assert len(_issues(kind, server, sink)) == 2
    (comment,) = _comments(kind, server, sink)
    assert "it also moved 1 benchmark(s) this issue did not list: `gemm_bf16`." in comment
    # the same group again adds no benchmark
    filed = file_issues(groups["full"], sink, ["performance-regression"])
    assert [f.action for f in filed] == ["commented", "commented"]
    later = _comments(kind, server, sink)[1:]
    assert any("it moved no benchmark this issue does not list" in c for c in later)
    assert len(_issues(kind, server, sink)) == 2


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_an_issue_under_the_old_per_benchmark_fingerprint_is_found(kind, server, tmp_path, groups):
    full = groups["full"]
    project = "acme/kernels" if kind == "github" else "gpu/compilers/nvcc"
    culprit = full.culprits[0]
    old = fingerprint(project, culprit.commit, "gemm_bf16")  # as attrib filed it before groups
    server.issues[project].append(Issue(1, "gemm_bf16: +4.2 % from ...", f"<!-- attrib-fingerprint: {old} -->\nreport", ["performance-regression"]))
    sink = _sink(kind, server, tmp_path)
    filed = file_issues(full, sink, ["performance-regression"])
    assert [f.action for f in filed] == ["commented", "opened"]
    first = server.issues[project][0]
    (comment,) = first.comments
    assert f"attrib-fingerprint: {old}" in comment
    assert "did not list: `gemm_fp16`." in comment  # gemm_bf16 is the old issue's own


def test_the_old_fingerprint_is_found_on_disk_too(tmp_path, groups):
    full = groups["full"]
    sink = open_sink(parse_target(f"dir:{tmp_path / 'filed'}"))
    culprit = full.culprits[0]
    old = fingerprint(sink.project, culprit.commit, "gemm_fp16")
    folder = sink.root / old[:16]
    folder.mkdir(parents=True)
    (folder / "report.md").write_text(f"<!-- title: t -->\n<!-- attrib-fingerprint: {old} -->\nold report\n")
    filed = file_issues(full, sink, ["performance-regression"])
    assert [f.action for f in filed] == ["commented", "opened"]
    text = (folder / "report.md").read_text()
    assert "## Comment 1" in text and "did not list: `gemm_bf16`." in text


def test_a_members_marker_cannot_close_its_comment():
    from attrib.tracker import members_marker

    mark = members_marker(["a-->b", "c"])
    assert mark.count("-->") == 1 and named_members(mark) == {"a-->b", "c"}
    assert json.loads(mark.split(": ", 1)[1].rsplit(" -->", 1)[0]) == ["a-->b", "c"]
