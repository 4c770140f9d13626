"""The result: a versioned JSON document built from an engine outcome. Reports render from it.

Fields named in docs/result-schema.md are stable: new ones may be added, none renamed.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import math
import os
import platform
import shlex
import statistics
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attrib import __version__
from attrib.bisection import Outcome, RevertCheck, Unresolved
from attrib.core.model import Direction, Verdict
from attrib.core.stats import TestConfig, to_pct
from attrib.evaluate.evaluation import Comparison
from attrib.recipe import BenchmarkSpec, Recipe
from attrib.report.sentences import unresolved_text

RESULT_SCHEMA = 1
# Per tested commit the result keeps a bounded picture of its samples for the report's plot:
# fixed quantiles, and at most this many values (the samples' own quantiles at evenly spaced
# probabilities when there are more, so the shape survives and a long run stays small).
QUANTILE_PROBS = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)
MAX_SAMPLE_VALUES = 64


@dataclass(frozen=True)
class RunContext:
    """What the outcome alone does not know: how the run was asked for and where it ran."""

    repo: Path
    recipe: Recipe
    bench: BenchmarkSpec
    executor: str
    config: TestConfig
    seed: int
    workdir: Path
    wall_s: float
    builds_fresh: int
    jobs: int = 1
    verify: str = "confirm"
    executor_info: dict[str, object] | None = None


def _pct_ci(comp: Comparison, direction: Direction) -> tuple[float, list[float]]:
    est = comp.estimate
    lo, hi = sorted((to_pct(est.low, direction), to_pct(est.high, direction)))
    return round(to_pct(est.shift, direction), 3), [round(lo, 3), round(hi, 3)]


def comparison_json(comp: Comparison, direction: Direction) -> dict[str, Any]:
    change, ci = _pct_ci(comp, direction) if comp.diffs else (None, None)
    return {
        "candidate": comp.candidate,
        "reference": comp.reference,
        "purpose": comp.purpose,
        "verdict": comp.verdict.value,
        "rounds": len(comp.diffs),
        "change_pct": change,
        "ci_pct": ci,
        "llr": round(comp.llr, 4),
        "sigma": comp.sigma,
        "reason": comp.reason,
        "shifts": [round(d, 6) for d in comp.diffs],
        # issue 12: which rule decided, the step's size check, and zero-sample verdicts
        "rule": comp.rule.value if comp.rule else None,
        "size_p": _prob(comp.size_p),
        "smaller": comp.smaller,
        "same_artifact_as": comp.same_artifact_as,
        "samples": comp.samples,
    }


def _efficiency_json(outcome: Outcome, direction: Direction) -> dict[str, Any]:
    """Issue 12's additions: what was not measured and why, smaller steps, time per phase."""
    t = outcome.times
    return {
        "smaller_steps": [
            {
                "commit": s.commit,
                "compared_with": s.last_good,
                "change_pct": _pct_ci(s.confirmation, direction)[0],
                "ci_pct": _pct_ci(s.confirmation, direction)[1],
                "size_p": _prob(s.size_p),
            }
            for s in outcome.smaller_steps
        ],
        "untouched": list(outcome.untouched),
        "same_artifact": {c.candidate: c.same_artifact_as for c in outcome.comparisons if c.same_artifact_as},
        "artifacts": {sha: rec.artifact for sha, rec in outcome.commits.items() if rec.artifact},
        "artifact_notes": [{"a": n.a, "b": n.b, "traps": [str(x) for x in n.traps]} for n in outcome.artifact_notes],
        "samples_saved_estimate": outcome.samples_saved,
        "phase_times_s": {
            "build": round(t.build_s, 3),
            "measure": round(t.measure_s, 3),
            "decide": round(t.decide_s, 3),
            "decide_per_comparison": round(t.overhead_per_comparison(), 4),
        },
        "out_of_time": outcome.out_of_time,
    }


def _prob(p: float) -> float | None:
    return None if math.isnan(p) else round(p, 4)


