"""The result document: the typed records survive JSON unchanged, documents of the old schema
(tests/fixtures/schema1, written by the last schema-1 attrib) migrate and render the report that
version rendered, and anything attrib did not write fails with one line naming the file and
the field, through the real CLI."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import run_cli
from sim_results import simulated_result

from attrib.codec import encode
from attrib.core.detect import ChangeDirection
from attrib.core.model import (
    ArtifactNote,
    ArtifactTrap,
    Cause,
    Direction,
    NoteKind,
    Purpose,
    TextCause,
    UnresolvedCause,
    Verdict,
)
from attrib.errors import ResultFormatError
from attrib.evaluate.executors.base import (
    DockerDescription,
    ExecutorKind,
    LocalDescription,
    SlurmBuildJob,
    SlurmDescription,
    SlurmRound,
)
from attrib.evaluate.runners import RunnerEvidence, StaticDiff, Step, evidence_of
from attrib.evaluate.runners.command import CommandRunner
from attrib.evaluate.runners.cupy import CupyRunner
from attrib.recipe import BenchmarkSpec, CupySpec
from attrib.report.markdown import render, resolve_text, why_text
from attrib.result import RESULT_SCHEMA, BisectResult, CompareResult, dump, from_json, load_result
from attrib.result.types import DetectedChange, ExecutorInfo, UnresolvedRange

FIXTURES = Path(__file__).parent / "fixtures" / "schema1"
SCHEMA1_BISECTIONS = ("culprit", "inconclusive", "preflight-inconclusive", "demo-revert")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, BisectResult]:
    tmp = tmp_path_factory.mktemp("sim")
    return {name: simulated_result(name, tmp) for name in ("culprit", "two_culprits", "not_reproduced", "inconclusive")}


def test_a_result_survives_its_json_unchanged(results):
    for name, result in results.items():
        doc = json.loads(dump(result))
        assert doc["schema"] == RESULT_SCHEMA and doc["kind"] == "bisect", name
        assert from_json(doc, name) == result, name


SLURM = SlurmDescription(
    run_id="r1", partition="gpu", nodes_available=("n1", "n2"), nodes_used=("n1", "n2"), jobs_submitted=5,
    calls={"squeue": 7}, polls_per_min=3.5, step_overhead_s=(0.05,),
    rounds=(SlurmRound(0, job=11, node="n1", runs=3), SlurmRound(1, job=12, node="n2", runs=3, fault="NODE_FAIL"),
            SlurmRound(2, job=13, node="n1", runs=3)),
    build_jobs=(SlurmBuildJob(10, "attrib-r1-build", node="n2", state="COMPLETED", submit_to_start_s=1.5),),
)  # fmt: skip
DOCKER = DockerDescription(image="attrib-cpu:1", image_id="sha256:abc", digests=("attrib@sha256:def",), gpus=False)


@pytest.mark.parametrize(
    ("info", "line"),
    [
        (ExecutorInfo.of(ExecutorKind.SLURM, SLURM), "- executor: slurm, partition gpu, 5 jobs; rounds per node: `n1` 2, `n2` 1; 1 round(s) lost their allocation"),
        (ExecutorInfo.of(ExecutorKind.DOCKER, DOCKER), "- executor: docker, image `attrib-cpu:1` id `sha256:abc` digest `attrib@sha256:def`, benchmarks ran without GPUs"),
        (ExecutorInfo.of(ExecutorKind.LOCAL, LocalDescription(host="box")), "- executor: local"),
    ],
)
def test_each_executor_describes_itself_in_types_the_json_keeps_flat(results, info, line):
    # The document keeps one flat object per executor (`name` beside its keys), as schema 1 and 2
    # always wrote it; reading it back gives the same typed description, and the report reads that.
    result = replace(results["culprit"], executor=info)
    doc = json.loads(dump(result))
    assert doc["executor"]["name"] == info.name.value and "extra" not in doc["executor"]
    assert doc["executor"] == {"name": info.name.value, **json.loads(json.dumps(encode(info.description)))}
    assert from_json(doc) == result
    assert line in render(result).splitlines()


def test_an_old_flat_executor_object_reads_as_its_typed_description(results):
    doc = json.loads(dump(results["culprit"]))
    doc["executor"] = {"name": "slurm", "partition": "p", "jobs_submitted": 2, "rounds": [{"round": 0, "job": 4, "node": "n7", "runs": 2}]}
    back = from_json(doc)
    assert isinstance(back, BisectResult) and back.executor.slurm is not None
    assert (back.executor.slurm.partition, back.executor.slurm.rounds[0].node) == ("p", "n7")
    doc["executor"]["rounds"][0]["node"] = 7
    with pytest.raises(ResultFormatError, match=r"field 'executor.rounds\[0\].node': expected a string, got 7"):
        from_json(doc)


def test_structured_causes_and_evidence_survive_json(results):
    r = results["inconclusive"]
    u = r.unresolved[0]
    causes = (
        Cause(UnresolvedCause.UNDECIDED_AT_CAP, u.commits[:2]),
        Cause(UnresolvedCause.NOT_CONFIRMED, (u.last_good, u.first_bad), verdict=Verdict.INCONCLUSIVE),
        Cause(UnresolvedCause.NOT_CLEARLY_WORSE, rounds=8, change_pct=1.25),
    )
    culprit = replace(r.culprits[0], static_diff={"registers": (96, 168)}) if r.culprits else None
    richer = replace(
        r,
        unresolved=(replace(u, causes=causes),),
        culprits=(culprit,) if culprit else (),
    )
    back = from_json(json.loads(dump(richer)))
    assert back == richer
    assert isinstance(back, BisectResult) and back.unresolved[0].causes == causes


def test_an_artifact_note_is_written_as_it_is_and_reads_back_as_the_same_record(results):
    # One record (core/model.ArtifactNote) for the evaluation, the outcome and the result: its
    # traps are written as their values, as every schema wrote them, and read back as traps.
    note = ArtifactNote("a" * 40, "b" * 40, (ArtifactTrap.BUILD_PATH, ArtifactTrap.TIMESTAMP))
    result = replace(results["culprit"], artifact_notes=(note,))
    doc = json.loads(dump(result))
    assert doc["artifact_notes"] == [{"a": "a" * 40, "b": "b" * 40, "traps": ["build_path", "timestamp"]}]
    back = from_json(doc)
    assert back == result and isinstance(back, BisectResult) and back.artifact_notes == (note,)
    doc["artifact_notes"][0]["traps"] = ["mtime"]  # no attrib wrote another trap
    with pytest.raises(ResultFormatError, match=r"field 'artifact_notes\[0\].traps\[0\]': expected one of timestamp, build_path"):
        from_json(doc)


@pytest.mark.parametrize("name", SCHEMA1_BISECTIONS)
def test_schema1_documents_render_the_report_they_rendered(name):
    result = load_result(FIXTURES / f"{name}.json")
    assert isinstance(result, BisectResult)
    # `attrib report FILE` printed the markdown plus typer's newline
    assert render(result) + "\n" == (FIXTURES / f"{name}.md").read_text()


@pytest.mark.parametrize("name", ("culprit", "inconclusive", "two_culprits"))
def test_schema2_documents_render_the_report_they_rendered(name):
    # Schema 2 wrote notes as sentences; they come back as notes of kind text, worded as before.
    path = FIXTURES.parent / "schema2" / f"{name}.json"
    result = load_result(path)
    assert isinstance(result, BisectResult)
    assert render(result) + "\n" == path.with_suffix(".md").read_text()
    sentences = json.loads(path.read_text())["notes"]
    assert [(n.kind, n.text) for n in result.notes] == [(NoteKind.TEXT, t) for t in sentences]


def test_notes_are_records_worded_by_the_report(results):
    # Today's engine writes what it noticed as data; the report says it in words.
    r = results["inconclusive"]
    assert r.notes and all(n.kind is not NoteKind.TEXT and n.text == "" for n in r.notes)
    doc = json.loads(dump(r))
    assert all(isinstance(n, dict) and n["kind"] in set(NoteKind) for n in doc["notes"])
    assert "stopped probing after 4 inconclusive tests after" in render(r)


def test_schema1_sentences_are_kept_as_text_causes():
    doc = json.loads((FIXTURES / "inconclusive.json").read_text())
    result = load_result(FIXTURES / "inconclusive.json")
    assert isinstance(result, BisectResult)
    (u,) = result.unresolved
    assert u.causes == (TextCause(doc["unresolved"][0]["why"], doc["unresolved"][0]["resolve"]),)


def test_schema1_gpu_object_becomes_a_list_and_static_diff_pairs_stay():
    result = load_result(FIXTURES / "culprit.json")
    assert isinstance(result, BisectResult)
    assert [g["name"] for g in result.environment.gpu] == ["NVIDIA H200"]
    assert result.culprits[0].static_diff == {"registers": (96, 168), "spill_stores_bytes": (0, 24)}


def test_schema1_compare_result_is_read_and_rendered():
    result = load_result(FIXTURES / "compare.json")
    assert isinstance(result, CompareResult)
    doc = json.loads((FIXTURES / "compare.json").read_text())
    assert result.benchmark == doc["benchmark"]
    c = result.comparison
    assert (c.candidate, c.reference, c.purpose, c.verdict) == (doc["candidate"], doc["reference"], Purpose.COMPARE, Verdict(doc["verdict"]))
    assert c.shifts == tuple(doc["shifts"])
    text = render(result)
    assert f"**{doc['verdict']}**" in text and f"{doc['change_pct']:+.2f} %" in text and doc["candidate"] in text
    again = json.loads(dump(result))
    assert again["kind"] == "compare" and again["verdict"] == doc["verdict"]  # still flat: `jq .verdict`
    assert from_json(again) == result


def test_a_compare_results_direction_is_parsed_on_reading_and_written_as_before():
    doc = json.loads((FIXTURES / "compare.json").read_text())
    old = load_result(FIXTURES / "compare.json")  # written before comparisons recorded a direction
    assert isinstance(old, CompareResult) and old.direction is None
    assert json.loads(dump(old))["direction"] == ""
    for written in ("lower", "higher"):
        result = from_json({**doc, "direction": written, "unit": "s"})
        assert isinstance(result, CompareResult) and result.direction is Direction(written)
        assert json.loads(dump(result))["direction"] == written
    with pytest.raises(ResultFormatError) as info:
        from_json({**doc, "direction": "sideways"}, "c.json")
    assert str(info.value) == "c.json: field 'direction': expected one of lower, higher, got 'sideways'"


def test_a_detected_change_point_reads_as_its_direction_and_refuses_any_other(results):
    change = DetectedChange("demo", "k00", "a" * 40, "b" * 40, ChangeDirection.REGRESSION, 5.1, (4.0, 6.2), 1e-4, "http://x/series")
    result = replace(results["culprit"], detected=(change,))
    doc = json.loads(dump(result))
    assert doc["detected"][0]["direction"] == "regression"  # written as before: the value
    again = from_json(doc)
    assert again == result and again.detected[0].direction is ChangeDirection.REGRESSION
    doc["detected"][0]["direction"] = "sideways"
    with pytest.raises(ResultFormatError) as info:
        from_json(doc, "r.json")
    assert "r.json: field 'detected[0].direction': expected one of " in str(info.value) and "'sideways'" in str(info.value)


def _settings():
    result = load_result(FIXTURES / "inconclusive.json")
    assert isinstance(result, BisectResult)
    return result.settings


@pytest.mark.parametrize("name", ("inconclusive", "preflight-inconclusive"))
def test_causes_say_what_the_schema1_engine_wrote(name):
    """The report's sentences for structured causes are the ones the engine wrote as text."""
    doc = json.loads((FIXTURES / f"{name}.json").read_text())
    (u,) = doc["unresolved"]
    rows = {row["commit"] for row in doc["commits"]}
    if name == "preflight-inconclusive":
        (pre,) = [c for c in doc["comparisons"] if c["purpose"] == "preflight"]
        causes: tuple[Cause, ...] = (
            Cause(UnresolvedCause.NOT_CLEARLY_WORSE, rounds=pre["rounds"], change_pct=doc["total_change_pct"]),
        )
    else:
        undecided = tuple(c for c in u["commits"][:-1] if c in rows)
        untested = tuple(c for c in u["commits"][:-1] if c not in rows)
        causes = (Cause(UnresolvedCause.UNDECIDED_AT_CAP, undecided), Cause(UnresolvedCause.NOT_MEASURED, untested))
    structured = UnresolvedRange(u["last_good"], u["first_bad"], tuple(u["commits"]), causes)
    result = load_result(FIXTURES / f"{name}.json")
    assert isinstance(result, BisectResult)
    assert why_text(structured, result.settings) == u["why"]
    assert resolve_text(structured, result.settings) == u["resolve"]


