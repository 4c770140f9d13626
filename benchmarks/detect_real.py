"""Detection on real series nobody on this project made: TCPD and Perfherder, attrib beside its peers.

    .venv/bin/python benchmarks/detect_real.py --tcpd /work/.mirror/alan-turing-institute+TCPD/repo \
        [--realise PATH] [--scale] [--out benchmarks/RESULTS-detect-real.md]

--tcpd: a clone or bare git directory of alan-turing-institute/TCPD. The series are read from
  datasets/<name>/<name>.json as committed (the ones TCPD may redistribute; the others need a
  download there, and are absent), the human annotations from annotations.json. Nothing is
  converted to disk: the data are rebuilt from that copy on every run, so no TCPD data is
  shipped here (its per-dataset licences differ: MIT, GPL-2, public domain, CC BY...).
  Univariate series only (n_dim = 1), scored with TCPDBench's own F1 and cover
  (benchmarks/tcpd_metrics.py, margin 5, annotators combined as TCPDBench does).
--realise: a directory of REALISE-Performance series CSVs (default benchmarks/data/realise/, the
  windows benchmarks/realise_subset.py rebuilds from a clone of mozilla/REALISE-Performance;
  that dataset states no licence, so its rows are not committed here, only the list of
  windows and their checksums). A series is one CSV (one row per push); labels per alert row
  (`test_status`): acknowledged / downstream / reassigned = a valid change, invalid = a false
  alarm; manually created alerts are changes Perfherder missed. A valid change is Perfherder's
  alert range (previous push, alert push]. Every detector (Perfherder's own alerts too) is
  scored the same way: a detection within --margin pushes of a valid change's range is a true
  positive (each used once), any other detection is a false alert; the alert-push-only
  scoring is reported beside it.
--scale: the ingestion/detection cost figures (issue 21): 50,000 points of one series added to
  a history store ordered by a real git repository of 50,000 commits, then detected; and
  detect over 100 series x 1,000 points.

Every detector runs at its default settings; nothing here is tuned on these data.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from detect_baselines import asv, otava, perfherder  # noqa: E402
from tcpd_metrics import covering, f_measure  # noqa: E402

from attrib.core.detect import DetectSettings, detect  # noqa: E402
from attrib.core.model import Direction  # noqa: E402

# TCPDBench analysis/output/tables/aggregate_table.tex, univariate, "Default" columns (cover, F1),
# over TCPDBench's 37 univariate series (6 of which are not redistributed by TCPD, so absent here).
PUBLISHED_DEFAULT = {
    "amoc": (0.702, 0.664), "binseg": (0.706, 0.680), "bocpd": (0.636, 0.611), "bocpdms": (0.633, 0.476),
    "cpnp": (0.535, 0.534), "ecp": (0.523, 0.551), "kcpa": (0.062, 0.057), "pelt": (0.689, 0.653),
    "prophet": (0.540, 0.456), "rbocpdms": (0.629, 0.418), "rfpop": (0.392, 0.372), "segneigh": (0.676, 0.626),
    "wbs": (0.330, 0.300),
}  # fmt: skip
PUBLISHED_BEST_BOCPD = (0.789, 0.831)

Detector = Callable[[Sequence[float], Direction], list[int]]


def attrib_detector(values: Sequence[float], direction: Direction) -> list[int]:
    return [c.index for c in detect(values, direction, DetectSettings())]


DETECTORS: dict[str, Detector] = {
    "attrib": attrib_detector,
    "perfherder-ttest": lambda v, d: perfherder(v),
    "otava": lambda v, d: otava(v),
    "asv": lambda v, d: asv(v),
}


# --- reading a copy of a repository (bare git dir or work tree) ------------------------------


class Copy:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.bare = (path / "HEAD").is_file() and (path / "objects").is_dir()

    def read(self, rel: str) -> bytes:
        if self.bare:
            out = subprocess.run(
                ["git", f"--git-dir={self.path}", "show", f"HEAD:{rel}"], capture_output=True, check=False
            )
            if out.returncode:
                raise FileNotFoundError(f"{self.path}: {rel}: {out.stderr.decode().strip()}")
            return out.stdout
        return (self.path / rel).read_bytes()

    def list(self, under: str) -> list[str]:
        if self.bare:
            out = subprocess.run(
                ["git", f"--git-dir={self.path}", "ls-tree", "-r", "--name-only", "HEAD", under],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            return sorted(s for s in out.stdout.splitlines() if s)
        root = self.path / under
        return sorted(str(p.relative_to(self.path)) for p in root.rglob("*") if p.is_file())


# --- TCPD -------------------------------------------------------------------------------------


@dataclass
class TcpdSeries:
    name: str
    values: list[float]
    annotations: dict[str, list[int]]


def load_tcpd(copy: Copy) -> tuple[list[TcpdSeries], list[str]]:
    annotations = json.loads(copy.read("annotations.json"))
    series, absent = [], []
    for name in sorted(annotations):
        try:
            doc = json.loads(copy.read(f"datasets/{name}/{name}.json"))
        except FileNotFoundError:
            absent.append(name)  # not redistributed by TCPD: its get_<name>.py downloads it
            continue
        if doc["n_dim"] != 1:
            continue
        raw = doc["series"][0]["raw"]
        values = [math.nan if v is None else float(v) for v in raw]
        series.append(TcpdSeries(name, values, {k: list(v) for k, v in annotations[name].items()}))
    return series, absent


@dataclass
class TcpdScore:
    f1: list[float] = field(default_factory=list)
    cover: list[float] = field(default_factory=list)
    reported: int = 0
    seconds: float = 0.0
    per_series: dict[str, tuple[float, float, int]] = field(default_factory=dict)
    placement: list[int] = field(default_factory=list)  # |reported - annotated| of matched pairs


# TCPDBench's "zero" method: no change anywhere, the reference a cover figure is read against
TCPD_DETECTORS: dict[str, Detector] = {**DETECTORS, "zero (no change reported)": lambda v, d: []}


def run_tcpd(series: list[TcpdSeries]) -> dict[str, TcpdScore]:
    scores = {name: TcpdScore() for name in TCPD_DETECTORS}
    for s in series:
        for name, det in TCPD_DETECTORS.items():
            t0 = time.perf_counter()
            found = det(s.values, Direction.LOWER)
            scores[name].seconds += time.perf_counter() - t0
            f1 = f_measure(s.annotations, found)[0]
            cover = covering(s.annotations, found, len(s.values))
            sc = scores[name]
            sc.f1.append(f1)
            sc.cover.append(cover)
            sc.reported += len(found)
            sc.per_series[s.name] = (f1, cover, len(found))
            # placement error: each reported point against the nearest annotated one (any
            # annotator) within the margin; points without one are the F1's false positives
            marks = {m for a in s.annotations.values() for m in a}
            for c in found:
                near = [abs(c - m) for m in marks if abs(c - m) <= 5]
                if near:
                    sc.placement.append(min(near))
    return scores


# --- Perfherder (REALISE-Performance) ----------------------------------------------------------

VALID = {"acknowledged", "downstream", "reassigned"}
INVALID = {"invalid"}
# Treeherder's PerformanceAlert status codes (treeherder/model/models: PerformanceAlert.STATUSES;
# the same mapping is in REALISE-Performance's data_extraction_transformation/scripts/transform-data.py)
STATUS_CODES = {"0": "untriaged", "1": "downstream", "2": "reassigned", "3": "invalid", "4": "acknowledged"}
REALISE_DATA = Path(__file__).resolve().parent / "data" / "realise"


@dataclass
class PerfSeries:
    path: str
    values: list[float]
    direction: Direction
    # pushes where sheriffs confirmed a change, as Perfherder's alert range (lo, hi): the change
    # lies after the alert's previous push and at or before its push (hi = the alert's own row);
    # the range is wider than one push where pushes in between were untested when it alerted
    valid: list[tuple[int, int]]
    invalid: list[int]  # Perfherder alerts sheriffs called false alarms
    perfherder: list[int]  # Perfherder's own (not manually created) alerts
    quiet: bool  # no valid change anywhere in the series


def _status(raw: str) -> str:
    s = raw.strip().lower()
    return STATUS_CODES.get(s.split(".")[0], s)


def parse_realise(path: str, text: str) -> PerfSeries:
    """One REALISE series CSV (all-datasets-annotated-aggregated: one row per revision, re-runs
    already averaged there), or a window of one (benchmarks/realise_subset.py): rows in push
    order (push_timestamp, then push_id); several rows of one push become their median, as
    attrib's history does."""
    rows = list(csv.DictReader(io.StringIO(text)))
    by_push: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        by_push.setdefault(r["push_id"], []).append(r)
    order = sorted(by_push, key=lambda p: (by_push[p][0]["push_timestamp"], int(p)))
    ids = [int(p) for p in order]
    values, valid, invalid, own = [], [], [], []
    lower = rows[0]["lower_is_better"].strip().lower() in ("true", "1") if rows else True
    for i, p in enumerate(order):
        vals = [float(r["value"]) for r in by_push[p] if r["value"].strip()]
        values.append(float(np.median(vals)) if vals else math.nan)
        for r in by_push[p]:
            if not r.get("alert_id", "").strip():
                continue
            status = _status(r.get("test_status", ""))
            manual = r.get("test_manually_created", "").strip().lower() in ("true", "1")
            if status in VALID:
                prev = r.get("alert_prev_push_id", "").strip()
                lo = i if not prev else next((j for j in range(i + 1) if ids[j] > float(prev)), i)
                valid.append((lo, i))
            elif status in INVALID:
                invalid.append(i)
            if not manual:
                own.append(i)
    return PerfSeries(
        path, values, Direction.LOWER if lower else Direction.HIGHER,
        sorted(set(valid)), sorted(set(invalid)), sorted(set(own)), not valid,
    )  # fmt: skip


