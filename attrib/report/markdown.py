"""Markdown from a result (the typed records, never the search driver's live objects), so a stored
result re-renders exactly.

The first screen is what an engineer reads in the tracker: the headline, a sparkline, the
range, and per culprit who/what/how much. Everything needed to check or reproduce it follows
below, and the raw counts sit in a collapsed <details> block.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

from attrib.core.blocks import BlockReason
from attrib.core.environment import Fingerprint
from attrib.core.model import NoteKind, RevertStatus, SearchMethod, Status, TextCause, Verdict
from attrib.core.stats import EXTEND_FACTOR
from attrib.fsutil import atomic_write_text
from attrib.report.chain import chain_text, innermost, rolls_section
from attrib.report.group import cell as _cell
from attrib.report.group import culprit_lines, group_headline, member_sections, members_overview, static_diff_table
from attrib.report.group import fmt_ci as _fmt_ci
from attrib.report.plot import plot_available, render_plot, series_sparkline, sparkline
from attrib.report.sentences import blocks_text, cause_resolve, cause_why, note_text, remainder_text
from attrib.report.work import build_failure_lines, run_work
from attrib.result.types import (
    BisectResult,
    CompareResult,
    CulpritRecord,
    ExecutorInfo,
    Result,
    RevertRecord,
    Role,
    Settings,
    UnresolvedRange,
)

MAX_FILES_SHOWN = 20


def _fmt_value(v: float | None, unit: str) -> str:
    if v is None:
        return "–"
    if unit == "s":
        for scale, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
            if abs(v) >= scale:
                return f"{v / scale:.4g} {name}"
    return f"{v:.4g} {unit}"


_REVERT_MEASURED = {
    RevertStatus.RECOVERED: "the regression goes away when this commit is reverted",
    RevertStatus.NOT_RECOVERED: "reverting this commit does NOT remove the regression",
    RevertStatus.INCONCLUSIVE: "undecided at the cap",
}
_REVERT_SKIPPED = {
    RevertStatus.CONFLICT: "skipped: the revert conflicts",
    RevertStatus.BUILD_FAILED: "skipped: the reverted tree does not build",
}


def _revert_text(rv: RevertRecord) -> str:
    ref = f"`{rv.reverted_commit[:10]}`" if rv.reverted_commit else "the revert"
    if rv.status in _REVERT_MEASURED:
        change = f"{rv.bad_vs_reverted_pct:+.2f} % {_fmt_ci(rv.ci_pct)}" if rv.bad_vs_reverted_pct is not None else "n/a"
        return f"{_REVERT_MEASURED[rv.status]}: bad vs bad-with-revert ({ref}) {change} over {rv.rounds} rounds"
    return _REVERT_SKIPPED.get(rv.status, "skipped") + (f" ({rv.detail})" if rv.detail else "")


def _executor_line(ex: ExecutorInfo) -> str:
    if ex.docker is not None:
        digest = ex.docker.digests[0] if ex.docker.digests else None
        gpus = "with GPUs" if ex.docker.gpus else "without GPUs"
        return (
            f"- executor: docker, image `{ex.docker.image}` id `{ex.docker.image_id}`"
            + (f" digest `{digest}`" if digest else "")
            + f", benchmarks ran {gpus}"
        )
    if ex.slurm is not None:  # where the rounds ran (a round is paired on one node only)
        per_node = Counter(r.node for r in ex.slurm.rounds if r.node)
        lost = sum(1 for r in ex.slurm.rounds if r.fault)
        nodes = ", ".join(f"`{n}` {k}" for n, k in sorted(per_node.items())) or "none"
        return (
            f"- executor: slurm, partition {ex.slurm.partition}, {ex.slurm.jobs_submitted} jobs; "
            f"rounds per node: {nodes}" + (f"; {lost} round(s) lost their allocation" if lost else "")
        )
    return f"- executor: {ex.name}"


def _sha_list(shas: tuple[str, ...], limit: int = 12) -> str:
    more = f" and {len(shas) - limit} more" if len(shas) > limit else ""
    return ", ".join(f"`{s[:10]}`" for s in shas[:limit]) + more


def why_text(u: UnresolvedRange, s: Settings) -> str:
    """Why the range is open: each cause's sentence (a schema-1 text cause as it was written)."""
    return "; ".join(c.why if isinstance(c, TextCause) else cause_why(c, s.min_change_pct) for c in u.causes)


