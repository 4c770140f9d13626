"""Detection benchmark: attrib.core.detect against its peers on synthetic nightly histories
with known change points.

    .venv/bin/python benchmarks/detect_scenarios.py --seed 1           # full run, writes benchmarks/RESULTS-detect.md
    .venv/bin/python benchmarks/detect_scenarios.py --seed 1 --quick   # CI-sized slice, prints only
    options: --series N (series per family), --workers W (default 2), --out PATH,
             --family NAME (repeatable), --detector NAME (repeatable)

Series: n points, n log-uniform in 50..2000 (50..400 with --quick), each point one nightly
value exp(level + noise), noise sigma = 2 % in log space (so attrib's default minimum change
of 1 % is half a sigma). Change points are planted with at least MIN_AFTER points after each
(segment lengths 5 + exponential, mean 150), each a step of k sigma up or down. Noise models:
  gaussian  N(0, sigma)
  spikes    gaussian, and 2 % of the nights are 5..20 sigma slower (single outliers)
  bimodal   gaussian, and 30 % of the nights run in a slower machine state (+4 sigma)
  heavy     Student t with 3 degrees of freedom, scale sigma
  drift     gaussian plus a linear drift of 2 sigma per 1000 nights (either way)
  gaps      gaussian, and 15 % of the nights have no value (NaN)

Scoring: a detection matches a planted change when it lies within TOL points of it; each
change and each detection match at most once (closest first). Precision, recall and F1 pool
the counts of a family. False alerts per 1000 points are counted on families with no change.
Latency (attrib and the peers): for the first LATENCY_CHANGES planted changes of sampled series, the series is fed one night at
a time (the LATENCY_CONTEXT points before the change, then the change and what follows) and
the latency is the number of points from the change on (the change itself counts 1) seen when
a detection within TOL first appears; censored at LATENCY_MAX.
Nightly (attrib only, series of <= NIGHTLY_MAX_N points): whole series fed one point at a time, every reported change passed
back as `decided`, as the daemon does; the final set is scored like the batch one.
Every series is a pure function of (--seed, family, index).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import subprocess
import sys
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from detect_baselines import CANDIDATES, PEERS  # noqa: E402

from attrib.core.detect import DetectSettings, detect  # noqa: E402
from attrib.core.model import Direction  # noqa: E402

SIGMA = 0.02
TOL = 5
MIN_AFTER = 5
MEAN_SEGMENT = 150
LATENCY_CONTEXT = 200
LATENCY_MAX = 40
NIGHTLY_MAX_N = 300  # a night-by-night run costs n detect calls
SETTINGS = DetectSettings()


@dataclass(frozen=True)
class Family:
    name: str
    noise: str
    step: float  # sigmas; 0 = no change
    series: int
    quick: int
    latency: int = 0  # planted changes sampled for latency (full run)
    nightly: int = 0  # series fed night by night to attrib (full run)


FAMILIES = (
    *(
        Family(f"null {m}", m, 0.0, 60, 6, nightly=20)
        for m in ("gaussian", "spikes", "bimodal", "heavy", "drift", "gaps")
    ),
    Family("steps 1 sigma", "gaussian", 1.0, 40, 4),
    Family("steps 2 sigma", "gaussian", 2.0, 40, 4),
    Family("steps 3 sigma", "gaussian", 3.0, 40, 4, latency=30, nightly=10),
    Family("steps 5 sigma", "gaussian", 5.0, 40, 4, latency=30),
    *(
        Family(f"steps 3 sigma, {m}", m, 3.0, 40, 4, latency=15)
        for m in ("spikes", "bimodal", "heavy", "drift", "gaps")
    ),
)


def attrib_detector(values) -> list[int]:
    return [c.index for c in detect(values, Direction.LOWER, SETTINGS)]


DETECTORS = {"attrib": attrib_detector, **PEERS, **CANDIDATES}
SLOW = {"ruptures-pelt"}  # pure-Python O(n^2): only on series of <= SLOW_MAX_N points
SLOW_MAX_N = 300
LATENCY_DETECTORS = ("attrib", *PEERS)  # candidates are judged on the batch figures
LATENCY_CHANGES = 3  # first changes of a series timed


def make_series(seed: int, family: Family, index: int, max_n: int) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng([seed, zlib.crc32(family.name.encode()), index])
    n = int(round(math.exp(rng.uniform(math.log(50), math.log(max_n)))))
    level = np.zeros(n)
    truth: list[int] = []
    if family.step:
        pos = int(MIN_AFTER + rng.exponential(MEAN_SEGMENT))
        while pos + MIN_AFTER <= n:
            truth.append(pos)
            level[pos:] += rng.choice((-1.0, 1.0)) * family.step * SIGMA
            pos += int(MIN_AFTER + rng.exponential(MEAN_SEGMENT))
    noise = rng.normal(0.0, SIGMA, n)
    if family.noise == "spikes":
        hit = rng.random(n) < 0.02
        noise[hit] += rng.uniform(5, 20, hit.sum()) * SIGMA
    elif family.noise == "bimodal":
        noise += (rng.random(n) < 0.3) * 4 * SIGMA
    elif family.noise == "heavy":
        noise = rng.standard_t(3, n) * SIGMA
    elif family.noise == "drift":
        noise += rng.choice((-1.0, 1.0)) * 2 * SIGMA * np.arange(n) / 1000
    values = np.exp(level + noise)
    if family.noise == "gaps":
        gap = rng.random(n) < 0.15
        gap[0] = False
        values[gap] = np.nan
        truth = [t + int(np.flatnonzero(~gap[t:])[0]) for t in truth]  # the first measured night after it
    return values, truth


def match(found: list[int], truth: list[int]) -> int:
    pairs = sorted((abs(f - t), i, j) for i, f in enumerate(found) for j, t in enumerate(truth) if abs(f - t) <= TOL)
    used_f, used_t, hits = set(), set(), 0
    for _, i, j in pairs:
        if i not in used_f and j not in used_t:
            used_f.add(i)
            used_t.add(j)
            hits += 1
    return hits


def batch_task(args: tuple[int, Family, int, int, tuple[str, ...]]) -> list[tuple]:
    seed, family, index, max_n, names = args
    values, truth = make_series(seed, family, index, max_n)
    rows = []
    for name in names:
        if name in SLOW and values.size > SLOW_MAX_N:
            continue
        start = time.perf_counter()
        found = DETECTORS[name](values)
        rows.append(
            (family.name, name, values.size, len(truth), len(found), match(found, truth), time.perf_counter() - start)
        )
    return rows


def latency_task(args: tuple[int, Family, int, int, tuple[str, ...]]) -> list[tuple]:
    seed, family, index, max_n, names = args
    values, truth = make_series(seed, family, index, max_n)
    rows = []
    edges = [*truth, values.size]
    for k, c in enumerate(truth[:LATENCY_CHANGES]):
        lo = max(edges[k - 1] if k else 0, c - LATENCY_CONTEXT)
        room = min(LATENCY_MAX, edges[k + 1] - c)
        for name in names:
            if name not in LATENCY_DETECTORS:
                continue
            seen = None
            for j in range(1, room + 1):
                found = DETECTORS[name](values[lo : c + j])
                if any(abs(f + lo - c) <= TOL for f in found):
                    seen = j
                    break
            rows.append((family.name, name, seen, room))
    return rows


def nightly_task(args: tuple[int, Family, int, int]) -> tuple:
    seed, family, index, max_n = args
    values, truth = make_series(seed, family, index, max_n)
    decided: list[int] = []
    for t in range(1, values.size + 1):
        if not np.isfinite(values[t - 1]):
            continue
        points = detect(values[:t], Direction.LOWER, SETTINGS, decided)
        decided = [p.index for p in points]
    return (family.name, values.size, len(truth), len(decided), match(decided, truth))


def _pool_map(fn, tasks, workers):
    if workers <= 1:
        return [fn(t) for t in tasks]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.map(fn, tasks, chunksize=1)


def summarise(batch: list[tuple], latency: list[tuple], nightly: list[tuple], families, names) -> tuple[str, dict]:
    acc: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0, 0, 0, 0.0, 0])
    for fam, name, n, t, f, hit, secs in batch:
        a = acc[(fam, name)]
        a[0] += n
        a[1] += t
        a[2] += f
        a[3] += hit
        a[4] += secs
        a[5] += 1
    lines, verdicts = [], {}
    lines.append(
        "| family | detector | series | points | planted | reported | precision | recall | F1 | false alerts / 1000 pts | ms / 1000 pts |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for fam in families:
        best_peer = 0.0
        for name in names:
            if (fam.name, name) not in acc:
                continue
            n, t, f, hit, secs, count = acc[(fam.name, name)]
            prec = hit / f if f else (1.0 if not t else 0.0)
            rec = hit / t if t else math.nan
            f1 = 2 * prec * rec / (prec + rec) if t and prec + rec else (math.nan if not t else 0.0)
            fa = (f - hit) / n * 1000
            verdicts[(fam.name, name)] = {"f1": f1, "recall": rec, "fa": fa, "precision": prec}
            if name in PEERS and t:
                best_peer = max(best_peer, f1)
            lines.append(
                f"| {fam.name} | {name} | {count} | {n} | {t} | {f} | {prec:.3f} | "
                + ("n/a" if not t else f"{rec:.3f}")
                + " | "
                + ("n/a" if not t else f"{f1:.3f}")
                + f" | {fa:.2f} | {secs / n * 1e6:.0f} |"
            )
        verdicts[(fam.name, "best-peer")] = {"f1": best_peer}
    lat_lines = []
    lat: dict[tuple[str, str], list] = defaultdict(list)
    for fam, name, seen, _room in latency:
        lat[(fam, name)].append(seen)
    if lat:
        lat_lines.append("| family | detector | changes | reported within 40 | median latency | 90th pct latency |")
        lat_lines.append("|---|---|---|---|---|---|")
        for fam in families:
            for name in names:
                seen = lat.get((fam.name, name))
                if not seen:
                    continue
                got = sorted(s for s in seen if s is not None)
                big = [s if s is not None else math.inf for s in seen]
                med = float(np.median(big))
                p90 = float(np.quantile(big, 0.9)) if all(math.isfinite(b) for b in big) else math.inf
                p90s = f"{p90:.0f}" if math.isfinite(p90) else f">{LATENCY_MAX} (censored)"
                meds = f"{med:.0f}" if math.isfinite(med) else f">{LATENCY_MAX}"
                lat_lines.append(f"| {fam.name} | {name} | {len(seen)} | {len(got)} | {meds} | {p90s} |")
    night_lines = []
    if nightly:
        night_lines.append("| family | series | points | planted | reported | matched | false alerts / 1000 pts |")
        night_lines.append("|---|---|---|---|---|---|---|")
        per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
        for fam, n, t, f, hit in nightly:
            p = per[fam]
            p[0] += 1
            p[1] += n
            p[2] += t
            p[3] += f
            p[4] += hit
        for fam, (count, n, t, f, hit) in per.items():
            night_lines.append(f"| {fam} | {count} | {n} | {t} | {f} | {hit} | {(f - hit) / n * 1000:.2f} |")
    text = "\n".join(lines)
    if lat_lines:
        text += "\n\n### Latency (points after the change until reported, fed one night at a time)\n\n" + "\n".join(
            lat_lines
        )
    if night_lines:
        text += "\n\n### attrib fed night by night (decided points passed back)\n\n" + "\n".join(night_lines)
    return text, verdicts


def targets(verdicts: dict, families) -> str:
    out = []
    nulls = [f for f in families if not f.step]
    worst = max((verdicts[(f.name, "attrib")]["fa"] for f in nulls if (f.name, "attrib") in verdicts), default=math.nan)
    out.append(
        f"- false alerts on series with no change: worst family {worst:.2f} per 1000 points (target <= 1): {'met' if worst <= 1 else 'MISSED'}"
    )
    big = [f for f in families if f.step >= 3 and (f.name, "attrib") in verdicts]
    low = min((verdicts[(f.name, "attrib")]["recall"] for f in big), default=math.nan)
    out.append(
        f"- recall for steps >= 3 sigma (all have >= {MIN_AFTER} points after): worst family {low:.3f} (target >= 0.95): {'met' if low >= 0.95 else 'MISSED'}"
    )
    for f in families:
        if not f.step or (f.name, "attrib") not in verdicts:
            continue
        mine, peer = verdicts[(f.name, "attrib")]["f1"], verdicts[(f.name, "best-peer")]["f1"]
        out.append(f"- F1 {f.name}: attrib {mine:.3f}, best peer {peer:.3f}: {'met' if mine >= peer else 'MISSED'}")
    for f in nulls:
        if (f.name, "attrib") not in verdicts:
            continue
        peer = (
            min(verdicts[(f.name, n)]["fa"] for n in PEERS if (f.name, n) in verdicts)
            if any((f.name, n) in verdicts for n in PEERS)
            else math.nan
        )
        out.append(
            f"- false alerts {f.name}: attrib {verdicts[(f.name, 'attrib')]['fa']:.2f}, best peer {peer:.2f} per 1000 points"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="CI-sized slice (short series, few of them); prints, writes nothing unless --out",
    )
    ap.add_argument("--series", type=int, default=None, help="series per family (overrides the defaults)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--family", action="append", default=None)
    ap.add_argument("--detector", action="append", default=None)
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    families = [f for f in FAMILIES if not args.family or f.name in args.family]
    names = tuple(args.detector or DETECTORS)
    max_n = 400 if args.quick else 2000
    started = time.time()
    tasks = []
    for f in families:
        count = args.series if args.series is not None else (f.quick if args.quick else f.series)
        tasks += [(args.seed, f, i, max_n, names) for i in range(count)]
    batch = [row for rows in _pool_map(batch_task, tasks, args.workers) for row in rows]
    latency: list[tuple] = []
    nightly: list[tuple] = []
    if not args.no_latency:
        lt = []
        for f in families:
            count = min(f.latency, 3) if args.quick else f.latency
            lt += [(args.seed, f, 10_000 + i, max_n, names) for i in range(count)]
        latency = [row for rows in _pool_map(latency_task, lt, args.workers) for row in rows]
        if "attrib" in names:
            nt = []
            for f in families:
                count = min(f.nightly, 1) if args.quick else f.nightly
                nt += [(args.seed, f, 20_000 + i, min(max_n, NIGHTLY_MAX_N)) for i in range(count)]
            nightly = _pool_map(nightly_task, nt, args.workers)
    wall = time.time() - started
    table, verdicts = summarise(batch, latency, nightly, families, names)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    cmd = "benchmarks/detect_scenarios.py " + " ".join(sys.argv[1:])
    head = (
        f"Command: `.venv/bin/python {cmd.strip()}`; seed {args.seed}; date {date.today()}; wall time {wall:.0f} s on "
        f"{args.workers} worker(s); attrib at commit {commit}; settings {SETTINGS}.\n"
        f"Noise sigma {SIGMA * 100:.0f} % (log space); tolerance {TOL} points; every planted change has >= {MIN_AFTER} points after it."
    )
    report = f"{head}\n\n## Targets\n\n{targets(verdicts, families)}\n\n## Figures\n\n{table}\n"
    print(report)
    out = args.out or (
        None
        if args.quick or args.series is not None or args.family or args.detector
        else Path(__file__).with_name("RESULTS-detect.md")
    )
    if out:
        out.write_text("# Detection benchmark: attrib.core.detect against Perfherder, Otava and asv\n\n" + report)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