def load_realise(root: Path) -> list[PerfSeries]:
    """Every series CSV under `root` (a directory of REALISE files or of windows of them)."""
    return [parse_realise(str(f.relative_to(root)), f.read_text()) for f in sorted(root.rglob("*.csv"))]


def match(found: Sequence[int], truth: Sequence[tuple[int, int]] | Sequence[int], margin: int) -> int:
    """Detections matched to true changes, each used once: a detection within `margin` points of
    a change's range (a bare index is a range of one)."""
    ranges = sorted((t, t) if isinstance(t, int) else t for t in truth)
    left = sorted(found)
    hits = 0
    for lo, hi in ranges:

        def gap(f: int, lo: int = lo, hi: int = hi) -> int:
            return max(lo - f, 0, f - hi)

        near = [f for f in left if gap(f) <= margin]
        if near:
            left.remove(min(near, key=lambda f: (gap(f), f)))
            hits += 1
    return hits


def unmatched(found: Sequence[int], truth: Sequence[tuple[int, int]], margin: int) -> list[int]:
    """The detections `match` leaves over (its false alerts), same order of matching."""
    left = sorted(found)
    for lo, hi in sorted(truth):
        near = [f for f in left if max(lo - f, 0, f - hi) <= margin]
        if near:
            left.remove(min(near, key=lambda f: (max(lo - f, 0, f - hi), f)))
    return left