def resolve_text(u: UnresolvedRange, s: Settings) -> str:
    return "; ".join(c.resolve if isinstance(c, TextCause) else cause_resolve(c, s.max_rounds, s.min_change_pct) for c in u.causes)


def _culprit_phrase(c: CulpritRecord) -> str:
    amb = f" (or one of {len(c.ambiguous_with)} untestable commits before it)" if c.ambiguous_with else ""
    below = ", below the minimum change" if c.below_minimum else ""
    return f'"{c.subject}" by {c.author}, **{c.change_pct:+.1f} %** {_fmt_ci(c.ci_pct)}{below} (`{c.commit[:10]}`){amb}{chain_text(c)}'


def _below_text(c: CulpritRecord, s: Settings) -> str:
    """Why a culprit smaller than the minimum is named at all: the indifference zone."""
    zone = f"between ignore_below_pct ({s.ignore_below_pct:g} %) and the minimum" if s.ignore_below_pct is not None else "below it"
    return (
        f"- below the minimum: its estimate ({c.change_pct:+.2f} %) is smaller than min_change_pct "
        f"({s.min_change_pct:g} %). A step {zone} may be named but is not promised; the search put the "
        "change here, and its size is what the 95 % CI above says"
    )


def headline(result: BisectResult) -> str:
    """One line that says what happened."""
    status, bench, culprits = result.status, result.benchmark, result.culprits
    if status is Status.CULPRIT_FOUND and len(culprits) == 1:
        c = culprits[0]
        amb = f" (or one of {len(c.ambiguous_with)} untestable commits before it)" if c.ambiguous_with else ""
        below = f", below the minimum change of {result.settings.min_change_pct:g} %" if c.below_minimum else ""
        return (
            f'**Culprit found** in "{c.subject}" by {c.author}: **{c.change_pct:+.1f} %** '
            f"{_fmt_ci(c.ci_pct)}{below} on `{bench}` (`{c.commit[:10]}`){amb}{chain_text(c)}"
        )
    if status is Status.CULPRIT_FOUND:
        return (
            f"**{len(culprits)} culprits found** on `{bench}` (together {result.total_change_pct:+.1f} %): "
            + "; ".join(_culprit_phrase(c) for c in culprits)
        )
    if status is Status.PARTIAL and result.remainder is not None:
        what = "culprit" if len(culprits) == 1 else f"{len(culprits)} culprits"
        s = result.settings
        return (
            f"**Partial attribution** on `{bench}` ({result.total_change_pct:+.1f} % overall): {what} "
            + "; ".join(_culprit_phrase(c) for c in culprits)
            + "; " + remainder_text(result.remainder, s.min_change_pct, s.max_rounds * EXTEND_FACTOR)
        )
    if status is Status.NOT_REPRODUCED:
        return (
            f"**Not reproduced**: `{bench}` at `{result.bad[:10]}` is not worse than at `{result.good[:10]}` "
            f"by {result.settings.min_change_pct} % or more (measured {result.total_change_pct:+.2f} % "
            f"{_fmt_ci(result.total_ci_pct)}); no commit is named."
        )
    if status is Status.INCONCLUSIVE:
        unresolved = result.unresolved
        if unresolved:
            u = unresolved[0]
            where = f"the change is in `{u.last_good[:10]}`..`{u.first_bad[:10]}` ({len(u.commits)} commits)"
            if len(unresolved) > 1:
                where += f" and {len(unresolved) - 1} more range(s)"
        else:
            where = f"the change is somewhere in `{result.good[:10]}`..`{result.bad[:10]}`"
        best = f"; best candidates: {'; '.join(_culprit_phrase(c) for c in culprits)}" if culprits else ""
        return f"**Inconclusive** on `{bench}` ({result.total_change_pct:+.1f} % overall): {where}{best}"
    rng = f"{result.good[:10]}..{result.bad[:10]}"
    return f"**Error** while bisecting `{bench}` in {rng}: {result.error or 'see notes'}"


