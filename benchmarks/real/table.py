"""Print the markdown tables of benchmarks/REAL.md from benchmarks/real/results/<clock>/*.json.

.venv/bin/python benchmarks/real/table.py [RESULTS_DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def short(shas: list[str] | None) -> str:
    return ", ".join(f"`{s[:10]}`" for s in shas or []) or "none"


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1f} %"


def ci(c: list[float] | None) -> str:
    return "n/a" if not c else f"[{c[0]:+.1f}, {c[1]:+.1f}] %"


def rows(doc: dict) -> list[str]:
    a, g = doc.get("attrib", {}), doc.get("git_bisect", {})
    load = doc.get("loadavg", {})
    out = []
    if a:
        cul = (
            "; ".join(
                f"`{c['commit'][:10]}` {pct(c.get('change_pct'))} CI {ci(c.get('ci_pct'))} posterior "
                f"{'n/a' if c.get('posterior') is None else format(c['posterior'], '.3f')}"
                + (f" via merge `{c['via_merge'][:10]}`" if c.get("via_merge") else "")
                for c in a.get("culprits", [])
            )
            or "none"
        )
        status = a.get("status", a.get("error", "?"))
        pre = a.get("preflight") or {}
        out.append(
            f"| {doc['case']} | attrib | {status} | {'yes' if a.get('right') else 'NO'} | {short(a.get('innocent'))} | {a.get('builds')} "
            f"| {a.get('samples')} | {a.get('wall_s')} | {cul}; whole {pct(a.get('total_change_pct'))} CI {ci(a.get('total_ci_pct'))}; "
            f"same binary {a.get('same_binary')}; smaller steps {len(a.get('smaller_steps') or [])}; "
            f"preflight {pre.get('verdict')} in {pre.get('rounds')} rounds, per-round noise {100 * (pre.get('sigma') or 0):.1f} % "
            f"| {load.get('start')} / {load.get('after_attrib')} |"
        )
    if g:
        skips = f"; {g.get('skips')} skipped" if g.get("skips") else ""
        note = (
            g.get("error")
            or f"good {g.get('good_ms', 0):.2f} ms, bad {g.get('bad_ms', 0):.2f} ms ({pct(g.get('change_pct'))}), threshold {g.get('threshold_ms', 0):.2f} ms{skips}"
        )
        out.append(
            f"| {doc['case']} | git bisect | {'named ' + short(g.get('named')) if g.get('named') else 'none'} | {'yes' if g.get('right') else 'NO'} "
            f"| {short(g.get('innocent'))} | {g.get('builds')} | {g.get('samples')} | {g.get('wall_s')} | {note} "
            f"| {load.get('after_attrib', load.get('start'))} / {load.get('end')} |"
        )
    return out


def main() -> int:
    base = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results"
    for clock_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        print(f"\n### clock: {clock_dir.name}\n")
        print(
            "| case | tool | outcome | right culprit | innocent named | builds | samples | wall s | what the report said | loadavg (1/5/15 min) before / after |"
        )
        print("|---|---|---|---|---|---:|---:|---:|---|---|")
        for f in sorted(clock_dir.glob("*.json")):
            for r in rows(json.loads(f.read_text())):
                print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
