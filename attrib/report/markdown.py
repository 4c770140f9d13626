"""Markdown from a result document (never from live objects), so a stored result re-renders.

The first screen is what an engineer reads in the tracker: the headline, a sparkline, the
range, and per culprit who/what/how much. Everything needed to check or reproduce it follows
below, and the raw counts sit in a collapsed <details> block.
"""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import Any

from attrib.fsutil import atomic_write_text
from attrib.report.plot import plot_available, render_plot, sparkline

LOG_EXCERPT_LINES = 12
MAX_FILES_SHOWN = 20


def _fmt_ci(ci: list[float] | None) -> str:
    return f"[{ci[0]:+.2f} %, {ci[1]:+.2f} %]" if ci else "n/a"


def _fmt_value(v: float | None, unit: str) -> str:
    if v is None:
        return "–"
    if unit == "s":
        for scale, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
            if abs(v) >= scale:
                return f"{v / scale:.4g} {name}"
    return f"{v:.4g} {unit}"


def _revert_text(rv: dict[str, Any]) -> str:
    ref = f"`{rv['reverted_commit'][:10]}`" if rv.get("reverted_commit") else "the revert"
    if rv["status"] in ("recovered", "not_recovered", "inconclusive"):
        change = (
            f"{rv['bad_vs_reverted_pct']:+.2f} % {_fmt_ci(rv['ci_pct'])}"
            if rv["bad_vs_reverted_pct"] is not None
            else "n/a"
        )
        verdict = {
            "recovered": "the regression goes away when this commit is reverted",
            "not_recovered": "reverting this commit does NOT remove the regression",
            "inconclusive": "undecided at the cap",
        }[rv["status"]]
        return f"{verdict}: bad vs bad-with-revert ({ref}) {change} over {rv['rounds']} rounds"
    return {
        "conflict": "skipped: the revert conflicts",
        "build_failed": "skipped: the reverted tree does not build",
    }.get(rv["status"], "skipped") + (f" ({rv['detail']})" if rv.get("detail") else "")


def _executor_line(ex: dict[str, Any]) -> str:
    if ex.get("name") == "docker":
        digest = (ex.get("digests") or [None])[0]
        gpus = "with GPUs" if ex.get("gpus") else "without GPUs"
        return (
            f"- executor: docker, image `{ex.get('image')}` id `{ex.get('image_id')}`"
            + (f" digest `{digest}`" if digest else "")
            + f", benchmarks ran {gpus}"
        )
    return f"- executor: {ex.get('name', 'local')}"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _sha_list(shas: list[str], limit: int = 12) -> str:
    more = f" and {len(shas) - limit} more" if len(shas) > limit else ""
    return ", ".join(f"`{s[:10]}`" for s in shas[:limit]) + more


def _culprit_phrase(c: dict[str, Any]) -> str:
    amb = f" (or one of {len(c['ambiguous_with'])} untestable commits before it)" if c["ambiguous_with"] else ""
    return f'"{c["subject"]}" by {c["author"]}, **{c["change_pct"]:+.1f} %** {_fmt_ci(c["ci_pct"])} (`{c["commit"][:10]}`){amb}'


def headline(result: dict[str, Any]) -> str:
    """One line that says what happened."""
    status, bench = result["status"], result["benchmark"]
    culprits = result["culprits"]
    if status == "culprit_found" and len(culprits) == 1:
        c = culprits[0]
        amb = f" (or one of {len(c['ambiguous_with'])} untestable commits before it)" if c["ambiguous_with"] else ""
        return (
            f'**Culprit found** in "{c["subject"]}" by {c["author"]}: **{c["change_pct"]:+.1f} %** '
            f"{_fmt_ci(c['ci_pct'])} on `{bench}` (`{c['commit'][:10]}`){amb}"
        )
    if status == "culprit_found":
        return (
            f"**{len(culprits)} culprits found** on `{bench}` (together {result['total_change_pct']:+.1f} %): "
            + "; ".join(_culprit_phrase(c) for c in culprits)
        )
    if status == "not_reproduced":
        return (
            f"**Not reproduced**: `{bench}` at `{result['bad'][:10]}` is not worse than at `{result['good'][:10]}` "
            f"by {result['settings']['min_change_pct']} % or more (measured {result['total_change_pct']:+.2f} % "
            f"{_fmt_ci(result['total_ci_pct'])}); no commit is named."
        )
    if status == "inconclusive":
        unresolved = result.get("unresolved") or []
        if unresolved:
            u = unresolved[0]
            where = f"the change is in `{u['last_good'][:10]}`..`{u['first_bad'][:10]}` ({len(u['commits'])} commits)"
            if len(unresolved) > 1:
                where += f" and {len(unresolved) - 1} more range(s)"
        else:
            where = f"the change is somewhere in `{result['good'][:10]}`..`{result['bad'][:10]}`"
        best = f"; best candidates: {'; '.join(_culprit_phrase(c) for c in culprits)}" if culprits else ""
        return f"**Inconclusive** on `{bench}` ({result['total_change_pct']:+.1f} % overall): {where}{best}"
    rng = f"{result['good'][:10]}..{result['bad'][:10]}"
    return f"**Error** while bisecting `{bench}` in {rng}: {result.get('error', 'see notes')}"