def title(result: BisectResult, culprit: CulpritRecord | None = None) -> str:
    """A tracker issue title: short, and unique enough to scan a list of them."""
    bench = result.benchmark
    if culprit is not None:
        if (inside := innermost(culprit)) is not None:  # a roll: the dependency's commit is the news
            path, dep = inside
            return f'{bench}: {culprit.change_pct:+.1f} % from {dep.commit[:10]} "{dep.subject}" in {path}, rolled by {culprit.commit[:10]}'
        return f'{bench}: {culprit.change_pct:+.1f} % from {culprit.commit[:10]} "{culprit.subject}"'
    return f"{bench}: {result.status.value.replace('_', ' ')} in {result.good[:10]}..{result.bad[:10]}"


def _culprit_section(c: CulpritRecord, index: int, total: int, status: Status, settings: Settings) -> list[str]:
    n = f" {index} of {total}" if total > 1 else ""
    # An inconclusive outcome's culprits are the best candidates, not a claim.
    what = "Culprit" if status in (Status.CULPRIT_FOUND, Status.PARTIAL) else "Best candidate"
    out = [f"## {what}{n}: `{c.commit[:10]}` {c.subject}", ""]
    out += [
        f"- commit: `{c.commit}`",
        f"- author: {c.author} <{c.author_email}>, {c.date}",
        f"- change: **{c.change_pct:+.2f} %** (95 % CI {_fmt_ci(c.ci_pct)})"
        + (f", {c.share * 100:.0f} % of the whole regression" if c.share is not None else ""),
        f"- confirmation: culprit vs `{c.compared_with[:10]}` measured again, paired: "
        f"{'confirmed' if c.confirmed else 'NOT confirmed'} (verdict {c.confirmation.verdict.value}, "
        f"{c.confirmation.rounds} rounds)",
    ]
    if c.below_minimum:
        out.append(_below_text(c, settings))
    if c.posterior is not None:
        line = f"- confidence: posterior probability {c.posterior:.3f} that this exact commit is the change"
        if c.ambiguous_with and c.range_posterior is not None:
            line += f" ({c.range_posterior:.3f} that it is this commit or one of the untestable ones before it)"
        out.append(line)
    if c.revert is not None:
        out.append("- revert check: " + _revert_text(c.revert))
    if c.via_merge:
        out.append(f"- brought in by the merge `{c.via_merge[:10]}`")
    if c.ambiguous_with:
        amb = ", ".join(f"`{s[:10]}`" for s in c.ambiguous_with)
        out.append(f"- ambiguous: these untestable commits just before it could also be the cause: {amb}")
    if c.files:
        more = f" and {len(c.files) - MAX_FILES_SHOWN} more" if len(c.files) > MAX_FILES_SHOWN else ""
        out.append(f"- files changed ({len(c.files)}): " + ", ".join(f"`{f}`" for f in c.files[:MAX_FILES_SHOWN]) + more)
    if c.static_diff:
        out += ["", "Static kernel diff:", ""] + static_diff_table(c.static_diff)
    elif c.static_diff is not None:
        out.append("- static kernel metrics (registers, spills, shared memory, binary size): unchanged")
    elif c.static_diff_unavailable:
        out.append(f"- static kernel diff: unavailable ({_cell(c.static_diff_unavailable)})")
    out += ["", "Reproduce this comparison:", "", "```sh", c.reproduce, "```", ""]
    return out + rolls_section(c)