def _revert_json(check: RevertCheck | None, direction: Direction) -> dict[str, Any] | None:
    if check is None:
        return None
    comp = check.comparison
    return {
        "status": check.status,
        "reverted_commit": check.reverted,
        "detail": check.detail,
        # bad against the reverted build: how much of the regression the revert takes away
        "bad_vs_reverted_pct": _pct_ci(comp, direction)[0] if comp and comp.diffs else None,
        "ci_pct": _pct_ci(comp, direction)[1] if comp and comp.diffs else None,
        "rounds": len(comp.diffs) if comp else 0,
    }


def _sig(v: float) -> float:
    return float(f"{v:.6g}")  # six significant digits: far below any noise, keeps the JSON small


def sample_summary(samples: list[float]) -> dict[str, Any]:
    """`quantiles` (at QUANTILE_PROBS) and `sample_values` (<= MAX_SAMPLE_VALUES) of a commit."""
    if not samples:
        return {"quantiles": None, "sample_values": []}
    arr = np.asarray(samples, dtype=float)
    values = arr if arr.size <= MAX_SAMPLE_VALUES else np.quantile(arr, np.linspace(0.0, 1.0, MAX_SAMPLE_VALUES))
    return {
        "quantiles": [_sig(q) for q in np.quantile(arr, QUANTILE_PROBS)],
        "sample_values": [_sig(v) for v in values],
    }


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "user": getpass.getuser(),
    }


def reproduce_command(ctx: RunContext, good: str, bad: str) -> str:
    argv = [
        "attrib", "bisect",
        "--repo", str(ctx.repo),
        "--good", good,
        "--bad", bad,
        "--recipe", str(ctx.recipe.path),
        "--benchmark", ctx.bench.name,
        "--executor", ctx.executor,
        "--seed", str(ctx.seed),
    ]  # fmt: skip
    if ctx.jobs > 1:
        argv += ["--jobs", str(ctx.jobs)]
    if ctx.verify != "confirm":
        argv += ["--verify", ctx.verify]
    return shlex.join(argv)


def compare_command(ctx: RunContext, reference: str, candidate: str) -> str:
    argv = [
        "attrib", "compare",
        "--repo", str(ctx.repo),
        "--recipe", str(ctx.recipe.path),
        "--benchmark", ctx.bench.name,
        "--executor", ctx.executor,
        reference, candidate,
    ]  # fmt: skip
    return shlex.join(argv)


def _unresolved_json(u: Unresolved, ctx: RunContext) -> dict[str, Any]:
    why, resolve = unresolved_text(u.causes, ctx.bench.min_change_pct, ctx.config.max_rounds)
    return {
        "last_good": u.last_good,
        "first_bad": u.first_bad,
        "commits": list(u.commits),
        "why": why,
        "resolve": resolve,
    }