def test_the_other_causes_in_words():
    a, b = "a" * 40, "b" * 40
    u = UnresolvedRange("1" * 40, "2" * 40, (a, b, "2" * 40), (
        Cause(UnresolvedCause.UNBUILDABLE, (a, b)),
        Cause(UnresolvedCause.NOT_CONFIRMED, ("1" * 40, "2" * 40), verdict=Verdict.INCONCLUSIVE),
    ))  # fmt: skip
    s = _settings()
    assert why_text(u, s) == (
        "2 commit(s) cannot be built or run; the step 1111111111 -> 2222222222 was not confirmed (inconclusive)"
    )
    assert resolve_text(u, s) == (
        "a fixed build of aaaaaaaaaa, bbbbbbbbbb; "
        "more rounds for the confirmation, or a larger min_change_pct if the step is small"
    )
    assert f"--max-rounds {2 * s.max_rounds}" in resolve_text(replace(u, causes=(Cause(UnresolvedCause.UNDECIDED_AT_CAP, (a,)),)), s)


# --- bad input: one line, naming the file and the field --------------------------------------


def _demo_doc() -> dict:
    return json.loads((FIXTURES / "demo-revert.json").read_text())


def _with(doc: dict, edit) -> dict:
    edit(doc)
    return doc


BAD_DOCUMENTS = {
    "schema-only": ('{"schema": 1}', "field 'status': missing"),
    "not-json": ("not json", "not JSON"),
    # one past the newest schema this attrib writes: unknown whatever that number is
    "unknown-schema": (f'{{"schema": {RESULT_SCHEMA + 1}, "status": "culprit_found"}}', "field 'schema': expected one of 1, 2"),
    "no-schema": ('{"status": "culprit_found"}', "field 'schema': missing"),
    "a-list": ("[1, 2]", "expected a JSON object"),
    "wrong-type": (
        json.dumps(_with(_demo_doc(), lambda d: d["culprits"][0].__setitem__("change_pct", "big"))),
        "field 'culprits[0].change_pct': expected a number, got 'big'",
    ),
    "unknown-status": (
        json.dumps(_with(_demo_doc(), lambda d: d.__setitem__("status", "found-it"))),
        "field 'status': expected one of culprit_found, partial, not_reproduced, inconclusive, error, got 'found-it'",
    ),
    "bad-ci": (
        json.dumps(_with(_demo_doc(), lambda d: d.__setitem__("total_ci_pct", [1.0]))),
        "field 'total_ci_pct': expected a list of 2, got 1 items",
    ),
    "bad-compare": (
        json.dumps(_with(json.loads((FIXTURES / "compare.json").read_text()), lambda d: d.__setitem__("rounds", None))),
        "field 'rounds': expected an integer, got null",
    ),
}