def _gpu_lines(gpus: tuple[Mapping[str, Any], ...]) -> list[str]:
    """environment.gpu as the GPU layer records it: name, driver, cuda, clocks and any further keys."""
    known = ("name", "driver", "cuda", "clocks")
    out = []
    for g in gpus:
        parts = [str(g["name"])] if g.get("name") else []
        parts += [f"{k} {g[k]}" for k in ("driver", "cuda") if g.get(k) is not None]
        clocks = g.get("clocks")
        if isinstance(clocks, dict):
            parts.append("clocks " + ", ".join(f"{k} {v}" for k, v in clocks.items()))
        elif clocks is not None:
            parts.append(f"clocks {clocks}")
        parts += [f"{k} {v}" for k, v in g.items() if k not in known and v is not None]
        out.append("- GPU: " + ", ".join(parts))
    return out


def _environment(result: BisectResult) -> list[str]:
    m, env = result.machine, result.environment
    out = [
        "## Environment",
        "",
        f"- attrib {result.tool.version}, recipe `{result.recipe.name}` "
        f"(`{result.recipe.path}`, sha256 {result.recipe.sha256[:12]})",
        f"- machine: {m.hostname}, {m.cpu} ({m.cpus} CPUs), {m.platform}, Python {m.python}",
    ]
    out += _gpu_lines(env.gpu) if env.gpu else ["- GPU: none recorded"]
    out.append(_executor_line(result.executor))
    for key, value in env.extra.items():
        if value not in (None, "", [], {}):
            out.append(f"- {key}: {value}")
    return out + [""] + where_it_ran(env.fingerprint)


def where_it_ran(fp: Fingerprint | None) -> list[str]:
    """The environment fingerprint (core/environment.py), read where the work ran: each key's
    value, then the keys it could not read and why. Nothing for a result without one (schema 4)."""
    if fp is None:
        return []
    out = ["## Where it ran", "", f"Read on `{fp.where or 'an unnamed machine'}`, where the builds and runs went.", ""]
    out += [f"- {key}: {_cell(value)}" for key, value in sorted(fp.values.items())]
    if fp.unavailable:
        out.append("- not read: " + "; ".join(f"{k} ({_cell(v)})" for k, v in sorted(fp.unavailable.items())))
    return out + [""]


