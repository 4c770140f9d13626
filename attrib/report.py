"""Markdown from a result document (never from live objects), so a stored result re-renders."""

from __future__ import annotations

from typing import Any

LOG_EXCERPT_LINES = 12


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
        change = f"{rv['bad_vs_reverted_pct']:+.2f} % {_fmt_ci(rv['ci_pct'])}" if rv["bad_vs_reverted_pct"] is not None else "n/a"
        verdict = {
            "recovered": "the regression goes away when this commit is reverted",
            "not_recovered": "reverting this commit does NOT remove the regression",
            "inconclusive": "undecided at the cap",
        }[rv["status"]]
        return f"{verdict}: bad vs bad-with-revert ({ref}) {change} over {rv['rounds']} rounds"
    return {"conflict": "skipped: the revert conflicts", "build_failed": "skipped: the reverted tree does not build"}.get(
        rv["status"], "skipped"
    ) + (f" ({rv['detail']})" if rv.get("detail") else "")


def _executor_line(ex: dict[str, Any]) -> str:
    if ex.get("name") == "docker":
        digest = (ex.get("digests") or [None])[0]
        gpus = "with GPUs" if ex.get("gpus") else "without GPUs"
        return f"- executor: docker, image `{ex.get('image')}` id `{ex.get('image_id')}`" + (
            f" digest `{digest}`" if digest else ""
        ) + f", benchmarks ran {gpus}"
    return f"- executor: {ex.get('name', 'local')}"


def headline(result: dict[str, Any]) -> str:
    status, bench = result["status"], result["benchmark"]
    culprits = result["culprits"]
    if status == "culprit_found" or (status == "inconclusive" and culprits):
        parts = []
        for c in culprits:
            amb = f" (or one of {len(c['ambiguous_with'])} untestable commits before it)" if c["ambiguous_with"] else ""
            parts.append(f"{c['commit'][:10]} \"{c['subject']}\" by {c['author']}, {c['change_pct']:+.1f} % {_fmt_ci(c['ci_pct'])}{amb}")
        prefix = "Culprit found" if len(culprits) == 1 else f"{len(culprits)} culprits found"
        if status == "inconclusive":
            prefix = "Inconclusive; best candidates"
        return f"**{prefix}** for `{bench}`: " + "; ".join(parts)
    rng = f"{result['good'][:10]}..{result['bad'][:10]}"
    if status == "not_reproduced":
        return (
            f"**Not reproduced**: `{bench}` at {result['bad'][:10]} is not worse than at {result['good'][:10]} "
            f"by {result['settings']['min_change_pct']} % or more (measured {result['total_change_pct']:+.2f} % "
            f"{_fmt_ci(result['total_ci_pct'])}); no commit is named."
        )
    if status == "inconclusive":
        return f"**Inconclusive** for `{bench}` in {rng}: the change could not be pinned down (see notes)."
    return f"**Error** while bisecting `{bench}` in {rng}: {result.get('error', 'see notes')}"


