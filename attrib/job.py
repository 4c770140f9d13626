"""One bisection from validated inputs to a result document: the seam the CLI (and later the
daemon) call. Everything the user can get wrong is checked before anything is written."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attrib.bisection import Bisection, Events, Outcome, Reverter
from attrib.core.model import CommitInfo
from attrib.core.stats import TestConfig
from attrib.errors import GpuUnavailable, InputError, RepoError
from attrib.evaluate.builds import Builder
from attrib.evaluate.executors import Executor, make_executor
from attrib.evaluate.runners import Runner
from attrib.evaluate.runners.command import CommandRunner
from attrib.evaluate.runners.cupy import CupyRunner
from attrib.fsutil import file_lock
from attrib.gitrepo import GitRepo, Mirror, default_workdir
from attrib.recipe import BenchmarkSpec, Recipe, load_recipe
from attrib.result import RESULT_SCHEMA, RunContext, build_result, comparison_json


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
    run_id: str | None = None,
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
    if executor == "slurm" and bench.runner != "command":
        raise InputError(
            f"benchmark '{bench.name}': runner {bench.runner!r} runs inside attrib's process, "
            'not as a Slurm job; --executor slurm needs runner = "command"'
        )
    check_runner_requirements(bench)
    if workdir is None and executor == "slurm" and recipe.slurm and recipe.slurm.shared_dir:
        workdir = Path(recipe.slurm.shared_dir) / default_workdir(repo.path).name  # the nodes must see it
    # Last, because it talks to the engine: an unreachable engine or missing image is bad input too.
    workdir = (workdir or default_workdir(repo.path)).resolve()
    made = make_executor(
        executor, recipe.build, recipe.path.parent, workdir, slurm=recipe.slurm, bench=bench, run_id=run_id
    )
    return Plan(repo, good, bad, recipe, bench, executor, workdir, made)


def make_runner(p: Plan) -> Runner:
    if p.bench.runner == "cupy":
        return CupyRunner(p.bench)
    return CommandRunner(p.executor, p.bench)


def check_runner_requirements(bench: BenchmarkSpec) -> None:
    """A cupy benchmark needs NVRTC, and a GPU unless it bisects a static metric: say so
    before anything is built (GpuUnavailable, exit 2)."""
    if bench.cupy is None:
        return
    from attrib.evaluate.gpu import nvrtc

    nvrtc.library()
    if bench.cupy.metric == "time":
        from attrib.evaluate.gpu.device import probe

        if why := probe():
            raise GpuUnavailable(
                f"benchmark '{bench.name}' times kernels on a GPU, and there is none here: {why}"
                ' (a static metric such as metric = "registers" needs no GPU)'
            )


def _tools(p: Plan) -> tuple[Mirror, Builder, Runner]:
    p.workdir.mkdir(parents=True, exist_ok=True)
    with file_lock(p.workdir / "locks" / "mirror.lock"):
        mirror = Mirror(p.workdir, p.repo)
    builder = Builder(p.workdir, mirror, p.executor, p.recipe.build)
    return mirror, builder, make_runner(p)


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
            p.repo, builder, wrap_runner(runner) if wrap_runner else runner, p.bench, config, seed, events, jobs=jobs, reverter=_reverter(p, mirror),
            round_context=p.executor.round,
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
    result = build_result(outcome, ctx)
    if isinstance(runner, CupyRunner):
        add_kernel_evidence(result, outcome, runner)
    return result


def add_kernel_evidence(result: dict[str, Any], outcome: Outcome, runner: CupyRunner) -> None:
    """What only the cupy runner knows: each culprit's static kernel diff against the commit
    it was confirmed against, and the GPU it was timed on."""
    for entry, culprit in zip(result["culprits"], outcome.culprits, strict=True):
        before = _checkout_of(outcome, culprit.last_good)
        after = _checkout_of(outcome, culprit.commit)
        if before is None or after is None:
            continue
        diff = runner.static_diff(before, after)
        if isinstance(diff, str):
            entry["static_diff_unavailable"] = diff
        else:
            entry["static_diff"] = diff
    gpu = runner.gpu_environment()
    if gpu:
        result.setdefault("environment", {})["gpu"] = gpu


def _checkout_of(outcome: Outcome, sha: str) -> Path | None:
    rec = outcome.commits.get(sha)
    if rec is None or rec.build is None or not rec.build.ok:
        return None
    return Path(rec.build.checkout)


def run_compare(p: Plan, config: TestConfig, seed: int, events: Events | None) -> dict[str, Any]:
    """A single sequential comparison: is `bad` (candidate) worse than `good` (reference)?"""
    try:
        _, builder, runner = _tools(p)
        engine = Bisection(p.repo, builder, runner, p.bench, config, seed, events, round_context=p.executor.round)
        comp = engine.compare(p.bad, p.good, "compare")
    finally:
        p.executor.close()
    return {"schema": RESULT_SCHEMA, "benchmark": p.bench.name, **comparison_json(comp, p.bench.direction)}


def built_checkout(repo_path: Path, rev: str, recipe: Recipe, executor_name: str, workdir: Path | None) -> Path:
    """Build one revision as a bisection would (same cache) and return its checkout:
    what `attrib inspect --commit` compiles kernels from."""
    repo = GitRepo(repo_path)
    sha = repo.resolve(rev)
    workdir = (workdir or default_workdir(repo.path)).resolve()
    executor = make_executor(executor_name, recipe.build, recipe.path.parent, workdir)
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        with file_lock(workdir / "locks" / "mirror.lock"):
            mirror = Mirror(workdir, repo)
        record = Builder(workdir, mirror, executor, recipe.build).build(repo.info(sha))
    finally:
        executor.close()
    if not record.ok:
        raise InputError(f"--commit {rev} ({sha[:10]}) does not build: {record.reason} (log: {record.log_path})")
    return Path(record.checkout)