def title(result: dict[str, Any], culprit: dict[str, Any] | None = None) -> str:
    """A tracker issue title: short, and unique enough to scan a list of them."""
    bench = result["benchmark"]
    if culprit is not None:
        return f'{bench}: {culprit["change_pct"]:+.1f} % from {culprit["commit"][:10]} "{culprit["subject"]}"'
    return f"{bench}: {result['status'].replace('_', ' ')} in {result['good'][:10]}..{result['bad'][:10]}"


def _static_diff(diff: dict[str, Any]) -> list[str]:
    """Static kernel metrics (registers, spills, ...) before -> after, as the runner reported them."""
    out = ["| kernel metric | before | after | change |", "|---|---:|---:|---:|"]
    for metric, pair in diff.items():
        if isinstance(pair, list | tuple) and len(pair) == 2:
            before, after = pair
            change = ""
            if isinstance(before, int | float) and isinstance(after, int | float) and not isinstance(before, bool):
                delta = after - before
                change = f"{delta:+g}" + (f" ({delta / before * 100:+.0f} %)" if before else "")
            out.append(f"| {_cell(metric)} | {_cell(before)} | {_cell(after)} | {change} |")
        else:
            out.append(f"| {_cell(metric)} | | {_cell(pair)} | |")
    return out


def _culprit_section(c: dict[str, Any], index: int, total: int, status: str) -> list[str]:
    n = f" {index} of {total}" if total > 1 else ""
    # An inconclusive outcome's culprits are the best candidates, not a claim.
    what = "Culprit" if status == "culprit_found" else "Best candidate"
    out = [f"## {what}{n}: `{c['commit'][:10]}` {c['subject']}", ""]
    out += [
        f"- commit: `{c['commit']}`",
        f"- author: {c['author']} <{c['author_email']}>, {c['date']}",
        f"- change: **{c['change_pct']:+.2f} %** (95 % CI {_fmt_ci(c['ci_pct'])})"
        + (f", {c['share'] * 100:.0f} % of the whole regression" if c.get("share") is not None else ""),
        f"- confirmation: culprit vs `{c['compared_with'][:10]}` measured again, paired: "
        f"{'confirmed' if c['confirmed'] else 'NOT confirmed'} (verdict {c['confirmation']['verdict']}, "
        f"{c['confirmation']['rounds']} rounds)",
    ]
    if c.get("posterior") is not None:
        line = f"- confidence: posterior probability {c['posterior']:.3f} that this exact commit is the change"
        if c["ambiguous_with"]:
            line += f" ({c['range_posterior']:.3f} that it is this commit or one of the untestable ones before it)"
        out.append(line)
    rv = c.get("revert")
    if rv:
        out.append("- revert check: " + _revert_text(rv))
    if c.get("via_merge"):
        out.append(f"- brought in by the merge `{c['via_merge'][:10]}`")
    if c["ambiguous_with"]:
        amb = ", ".join(f"`{s[:10]}`" for s in c["ambiguous_with"])
        out.append(f"- ambiguous: these untestable commits just before it could also be the cause: {amb}")
    files = c.get("files") or []
    if files:
        more = f" and {len(files) - MAX_FILES_SHOWN} more" if len(files) > MAX_FILES_SHOWN else ""
        out.append(f"- files changed ({len(files)}): " + ", ".join(f"`{f}`" for f in files[:MAX_FILES_SHOWN]) + more)
    if c.get("static_diff"):
        out += ["", "Static kernel diff:", ""] + _static_diff(c["static_diff"])
    elif c.get("static_diff") == {}:
        out.append("- static kernel metrics (registers, spills, shared memory, binary size): unchanged")
    elif c.get("static_diff_unavailable"):
        out.append(f"- static kernel diff: unavailable ({_cell(c['static_diff_unavailable'])})")
    out += ["", "Reproduce this comparison:", "", "```sh", c["reproduce"], "```", ""]
    return out


