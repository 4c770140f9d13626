"""The posterior search against the sequential one and today's catapult rule, from one run of
benchmarks/scenarios.py (`--issue19 PATH`): the table and the targets of issue 19, each with
what was measured. Pure formatting of scenario Records; nothing here runs a search."""

from __future__ import annotations

import math
import os
from statistics import median

OLD, NEW, TODAY = "attrib", "attrib-posterior", "pinpoint-today"


def _cells(records, families, strategies):
    out = {}
    for f in families:
        for s in strategies:
            rs = [r for r in records if r.family == f.name and r.strategy == s]
            if rs:
                out[f.name, s] = rs
    return out


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.0f} % ({k}/{n})" if n else "-"


def _small_named(r, fam) -> bool:
    """Whether a record names a planted step that is no culprit (a step below the minimum)."""
    truth = set(r.truth)
    return any(c not in truth for c in r.named) and bool(fam.small)


def _exact_by_contract(r) -> bool:
    """Every true culprit named, and nothing else but planted steps strictly inside the zone
    (which the minimum-change contract lets a search name or not)."""
    return set(r.truth) <= set(r.named) and set(r.named) <= set(r.truth) | set(r.zone)


def section(records, families, strategies, trials, seed, wall, workers) -> str:
    cells = _cells(records, families, strategies)
    load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else ["?"]
    lines = [
        "## The posterior search (issue 19): before and after, one run",
        "",
        f"Seed {seed}; trials per family as listed (fewer than the full run's 150-300: the machine has 2",
        f"cores); {workers} worker(s), {wall:.0f} s wall, load average at the end "
        f"{' '.join(load)}. `attrib` is the sequential search (`[search] method = \"sequential\"`, kept for a",
        "release), `attrib-posterior` the posterior search (`method = \"posterior\"`, the default), `pinpoint` the 2018 catapult rule",
        "and `pinpoint-today` the rule in catapult since 2024-03 (benchmarks/baselines.py). CPU s is the",
        "strategy's own CPU time per trial (process time: wall time on a shared machine measures the others).",
        "",
        "| family | trials | " + " | ".join(f"{s} exact / samples / builds / CPU s" for s in strategies) + " |",
        "|---|---|" + "---|" * len(strategies),
    ]
    for f in families:
        row = [f.name, str(trials[f.name])]
        for s in strategies:
            rs = cells.get((f.name, s), [])
            if not rs:
                row.append("-")
                continue
            k = sum(r.exact for r in rs)
            row.append(
                f"{100 * k / len(rs):.0f} % / {median(r.samples for r in rs):.0f} / "
                f"{median(r.builds for r in rs):.0f} / {sum(r.wall_s for r in rs) / len(rs):.2f}"
            )
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "### Targets", ""]
    lines += targets(records, families, cells)
    lines += ["", "### Reliability of the posterior search's culprit posterior", ""]
    lines += reliability(records)
    return "\n".join(lines) + "\n"


