"""What a run's builds and time went to, whichever benchmarks it measured: the lines a single
bisection's report shows in "Where the work went" and "Build failures", and a group's report
shows once for all its members (report/markdown.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from attrib.core.model import BuildHow
from attrib.result.types import BisectResult, CommitRow

LOG_EXCERPT_LINES = 12


def run_work(result: BisectResult, rows: Sequence[CommitRow]) -> list[str]:
    """What the run's builds and time went to, whichever benchmarks it measured: in a group's
    report once (`rows`: every member's tested commits), not in each member's."""
    lines = []
    if result.untouched:
        lines.append(f"- not built: {len(result.untouched)} commit(s) touch none of the recipe's [search] paths")
    for n in result.artifact_notes:
        lines.append(
            f"- artifacts of `{n.a[:10]}` and `{n.b[:10]}` differ only by an embedded {' and '.join(n.traps)}: "
            "they were measured as different builds; a reproducible build (docs/recipes.md) would have saved that"
        )
    lines += build_lines(rows)
    t = result.phase_times_s
    if t.build or t.measure or t.decide:
        check = f" ({t.build_check:.1f} s of it the end check: the culprit's ends built again clean)" if t.build_check else ""
        lines.append(
            f"- wall time: build {t.build:.1f} s{check}, measure {t.measure:.1f} s, attrib's own {t.decide:.2f} s "
            f"({t.decide_per_comparison:.3f} s per comparison)"
        )
    return lines


MAX_BUILD_NOTES = 5  # reasons a build was not what the recipe asked first, listed in the report


def build_lines(rows: Sequence[CommitRow]) -> list[str]:
    """What the compiler cache served the builds of these commits, and why it served some none;
    how many were prebuilt, incremental or clean, and why some were not what the recipe asked."""
    builds = [c.build for c in rows if c.build is not None and c.build.ok and not c.build.cached]
    served = [b.cache for b in builds if b.cache.tool]
    lines = []
    if served:
        hits, misses = sum(c.hits for c in served), sum(c.misses for c in served)
        lines.append(
            f"- compiler cache ({served[0].tool}): {hits} compilation(s) served, {misses} compiled, over {len(served)} build(s)"
        )
    notes = sorted({b.cache.note for b in builds if b.cache.note})
    lines += [f"- compiler cache: {note}" for note in notes]
    hows = Counter(b.how for b in builds)
    if set(hows) - {BuildHow.CLEAN}:
        lines.append("- builds: " + ", ".join(f"{hows[h]} {h.value}" for h in BuildHow if hows[h]))
    why = Counter(b.note for b in builds if b.note)
    lines += [f"- {n} build(s): {note}" for note, n in sorted(why.items())[:MAX_BUILD_NOTES]]
    if len(why) > MAX_BUILD_NOTES:
        lines.append(f"- and {len(why) - MAX_BUILD_NOTES} other reason(s): see each build's log")
    return lines


def build_failure_lines(result: BisectResult) -> list[str]:
    """Each commit that did not build, with the tail of its log."""
    out = ["## Build failures", ""] if result.build_failures else []
    for f in result.build_failures:
        tail = "\n".join(f.log_tail.splitlines()[-LOG_EXCERPT_LINES:]) or "(empty log)"
        out += [f"- `{f.commit[:10]}` {f.subject}: {f.reason}", "", "```text", tail, "```", ""]
    return out
