"""One bisection from validated inputs to a result document: the seam the CLI (and later the
daemon) call. Everything the user can get wrong is checked before anything is written."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .builds import Builder
from .engine import Bisection, Events, Reverter
from .errors import InputError, RepoError
from .executors import Executor, make_executor
from .fsutil import file_lock
from .gitrepo import GitRepo, Mirror, default_workdir
from .model import CommitInfo
from .recipe import BenchmarkSpec, Recipe, load_recipe
from .result import RESULT_SCHEMA, RunContext, build_result, comparison_json
from .runners import Runner
from .runners.command import CommandRunner
from .stats import TestConfig


@dataclass(frozen=True)
class Plan:
    repo: GitRepo
    good: str
    bad: str
    recipe: Recipe
    bench: BenchmarkSpec
    executor_name: str
    workdir: Path
    executor: Executor


def plan(
    repo_path: Path,
    good_rev: str,
    bad_rev: str,
    recipe_path: Path,
    bench_name: str | None,
    executor: str,
    workdir: Path | None,
    *,
    require_ancestor: bool = True,
) -> Plan:
    """Validate every input; raises InputError (exit 2) with one line, and creates nothing."""
    recipe = load_recipe(recipe_path)
    bench = recipe.benchmark(bench_name)
    repo = GitRepo(repo_path)
    good, bad = repo.resolve(good_rev), repo.resolve(bad_rev)
    if good == bad:
        raise RepoError(f"--good {good_rev} and --bad {bad_rev} are the same commit ({good[:10]})")
    if require_ancestor and not repo.is_ancestor(good, bad):
        raise RepoError(f"--good {good_rev} ({good[:10]}) is not an ancestor of --bad {bad_rev} ({bad[:10]})")
    # Last, because it talks to the engine: an unreachable engine or missing image is bad input too.
    workdir = (workdir or default_workdir(repo.path)).resolve()
    made = make_executor(executor, recipe.build, recipe.path.parent, workdir)
    return Plan(repo, good, bad, recipe, bench, executor, workdir, made)


def _tools(p: Plan) -> tuple[Mirror, Builder, CommandRunner]:
    p.workdir.mkdir(parents=True, exist_ok=True)
    with file_lock(p.workdir / "locks" / "mirror.lock"):
        mirror = Mirror(p.workdir, p.repo)
    builder = Builder(p.workdir, mirror, p.executor, p.recipe.build)
    return mirror, builder, CommandRunner(p.executor, p.bench)


def _reverter(p: Plan, mirror: Mirror) -> Reverter:
    mirror_repo = GitRepo(mirror.path)

    def revert(culprit: str, onto: str) -> CommitInfo | None:
        with file_lock(p.workdir / "locks" / "mirror.lock"):
            sha = mirror.revert(culprit, onto, p.workdir / "scratch" / f"revert-{culprit[:12]}")
        return None if sha is None else mirror_repo.info(sha)

    return revert


VERIFY_MODES = ("confirm", "revert")


def run_bisect(
    p: Plan, config: TestConfig, seed: int, events: Events | None, *, jobs: int = 1, verify: str = "confirm",
    wrap_runner: Callable[[Runner], Runner] | None = None,
) -> dict[str, Any]:
    """`wrap_runner`: the daemon records and replays every runner call through it (daemon/recording.py)."""
    if verify not in VERIFY_MODES:
        raise InputError(f"--verify {verify!r}: expected one of: {', '.join(VERIFY_MODES)}")
    if jobs < 1:
        raise InputError(f"--jobs {jobs}: expected a positive integer")
    start = time.monotonic()
    try:
        mirror, builder, runner = _tools(p)
        engine = Bisection(
            p.repo, builder, wrap_runner(runner) if wrap_runner else runner, p.bench, config, seed, events, jobs=jobs, reverter=_reverter(p, mirror)
        )
        outcome = engine.run(p.good, p.bad, verify_revert=verify == "revert")
    finally:
        p.executor.close()
    ctx = RunContext(
        repo=p.repo.path,
        recipe=p.recipe,
        bench=p.bench,
        executor=p.executor_name,
        config=config,
        seed=seed,
        workdir=p.workdir,
        wall_s=time.monotonic() - start,
        builds_fresh=builder.fresh_builds,
        jobs=jobs,
        verify=verify,
        executor_info=p.executor.describe(),
    )
    return build_result(outcome, ctx)


def run_compare(p: Plan, config: TestConfig, seed: int, events: Events | None) -> dict[str, Any]:
    """A single sequential comparison: is `bad` (candidate) worse than `good` (reference)?"""
    try:
        _, builder, runner = _tools(p)
        engine = Bisection(p.repo, builder, runner, p.bench, config, seed, events)
        comp = engine.compare(p.bad, p.good, "compare")
    finally:
        p.executor.close()
    return {"schema": RESULT_SCHEMA, "benchmark": p.bench.name, **comparison_json(comp, p.bench.direction)}