def build_result(outcome: Outcome, ctx: RunContext) -> dict[str, Any]:
    direction = ctx.bench.direction
    culprit_shas = {c.commit for c in outcome.culprits}
    total_change, total_ci = _pct_ci(outcome.preflight, direction)
    total_shift = outcome.preflight.estimate.shift

    culprits = []
    for c in outcome.culprits:
        info = outcome.commits[c.commit].info
        change, ci = _pct_ci(c.confirmation, direction)
        share = c.confirmation.estimate.shift / total_shift if total_shift > 0 else None
        culprits.append(
            {
                "commit": c.commit,
                "subject": info.subject,
                "author": info.author,
                "author_email": info.author_email,
                "date": info.date,
                "files": list(info.files),
                "change_pct": change,
                "ci_pct": ci,
                "share": None if share is None else round(share, 3),
                "ambiguous_with": list(c.ambiguous_with),
                "compared_with": c.last_good,
                "confirmed": c.confirmed,
                "confirmation": comparison_json(c.confirmation, direction),
                "via_merge": c.via_merge,
                "posterior": _prob(c.posterior),
                "size_p": _prob(c.size_p),
                "range_posterior": _prob(c.range_posterior),
                "revert": _revert_json(c.revert, direction),
                "reproduce": compare_command(ctx, c.last_good, c.commit),
            }
        )

    commits = []
    for sha in outcome.order:
        rec = outcome.commits.get(sha)
        if rec is None:
            continue
        if sha == outcome.good:
            verdict, reference, role = Verdict.GOOD, None, "good"
        elif sha == outcome.bad:
            verdict, reference, role = outcome.preflight.verdict, outcome.good, "bad"
        elif sha in outcome.verdicts:
            reference, verdict = outcome.verdicts[sha]
            role = "candidate"
        else:
            continue  # built only as a confirmation partner's neighbour: nothing decided about it
        if rec.build is not None and not rec.build.ok:
            verdict = Verdict.SKIP
        # A candidate that matches a culprit is as bad as that culprit is relative to good.
        overall = Verdict.BAD if verdict is Verdict.GOOD and reference in culprit_shas else verdict
        commits.append(
            {
                "commit": sha,
                "subject": rec.info.subject,
                "role": role,
                "verdict": overall.value,
                "verdict_vs_reference": verdict.value,
                "reference": reference,
                "samples": len(rec.samples),
                "median": statistics.median(rec.samples) if rec.samples else None,
                "build": None
                if rec.build is None
                else {"ok": rec.build.ok, "cached": rec.build.cached, "reason": rec.build.reason, "log": rec.build.log_path},
                "failed_runs": rec.failed_runs,
                **sample_summary(rec.samples),
            }
        )

    failures = [
        {
            "commit": sha,
            "subject": rec.info.subject,
            "reason": rec.build.reason,
            "log": rec.build.log_path,
            "log_tail": rec.build.log_tail(),
        }
        for sha, rec in outcome.commits.items()
        if rec.build is not None and not rec.build.ok
    ]
    excluded: Counter[str] = Counter()
    for rec in outcome.commits.values():
        excluded.update(rec.excluded)
    recipe_bytes = ctx.recipe.path.read_bytes() if ctx.recipe.path.exists() else b""
    built = [r for r in outcome.commits.values() if r.build is not None]
    return {
        "schema": RESULT_SCHEMA,
        "status": outcome.status.value,
        "repo": str(ctx.repo),
        "good": outcome.good,
        "bad": outcome.bad,
        "benchmark": ctx.bench.name,
        "culprits": culprits,
        "commits": commits,
        "builds": len(built),
        "samples": sum(len(r.samples) for r in outcome.commits.values()),
        "wall_s": round(ctx.wall_s, 2),
        "unit": ctx.bench.unit,
        "direction": direction.value,
        "total_change_pct": total_change,
        "total_ci_pct": total_ci,
        "range_commits": len(outcome.order) - 1,
        "builds_fresh": ctx.builds_fresh,
        "builds_cached": sum(1 for r in built if r.build is not None and r.build.cached),
        "build_failures": failures,
        "comparisons": [comparison_json(c, direction) for c in outcome.comparisons],
        "notes": list(outcome.notes),
        "unresolved": [_unresolved_json(u, ctx) for u in outcome.unresolved],
        "drift": [
            {
                "commit": d.commit,
                "role": "good" if d.commit == outcome.good else "bad" if d.commit == outcome.bad else "culprit",
                "blocks": d.blocks,
                "change_pct": round(d.change_pct, 3),
            }
            for d in outcome.drift
        ],
        "excluded_samples": dict(excluded),
        **_efficiency_json(outcome, direction),
        "rounds": outcome.rounds,
        "reproduce": reproduce_command(ctx, outcome.good, outcome.bad),
        "settings": {
            "alpha": ctx.config.alpha,
            "beta": ctx.config.beta,
            "min_rounds": ctx.config.min_rounds,
            "max_rounds": ctx.config.max_rounds,
            "min_change_pct": ctx.bench.min_change_pct,
            "reps": ctx.bench.reps,
            "seed": ctx.seed,
            "executor": ctx.executor,
            "jobs": ctx.jobs,
            "verify": ctx.verify,
        },
        "recipe": {
            "path": str(ctx.recipe.path),
            "name": ctx.recipe.name,
            "sha256": hashlib.sha256(recipe_bytes).hexdigest(),
        },
        "executor": {"name": ctx.executor, **(ctx.executor_info or {})},
        "tool": {"name": "attrib", "version": __version__},
        "machine": machine_info(),
        "workdir": str(ctx.workdir),
    }


def dump(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=2, sort_keys=False) + "\n"
