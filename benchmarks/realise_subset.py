"""Rebuild benchmarks/data/realise/: the Perfherder windows benchmarks/detect_real.py scores.

    .venv/bin/python benchmarks/realise_subset.py --clone PATH   # a clone (or bare git dir) of
                                                                  # mozilla/REALISE-Performance
    .venv/bin/python benchmarks/realise_subset.py --check         # the files there against WINDOWS

Why a script and not the data: REALISE-Performance states no licence (no LICENSE file, none in
its READMEs), so its rows are not committed here; this list of windows and the checksums of
what was measured are.

The subset, and how it was chosen (issue 21): the REALISE authors' own selection of series,
the signatures that have Perfherder results under `all_best_default/` in that repository
(3776847, 3776849, 3776942, 3776945, 3776959, 3777002, all autoland linux1804 page-load
tests), read from data/all-datasets-annotated-aggregated/autoland4/<id>_timeseries_data.csv at
commit 50378e6c. A window is a range of characters of that file around a Perfherder alert
listed in `all_best_default/<id>/default_mozilla/default_mozilla.json` (2 pages of 16,000
characters, 3 where the first two held no alert; located by the alert's row index): whole lines
only, the partial line at each end dropped. 3776945 was left out after one page: it is the
sibling metric of 3776942 on the same pushes (imdb ContentfulSpeedIndex beside SpeedIndex), its
first listed alert (row 196) where 3776942's is (row 195). The files were read through a
16,000-character reader (the repository, 559 MB, was too large to clone here), so the number of
windows is what that allowed: 12 windows, 915 pushes, 11 alerts (7 valid, 4 invalid), one of
them the window of 3777002 where its listed alert did not fall (no alert in it). One more page
was read and not used: 3776847 characters 668000-684000, right after a window, no alert in it.
Issue 41 (point 5) rebuilt those 12 through the same reader at the same commit (all 12 match)
and added 3777002 characters 384000-416000, the two pages just before that window, read while
looking for its listed alert (row 1054, still earlier): no alert in it, so a 13th, quiet window
(73 pushes; the push on the line that straddles character 416000 is in neither window). The
alert lists under `all_best_default/` hold 3, 5 and 1 alerts for 3776942, 3776849 and 3777002;
the windows cover all of the first two; those of 3776847 and 3776959 are not in the stored copy.

Columns kept (names as in the dataset): revision (first 12 hex), value, push_timestamp,
push_id, lower_is_better, alert_id (the alert summary), alert_prev_push_id (the push before the
alert's range), test_status (the single alert's status code), test_manually_created,
test_is_regression, test_status_general, alert_status_general.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import subprocess
import sys
from pathlib import Path

COMMIT = "50378e6c0226d7b5ef2cf506d0bd1aa36fe3bf65"
SOURCE = "data/all-datasets-annotated-aggregated/autoland4/{sig}_timeseries_data.csv"
OUT = Path(__file__).resolve().parent / "data" / "realise"
COLUMNS = [
    "revision", "value", "push_timestamp", "push_id", "lower_is_better", "alert_id", "alert_prev_push_id",
    "test_status", "test_manually_created", "test_is_regression", "test_status_general", "alert_status_general",
]  # fmt: skip

# (signature, first character, end character, sha256 of the window file as measured)
WINDOWS = [
    ("3776847", 140000, 172000, "61bf760dfa393468e59ec2447dbf9a06319b37fc9e81495c7589467a7826116f"),
    ("3776847", 636000, 668000, "b8ddbc0f02f059fc3d3719536b2b2fcc465332daa8a1f75796450f023a147eab"),
    ("3776849", 112000, 144000, "0e0a362f561e70d18d05e0b0e8fab64a3b6f4b18c4a782282a0ba396f9a9eb2f"),
    ("3776849", 634400, 682400, "f8b51df8f02749058f633fedafabfa8424dddc1477b7e504323fc56e7180e47a"),
    ("3776849", 742000, 774000, "a7ab2370bf618a84687350e6c6108ff967da2ae495c966272b905679250eea5f"),
    ("3776849", 836000, 868000, "007bf3a54f54db2b8c48500f3c30638e34a2854a9c90e2664545eef597b52180"),
    ("3776849", 1036000, 1068000, "3b9a61a15411497aec70ff1b09e3d515a55200758f6b462adfd8343a2995c57d"),
    ("3776942", 65000, 97000, "06694437a9bd636b7962346e38e253a16e7b7eeb7cc17f7aeb803c66df458cb0"),
    ("3776942", 324400, 356400, "ab5f5f56b5a8b84b57bb68cf7a4689d8cfad0894efad3743b1c00ea9770c62eb"),
    ("3776942", 643000, 675000, "0006c47b67af2d0d1cc5fde18da8bce26c2374d946d7d4be4a371db9f19ec4c0"),
    ("3776959", 380000, 412000, "4e4bd5d9e69816393de571add65400c97e9228ee4441b6008844bae7194e2292"),
    ("3777002", 384000, 416000, "d5a0f3bfa6cdc3792ccf6b98abfc3597c156e37c8aea079fcf68eb5f876e4e68"),
    ("3777002", 416000, 448000, "3d64c18e2f7994dde6f5a159b1fe375dcb3bad3cf3bb07af199637b18fc82d90"),
]


def name(sig: str, start: int) -> str:
    return f"autoland4_{sig}_w{start}.csv"


def window(text: str, start: int, end: int) -> str:
    """The window file for characters [start, end) of one series CSV."""
    header = text[: text.index("\n")]
    chunk = text[start:end]
    chunk = chunk[chunk.index("\n") + 1 : chunk.rindex("\n") + 1]  # whole lines only
    out = io.StringIO()
    w = csv.DictWriter(out, COLUMNS, lineterminator="\n")
    w.writeheader()
    for row in csv.DictReader(io.StringIO(header + "\n" + chunk)):
        prev = row["alert_prev_push_id"].strip()
        w.writerow(
            {c: row[c] for c in COLUMNS}
            | {"revision": row["revision"][:12], "alert_prev_push_id": str(int(float(prev))) if prev else ""}
        )
    return out.getvalue()


def read_source(clone: Path, rel: str) -> str:
    bare = (clone / "HEAD").is_file() and (clone / "objects").is_dir()
    git_dir = clone if bare else clone / ".git"
    out = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{COMMIT}:{rel}"], capture_output=True, check=False)
    if out.returncode:
        raise SystemExit(f"{clone}: cannot read {rel} at {COMMIT}: {out.stderr.decode().strip()}")
    return out.stdout.decode()


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clone", type=Path, help="a clone or bare git directory of mozilla/REALISE-Performance")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="only compare the files in --out with the checksums")
    args = ap.parse_args()
    if not args.check and not args.clone:
        ap.error("give --clone PATH, or --check")
    bad = 0
    args.out.mkdir(parents=True, exist_ok=True)
    for sig, start, end, sha in WINDOWS:
        path = args.out / name(sig, start)
        if args.check:
            text = path.read_text() if path.exists() else ""
        else:
            text = window(read_source(args.clone, SOURCE.format(sig=sig)), start, end)
            path.write_text(text)
        ok = digest(text) == sha
        bad += not ok
        print(f"{path.name}: {'matches' if ok else 'DIFFERS from'} the window measured ({sha[:12]})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
