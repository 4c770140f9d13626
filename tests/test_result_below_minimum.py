"""Issue 19, item 1's last part: a culprit named in the indifference zone (between
ignore_below_pct and min_change_pct) is reported with its CI and marked below the minimum when
its estimate is; schema 3 carries the mark, and schema-2 documents (tests/fixtures/schema2,
written by the last schema-2 attrib) migrate with it computed and render the report they did."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from sim_results import simulated_result

from attrib.core.model import Direction, SearchMethod
from attrib.core.stats import below_minimum, to_pct, to_shift
from attrib.report.markdown import headline, render
from attrib.result import BisectResult, dump, from_json, load_result

SCHEMA2 = Path(__file__).parent / "fixtures" / "schema2"


@pytest.mark.parametrize("name", ["culprit", "inconclusive"])
def test_schema2_documents_migrate_and_render_the_report_they_rendered(name):
    result = load_result(SCHEMA2 / f"{name}.json")
    assert isinstance(result, BisectResult)
    assert result.settings.search is SearchMethod.SEQUENTIAL and result.settings.ignore_below_pct is None
    assert all(not c.below_minimum for c in result.culprits)  # the written changes are above 2 %
    assert render(result) + "\n" == (SCHEMA2 / f"{name}.md").read_text()


@pytest.mark.parametrize(("change_pct", "direction", "below"), [
    (1.5, "lower", True), (2.5, "lower", False),
    # higher is better: a worsening by the minimum (log 1.02) reads as -1.96 %
    (-1.9, "higher", True), (-1.97, "higher", False),
])  # fmt: skip
def test_a_schema2_culprit_below_the_minimum_is_marked_on_reading(change_pct, direction, below):
    doc = json.loads((SCHEMA2 / "culprit.json").read_text())
    doc = copy.deepcopy(doc)
    doc["direction"] = direction
    doc["culprits"][0]["change_pct"] = change_pct
    result = from_json(doc, "schema-2 culprit")
    assert isinstance(result, BisectResult)
    assert result.culprits[0].below_minimum is below


def test_shift_and_percent_round_trip_and_the_minimum_itself_is_not_below():
    for direction in Direction:
        for pct in (-30.0, -1.0, 0.5, 2.0, 40.0):
            assert to_pct(to_shift(pct, direction), direction) == pytest.approx(pct)
    assert not below_minimum(math.log1p(0.02), 2.0)
    assert below_minimum(math.log1p(0.0199), 2.0)


def test_a_culprit_in_the_zone_is_said_to_be_below_the_minimum(tmp_path):
    result = simulated_result("culprit", tmp_path)
    c = result.culprits[0]
    zone = replace(
        result,
        culprits=(replace(c, change_pct=1.4, ci_pct=(1.1, 1.7), below_minimum=True),),
        settings=replace(result.settings, search=SearchMethod.POSTERIOR, ignore_below_pct=1.0),
    )
    assert from_json(json.loads(dump(zone))) == zone  # schema 3 keeps the mark
    text = render(zone)
    assert "below the minimum change of 2 %" in headline(zone)
    assert "- below the minimum: its estimate (+1.40 %) is smaller than min_change_pct (2 %)" in text
    assert "between ignore_below_pct (1 %) and the minimum" in text
    assert "**+1.4 %** [+1.10 %, +1.70 %], below the minimum change of 2 %" in headline(zone)  # with its CI
    assert "posterior search, steps below 1 % ignored" in text
    plain = render(result)
    assert "below the minimum" not in plain