def _raw_counts(result: BisectResult, run_wide: bool = True) -> list[str]:
    """`run_wide`: with the run's builds and wall time (a group's report says them once, not per member)."""
    unit, s = result.unit, result.settings
    b = result.blocks
    chosen = f" (then {b.reps}, chosen)" if b is not None and b.reason is BlockReason.CHOSEN else ""
    out = [
        "<details><summary>Raw samples, comparisons and settings</summary>",
        "",
        f"- alpha {s.alpha}, beta {s.beta}, rounds {s.min_rounds}..{s.max_rounds}, "
        f"minimum change {s.min_change_pct} %, {s.reps} samples per run{chosen}, seed {s.seed}, "
        f"executor {s.executor}, jobs {s.jobs}, verify {s.verify}"
        + (f", {s.search} search, steps below {s.ignore_below_pct:g} % ignored" if s.ignore_below_pct is not None else ""),
        f"- {result.samples} samples in {result.rounds} rounds"
        + (f", {result.builds} builds ({result.builds_fresh} fresh, {result.builds_cached} from the cache), "
           f"{result.wall_s:.1f} s" if run_wide else ""),
    ]  # fmt: skip
    cancels = (
        "the posterior search runs the reference in every round and reads each block against it, "
        "and the confirmation is paired within rounds"
        if s.search is SearchMethod.POSTERIOR
        else "every comparison is paired within a round, so this cancels"
    )
    for d in result.drift:
        out.append(
            f"- drift: the {d.role.value} reference `{d.commit[:10]}` moved {d.change_pct:+.2f} % between its first "
            f"and last blocks ({d.blocks} blocks); {cancels}"
        )
    excluded = result.excluded_samples
    if excluded:
        reasons = ", ".join(f"{why}: {n}" for why, n in sorted(excluded.items(), key=lambda kv: -kv[1]))
        out.append(f"- excluded samples: {sum(excluded.values())}, by reason: {reasons} (flagged by the benchmark, or GPU blocks the validity gate excluded and timed again: a low SM clock, thermal, power brake, HW slowdown, a shared device; docs/gpu.md)")
    out += [
        "",
        "| commit | samples | failed runs | min | 5 % | median | 95 % | max |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result.commits:
        q: tuple[float | None, ...] = row.quantiles or (None,) * 7
        cells = " | ".join(_fmt_value(q[i], unit) for i in (0, 1, 3, 5, 6))
        out.append(f"| `{row.commit[:10]}` | {row.samples} | {len(row.failed_runs)} | {cells} |")
    out += [
        "",
        "| candidate | reference | purpose | verdict | rounds | change | 95 % CI |",
        "|---|---|---|---|---:|---:|---|",
    ]
    for c in result.comparisons:
        change = f"{c.change_pct:+.2f} %" if c.change_pct is not None else "–"
        out.append(
            f"| `{c.candidate[:10]}` | `{c.reference[:10]}` | {c.purpose.value} | {c.verdict.value} | "
            f"{c.rounds} | {change} | {_fmt_ci(c.ci_pct)} |"
        )
    return out + ["", "</details>", ""]


def _spent_where_it_decides(result: BisectResult, run_wide: bool = True) -> list[str]:
    """Smaller steps, what was not measured or built and why, time per phase (`run_wide`: with
    the run's builds and time, `run_work`)."""
    out: list[str] = []
    for st in result.smaller_steps:
        change = f"{st.change_pct:+.2f} % {_fmt_ci(st.ci_pct)}" if st.change_pct is not None else "a step"
        size = f"{st.size_p:.2f}" if st.size_p is not None else "unknown"
        out += [
            f"## Smaller step: `{st.commit[:10]}` (not a culprit)",
            "",
            f"- {change} against `{st.compared_with[:10]}`; "
            f"P(at least the minimum change) = {size}, so it is reported, not blamed",
            "",
        ]
    lines = []
    if result.same_artifact:
        lines.append(
            f"- {len(result.same_artifact)} comparison(s) settled by identical artifacts (same binary as an already decided commit), "
            f"about {result.samples_saved_estimate} samples saved (estimate: their count x the mean measured comparison)"
        )
    if run_wide:
        lines += run_work(result, result.commits)
    if result.out_of_time:
        lines.append("- the time budget ran out: see the unresolved range for what more time would settle")
    if result.blocks is not None and result.blocks.reason is BlockReason.CHOSEN:
        # a kept size changes nothing the reader sees; why it was kept stays in the result
        lines.append(f"- {blocks_text(result.blocks)}")
    if lines:
        out += ["## Where the work went", "", *lines, ""]
    return out


def render_markdown(result: BisectResult, plot: str | None = None, figure: str | None = None) -> str:
    """The report. `plot` is where the PNG is (a path relative to the report, or a URL); without
    one the sparkline is the only picture. `figure`, a line of markdown, stands where the plot's
    link would: a tracker's own markdown for an uploaded plot, or the line saying why none is.
    A group (several members) reports its culprits with their members, then each member folded."""
    name = PurePath(result.repo).name or result.repo
    if result.group:
        out = [f"# attrib: {len(result.members)} benchmarks in {name}", "", group_headline(result), ""]
        out += _range_lines(result, plot, figure)
        for i, c in enumerate(result.culprits, 1):
            out += culprit_lines(result, c, i, len(result.culprits))
        out += members_overview(result) + _group_work(result) + member_sections(result, member_lines)
        out += ["## Reproduce", "", "```sh", result.reproduce, "```", ""]
        return "\n".join(out + _environment(result))
    out = [f"# attrib: `{result.benchmark}` in {name}", "", headline(result), ""]
    spark = sparkline(result)
    if spark:
        out += ["```text"] + spark + ["```", ""]
    out += _range_lines(result, plot, figure)
    out += _findings(result)
    out += ["## Reproduce", "", "```sh", result.reproduce, "```", ""]
    out += _environment(result)
    out += _raw_counts(result)
    return "\n".join(out)


def _group_work(result: BisectResult) -> list[str]:
    """The run's builds, time and build failures, said once for the whole group."""
    rows = list({row.commit: row for m in result.members for row in m.commits}.values())
    lines = run_work(result, rows)
    out = ["## Where the work went", "", *lines, ""] if lines else []
    return out + build_failure_lines(result)


def member_lines(result: BisectResult, run_wide: bool = False) -> list[str]:
    """A member's own report inside a group's (a result of one member): what a bisection of it
    alone reports, without the title, the range and the machine the group's report shows once,
    and (unless `run_wide`: an issue folds one member's report, and says them there) without the
    run's builds, time and build failures, which it shows once too."""
    out = [headline(result), ""]
    spark = sparkline(result)
    if spark:
        out += ["```text"] + spark + ["```", ""]
    out += _findings(result, run_wide) + ["```sh", result.reproduce, "```", ""]
    return out + _raw_counts(result, run_wide)


def _range_lines(result: BisectResult, plot: str | None, figure: str | None) -> list[str]:
    out = [
        f"- range: `{result.good[:10]}`..`{result.bad[:10]}` ({result.range_commits} commits), "
        f"whole change {result.total_change_pct:+.2f} % {_fmt_ci(result.total_ci_pct)}, "
        f"{result.direction.value} is better",
        f"- tested: {sum(1 for r in result.commits if r.role is Role.CANDIDATE)} commits, "
        f"{len(result.build_failures)} did not build; {result.builds} builds, {result.samples} samples, "
        f"{result.wall_s:.0f} s",
    ]
    if result.group:  # the whole change above is the lead member's
        out[0] = f"- range: `{result.good[:10]}`..`{result.bad[:10]}` ({result.range_commits} commits)"
    # the noise warning, once, where the reader is (whichever test showed it first)
    out += [f"- {note_text(n)}" for n in result.notes if n.kind is NoteKind.TOO_NOISY][:1]
    for cp in result.detected:  # a job from the nightly history
        out.append(f"- detected in nightly history: `{cp.series}` of {cp.project} changed {cp.change_pct:+.2f} % between "
                   f"`{cp.before[:10]}` and `{cp.after[:10]}` (p = {cp.p_value:.2g}): [series and change point]({cp.url})"
                   + (f"; the environment changed too: {cp.environment}" if cp.environment else ""))  # fmt: skip
    out.append("")
    for cp in result.detected:
        drawn = series_sparkline(cp.series_values, cp.change_at, result.settings.min_change_pct)
        if drawn:
            out += [f"`{cp.series}`, the last {len(cp.series_values)} nights:", "", "```text", *drawn, "```", ""]
    if plot:
        out += [f"![{result.benchmark} per tested commit]({plot})", ""]
    elif figure:
        out += [figure, ""]
    return out


def _findings(result: BisectResult, run_wide: bool = True) -> list[str]:
    """Culprits, open ranges, where the work went, notes, the tested commits and (`run_wide`)
    the build failures."""
    unit = result.unit
    out: list[str] = []
    for i, c in enumerate(result.culprits, 1):
        out += _culprit_section(c, i, len(result.culprits), result.status, result.settings)
    for u in result.unresolved:
        out += [
            f"## Unresolved: `{u.last_good[:10]}`..`{u.first_bad[:10]}` ({len(u.commits)} commits)",
            "",
            f"- the change is in this range: {_sha_list(u.commits)}",
            f"- why it is not pinned down: {why_text(u, result.settings)}",
            f"- what would resolve it: {resolve_text(u, result.settings)}",
            "",
        ]
    out += _spent_where_it_decides(result, run_wide)
    notes = [n for n in result.notes if n.kind is not NoteKind.TOO_NOISY]  # said under the headline
    if notes:
        out += ["## Notes", ""] + [f"- {note_text(n)}" for n in notes] + [""]
    culprit_shas = {c.commit for c in result.culprits}
    out += [
        "## Tested commits",
        "",
        "| commit | subject | verdict | vs | samples | median |",
        "|---|---|---|---|---:|---:|",
    ]
    for row in result.commits:
        vs = f"`{row.reference[:10]}`" if row.reference else ""
        verdict = row.verdict.value
        if row.role is not Role.CANDIDATE:
            verdict = f"{verdict} ({row.role.value} ref)"
        if row.commit in culprit_shas:
            verdict = f"**{verdict}, culprit**"
        twin = result.same_artifact.get(row.commit)
        if twin:
            verdict = f"{verdict}, same binary as `{twin[:10]}`"
        out.append(
            f"| `{row.commit[:10]}` | {_cell(row.subject)} | {verdict} | {vs} | {row.samples} | "
            f"{_fmt_value(row.median, unit)} |"
        )
    out.append("")
    return out + (build_failure_lines(result) if run_wide else [])



_COMPARE_VERDICT = {
    Verdict.BAD: "worse",
    Verdict.GOOD: "not worse",
    Verdict.INCONCLUSIVE: "undecided at the round cap, or before it once the rounds left could not decide",
    Verdict.SKIP: "not measured",
}


def compare_line(result: CompareResult, candidate: str, reference: str) -> str:
    """One line, as `attrib compare` prints it, naming the revisions as the user gave them."""
    c = result.comparison
    ci = list(c.ci_pct) if c.ci_pct is not None else None
    return f"{c.verdict.value}: {candidate} vs {reference}: {c.change_pct} % CI {ci} after {c.rounds} rounds {c.reason}".rstrip()


def render_compare(result: CompareResult) -> str:
    """The report of one `attrib compare`: the verdict, the change and the test behind it."""
    c = result.comparison
    change = f"**{c.change_pct:+.2f} %** {_fmt_ci(c.ci_pct)}" if c.change_pct is not None else "n/a"
    out = [
        f"# attrib compare: `{result.benchmark}`",
        "",
        f"**{c.verdict.value}**: `{c.candidate[:10]}` vs `{c.reference[:10]}`: {_COMPARE_VERDICT[c.verdict]}, {change}",
        "",
        f"- candidate: `{c.candidate}`",
        f"- reference: `{c.reference}`",
        f"- {c.rounds} rounds, log-likelihood ratio {c.llr:+.2f}, sigma {c.sigma:.4g}",
    ]
    if c.reason:
        out.append(f"- why: {_cell(c.reason)}")
    return "\n".join(out + [""] + where_it_ran(result.environment))


def render(result: Result) -> str:
    """The markdown of any result attrib writes."""
    return render_markdown(result) if isinstance(result, BisectResult) else render_compare(result)


def write_report(result: Result, path: Path) -> Path | None:
    """The report at `path` and, when matplotlib is installed, a bisection's plot next to it
    (same name, .png), linked from the report. Returns the plot's path, or None (text only)."""
    if isinstance(result, CompareResult):
        atomic_write_text(path, render_compare(result))
        return None
    plot = render_plot(result, path.with_suffix(".png")) if plot_available() else None
    atomic_write_text(path, render_markdown(result, plot=plot.name if plot else None))
    return plot
