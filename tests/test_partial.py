"""Status partial (issue 39): a remainder that could not be decided is never hidden. When a
remaining-change test ends undecided and what the named culprits leave of the whole change still
reaches the minimum by its interval, the outcome is partial: the status, exit code 13, the
headline (and so the filed issue and the daemon's comment, which are the report) name the
culprits, the unexplained change with its interval, and what would settle it. Schema-4
documents (tests/fixtures/schema4, written by the last schema-4 attrib) read with no remainder
and render the report they rendered."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from sim_results import simulated_result

from attrib.cli import EXIT_INCONCLUSIVE, EXIT_NOT_REPRODUCED, EXIT_OK, EXIT_PARTIAL, STATUS_EXIT
from attrib.core.model import Purpose, Remainder, Status, Verdict
from attrib.core.stats import TestConfig
from attrib.report.markdown import headline, render
from attrib.result import dump, from_json, load_result
from attrib.result.writer import group_status
from attrib.simulation import NoiseModel, linear_history, run_simulated
from attrib.tracker import file_issues, open_sink, parse_target

SCHEMA4 = Path(__file__).parent / "fixtures" / "schema4"
SCHEMA6 = Path(__file__).parent / "fixtures" / "schema6"
# the lrzip shape: a +0.7 % step, a +17 % culprit and a +8.6 % one, noise 13 % a sample
TREE = linear_history(8, {2: 0.7, 4: 17.0, 7: 8.6}, small=frozenset({2}))
NOISY = NoiseModel("gaussian", sigma=0.101, between=0.082)
REMAINDER = Remainder(9.1, -2.5, 22.0, 31.4, 0.31, ("c" * 40, "d" * 40), 120, 9677, 15.7, 1.6, 19.5)


def test_exit_codes_scripts_depend_on_stay_and_partial_has_its_own():
    assert (STATUS_EXIT[Status.CULPRIT_FOUND], STATUS_EXIT[Status.NOT_REPRODUCED], STATUS_EXIT[Status.INCONCLUSIVE]) == (
        EXIT_OK, EXIT_NOT_REPRODUCED, EXIT_INCONCLUSIVE) == (0, 10, 11)  # fmt: skip
    assert STATUS_EXIT[Status.PARTIAL] == EXIT_PARTIAL == 13
    assert set(STATUS_EXIT) == set(Status)


def test_an_undecided_remainder_that_reaches_the_minimum_makes_the_outcome_partial():
    seen = set()
    for seed in range(4):
        out = run_simulated(TREE, NOISY, seed, TestConfig(), min_change_pct=2.0, reps=4).outcome
        undecided = [c for c in out.comparisons if c.purpose is Purpose.REMAINING and c.verdict is Verdict.INCONCLUSIVE]
        seen.add(out.status)
        if out.status is Status.PARTIAL:
            r = out.remainder
            assert r is not None and out.culprits and undecided
            assert r.low_pct <= r.change_pct <= r.high_pct and r.high_pct >= 2.0  # it reaches the minimum
            assert r.rounds_needed > 120 and r.resolvable_pct > 2.0 and r.quiet_sigma_pct < r.sigma_pct
        else:
            assert out.remainder is None
    assert Status.PARTIAL in seen
    # where the noise lets every remaining-change test decide, the same tree is simply found
    quiet = run_simulated(TREE, NoiseModel("gaussian", sigma=0.01), 1, TestConfig(), min_change_pct=2.0, reps=4).outcome
    assert quiet.status is Status.CULPRIT_FOUND and quiet.remainder is None and len(quiet.culprits) == 2


@pytest.fixture(scope="module")
def partial(tmp_path_factory: pytest.TempPathFactory):
    found = simulated_result("culprit", tmp_path_factory.mktemp("sim"))
    return replace(found, status=Status.PARTIAL, remainder=REMAINDER)


def test_the_headline_names_the_culprit_the_unexplained_change_and_what_would_settle_it(partial):
    line = headline(partial)
    assert line.startswith("**Partial attribution**") and partial.culprits[0].commit[:10] in line
    assert "+9.1 % [-2.5 %, +22.0 %] of the whole change (+31.4 %, 31 % of it) unexplained, undecided at this noise" in line
    assert "about 9677 rounds" in line and "per-round noise at most 1.6 %" in line and "min_change_pct of at least 19.5 %" in line
    assert "## Culprit" in render(partial)  # its culprits are culprits, not best candidates


def test_a_partial_result_reads_back_and_is_filed(partial, tmp_path):
    doc = json.loads(dump(partial))
    assert doc["status"] == "partial" and doc["remainder"]["change_pct"] == 9.1
    assert from_json(doc) == partial
    sink = open_sink(parse_target(f"dir:{tmp_path / 'reports'}"))
    (filed,) = file_issues(partial, sink, ["performance-regression"])
    assert filed.action == "opened"
    [folder] = (tmp_path / "reports").iterdir()
    assert "**Partial attribution**" in (folder / "report.md").read_text()


def test_a_group_with_a_partial_member_is_partial():
    assert group_status([Status.CULPRIT_FOUND, Status.PARTIAL, Status.NOT_REPRODUCED]) is Status.PARTIAL
    assert group_status([Status.CULPRIT_FOUND, Status.INCONCLUSIVE]) is Status.CULPRIT_FOUND


@pytest.mark.parametrize("name", ("two_culprits",))
def test_schema4_documents_read_with_no_remainder_and_render_as_they_did(name):
    doc = json.loads((SCHEMA4 / f"{name}.json").read_text())
    assert doc["schema"] == 4 and "remainder" not in doc
    result = load_result(SCHEMA4 / f"{name}.json")
    assert result.remainder is None and all(m.remainder is None for m in result.members)  # type: ignore[union-attr]
    assert render(result) + "\n" == (SCHEMA4 / f"{name}.md").read_text()
    assert from_json(json.loads(dump(result))) == result


def test_a_schema6_document_reads_and_renders_as_it_did():
    # schema 7 added only a value (blocks.reason unneeded): a partial result of the last
    # schema-6 writer reads whole, remainder included, and renders the report it rendered
    doc = json.loads((SCHEMA6 / "noisy_tree.json").read_text())
    assert doc["schema"] == 6 and doc["status"] == "partial" and doc["remainder"] is not None
    result = load_result(SCHEMA6 / "noisy_tree.json")
    assert result.status is Status.PARTIAL and result.remainder is not None  # type: ignore[union-attr]
    assert render(result) + "\n" == (SCHEMA6 / "noisy_tree.md").read_text()
    assert json.loads(dump(result))["schema"] == 7 and from_json(json.loads(dump(result))) == result
