"""The history's own formats: the documented CSV and attrib's result / compare JSON. Strict:
each bad row is one line naming the file, the row and the field."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from history_data import RESULT_FIXTURE, result_doc

from attrib.core.model import Direction
from attrib.errors import BadRows, IngestError
from attrib.formats.results_csv import parse_results_csv
from attrib.history.attrib_result import parse_attrib_json
from attrib.history.ingest import InputFormat, sniff

SHA = "a" * 40
COMPARE_FIXTURE = RESULT_FIXTURE.parent / "compare.json"


def test_csv_rows_with_extra_columns_as_configuration():
    text = "commit,benchmark,value,unit,direction,timestamp,gpu,dtype\n" f"{SHA},gemm,1.5,ms,lower,2026-11-30T02:00:00+01:00,H100,bf16\n"
    [row] = parse_results_csv(text, "n.csv")
    assert (row.row, row.commit, row.benchmark, row.value, row.unit, row.direction) == ("1", SHA, "gemm", 1.5, "ms", Direction.LOWER)
    assert row.config == {"gpu": "H100", "dtype": "bf16"}
    assert row.measured_at == datetime(2026, 11, 30, 1, 0, tzinfo=UTC).timestamp()


def test_csv_every_bad_row_is_one_line_naming_file_row_and_field():
    text = (
        "commit,benchmark,value,unit,direction,timestamp\n"
        f"{SHA},gemm,fast,ms,lower,2026-11-30T02:00:00Z\n"
        f"{SHA},gemm,1.0,ms,sideways,2026-11-30T02:00:00Z\n"
        f"{SHA},gemm,1.0,ms,lower,30/11/2026\n"
        f"{SHA},gemm,1.0,ms,lower\n"
        f"{SHA},gemm,nan,ms,lower,2026-11-30T02:00:00Z\n"
        f",gemm,slow,,up,yesterday\n"
    )
    with pytest.raises(BadRows) as info:
        parse_results_csv(text, "nightly.csv")
    lines = str(info.value).splitlines()
    assert lines == [
        "nightly.csv: row 1: field 'value': 'fast': expected a number",
        "nightly.csv: row 2: field 'direction': 'sideways': expected lower or higher (or lower_is_better true/false)",
        "nightly.csv: row 3: field 'timestamp': '30/11/2026': expected an ISO 8601 time such as 2026-11-30T02:00:00Z, or epoch seconds",
        "nightly.csv: row 4: 5 cells; the header has 6 columns",
        "nightly.csv: row 5: field 'value': 'nan': expected a finite number",
        # every bad field of a row, still one line for the row
        "nightly.csv: row 6: field 'commit': empty; field 'unit': empty; field 'value': 'slow': expected a number;"
        " field 'direction': 'up': expected lower or higher (or lower_is_better true/false);"
        " field 'timestamp': 'yesterday': expected an ISO 8601 time such as 2026-11-30T02:00:00Z, or epoch seconds",
    ]


def test_csv_exports_as_they_come():
    """Perfherder-style exports (issue 21): lower_is_better for direction, true/false, epoch
    seconds, zone-less times read as UTC, empty values skipped and counted."""
    text = (
        "commit,benchmark,value,unit,lower_is_better,timestamp\n"
        f"{SHA},a,1.5,ms,True,1700017604\n"
        f"{SHA},a,,ms,True,1700017605\n"
        f"{SHA},b,2.5,fps,false,2023-05-24 10:49:25\n"
        f"{SHA},c,3.5,ms,lower_is_better=True,1700017604.5\n"
        f"{SHA},d,4.5,ms,0,2023-05-24T10:49:25\n"
    )
    rows = parse_results_csv(text, "export.csv")
    assert [(r.benchmark, r.direction) for r in rows] == [
        ("a", Direction.LOWER), ("b", Direction.HIGHER), ("c", Direction.LOWER), ("d", Direction.HIGHER)
    ]  # fmt: skip
    utc = datetime(2023, 5, 24, 10, 49, 25, tzinfo=UTC).timestamp()
    assert [r.measured_at for r in rows] == [1700017604.0, utc, 1700017604.5, utc]
    assert rows.skipped == 1
    with pytest.raises(IngestError, match="all 1 rows have an empty value"):
        parse_results_csv(f"commit,benchmark,value,unit,direction,timestamp\n{SHA},a,,ms,lower,1700017604\n", "e.csv")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("commit,benchmark,value,unit,direction\n", "nightly.csv: row header: field 'timestamp': missing column"),
        ("", "nightly.csv: empty; expected a header"),
        ("commit,benchmark,value,unit,direction,timestamp\n", "nightly.csv: a header but no rows"),
    ],
)
def test_csv_bad_header(text: str, expected: str):
    with pytest.raises(IngestError) as info:
        parse_results_csv(text, "nightly.csv")
    assert str(info.value).startswith(expected)


def _result(commits: list[tuple[str, object]]) -> str:
    return json.dumps(result_doc(commits))  # type: ignore[arg-type]


def test_result_json_gives_one_row_per_measured_commit():
    text = _result([(SHA, 0.5), ("b" * 40, None), ("c" * 40, 0.7)])
    assert sniff("r.json", text) is InputFormat.ATTRIB
    rows = parse_attrib_json(text, "r.json")
    assert [(r.row, r.commit, r.value) for r in rows] == [("commits[0]", SHA, 0.5), ("commits[2]", "c" * 40, 0.7)]
    assert {r.unit for r in rows} == {"s"} and {r.direction for r in rows} == {Direction.LOWER}


@pytest.mark.parametrize(
    ("median", "expected"),
    [
        ("slow", "r.json: field 'commits[0].median': expected null or a number, got 'slow'"),
        (float("nan"), "r.json: row commits[0]: field 'median': expected a finite number, got nan"),
    ],
)
def test_result_json_bad_median_names_the_row(median: object, expected: str):
    with pytest.raises(IngestError) as info:
        parse_attrib_json(_result([(SHA, median)]), "r.json")
    assert str(info.value) == expected


def test_a_result_attrib_did_not_write_is_refused_as_attrib_report_refuses_it():
    # The history reads results with from_json: a document missing what every result has is not one.
    doc = result_doc([(SHA, 0.5)])
    del doc["status"]
    with pytest.raises(IngestError) as info:
        parse_attrib_json(json.dumps(doc), "r.json")
    assert str(info.value) == "r.json: field 'status': missing"


def test_compare_json_needs_its_medians():
    doc = {**json.loads(COMPARE_FIXTURE.read_text()), "unit": "s", "direction": "lower"}
    sha, ref = doc["candidate"], doc["reference"]
    assert sniff("c.json", json.dumps(doc)) is InputFormat.ATTRIB
    with pytest.raises(IngestError) as info:
        parse_attrib_json(json.dumps(doc), "c.json")
    assert "field 'medians': missing" in str(info.value)
    rows = parse_attrib_json(json.dumps({**doc, "medians": {sha: 1.2, ref: 1.0}}), "c.json")
    assert sorted((r.commit, r.value) for r in rows) == sorted([(sha, 1.2), (ref, 1.0)])
    assert all(r.direction is Direction.LOWER for r in rows)
    for direction, expected in (("", "field 'direction': missing"), ("up", "field 'direction': expected one of lower, higher")):
        with pytest.raises(IngestError) as info:
            parse_attrib_json(json.dumps({**doc, "direction": direction, "medians": {sha: 1.2, ref: 1.0}}), "c.json")
        assert expected in str(info.value)


def test_json_that_is_no_known_document_is_refused():
    with pytest.raises(IngestError) as info:
        sniff("x.json", '{"hello": 1}')
    assert str(info.value).startswith("x.json: JSON, but not an attrib result/compare")
