"""Schema 4: a result is a group. Each member keeps everything a bisection of it alone reports,
each culprit lists the members it moved (largest first, with change, CI and posterior), a
single benchmark is a group of one whose report reads as before, and schema-3 documents
(tests/fixtures/schema3, written by the last schema-3 attrib) migrate to a group of one and
render the report that version rendered."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest
from conftest import run_cli
from sim_results import GROUP, _recipe, simulated_group, simulated_result

from attrib.codec import encode
from attrib.core.model import Status
from attrib.core.stats import TestConfig
from attrib.recipe import BenchmarkSpec
from attrib.report.group import issue_lines
from attrib.report.markdown import member_lines, render
from attrib.result import RESULT_SCHEMA, BisectResult, dump, from_json, load_result
from attrib.result.gather import machine_info
from attrib.result.types import MEMBER_FIELDS, BuildFailure
from attrib.result.writer import Provenance, RunContext, build_result, group_status
from attrib.simulation import NoiseModel, group_history, run_simulated_group

SCHEMA3 = Path(__file__).parent / "fixtures" / "schema3"
GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> BisectResult:
    return simulated_group(tmp_path_factory.mktemp("group"))


@pytest.mark.parametrize("name", ("culprit", "two_culprits", "not_reproduced", "inconclusive"))
def test_schema3_documents_migrate_to_a_group_of_one_and_render_as_they_did(name):
    doc = json.loads((SCHEMA3 / f"{name}.json").read_text())
    assert doc["schema"] == 3 and "members" not in doc
    result = load_result(SCHEMA3 / f"{name}.json")
    assert isinstance(result, BisectResult)
    assert render(result) + "\n" == (SCHEMA3 / f"{name}.md").read_text()
    (member,) = result.members
    assert member.label == doc["benchmark"] and member.config == {}
    for field in MEMBER_FIELDS:
        if field != "culprits":
            assert getattr(member, field) == getattr(result, field), field
    assert [c.commit for c in member.culprits] == [c["commit"] for c in doc["culprits"]]
    for c, written in zip(result.culprits, doc["culprits"], strict=True):
        (moved,) = c.members
        assert (moved.benchmark, moved.change_pct, list(moved.ci_pct), moved.posterior) == (
            doc["benchmark"], written["change_pct"], written["ci_pct"], written["posterior"])  # fmt: skip
    # and what it migrates to is a document of today's schema that reads back unchanged
    assert from_json(json.loads(dump(result))) == result


def test_a_single_benchmark_is_a_group_of_one_and_its_report_is_the_golden(tmp_path):
    result = simulated_result("two_culprits", tmp_path)
    doc = json.loads(dump(result))
    assert doc["schema"] == RESULT_SCHEMA >= 4
    assert [m["benchmark"] for m in doc["members"]] == ["gemm_fp16"]
    assert [[m["benchmark"] for m in c["members"]] for c in doc["culprits"]] == [["gemm_fp16"], ["gemm_fp16"]]
    assert not result.group and result.view(result.members[0]) == result
    assert render(result) == (GOLDEN / "two_culprits.md").read_text()  # unchanged by schema 4


def test_a_single_benchmarks_document_is_schema_3s_plus_only_what_schema_4_needs(tmp_path):
    """Its one member is the lead, whose measurements are the top level's: written once, so the
    document is what schema 3 wrote plus the member's name and each culprit's members (it was
    twice that size when the member was written in full)."""
    result = simulated_result("two_culprits", tmp_path)
    doc = json.loads(dump(result))
    assert doc["members"] == [{"benchmark": "gemm_fp16", "config": {}, "min_change_pct": result.settings.min_change_pct,
                               "ignore_below_pct": result.settings.ignore_below_pct}]  # fmt: skip
    # without what schema 4 added, it is a schema-3 document that reads as the same result
    schema3 = {k: v for k, v in doc.items() if k != "members"} | {"schema": 3}
    schema3["culprits"] = [{k: v for k, v in c.items() if k != "members"} for c in doc["culprits"]]
    # (and schema 5's remainder, null unless the status is partial)
    assert set(doc) - set(json.loads((SCHEMA3 / "two_culprits.json").read_text())) == {"members", "remainder"}
    assert from_json(schema3) == result == from_json(doc)
    assert len(dump(result)) - len(json.dumps(schema3, indent=2)) < 1000
    # a schema-4 document written with its member in full still reads
    doc["members"] = [encode(result.members[0])]
    assert from_json(doc) == result


def test_a_groups_members_are_each_written_in_full(group):
    doc = json.loads(dump(group))
    assert len(doc["members"]) == len(GROUP)
    for written, member in zip(doc["members"], group.members, strict=True):
        assert written == encode(member)
    assert from_json(doc) == group


def test_each_culprit_lists_exactly_the_members_it_moved_largest_first(group):
    assert group.status is Status.CULPRIT_FOUND
    planted = {}
    for name, spec in GROUP.items():
        for position in spec["steps"]:
            planted.setdefault(position, []).append(name)
    assert len(group.culprits) == len(planted) == 2
    for c, (position, names) in zip(group.culprits, sorted(planted.items()), strict=True):
        assert c.subject.endswith(f"(step {position})")
        moved = [m.benchmark for m in c.members]
        assert sorted(moved) == sorted(names)
        sizes = [abs(m.change_pct) for m in c.members]
        assert sizes == sorted(sizes, reverse=True)
        # the group's record is its largest member's own: change, CI, confirmation
        top = next(m for m in group.members if m.benchmark == moved[0])
        own = next(x for x in top.culprits if x.commit == c.commit)
        assert (c.change_pct, c.ci_pct, c.confirmation) == (own.change_pct, own.ci_pct, own.confirmation)
        for ch in c.members:
            mine = next(x for m in group.members if m.benchmark == ch.benchmark for x in m.culprits if x.commit == c.commit)
            assert (ch.change_pct, ch.ci_pct, ch.posterior, ch.confirmed) == (mine.change_pct, mine.ci_pct, mine.posterior, mine.confirmed)


def test_each_member_has_its_own_status_and_everything_a_bisection_of_it_alone_reports(group, tmp_path):
    statuses = {m.benchmark: m.status for m in group.members}
    assert statuses == {"gemm_fp16": Status.CULPRIT_FOUND, "gemm_bf16": Status.CULPRIT_FOUND,
                        "attention": Status.CULPRIT_FOUND, "moe_router": Status.NOT_REPRODUCED}  # fmt: skip
    for name in GROUP:
        alone = simulated_group(tmp_path, (name,))
        (own,) = alone.members
        member = next(m for m in group.members if m.benchmark == name)
        assert member == own, name
    # the lead member (the largest change of the group's status) is at the top, as one bisection's fields
    assert group.benchmark == "gemm_fp16" and group.commits == group.members[0].commits
    assert group.samples == sum(m.samples for m in group.members)


def test_a_group_survives_its_json_and_the_cli_renders_it(group, tmp_path):
    doc = json.loads(dump(group))
    assert from_json(doc) == group
    assert [m["benchmark"] for m in doc["members"]] == list(GROUP)
    path = tmp_path / "group.json"
    path.write_text(dump(group))
    proc = run_cli("report", str(path))
    assert proc.code == 0, proc.stderr
    text = proc.stdout
    assert text.startswith("# attrib: 4 benchmarks in kernels")
    assert "**2 culprits found** in 3 of 4 benchmarks" in text
    assert text.count("<details><summary><code>") == 4  # every member's own report, folded
    first = text.index("## Culprit 1 of 2")
    table = text[first : text.index("## Culprit 2 of 2")]
    assert table.index("`gemm_fp16` | **+") < table.index("`gemm_bf16` | **+")
    assert "`gemm_fp16`, the largest, per tested commit:" in table and "good " in table
    assert "| `moe_router` | not reproduced |" in text


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ((Status.NOT_REPRODUCED, Status.CULPRIT_FOUND), Status.CULPRIT_FOUND),
        ((Status.NOT_REPRODUCED, Status.INCONCLUSIVE), Status.INCONCLUSIVE),
        ((Status.NOT_REPRODUCED, Status.ERROR), Status.ERROR),
        ((Status.NOT_REPRODUCED,), Status.NOT_REPRODUCED),
    ],
)
def test_a_groups_status_is_the_most_telling_of_its_members(statuses, expected):
    assert group_status(list(statuses)) is expected


def test_history_ingests_each_member_of_a_group_as_its_own_series(group):
    from attrib.history.attrib_result import parse_attrib_json

    rows = parse_attrib_json(dump(group), "group.json")
    by_bench: dict[str, list[float]] = {}
    for r in rows:
        by_bench.setdefault(r.benchmark, []).append(r.value)
    assert sorted(by_bench) == sorted(GROUP)
    for m in group.members:
        assert by_bench[m.benchmark] == [row.median for row in m.commits if row.median is not None]
    assert rows[0].row.startswith("members[0].commits[")


def test_the_runs_builds_time_and_build_failures_are_said_once_in_a_groups_report(group):
    failure = BuildFailure(group.commits[1].commit, "subject", "exit 2", "/work/cache/logs/x.log", "error: nope")
    shown = replace(group, build_failures=(failure,))
    text = render(shown)
    folded = text.index("<details><summary><code>")
    assert text.count("- wall time: build 12.0 s, measure 300.0 s") == 1 and text.index("- wall time") < folded
    assert text.count("## Build failures") == 1 and text.index("## Build failures") < folded
    assert text.count("## Where the work went") - text[folded:].count("## Where the work went") == 1
    # each member's raw counts say its own samples and rounds, not the run's builds and wall time again
    for m in group.members:
        assert f"- {m.samples} samples in {m.rounds} rounds\n" in text[folded:], m.label
    assert text.count(f"{group.builds} builds ({group.builds_fresh} fresh") == 0
    # an issue folds one member's report, which says them there, once
    (c, *_) = group.culprits
    body = "\n".join(issue_lines(shown, c, partial(member_lines, run_wide=True)))
    assert body.count("- wall time:") == 1 and body.count("## Build failures") == 1


def test_a_groups_time_per_phase_is_its_members_together(tmp_path):
    sim = run_simulated_group(group_history(30, {"a": {10: 5.0}, "b": {10: 5.0}}), NoiseModel(sigma=0.01), 1)
    benches = tuple(BenchmarkSpec(name=n, runner="command", command=("sim",), min_change_pct=2.0) for n in ("a", "b"))
    ctx = RunContext(Path("/r"), _recipe(*benches), benches[0], "local", TestConfig(), 1, tmp_path, 1.0, sim.builds,
                     member_specs={b.name: b for b in benches})  # fmt: skip
    result = build_result(sim.outcome, ctx, Provenance(machine_info(), "0" * 64))
    times = [o.times for _, o in sim.outcome.members]
    assert all(t.measure_s > 0 and t.comparisons for t in times)  # both members measured: not the lead's alone
    t = result.phase_times_s
    sums = tuple(round(sum(getattr(x, k) for x in times), 3) for k in ("build_s", "measure_s", "decide_s", "build_check_s"))
    assert (t.build, t.measure, t.decide, t.build_check) == sums
    assert t.decide_per_comparison == round(sum(x.decide_s for x in times) / sum(x.comparisons for x in times), 4)

