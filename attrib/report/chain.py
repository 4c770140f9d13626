"""The chain of a culprit that rolls a dependency: the roll in the superproject -> the commit in
the dependency (-> the commit in a dependency of it ...), each level with its change, CI and a
reproduce command. Read from the result's `CulpritRecord.rolls` (result/types.RollRecord)."""

from __future__ import annotations

from attrib.core.model import RollRelation, Status
from attrib.result.types import CulpritRecord, RollRecord

_RELATION = {
    RollRelation.BACKWARD: "moves the pin backwards",
    RollRelation.DIVERGED: "moves the pin sideways",
    RollRelation.UNRELATED: "moves the pin to an unrelated history",
    RollRelation.UNAVAILABLE: "could not be searched",
}


def _ci(ci: tuple[float, float] | None) -> str:
    return f"[{ci[0]:+.2f} %, {ci[1]:+.2f} %]" if ci else "[n/a]"


def _roll_span(r: RollRecord) -> str:
    return f"`{r.path}` `{r.old[:10]}`..`{r.new[:10]}`"


def chain_text(c: CulpritRecord) -> str:
    """' -> inside the roll of `path` ...: "subject" (`sha`) +x % [ci]', each level down, or ''."""
    out = ""
    here = c
    while True:
        found = [r for r in here.rolls if r.culprits]
        if not found:
            break
        r = found[0]
        inner = r.culprits[0]
        what = "the commit" if r.status in (Status.CULPRIT_FOUND, Status.PARTIAL) else "best candidate"
        amb = f" or one of {len(inner.ambiguous_with)} untestable before it" if inner.ambiguous_with else ""
        out += (
            f' -> {what} inside the roll of {_roll_span(r)}: "{inner.subject}" (`{inner.commit[:10]}`{amb}) '
            f"**{inner.change_pct:+.1f} %** {_ci(inner.ci_pct)}"
        )
        here = inner
    return out


def innermost(c: CulpritRecord) -> tuple[str, CulpritRecord] | None:
    """(the dependency's path, its commit) at the end of the chain, or None without one."""
    found: tuple[str, CulpritRecord] | None = None
    here = c
    while r := next((r for r in here.rolls if r.culprits), None):
        found, here = (r.path, r.culprits[0]), r.culprits[0]
    return found


def rolls_section(c: CulpritRecord, depth: int = 0) -> list[str]:
    """A section per dependency the culprit rolls: what the search inside it found."""
    out: list[str] = []
    for r in c.rolls:
        out += [f"### {'Inside ' * (depth + 1)}the roll of `{r.path}` in `{c.commit[:10]}`", ""]
        out.append(f"- dependency: `{r.path}` from {r.url or '(no url)'}, pin `{r.old[:10]}` -> `{r.new[:10]}`")
        if r.status is None:
            out += [f"- not searched: the roll {_RELATION.get(r.relation, r.relation.value)}: {r.why}", ""]
            continue
        out.append(
            f"- searched with the superproject at the roll's parent: {r.range_commits} commits (first parent), "
            f"the new pin against the old {r.total_change_pct:+.2f} % {_ci(r.total_ci_pct)}, "
            f"{r.builds} builds, {r.samples} samples: {r.status.value.replace('_', ' ')}"
            if r.total_change_pct is not None
            else f"- searched: {r.status.value.replace('_', ' ')}"
        )
        for inner in r.culprits:
            amb = ", ".join(f"`{s[:10]}`" for s in inner.ambiguous_with)
            out += [
                f'- {"culprit" if r.status in (Status.CULPRIT_FOUND, Status.PARTIAL) else "best candidate"}: `{inner.commit[:10]}` '
                f'"{inner.subject}" by {inner.author} <{inner.author_email}>, **{inner.change_pct:+.2f} %** '
                f"{_ci(inner.ci_pct)}, confirmed against `{inner.compared_with[:10]}`: "
                f"{'yes' if inner.confirmed else 'no'} ({inner.confirmation.rounds} rounds)"
                + (f"; ambiguous with the untestable {amb}" if amb else ""),
            ]
        for u in r.unresolved:
            out.append(f"- open range in the dependency: `{u.last_good[:10]}`..`{u.first_bad[:10]}` ({len(u.commits)} commits)")
        for f in r.build_failures:
            out.append(f"- did not build with the superproject at the roll's parent: `{f.commit[:10]}` {f.subject}: {f.reason}")
        out += ["", "Reproduce (bisects the roll, which descends into the dependency again):", "", "```sh", r.reproduce, "```", ""]
        for inner in r.culprits:
            out += rolls_section(inner, depth + 1)
    return out
