"""The report of a group (a result with several members): each culprit with every member it
moved, largest first, the largest one's sparkline and static kernel diff, then each member as a
bisection of it alone reports it, folded.

A result of one member never comes here: it reads as a single bisection always has
(report/markdown.py). This module imports nothing of markdown.py; markdown.py hands it the
lines of a member's own report (`MemberLines`) and uses the cells defined here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from attrib.core.model import Status
from attrib.report.chain import rolls_section
from attrib.report.plot import sparkline
from attrib.result.types import BisectResult, CulpritRecord, MemberResult

# The lines of one member's own report (a result of one member), without title or environment.
MemberLines = Callable[[BisectResult], list[str]]
MAX_MEMBERS_IN_HEADLINE = 3


def fmt_ci(ci: tuple[float, float] | None) -> str:
    return f"[{ci[0]:+.2f} %, {ci[1]:+.2f} %]" if ci else "n/a"


def cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def static_diff_table(diff: Mapping[str, tuple[int, int]]) -> list[str]:
    """Static kernel metrics (registers, spills, ...) before -> after, as the runner reported them."""
    out = ["| kernel metric | before | after | change |", "|---|---:|---:|---:|"]
    for metric, (before, after) in diff.items():
        delta = after - before
        change = f"{delta:+g}" + (f" ({delta / before * 100:+.0f} %)" if before else "")
        out.append(f"| {cell(metric)} | {before} | {after} | {change} |")
    return out


def largest(result: BisectResult, culprit: CulpritRecord) -> MemberResult | None:
    """The member this culprit moved most (the first it lists), as the group holds it."""
    if not culprit.members:
        return None
    first = culprit.members[0]
    return next((m for m in result.members if m.label == first.label), None)


def group_headline(result: BisectResult) -> str:
    n, culprits = len(result.members), result.culprits
    if result.status is Status.CULPRIT_FOUND:
        moved = len({ch.label for c in culprits for ch in c.members})
        parts = []
        for c in culprits:
            top = c.members[0] if c.members else None
            size = f", largest **{top.change_pct:+.1f} %** on `{top.label}`" if top else ""
            parts.append(f'`{c.commit[:10]}` "{c.subject}" by {c.author} moved {len(c.members)}{size}')
        what = "1 culprit" if len(culprits) == 1 else f"{len(culprits)} culprits"
        return f"**{what} found** in {moved} of {n} benchmarks: " + "; ".join(parts)
    if result.status is Status.PARTIAL:
        left = [m.label for m in result.members if m.status is Status.PARTIAL]
        named = "; ".join(f'`{c.commit[:10]}` "{c.subject}" by {c.author} moved {len(c.members)}' for c in culprits)
        return (
            f"**Partial attribution** on {n} benchmarks: {named}; on {', '.join(f'`{x}`' for x in left)} part of the"
            " whole change is left unexplained, undecided at this noise (each member's report says how much)"
        )
    counts = {s: sum(1 for m in result.members if m.status is s) for s in Status}
    said = ", ".join(f"{k} {s.value.replace('_', ' ')}" for s, k in counts.items() if k)
    return f"**{result.status.value.replace('_', ' ').capitalize()}** on {n} benchmarks ({said}); no culprit is named"


def group_title(result: BisectResult, culprit: CulpritRecord) -> str:
    """A tracker issue title for one culprit of a group: how many it moved, and by how much at most."""
    top = culprit.members[0] if culprit.members else None
    names = [ch.label for ch in culprit.members[:MAX_MEMBERS_IN_HEADLINE]]
    more = f" and {len(culprit.members) - len(names)} more" if len(culprit.members) > len(names) else ""
    size = f"up to {top.change_pct:+.1f} %" if top else f"{culprit.change_pct:+.1f} %"
    return f'{", ".join(names)}{more}: {size} from {culprit.commit[:10]} "{culprit.subject}"'


def members_table(culprit: CulpritRecord, only: set[str] | None = None) -> list[str]:
    """Every member the culprit moved, largest first (`only`: those labels, when given)."""
    out = ["| benchmark | change | 95 % CI | posterior | confirmed |", "|---|---:|---|---:|---|"]
    for ch in culprit.members:
        if only is not None and ch.label not in only:
            continue
        post = f"{ch.posterior:.3f}" if ch.posterior is not None else "–"
        below = ", below the minimum" if ch.below_minimum else ""
        out.append(
            f"| `{cell(ch.label)}` | **{ch.change_pct:+.2f} %** | {fmt_ci(ch.ci_pct)}{below} | {post} | "
            f"{'yes' if ch.confirmed else 'NO'} |"
        )
    return out


def culprit_lines(result: BisectResult, c: CulpritRecord, index: int, total: int) -> list[str]:
    """A culprit of the group: who, what, the members it moved, and the largest one's pictures."""
    n = f" {index} of {total}" if total > 1 else ""
    what = "Culprit" if result.status in (Status.CULPRIT_FOUND, Status.PARTIAL) else "Best candidate"
    out = [
        f"## {what}{n}: `{c.commit[:10]}` {c.subject}",
        "",
        f"- commit: `{c.commit}`",
        f"- author: {c.author} <{c.author_email}>, {c.date}",
    ]
    if c.via_merge:
        out.append(f"- brought in by the merge `{c.via_merge[:10]}`")
    if c.ambiguous_with:
        out.append("- ambiguous: these untestable commits just before it could also be the cause: "
                   + ", ".join(f"`{s[:10]}`" for s in c.ambiguous_with))  # fmt: skip
    if c.files:
        out.append(f"- files changed ({len(c.files)}): " + ", ".join(f"`{f}`" for f in c.files[:20]))
    out += ["", f"It moved {len(c.members)} of {len(result.members)} benchmarks, largest first:", ""]
    out += members_table(c)
    top = largest(result, c)
    if top is not None:
        spark = sparkline(result.view(top))
        if spark:
            out += ["", f"`{top.label}`, the largest, per tested commit:", "", "```text", *spark, "```"]
    if c.static_diff:
        out += ["", f"Static kernel diff (`{c.members[0].label if c.members else result.benchmark}`):", ""]
        out += static_diff_table(c.static_diff)
    elif c.static_diff is not None:
        out.append("- static kernel metrics (registers, spills, shared memory, binary size): unchanged")
    elif c.static_diff_unavailable:
        out.append(f"- static kernel diff: unavailable ({cell(c.static_diff_unavailable)})")
    return out + ["", "Reproduce the largest change:", "", "```sh", c.reproduce, "```", ""] + rolls_section(c)