def _gpu_lines(gpu: Any) -> list[str]:
    """environment.gpu as the GPU layer records it: one object, or a list of them."""
    gpus = gpu if isinstance(gpu, list) else [gpu]
    known = ("name", "driver", "cuda", "clocks")
    out = []
    for g in gpus:
        if not isinstance(g, dict):
            out.append(f"- GPU: {g}")
            continue
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


def _environment(result: dict[str, Any]) -> list[str]:
    m, s = result["machine"], result["settings"]
    out = [
        "## Environment",
        "",
        f"- attrib {result['tool']['version']}, recipe `{result['recipe']['name']}` "
        f"(`{result['recipe']['path']}`, sha256 {result['recipe']['sha256'][:12]})",
        f"- machine: {m['hostname']}, {m['cpu']} ({m['cpus']} CPUs), {m['platform']}, Python {m['python']}",
    ]
    env = result.get("environment") or {}
    if env.get("gpu"):
        out += _gpu_lines(env["gpu"])
    else:
        out.append("- GPU: none recorded")
    out.append(_executor_line(result.get("executor") or {"name": s["executor"]}))
    for key, value in env.items():
        if key != "gpu" and value not in (None, "", [], {}):
            out.append(f"- {key}: {value}")
    return out + [""]


def _raw_counts(result: dict[str, Any]) -> list[str]:
    unit = result["unit"]
    s = result["settings"]
    out = [
        "<details><summary>Raw samples, comparisons and settings</summary>",
        "",
        f"- alpha {s['alpha']}, beta {s['beta']}, rounds {s['min_rounds']}..{s['max_rounds']}, "
        f"minimum change {s['min_change_pct']} %, {s['reps']} samples per run, seed {s['seed']}, "
        f"executor {s['executor']}, jobs {s.get('jobs', 1)}, verify {s.get('verify', 'confirm')}",
        f"- {result['samples']} samples in {result.get('rounds', 0)} rounds, {result['builds']} builds "
        f"({result['builds_fresh']} fresh, {result['builds_cached']} from the cache), {result['wall_s']:.1f} s",
    ]
    for d in result.get("drift", []):
        out.append(
            f"- drift: the {d['role']} reference `{d['commit'][:10]}` moved {d['change_pct']:+.2f} % between its first "
            f"and last blocks ({d['blocks']} blocks); every comparison is paired within a round, so this cancels"
        )
    excluded = result.get("excluded_samples") or {}
    if excluded:
        reasons = ", ".join(f"{why}: {n}" for why, n in sorted(excluded.items(), key=lambda kv: -kv[1]))
        out.append(f"- excluded samples: {sum(excluded.values())}, by reason: {reasons} (flagged by the benchmark, or blocks the cupy runner saw run below the throttle clock)")
    out += [
        "",
        "| commit | samples | failed runs | min | 5 % | median | 95 % | max |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["commits"]:
        q = row.get("quantiles") or [None] * 7
        cells = " | ".join(_fmt_value(q[i], unit) for i in (0, 1, 3, 5, 6))
        out.append(f"| `{row['commit'][:10]}` | {row['samples']} | {len(row.get('failed_runs') or [])} | {cells} |")
    out += [
        "",
        "| candidate | reference | purpose | verdict | rounds | change | 95 % CI |",
        "|---|---|---|---|---:|---:|---|",
    ]
    for c in result["comparisons"]:
        change = f"{c['change_pct']:+.2f} %" if c["change_pct"] is not None else "–"
        out.append(
            f"| `{c['candidate'][:10]}` | `{c['reference'][:10]}` | {c['purpose']} | {c['verdict']} | "
            f"{c['rounds']} | {change} | {_fmt_ci(c['ci_pct'])} |"
        )
    return out + ["", "</details>", ""]


def _spent_where_it_decides(result: dict[str, Any]) -> list[str]:
    """Issue 12's lines: smaller steps, what was not measured or built and why, time per phase."""
    out: list[str] = []
    for st in result.get("smaller_steps", []):
        out += [
            f"## Smaller step: `{st['commit'][:10]}` (not a culprit)",
            "",
            f"- {st['change_pct']:+.2f} % {_fmt_ci(st['ci_pct'])} against `{st['compared_with'][:10]}`; "
            f"P(at least the minimum change) = {st['size_p']:.2f}, so it is reported, not blamed",
            "",
        ]
    lines = []
    same = result.get("same_artifact", {})
    if same:
        lines.append(
            f"- {len(same)} comparison(s) settled by identical artifacts (same binary as an already decided commit), "
            f"about {result.get('samples_saved_estimate', 0)} samples saved (estimate: their count x the mean measured comparison)"
        )
    if result.get("untouched"):
        lines.append(f"- not built: {len(result['untouched'])} commit(s) touch none of the recipe's [search] paths")
    for n in result.get("artifact_notes", []):
        lines.append(
            f"- artifacts of `{n['a'][:10]}` and `{n['b'][:10]}` differ only by an embedded {' and '.join(n['traps'])}: "
            "they were measured as different builds; a reproducible build (docs/recipes.md) would have saved that"
        )
    t = result.get("phase_times_s")
    if t:
        lines.append(
            f"- wall time: build {t['build']:.1f} s, measure {t['measure']:.1f} s, attrib's own {t['decide']:.2f} s "
            f"({t['decide_per_comparison']:.3f} s per comparison)"
        )
    if result.get("out_of_time"):
        lines.append("- the time budget ran out: see the unresolved range for what more time would settle")
    if lines:
        out += ["## Where the work went", "", *lines, ""]
    return out


def render_markdown(result: dict[str, Any], plot: str | None = None, figure: str | None = None) -> str:
    """The report. `plot` is where the PNG is (a path relative to the report, or a URL); without
    one the sparkline is the only picture. `figure`, a line of markdown, stands where the plot's
    link would: a tracker's own markdown for an uploaded plot, or the line saying why none is."""
    unit = result["unit"]
    name = PurePath(result["repo"]).name or result["repo"]
    out: list[str] = [f"# attrib: `{result['benchmark']}` in {name}", "", headline(result), ""]
    spark = sparkline(result)
    if spark:
        out += ["```text"] + spark + ["```", ""]
    out += [
        f"- range: `{result['good'][:10]}`..`{result['bad'][:10]}` ({result['range_commits']} commits), "
        f"whole change {result['total_change_pct']:+.2f} % {_fmt_ci(result['total_ci_pct'])}, "
        f"{'lower' if result['direction'] == 'lower' else 'higher'} is better",
        f"- tested: {sum(1 for r in result['commits'] if r['role'] == 'candidate')} commits, "
        f"{len(result['build_failures'])} did not build; {result['builds']} builds, {result['samples']} samples, "
        f"{result['wall_s']:.0f} s",
    ]
    out.append("")
    if plot:
        out += [f"![{result['benchmark']} per tested commit]({plot})", ""]
    elif figure:
        out += [figure, ""]
    for i, c in enumerate(result["culprits"], 1):
        out += _culprit_section(c, i, len(result["culprits"]), result["status"])
    for u in result.get("unresolved", []):
        out += [
            f"## Unresolved: `{u['last_good'][:10]}`..`{u['first_bad'][:10]}` ({len(u['commits'])} commits)",
            "",
            f"- the change is in this range: {_sha_list(u['commits'])}",
            f"- why it is not pinned down: {u['why']}",
            f"- what would resolve it: {u['resolve']}",
            "",
        ]
    out += _spent_where_it_decides(result)
    if result["notes"]:
        out += ["## Notes", ""] + [f"- {n}" for n in result["notes"]] + [""]
    culprit_shas = {c["commit"] for c in result["culprits"]}
    out += [
        "## Tested commits",
        "",
        "| commit | subject | verdict | vs | samples | median |",
        "|---|---|---|---|---:|---:|",
    ]
    for row in result["commits"]:
        vs = f"`{row['reference'][:10]}`" if row["reference"] else ""
        verdict = row["verdict"]
        if row["role"] != "candidate":
            verdict = f"{verdict} ({row['role']} ref)"
        if row["commit"] in culprit_shas:
            verdict = f"**{verdict}, culprit**"
        twin = result.get("same_artifact", {}).get(row["commit"])  # issue 12
        if twin:
            verdict = f"{verdict}, same binary as `{twin[:10]}`"
        out.append(
            f"| `{row['commit'][:10]}` | {_cell(row['subject'])} | {verdict} | {vs} | {row['samples']} | "
            f"{_fmt_value(row['median'], unit)} |"
        )
    out.append("")
    if result["build_failures"]:
        out += ["## Build failures", ""]
        for f in result["build_failures"]:
            tail = "\n".join(f["log_tail"].splitlines()[-LOG_EXCERPT_LINES:]) or "(empty log)"
            out += [f"- `{f['commit'][:10]}` {f['subject']}: {f['reason']}", "", "```text", tail, "```", ""]
    out += ["## Reproduce", "", "```sh", result["reproduce"], "```", ""]
    out += _environment(result)
    out += _raw_counts(result)
    return "\n".join(out)


def write_report(result: dict[str, Any], path: Path) -> Path | None:
    """The report at `path` and, when matplotlib is installed, its plot next to it (same name,
    .png), linked from the report. Returns the plot's path, or None (text only)."""
    plot = render_plot(result, path.with_suffix(".png")) if plot_available() else None
    atomic_write_text(path, render_markdown(result, plot=plot.name if plot else None))
    return plot