def render_markdown(result: dict[str, Any]) -> str:
    unit = result["unit"]
    out: list[str] = [f"# attrib: {result['benchmark']} in {result['repo']}", "", headline(result), ""]
    out += [
        f"- range: `{result['good']}`..`{result['bad']}` ({result['range_commits']} commits), "
        f"total change {result['total_change_pct']:+.2f} % {_fmt_ci(result['total_ci_pct'])} "
        f"({'lower' if result['direction'] == 'lower' else 'higher'} is better)",
        f"- cost: {result['builds']} builds ({result['builds_fresh']} fresh), {result['samples']} samples, "
        f"{result.get('rounds', 0)} rounds, {result['wall_s']:.1f} s",
    ]
    for d in result.get("drift", []):
        out.append(
            f"- drift: the {d['role']} reference `{d['commit'][:10]}` moved {d['change_pct']:+.2f} % between its first "
            f"and last blocks ({d['blocks']} blocks); every comparison is paired within a round, so this cancels"
        )
    excluded = result.get("excluded_samples") or {}
    if excluded:
        reasons = ", ".join(f"{why}: {n}" for why, n in sorted(excluded.items(), key=lambda kv: -kv[1]))
        out.append(f"- excluded samples: {sum(excluded.values())} flagged as disturbed by the benchmark ({reasons})")
    out.append("")
    for u in result.get("unresolved", []):
        out += [
            f"## Unresolved: `{u['last_good'][:10]}`..`{u['first_bad'][:10]}` ({len(u['commits'])} commits)",
            "",
            f"- the change is in this range: {', '.join(f'`{c[:10]}`' for c in u['commits'])}",
            f"- why it is not pinned down: {u['why']}",
            f"- what would resolve it: {u['resolve']}",
            "",
        ]
    for c in result["culprits"]:
        out += [f"## Culprit `{c['commit'][:10]}`: {c['subject']}", ""]
        out += [
            f"- commit: `{c['commit']}`",
            f"- author: {c['author']} <{c['author_email']}>, {c['date']}",
            f"- change: **{c['change_pct']:+.2f} %** (95 % CI {_fmt_ci(c['ci_pct'])})"
            + (f", {c['share'] * 100:.0f} % of the total change" if c.get("share") is not None else ""),
            f"- confirmed by a paired comparison against `{c['compared_with'][:10]}`: "
            f"{'yes' if c['confirmed'] else 'no'} ({c['confirmation']['rounds']} rounds, verdict {c['confirmation']['verdict']})",
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
        if c["files"]:
            out.append("- files: " + ", ".join(f"`{f}`" for f in c["files"][:20]))
        out += ["", "Reproduce the comparison:", "", "```sh", c["reproduce"], "```", ""]
    if result["notes"]:
        out += ["## Notes", ""] + [f"- {n}" for n in result["notes"]] + [""]
    out += ["## Tested commits", "", "| commit | subject | verdict | vs | samples | median |", "|---|---|---|---|---|---|"]
    for row in result["commits"]:
        vs = f"`{row['reference'][:10]}`" if row["reference"] else ""
        verdict = row["verdict"]
        if row["role"] != "candidate":
            verdict = f"{verdict} ({row['role']} ref)"
        subject = row["subject"].replace("|", "\\|")
        out.append(
            f"| `{row['commit'][:10]}` | {subject} | {verdict} | {vs} | {row['samples']} | {_fmt_value(row['median'], unit)} |"
        )
    out.append("")
    if result["build_failures"]:
        out += ["## Build failures", ""]
        for f in result["build_failures"]:
            tail = "\n".join(f["log_tail"].splitlines()[-LOG_EXCERPT_LINES:])
            out += [f"- `{f['commit'][:10]}` {f['subject']}: {f['reason']}", "", "```", tail, "```", ""]
    out += ["## Reproduce", "", "```sh", result["reproduce"], "```", ""]
    s, m = result["settings"], result["machine"]
    out += [
        "<details><summary>Settings, environment and raw counts</summary>",
        "",
        f"- attrib {result['tool']['version']}, recipe `{result['recipe']['path']}` (sha256 {result['recipe']['sha256'][:12]})",
        f"- alpha {s['alpha']}, beta {s['beta']}, rounds {s['min_rounds']}..{s['max_rounds']}, "
        f"minimum change {s['min_change_pct']} %, {s['reps']} samples per run, seed {s['seed']}, executor {s['executor']}",
        f"- machine: {m['cpu']} ({m['cpus']} CPUs), {m['platform']}, Python {m['python']}",
        _executor_line(result.get("executor") or {"name": s["executor"]}),
        "",
        "| candidate | reference | purpose | verdict | rounds | change | 95 % CI |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in result["comparisons"]:
        change = f"{c['change_pct']:+.2f} %" if c["change_pct"] is not None else "–"
        out.append(
            f"| `{c['candidate'][:10]}` | `{c['reference'][:10]}` | {c['purpose']} | {c['verdict']} | "
            f"{c['rounds']} | {change} | {_fmt_ci(c['ci_pct'])} |"
        )
    out += ["", "</details>", ""]
    return "\n".join(out)