def targets(records, families, cells) -> list[str]:
    out = []

    def pooled(pred, s):
        rs = [r for r in records if r.strategy == s and pred(next(f for f in families if f.name == r.family))]
        return sum(r.exact for r in rs), len(rs)

    at_min = lambda f: f.group == "minimum"  # noqa: E731
    for s in (OLD, NEW, TODAY):
        k, n = pooled(at_min, s)
        rs = [r for r in records if r.strategy == s and any(f.name == r.family and at_min(f) for f in families)]
        found = sum(set(r.truth) <= set(r.named) for r in rs)
        by_contract = sum(_exact_by_contract(r) for r in rs)
        out.append(
            f"- step of exactly the minimum (families 'at the minimum ...'), {s}: exact {_pct(k, n)}; "
            f"exact by the contract (a step strictly inside the zone may be named beside the truth) "
            f"{_pct(by_contract, len(rs))}; found (the true culprit among those named, whatever else is) "
            f"{_pct(found, len(rs))}; target exact >= 97 %"
        )
    for s in (OLD, NEW):
        rs = [r for r in records if r.strategy == s and any(f.name == r.family and f.small and min(f.small) <= 0.5 for f in families)]
        named = sum(_small_named(r, next(f for f in families if f.name == r.family)) for r in rs)
        out.append(
            f"- steps <= ignore_below_pct (1/2 of the minimum, the default) named as culprits, {s}: "
            f"{_pct(named, len(rs))} of trials with such a step; target <= 1 %"
        )
        nulls = [r for r in records if r.strategy == s and not r.truth]
        false = sum(r.false_culprit for r in nulls)
        out.append(f"- culprits where nothing changed, {s}: {_pct(false, len(nulls))}; target <= 0.5 %")
    ratios, worse, worse_contract = [], [], []
    for f in families:
        old, new = cells.get((f.name, OLD)), cells.get((f.name, NEW))
        if not old or not new:
            continue
        mo, mn = median(r.samples for r in old), median(r.samples for r in new)
        if mo:
            ratios.append((mn / mo, f.name))
        if sum(r.exact for r in new) < sum(r.exact for r in old):
            worse.append(f.name)
        if sum(map(_exact_by_contract, new)) < sum(map(_exact_by_contract, old)):
            worse_contract.append(f.name)
    if ratios:
        ratios.sort()
        mid = ratios[len(ratios) // 2]
        searched = [x for x in ratios if any(f.name == x[1] and f.effects for f in families)]
        mid_s = searched[len(searched) // 2] if searched else (math.nan, "-")
        out.append(
            f"- samples, median family: posterior / sequential = {mid[0]:.2f}x ({mid[1]}); range "
            f"{ratios[0][0]:.2f}x..{ratios[-1][0]:.2f}x over {len(ratios)} families; over the {len(searched)} "
            f"families with a regression (a null family's cost is its preflight's, the same test in both) "
            f"{mid_s[0]:.2f}x ({mid_s[1]}); target <= 0.4x at equal or "
            f"better exactness (less exact in: {', '.join(worse) or 'none'}; by the contract, where a step strictly "
            f"inside the zone may be named: {', '.join(worse_contract) or 'none'})"
        )
    fewer, more, exact_miss = [], [], []
    for f in families:
        new, today = cells.get((f.name, NEW)), cells.get((f.name, TODAY))
        if not new or not today:
            continue
        kn, kt = sum(r.exact for r in new) / len(new), sum(r.exact for r in today) / len(today)
        if kt >= 0.95:
            (fewer if median(r.samples for r in new) <= median(r.samples for r in today) else more).append(f.name)
        elif kn <= kt:
            exact_miss.append(f.name)
    out.append(
        f"- against today's catapult rule: where it is >= 95 % exact, the posterior draws no more samples in "
        f"{len(fewer)} famil(ies) and more in {len(more)} ({', '.join(more) or 'none'}); where it is below 95 %, "
        f"the posterior is not more exact in: {', '.join(exact_miss) or 'none'}"
    )
    for s in (OLD, NEW):
        single = [r for r in records if r.strategy == s and len(r.truth) == 1]
        over = [r for r in single if r.builds > math.ceil(math.log2(r.n)) + 4]
        by_family: dict[str, list[int]] = {}
        for r in over:
            by_family.setdefault(r.family, []).append(r.builds - math.ceil(math.log2(r.n)) - 4)
        where = "; ".join(f"{f} {len(v)} (+{min(v)}..+{max(v)})" for f, v in by_family.items()) or "none"
        out.append(
            f"- builds > ceil(log2 N) + 4 in single-culprit trials, {s}: {_pct(len(over), len(single))}; target 0; "
            f"over, by family (builds over): {where}"
        )
    return out


BINS = (0.5, 0.9, 0.99, 0.999)


def reliability(records, strategy: str = NEW) -> list[str]:
    """Among named culprits at posterior >= p, the fraction that are true culprits."""
    pairs = [
        (post, name in r.truth)
        for r in records
        if r.strategy == strategy
        for name, post in zip(r.named, r.posteriors, strict=False)
    ]
    out = ["| posterior >= | named | true | fraction true |", "|---|---|---|---|"]
    for p in BINS:
        sel = [ok for post, ok in pairs if post >= p]
        frac = f"{sum(sel) / len(sel):.3f}" if sel else "-"
        out.append(f"| {p} | {len(sel)} | {sum(sel)} | {frac} |")
    below = [ok for post, ok in pairs if post < BINS[0]]
    out.append(f"| < {BINS[0]} | {len(below)} | {sum(below)} | {sum(below) / len(below):.3f} |" if below else f"| < {BINS[0]} | 0 | 0 | - |")
    return out