def members_overview(result: BisectResult) -> list[str]:
    out = ["## Benchmarks", "", "| benchmark | status | whole change | 95 % CI | culprits |", "|---|---|---:|---|---|"]
    for m in result.members:
        named = ", ".join(f"`{c.commit[:10]}`" for c in m.culprits) or "–"
        out.append(
            f"| `{cell(m.label)}` | {m.status.value.replace('_', ' ')} | {m.total_change_pct:+.2f} % | "
            f"{fmt_ci(m.total_ci_pct)} | {named} |"
        )
    return out + [""]


def member_sections(result: BisectResult, member_lines: MemberLines) -> list[str]:
    """Each member's own report, folded: everything a bisection of it alone reports."""
    out = []
    for m in result.members:
        out += [f"<details><summary><code>{cell(m.label)}</code>: {m.status.value.replace('_', ' ')}</summary>", ""]
        out += member_lines(result.view(m))
        out += ["</details>", ""]
    return out


def issue_lines(result: BisectResult, c: CulpritRecord, member_lines: MemberLines) -> list[str]:
    """The body of one culprit's issue (before the markers): the culprit with its members, the
    table of every member, and the largest member's own report folded. Bounded by one member's
    report, however large the group (a tracker caps a body's size)."""
    out = [f"# attrib: `{c.commit[:10]}` moved {len(c.members)} benchmarks", "", group_headline(result), ""]
    out += culprit_lines(result, c, 1, 1)
    out += members_overview(result)
    top = largest(result, c)
    if top is not None:
        out += [f"<details><summary>The report of <code>{cell(top.label)}</code></summary>", ""]
        out += member_lines(result.view(top)) + ["</details>", ""]
    return out + ["## Reproduce the group", "", "```sh", result.reproduce, "```", ""]
