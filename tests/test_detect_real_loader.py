"""benchmarks/detect_real.py's REALISE-Performance reader and benchmarks/realise_subset.py's
window cutter, on rows shaped like that dataset's series CSVs (the column names and the layout
of an alert row are the dataset's, as read from data/all-datasets-annotated-aggregated; the
values are made up here)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from detect_real import match, parse_realise, step_pct, unmatched  # noqa: E402
from realise_subset import COLUMNS, window  # noqa: E402

from attrib.core.model import Direction  # noqa: E402

HEADER = (
    "revision,value,lower_is_better,push_timestamp,push_id,alert_id,alert_prev_push_id,test_status,"
    "test_manually_created\n"
)


def test_pushes_in_order_reruns_as_median_and_labels():
    text = HEADER + (
        "r1,1.0,True,2023-05-24 10:49:25,100,,,,\n"
        "r3,3.0,True,2023-05-24 13:00:00,102,7,101.0,acknowledged,False\n"
        "r2,2.0,True,2023-05-24 12:00:00,101,,,,\n"
        "r2,4.0,True,2023-05-24 12:00:00,101,,,,\n"  # a second row of push 101
        "r4,5.0,True,2023-05-24 14:00:00,103,8,102,3.0,False\n"  # Treeherder's code 3: invalid
        "r5,6.0,True,2023-05-24 15:00:00,104,9,,downstream,True\n"  # sheriff-made: Perfherder missed it
        "r6,,True,2023-05-24 16:00:00,105,,,,\n"
    )
    s = parse_realise("x.csv", text)
    assert s.values[:5] == [1.0, 3.0, 3.0, 5.0, 6.0]
    assert s.values[5] != s.values[5]  # an empty value is a gap (NaN)
    assert s.direction is Direction.LOWER
    assert (s.valid, s.invalid, s.perfherder, s.quiet) == ([(2, 2), (4, 4)], [3], [2, 3], False)


def test_a_valid_alert_is_the_range_after_its_previous_push():
    # pushes 10..15; the alert at push 15 says its previous push was 11: the change lies in 12..15
    rows = "".join(f"r{p},1.0,False,2023-06-01 0{p - 10}:00:00,{p},,,,\n" for p in range(10, 15))
    text = HEADER + rows + "r15,2.0,False,2023-06-01 05:00:00,15,40,11.0,2.0,False\n"
    s = parse_realise("x.csv", text)
    assert s.valid == [(2, 5)] and s.direction is Direction.HIGHER
    # a previous push before the window's first: the range starts at the window's start
    s = parse_realise("x.csv", text.replace(",11.0,2.0,", ",3.0,2.0,"))
    assert s.valid == [(0, 5)]


def test_match_uses_each_detection_once_and_counts_the_range():
    assert match([10, 11], [10, 12], 5) == 2
    assert match([10], [10, 12], 5) == 1
    assert match([30], [10], 5) == 0
    assert match([20], [(12, 20)], 0) == 1 and match([12], [(12, 20)], 0) == 1
    assert match([6], [(12, 20)], 5) == 0 and match([7], [(12, 20)], 5) == 1


def _full_row(rev: str, value: str, ts: str, push: str, alert: str = "") -> str:
    """A row in the dataset's full column order (the cutter must pick columns by name)."""
    cols = {c: "" for c in FULL}
    cols |= {"revision": rev, "value": value, "push_timestamp": ts, "push_id": push, "lower_is_better": "True"}
    cols |= {"test_status_general": "TN", "alert_status_general": "TN"}
    if alert:
        cols |= {
            "alert_id": alert, "alert_prev_push_id": "99.0", "test_status": "2.0", "test_manually_created": "False",
            "test_is_regression": "True", "test_status_general": "TP", "alert_status_general": "TP",
            "test_backfill_record_context": '"(\'[{""push_id"": 99, ""value"": 1.5}]\',)"',
        }  # fmt: skip
    return ",".join(cols[c] for c in FULL) + "\n"


FULL = [
    "revision", "value", "repository_name", "signature_id", "push_timestamp", "push_id", "alert_id",
    "alert_push_id", "alert_prev_push_id", "test_status", "test_is_regression", "test_manually_created",
    "test_backfill_record_context", "lower_is_better", "alert_status_general", "test_status_general",
]  # fmt: skip


def test_window_keeps_whole_lines_and_the_dataset_columns():
    text = ",".join(FULL) + "\n"
    text += _full_row("a" * 40, "1.5", "2023-06-01 00:00:00", "98")
    text += _full_row("b" * 40, "1.25", "2023-06-01 01:00:00", "99")
    text += _full_row("c" * 40, "2.5", "2023-06-01 02:00:00", "100", alert="41.0")
    text += _full_row("d" * 40, "2.75", "2023-06-01 03:00:00", "101")
    start = text.index("a" * 40) + 5  # inside the first row: that row is dropped
    end = text.index("d" * 40) + 3  # inside the last row: dropped too
    out = window(text, start, end)
    lines = out.splitlines()
    assert lines[0] == ",".join(COLUMNS)
    assert [line.split(",")[0] for line in lines[1:]] == ["b" * 12, "c" * 12]
    alert = dict(zip(COLUMNS, lines[2].split(","), strict=True))
    assert (alert["alert_id"], alert["alert_prev_push_id"], alert["test_status"]) == ("41.0", "99", "2.0")
    s = parse_realise("w.csv", out)
    assert s.values == [1.25, 2.5] and s.valid == [(1, 1)]


def test_false_alerts_are_what_match_leaves_and_a_step_is_sized_as_a_window_test_sees_it():
    # truth: a change in pushes 20..24; detections at 18 (within 5 of it), 40 and 3
    assert match([18, 40, 3], [(20, 24)], 5) == 1
    assert unmatched([18, 40, 3], [(20, 24)], 5) == [3, 40]
    assert unmatched([22, 23], [(20, 24)], 5) == [23]  # each change is matched once
    # a 2 % step at 30: medians of 12 points each side; a gap (NaN) is skipped
    values = [100.0] * 30 + [102.0] * 30
    values[35] = float("nan")
    assert abs(step_pct(values, 30) - 2.0) < 1e-9
    assert step_pct(values, 3) == 0.0  # 3 points before it, 12 after: all 100, flat
