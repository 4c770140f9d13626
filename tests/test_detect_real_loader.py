"""benchmarks/detect_real.py's REALISE-Performance reader on rows shaped like that dataset's
series CSVs (the column names are the dataset's; the values are made up here): pushes in time
order, re-runs of a push as their median, sheriff labels per alert row."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from detect_real import match, parse_realise  # noqa: E402

from attrib.core.model import Direction  # noqa: E402

HEADER = "revision,value,lower_is_better,push_timestamp,push_id,alert_id,test_status,test_manually_created\n"


def test_pushes_in_order_reruns_as_median_and_labels():
    text = HEADER + (
        "r1,1.0,True,2023-05-24 10:49:25,100,,,\n"
        "r3,3.0,True,2023-05-24 13:00:00,102,7,acknowledged,False\n"
        "r2,2.0,True,2023-05-24 12:00:00,101,,,\n"
        "r2,4.0,True,2023-05-24 12:00:00,101,,,\n"  # a re-run of push 101
        "r4,5.0,True,2023-05-24 14:00:00,103,8,3,False\n"  # Treeherder's code 3: invalid
        "r5,6.0,True,2023-05-24 15:00:00,104,9,downstream,True\n"  # sheriff-made: Perfherder missed it
        "r6,,True,2023-05-24 16:00:00,105,,,\n"
    )
    s = parse_realise("x.csv", text)
    assert s.values[:5] == [1.0, 3.0, 3.0, 5.0, 6.0]
    assert s.values[5] != s.values[5]  # an empty value is a gap (NaN)
    assert s.direction is Direction.LOWER
    assert (s.valid, s.invalid, s.perfherder) == ([2, 4], [3], [2, 3])


def test_match_uses_each_detection_once():
    assert match([10, 11], [10, 12], 5) == 2
    assert match([10], [10, 12], 5) == 1
    assert match([30], [10], 5) == 0