@pytest.mark.parametrize("name", BAD_DOCUMENTS)
def test_report_on_anything_else_is_one_line_naming_file_and_field(tmp_path, name):
    text, expected = BAD_DOCUMENTS[name]
    path = tmp_path / f"{name}.json"
    path.write_text(text)
    res = run_cli("report", path)
    assert res.code == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert str(path) in lines[0] and expected in lines[0], lines[0]
    assert res.stdout == ""


def test_report_renders_what_attrib_wrote(tmp_path, results):
    for name, doc in (("bisect", dump(results["culprit"])), ("compare", (FIXTURES / "compare.json").read_text())):
        path = tmp_path / f"{name}.json"
        path.write_text(doc)
        res = run_cli("report", path)
        assert res.code == 0 and res.stdout.startswith("# attrib"), res.stderr


def test_a_compare_result_is_not_filed(tmp_path):
    res = run_cli("report", FIXTURES / "compare.json", "--file-issue", f"dir:{tmp_path / 'filed'}")
    assert res.code == 2 and "compare result" in res.stderr
    assert not (tmp_path / "filed").exists()


def test_from_json_names_the_source():
    with pytest.raises(ResultFormatError) as info:
        from_json({"schema": 2, "kind": "bisect"}, "job 42's result")
    assert str(info.value) == "job 42's result: field 'status': missing"