PERFHERDER_FLOOR_PCT = 2.0  # Perfherder's PERFHERDER_REGRESSION_THRESHOLD (detect_baselines.perfherder)
PERFHERDER_WINDOW = 12  # its fore window and minimum back window: it cannot alert nearer an end


def step_pct(values: Sequence[float], i: int, side: int = PERFHERDER_WINDOW) -> float:
    """Median of up to `side` points from i on over the median of up to `side` before it, in %:
    how large a detection's step looks to a window-based test like Perfherder's."""
    before = [v for v in values[max(0, i - side) : i] if math.isfinite(v)]
    after = [v for v in values[i : i + side] if math.isfinite(v)]
    if not before or not after or float(np.median(before)) == 0:
        return math.nan
    return (float(np.median(after)) / float(np.median(before)) - 1) * 100


def run_realise(series: list[PerfSeries], margin: int) -> dict[str, dict[str, dict[str, float]]]:
    """Per detector, two scorings: `range` (a detection within `margin` of the alert's push range
    is a hit) and `push` (within `margin` of the alert's own push only, as the issue first
    scored). `quiet`: detections on the series without a valid change, per 1000 of their points.
    Beside attrib at its defaults, attrib at Perfherder's 2 % alert floor (`min_change_pct`, a
    setting a project may choose, docs/history.md): the same magnitude policy as the t-test."""
    dets: dict[str, Callable[[PerfSeries], list[int]]] = {
        name: (lambda s, d=det: d(s.values, s.direction)) for name, det in DETECTORS.items()
    }
    floor = DetectSettings(min_change_pct=PERFHERDER_FLOOR_PCT)
    dets[f"attrib, min_change_pct {PERFHERDER_FLOOR_PCT:g}"] = lambda s: [
        c.index for c in detect(s.values, s.direction, floor)
    ]
    dets["perfherder-alerts"] = lambda s: s.perfherder
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, det in dets.items():
        found = {s.path: det(s) for s in series}
        out[name] = {"found": {k: list(v) for k, v in found.items()}}  # type: ignore[dict-item]
        for scoring in ("range", "push"):
            tp = reported = valid = points = 0
            for s in series:
                truth = s.valid if scoring == "range" else [hi for _, hi in s.valid]
                tp += match(found[s.path], truth, margin)
                reported += len(found[s.path])
                valid += len(s.valid)
                points += len(s.values)
            p = tp / reported if reported else 1.0
            r = tp / valid if valid else math.nan
            out[name][scoring] = {
                "reported": reported, "tp": tp, "valid": valid, "precision": p, "recall": r,
                "f1": 2 * p * r / (p + r) if p + r else 0.0,
                "false_per_1000": 1000 * (reported - tp) / max(points, 1),
            }  # fmt: skip
        out[name]["false"] = [  # type: ignore[assignment]
            (s.path, f, f, len(s.values) - 1 - f, step_pct(s.values, f))
            for s in series
            for f in unmatched(found[s.path], s.valid, margin)
        ]
        quiet = [s for s in series if s.quiet]
        qn = sum(len(s.values) for s in quiet)
        qf = sum(len(found[s.path]) for s in quiet)
        out[name]["quiet"] = {"series": len(quiet), "points": qn, "reported": qf, "per_1000": 1000 * qf / max(qn, 1)}
    return out


