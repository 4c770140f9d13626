"""Group families (issue 29): one range that moved many benchmarks, bisected as one group by
attrib's real group bisection, against its peers, on simulated groups with known truth.

    .venv/bin/python benchmarks/scenarios.py --groups --seed 1 --trials 20
    .venv/bin/python benchmarks/group_scenarios.py --seed 1 --trials 20 [--family NAME] [--out PATH]

Each trial draws a linear history of 40..160 commits (1,000 in the family named so) and plants each family's culprits at
random positions; every member is a benchmark of one process (`SimGroupRunner`: one run gives
each member a 10-sample block, noise 1 % per sample in log space, the machine's state shared).
The minimum change is 2 % (ignore_below 1 %, the default half).

Strategies:
  group      attrib.simulation.run_simulated_group: the group bisection (shared builds and rounds,
             the shared-culprit prior, one confirmation per position)
  separate   today's attrib: one bisection per member (run_simulated), builds cached between them
  skia       Skia's rule: bisect the member with the largest change alone, assign its culprit to
             every member (members it did not reproduce for get nothing: a flat member too)

Scoring, per member: exact = the culprits named for it equal its own planted culprits (none for
a flat member: named nothing). Builds: distinct commits built for the whole group. Samples per
member: the samples its own tests drew (`drawn`: its records' samples, the preflight, blocks and
confirmation); `vs separate` is the median over trials of the trial's median member against the
separate bisections' median member, `member / itself alone` each member with a step against the
same member's separate bisection (same history), its median and mean. With one process measuring
every member, the machine's cost per member is the runs times 10 samples over the members (`share`).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import sys
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attrib.simulation import NoiseModel, group_history, run_simulated, run_simulated_group

MIN_CHANGE = 2.0
IGNORE = 1.0
REPS = 10


@dataclass(frozen=True)
class GroupFamily:
    name: str
    culprits: int  # distinct culprit commits planted
    members: tuple[tuple[int, float], ...]  # per member: (which culprit, 0-based; -1 flat) and its step in %
    commits: int | None = None  # the history's length; None: 40..160 drawn per trial


FAMILIES = (
    GroupFamily("24 members, 16 + 3 culprits", 2, (*((0, 5.0),) * 16, *((1, 4.0),) * 3, *((-1, 0.0),) * 5)),
    GroupFamily(
        "8 members, three culprits",
        3,
        ((0, 5.0), (0, 4.0), (0, 3.0), (1, 6.0), (1, 4.0), (2, 5.0), (2, 3.0), (-1, 0.0)),
    ),
    GroupFamily(
        "weakest at the minimum", 1, ((0, 8.0), (0, 6.0), (0, 5.0), (0, 4.0), (0, 3.0), (0, MIN_CHANGE), (0, IGNORE))
    ),
    GroupFamily("one member does not reproduce", 1, ((0, 5.0), (0, 5.0), (0, 4.0), (0, 4.0), (0, 3.0), (-1, 0.0))),
    GroupFamily(
        "N = 1,000: 24 members, 16 + 3 culprits",
        2,
        (*((0, 5.0),) * 16, *((1, 4.0),) * 3, *((-1, 0.0),) * 5),
        commits=1000,
    ),
)
STRATEGIES = ("group", "separate", "skia")


@dataclass(frozen=True)
class MemberScore:
    step: float
    exact: bool
    flat_named: bool  # a flat member got a culprit
    ignore_named: bool  # a step at or below ignore_below was named
    drawn: int


@dataclass(frozen=True)
class TrialScore:
    family: str
    strategy: str
    n: int
    members: tuple[MemberScore, ...]
    builds: int
    runs: int
    seconds: float


def plant(family: GroupFamily, index: int, seed: int) -> tuple[int, dict[str, dict[int, float]]]:
    rng = np.random.default_rng(zlib.crc32(f"{seed}/{family.name}/{index}".encode()))
    n = family.commits or int(rng.integers(40, 161))
    at = sorted(int(p) for p in rng.choice(np.arange(2, n - 1), size=family.culprits, replace=False))
    steps = {f"m{i:02d}": ({at[c]: pct} if c >= 0 else {}) for i, (c, pct) in enumerate(family.members)}
    return n, steps


def _score(step: float, truth: dict[int, float], named: tuple[str, ...]) -> MemberScore:
    want = {f"c{p:03d}" for p in truth} if step > IGNORE else set()
    got = set(named)
    return MemberScore(
        step, got == want, not truth and bool(got), 0 < step <= IGNORE and bool(got & {f"c{p:03d}" for p in truth}), 0
    )


def run_trial(family: GroupFamily, index: int, seed: int, strategy: str, spell: float = 0.0) -> TrialScore:
    n, steps = plant(family, index, seed)
    group = group_history(n, steps)
    # spells: the machine's state, shared by every member of a run, off by `spell` (%) for
    # stretches of 12 runs, one stretch in three
    noise = NoiseModel("spells", sigma=0.01, spell=math.log1p(spell / 100)) if spell else NoiseModel(sigma=0.01)
    trial_seed = zlib.crc32(f"{seed}/{family.name}/{index}/run".encode())
    t0 = time.perf_counter()
    scores: list[MemberScore] = []
    if strategy == "group":
        out = run_simulated_group(group, noise, trial_seed, min_change_pct=MIN_CHANGE, reps=REPS)
        for (_, step), (name, o) in zip(family.members, out.members.items(), strict=True):
            named = o.culprits if o.status in ("culprit_found", "partial") else ()  # partial names them too
            s = _score(step, steps[name], named)
            scores.append(MemberScore(s.step, s.exact, s.flat_named, s.ignore_named, o.samples))
        return TrialScore(family.name, strategy, n, tuple(scores), out.builds, out.runs, time.perf_counter() - t0)
    built: set[str] = set()
    runs = 0
    alone = {}
    names = list(steps)
    if strategy == "skia":
        top = max(range(len(names)), key=lambda i: family.members[i][1])
        names_run = [names[top]]
    else:
        names_run = names
    for i, name in enumerate(names_run):
        o = run_simulated(group.members[name], noise, trial_seed + i, min_change_pct=MIN_CHANGE, reps=REPS)
        alone[name] = o
        runs += o.runs
        built |= {sha for sha, r in o.outcome.commits.items() if r.build is not None}  # type: ignore[attr-defined]
    for (_, step), name in zip(family.members, names, strict=True):
        if strategy == "skia":
            o = alone[names_run[0]]
            named = o.culprits if o.status in ("culprit_found", "partial") else ()  # partial names them too
            drawn = o.samples if name == names_run[0] else 0
        else:
            o = alone[name]
            named = o.culprits if o.status in ("culprit_found", "partial") else ()  # partial names them too
            drawn = o.samples
        s = _score(step, steps[name], named)
        scores.append(MemberScore(s.step, s.exact, s.flat_named, s.ignore_named, drawn))
    return TrialScore(family.name, strategy, n, tuple(scores), len(built), runs, time.perf_counter() - t0)


def _task(args: tuple[str, int, int, str, float]) -> TrialScore:
    name, index, seed, strategy, spell = args
    family = next(f for f in FAMILIES if f.name == name)
    return run_trial(family, index, seed, strategy, spell)


def run_all(families: list[GroupFamily], trials: int, seed: int, workers: int, spell: float = 0.0) -> list[TrialScore]:
    tasks = [(f.name, i, seed, s, spell) for f in families for i in range(trials) for s in STRATEGIES]
    if workers <= 1:
        return [_task(t) for t in tasks]
    with multiprocessing.Pool(workers) as pool:
        return pool.map(_task, tasks, chunksize=1)


def pct(k: int, n: int) -> str:
    return f"{100 * k / n:.1f} % ({k}/{n})" if n else "–"


def report(
    scores: list[TrialScore], families: list[GroupFamily], trials: int, seed: int, seconds: float, spell: float = 0.0
) -> str:
    by: dict[tuple[str, str], list[TrialScore]] = defaultdict(list)
    for s in scores:
        by[(s.family, s.strategy)].append(s)
    lines = [
        f"`benchmarks/scenarios.py --groups --seed {seed} --trials {trials}{f' --spell {spell:g}' if spell else ''}` "
        f"({trials} trials per family and strategy, {seconds:.0f} s on this machine; noise 1 % per sample"
        f"{f', spells of {spell:g} % for 12 runs in 36' if spell else ''}, min change {MIN_CHANGE:g} %, "
        f"ignore_below {IGNORE:g} %).",
        "",
        "| family | strategy | exact per member | at the minimum | flat named | <= ignore named | builds (p50 / max; budget) "
        "| over budget | drawn per member (p50) | vs separate | member / itself alone (p50, mean) | runs per trial (p50) "
        "| share per member (p50) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in families:
        sep = by[(f.name, "separate")]
        sep_drawn = [float(np.median([m.drawn for m in s.members if m.step > 0] or [0])) for s in sep]
        for strategy in STRATEGIES:
            rows = by[(f.name, strategy)]
            members = [m for s in rows for m in s.members]
            real = [m for m in members if m.step > IGNORE]
            at_min = [m for m in members if m.step == MIN_CHANGE]
            flat = [m for m in members if m.step == 0]
            low = [m for m in members if 0 < m.step <= IGNORE]
            budgets = [f.culprits * (math.ceil(math.log2(s.n)) + 4) for s in rows]
            builds = [s.builds for s in rows]
            over = sum(b > cap for b, cap in zip(builds, budgets, strict=True))
            drawn = [float(np.median([m.drawn for m in s.members if m.step > 0] or [0])) for s in rows]
            ratio = (
                float(np.median([d / a for d, a in zip(drawn, sep_drawn, strict=True) if a])) if sep_drawn else math.nan
            )
            share = [s.runs * REPS / len(s.members) for s in rows]
            paired = _paired(rows, sep)
            lines.append(
                f"| {f.name} | {strategy} | {pct(sum(m.exact for m in members), len(members))} "
                f"| {pct(sum(m.exact for m in at_min), len(at_min))} | {pct(sum(m.flat_named for m in flat), len(flat))} "
                f"| {pct(sum(m.ignore_named for m in low), len(low))} | {np.median(builds):.0f} / {max(builds)}; "
                f"{np.median(budgets):.0f} | {over}/{len(rows)} | {np.median(drawn):.0f} | {ratio:.2f}x "
                f"| {np.median(paired):.2f}x, {np.mean(paired):.2f}x | {np.median([s.runs for s in rows]):.0f} | {np.median(share):.0f} |"
            )
        del real
    return "\n".join(lines)


def _paired(rows: list[TrialScore], sep: list[TrialScore]) -> list[float]:
    """Each member's draws over the same member's in its separate bisection (same trial, same
    history), for every member with a step."""
    out = []
    for g, s in zip(rows, sep, strict=True):
        out += [a.drawn / b.drawn for a, b in zip(g.members, s.members, strict=True) if a.step > 0 and b.drawn]
    return out or [math.nan]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--family", action="append", default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--spell",
        type=float,
        default=0.0,
        help="the machine off by this %% for 12 runs in 36 (shared by a run's members)",
    )
    args = ap.parse_args(argv)
    families = [f for f in FAMILIES if args.family is None or f.name in args.family]
    t0 = time.perf_counter()
    scores = run_all(families, args.trials, args.seed, args.workers, args.spell)
    text = report(scores, families, args.trials, args.seed, time.perf_counter() - t0, args.spell)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