# --- runner evidence ---------------------------------------------------------------------------


def test_a_runner_without_evidence_adds_nothing():
    bench = BenchmarkSpec(name="loop", runner="command", command=("./bench",))
    assert evidence_of(CommandRunner(None, bench), [Step("c" * 40, Path("/a"), Path("/b"))]) == RunnerEvidence()  # type: ignore[arg-type]


def test_the_cupy_runner_says_why_a_static_diff_is_unavailable(tmp_path):
    """NVRTC runs here (no GPU needed); a checkout without the kernel is a reason, not a crash."""
    spec = BenchmarkSpec(name="gemm", runner="cupy", command=(), cupy=CupySpec(kernel="gemm_mma", dtype="bf16", source="kernels/none.cu"))
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir()
    after.mkdir()
    ev = evidence_of(CupyRunner(spec), [Step("c" * 40, before, after)])
    (diff,) = ev.static_diffs.values()
    assert isinstance(diff, StaticDiff) and diff.unavailable and not diff.changed
    assert ev.gpu == {}  # nothing was timed: no GPU to record


def test_an_undecided_preflight_above_the_minimum_is_blamed_on_noise_not_size() -> None:
    from attrib.report.sentences import cause_resolve

    noisy = Cause(UnresolvedCause.NOT_CLEARLY_WORSE, rounds=60, change_pct=12.5)
    small = Cause(UnresolvedCause.NOT_CLEARLY_WORSE, rounds=60, change_pct=1.25)
    assert "below the recipe's min_change_pct" not in cause_resolve(noisy, 60, 2.0)
    assert "too noisy" in cause_resolve(noisy, 60, 2.0)
    assert "below the recipe's min_change_pct" in cause_resolve(small, 60, 2.0)