# --- scale ---------------------------------------------------------------------------------------


def scale_figures(n_points: int = 50_000, n_series: int = 100, series_len: int = 1000) -> dict[str, float]:
    """Time to add n_points of one series (commits of a real git repository, ordered by its
    first-parent line) and to detect on it; and detect over n_series x series_len points."""
    from attrib.history.detection import detect_series
    from attrib.history.ingest import Options, SourceFile, ingest
    from attrib.history.order import GitLine
    from attrib.history.store import HistoryStore

    out: dict[str, float] = {}
    rng = np.random.default_rng(21)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
        # fast-import: 50,000 real commits in a second or two (a commit per `git commit` takes minutes)
        lines = []
        for i in range(n_points):
            msg = f"c{i}"
            lines.append(f"commit refs/heads/main\nmark :{i + 1}\ncommitter b <b@x> {1_700_000_000 + i} +0000\n")
            lines.append(f"data {len(msg)}\n{msg}\n")
            if i:
                lines.append(f"from :{i}\n")
        lines.append("\n")
        subprocess.run(["git", "-C", str(repo), "fast-import", "--quiet"], input="".join(lines).encode(), check=True)
        shas = subprocess.run(
            ["git", "-C", str(repo), "rev-list", "--reverse", "main"], capture_output=True, text=True, check=True
        ).stdout.split()
        values = np.exp(rng.normal(0, 0.02, n_points) + np.where(np.arange(n_points) > n_points // 2, 0.1, 0.0))
        body = "commit,benchmark,value,unit,direction,timestamp\n" + "".join(
            f"{c},big,{v:.6f},ms,lower,2026-11-30T02:14:00Z\n" for c, v in zip(shas, values, strict=True)
        )
        store = HistoryStore(Path(tmp) / "h.db")
        t0, c0 = time.perf_counter(), time.process_time()
        upload = GitLine(repo, "main")  # one per upload, as `attrib history add` and the daemon make
        ingest(store, "p", [SourceFile("big.csv", body)], Options(), upload.resolve)
        out["add_50000_s"] = time.perf_counter() - t0
        out["add_50000_cpu_s"] = time.process_time() - c0  # this process only: git's own time is in the wall figure
        line = GitLine(repo, "main").line()
        series = store.series("p")[0]
        t0 = time.perf_counter()
        first = detect_series(store, series, line, DetectSettings())
        out["detect_50000_s"] = time.perf_counter() - t0
        second = detect_series(store, series, line, DetectSettings())
        out["detect_50000_first_n"] = len(first)
        out["detect_50000_second_n"] = len(second)
    many = [np.exp(rng.normal(0, 0.02, series_len)) for _ in range(n_series)]
    t0, c0 = time.perf_counter(), time.process_time()
    for v in many:
        detect(v, Direction.LOWER, DetectSettings())
    out["detect_100x1000_s"] = time.perf_counter() - t0
    out["detect_100x1000_cpu_s"] = time.process_time() - c0
    return out


# --- report --------------------------------------------------------------------------------------


def report(args, tcpd, absent, tcpd_scores, realise, realise_scores, scale, wall) -> str:
    import os

    load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else ["?"]
    lines = [
        "## Real series (benchmarks/detect_real.py)",
        "",
        f"Command: `.venv/bin/python benchmarks/detect_real.py {' '.join(sys.argv[1:])}`; wall {wall:.0f} s; "
        f"load average at the end {' '.join(load)} (2 CPUs shared with other work). Default settings everywhere.",
        "",
    ]
    if tcpd is not None:
        n = len(tcpd)
        lines += [
            f"### TCPD ({n} univariate series present in the copy; absent, not redistributed by TCPD: {', '.join(absent)})",
            "",
            "TCPDBench's metrics (F1 and cover, margin 5, annotators combined as TCPDBench does), mean over series.",
            "",
            "| detector | F1 | cover | change points reported | within 5 of an annotation | placement error mean / median (points) | exactly placed | s in all |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, sc in tcpd_scores.items():
            pl = np.asarray(sc.placement, dtype=float)
            place = f"{pl.mean():.2f} / {np.median(pl):.0f}" if pl.size else "n/a"
            lines.append(
                f"| {name} | {np.mean(sc.f1):.3f} | {np.mean(sc.cover):.3f} | {sc.reported} | {pl.size} | {place} | {int(np.sum(pl == 0))} | {sc.seconds:.1f} |"
            )
        for name, (cover, f1) in PUBLISHED_DEFAULT.items():
            if name in ("binseg", "pelt", "bocpd", "amoc", "segneigh"):
                lines.append(f"| TCPDBench published default {name} (37 series) | {f1:.3f} | {cover:.3f} | | | | | |")
        lines.append(
            f"| TCPDBench published best-tuned bocpd (37 series) | {PUBLISHED_BEST_BOCPD[1]:.3f} | {PUBLISHED_BEST_BOCPD[0]:.3f} | | | | | |"
        )
        quiet = [t for t in tcpd if not any(t.annotations.values())]
        pts = sum(len(t.values) for t in quiet)
        lines += [
            "",
            f"Quiet real series (every annotator marked no change: {', '.join(t.name for t in quiet)}; {pts} points):"
            " change points reported, per 1000 points: "
            + "; ".join(
                f"{name} {sum(sc.per_series[t.name][2] for t in quiet)} ({1000 * sum(sc.per_series[t.name][2] for t in quiet) / pts:.1f})"
                for name, sc in tcpd_scores.items()
            ),
        ]
        lines += ["", "Per series (attrib): F1 / cover / reported", ""]
        att = tcpd_scores["attrib"].per_series
        lines.append(" ".join(f"{k} {f:.2f}/{c:.2f}/{r};" for k, (f, c, r) in att.items()))
        zero = tcpd_scores["zero (no change reported)"].per_series
        annotated = {t.name for t in tcpd if any(t.annotations.values())}
        silent = [k for k, (_, _, r) in att.items() if r == 0 and k in annotated]
        lines += [
            "",
            f"attrib reports no change on {len(silent)} annotated series ({', '.join(silent)}): there its cover is "
            f"the zero row's, {np.mean([zero[k][1] for k in silent]):.3f} on average; on the other "
            f"{len(att) - len(silent)} series attrib's mean cover is "
            f"{np.mean([c for k, (_, c, _) in att.items() if k not in silent]):.3f} (zero: "
            f"{np.mean([zero[k][1] for k in att if k not in silent]):.3f}).",
        ]
        lines.append("")
    if realise is None:
        lines += [f"### Perfherder (REALISE-Performance): not measured ({args.realise_why})", ""]
    else:
        pts = sum(len(s.values) for s in realise)
        lines += [
            f"### Perfherder (REALISE-Performance): {len(realise)} windows, {pts} pushes, "
            f"{sum(len(s.valid) for s in realise)} valid changes, {sum(len(s.invalid) for s in realise)} invalid alerts; margin {args.margin}",
            "",
            "`range`: a detection within the margin of the alert's push range (previous push, alert push] is a hit; "
            "`push`: within the margin of the alert's own push only. Quiet: the windows with no valid change.",
            "",
            "| detector | reported | true (range) | precision (range) | recall (range) | F1 (range) | true (push) | precision (push) | recall (push) | false alerts / 1000 pts (range) | quiet windows: reported / points (per 1000) |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, r in realise_scores.items():
            g, h, q = r["range"], r["push"], r["quiet"]
            lines.append(
                f"| {name} | {g['reported']} | {g['tp']} | {g['precision']:.3f} | {g['recall']:.3f} | {g['f1']:.3f} | "
                f"{h['tp']} | {h['precision']:.3f} | {h['recall']:.3f} | {g['false_per_1000']:.2f} | "
                f"{q['reported']} / {q['points']} ({q['per_1000']:.1f}) |"
            )
        lines += [
            "",
            f"False alerts (range scoring), each as window:index (points before it in the window / after it; "
            f"step: median of the {PERFHERDER_WINDOW} points from it on over the median of the {PERFHERDER_WINDOW} before). "
            f"Perfherder's t-test cannot alert with fewer than {PERFHERDER_WINDOW} points on either side, nor on a step "
            f"under {PERFHERDER_FLOOR_PCT:g} %.",
            "",
        ]
        for name, r in realise_scores.items():
            items = [
                f"{path.removeprefix('autoland4_').removesuffix('.csv')}:{i} ({b}/{a}, {pct:+.1f} %)"
                for path, i, b, a, pct in r["false"]
            ]
            lines.append(f"- {name}: {'; '.join(items) if items else 'none'}")
        lines += ["", "Per window: points, valid ranges, invalid alerts; each detector's reported indices", ""]
        for s in realise:
            found = "; ".join(
                f"{name} {r['found'][s.path]}" for name, r in realise_scores.items() if name != "perfherder-alerts"
            )
            lines.append(f"- {s.path}: {len(s.values)} pts, valid {s.valid}, invalid {s.invalid}; {found}")
        lines.append("")
    if scale:
        lines += [
            "### Scale",
            "",
            f"- 50,000 points of one series added (`history.ingest.ingest` with one `GitLine` per upload, CSV parse included, git repository of 50,000 commits): {scale['add_50000_s']:.1f} s wall, {scale['add_50000_cpu_s']:.1f} s CPU of this process (target <= 10 s)",
            f"- detect on that series (`detect_series`, store and order included): {scale['detect_50000_s']:.1f} s; "
            f"change points after the first run {scale['detect_50000_first_n']:.0f}, after a second run on the same data {scale['detect_50000_second_n']:.0f}",
            f"- detect over 100 series x 1,000 points (`detect`): {scale['detect_100x1000_s']:.2f} s wall, {scale['detect_100x1000_cpu_s']:.2f} s CPU (target <= 5 s)",
            "",
        ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tcpd", type=Path, default=None)
    ap.add_argument(
        "--realise",
        type=Path,
        default=None,
        help=f"a directory of REALISE series CSVs (default {REALISE_DATA} when it exists)",
    )
    ap.add_argument("--margin", type=int, default=5)
    ap.add_argument("--scale", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    tcpd = absent = tcpd_scores = realise = realise_scores = None
    if args.tcpd:
        tcpd, absent = load_tcpd(Copy(args.tcpd))
        tcpd_scores = run_tcpd(tcpd)
    where = args.realise or REALISE_DATA
    args.realise_why = f"{where} holds no series CSV: build it with benchmarks/realise_subset.py"
    if where.is_dir() and any(where.rglob("*.csv")):
        realise = load_realise(where)
        realise_scores = run_realise(realise, args.margin)
    scale = scale_figures() if args.scale else None
    text = report(args, tcpd, absent, tcpd_scores, realise, realise_scores, scale, time.perf_counter() - t0)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
