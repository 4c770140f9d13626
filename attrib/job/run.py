"""One bisection or comparison from a validated plan to a result document: the seam the CLI
and the daemon call, and only wiring. The rooms it wires: job/inputs.py validates (a `Plan`;
nothing is written before it), job/members.py gives each member its runner and shared process,
group_bisection.py searches (a single benchmark is a group of one), job/end_check.py builds the
culprits' ends again clean, job/evidence.py asks the runners what they know of the culprits'
builds, result/writer.py assembles the document."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from attrib.core.model import CommitInfo, Purpose, VerifyMode
from attrib.core.stats import TestConfig
from attrib.errors import InputError
from attrib.evaluate.builds import CheckoutBuilder
from attrib.evaluate.checkouts import Checkouts
from attrib.evaluate.evaluation import Settings, Stage
from attrib.evaluate.executors import Executor, WatchedExecutor, check_executor, make_executor
from attrib.evaluate.fingerprint import watched
from attrib.evaluate.runners import Runner, closed, evidence_of
from attrib.events import Events
from attrib.fsutil import file_lock
from attrib.gitrepo import GitRepo, Mirror, origin_of
from attrib.group_bisection import GroupBisection
from attrib.job.end_check import checked_ends
from attrib.job.evidence import culprit_steps, member_evidence
from attrib.job.inputs import Plan, check_probes, with_recipe
from attrib.job.members import make_runner, member_runs, placed
from attrib.outcome import Reverter
from attrib.recipe import Recipe
from attrib.result import BisectResult, CompareResult
from attrib.result.gather import provenance
from attrib.result.writer import RunContext, build_result, compare_result
from attrib.rolls import superproject
from attrib.workdir import WorkDir


@dataclass(frozen=True)
class Tools:
    """What a run holds open: the executor (containers, connections) and what uses it."""

    executor: Executor
    mirror: Mirror
    builder: CheckoutBuilder
    runner: Runner


@contextmanager
def opened(p: Plan) -> Iterator[Tools]:
    """The work dir, mirror, executor, builder and runner of a plan; the runner (a GPU worker)
    and the executor are closed on the way out, whatever happens inside (Ctrl-C included)."""
    recipe = p.recipe
    p.workdir.root.mkdir(parents=True, exist_ok=True)
    executor = make_executor(
        p.executor_name, recipe.build, recipe.path.parent, p.workdir.root, slurm=recipe.slurm, bench=p.bench,
        run_id=p.run_id,
    )  # fmt: skip
    if isinstance(executor, WatchedExecutor) and p.stop_check is not None:
        executor.watch(p.stop_check)
    try:
        with file_lock(p.workdir.mirror_lock):
            mirror = Mirror(p.workdir.mirror, p.repo)
        checkouts = Checkouts(p.workdir, mirror, origin_of(p.repo.path), p.submodule_urls, recipe.dependencies)
        builder = CheckoutBuilder(p.workdir, mirror, executor, recipe.build, checkouts)
        runner = make_runner(p.bench, placed(executor, recipe, p.bench))
        try:
            yield Tools(executor, mirror, builder, runner)
        finally:
            closed(runner)  # the cupy runner's GPU worker
    finally:
        executor.close()


def _reverter(p: Plan, mirror: Mirror) -> Reverter:
    mirror_repo = GitRepo(mirror.path)

    def revert(culprit: str, onto: str) -> CommitInfo | None:
        with file_lock(p.workdir.mirror_lock):
            sha = mirror.revert(culprit, onto, p.workdir.scratch(f"revert-{culprit[:12]}"))
        return None if sha is None else mirror_repo.info(sha)

    return revert


def run_bisect(
    p: Plan,
    config: TestConfig,
    seed: int,
    events: Events | None,
    *,
    probes: int = 1,
    verify: VerifyMode = VerifyMode.CONFIRM,
    wrap_runner: Callable[[Runner], Runner] | None = None,
    budget_s: float | None = None,
) -> BisectResult:
    """`probes`: commits proposed per search step (`--probes`, once `--jobs`).
    `budget_s`: wall-time budget (`--budget`; default the recipe's [search] budget), after which
    the search ends with the smallest range it proved.
    `wrap_runner`: the daemon records and replays every runner call through it (daemon/recording.py)."""
    mode = verify
    check_probes(probes)
    start = time.monotonic()
    config = with_recipe(config, p)
    budget = budget_s if budget_s is not None else p.recipe.budget_s
    deadline = None if budget is None else start + budget
    with opened(p) as tools:
        events = watch = watched(tools.executor, p.recipe, events)
        wrap = wrap_runner or (lambda r: r)
        tools.builder.checkouts.check_references(p.good, p.bad)  # a bad .gitmodules or pin file: exit 2
        prebuilt = tools.builder.prebuilt_among(p.repo.first_parent_chain(p.good, p.bad))
        settings = Settings(
            config, seed, p.recipe.search_method, probes, deadline, paths=p.recipe.search_paths, prebuilt=prebuilt
        )
        # a single benchmark is a group of one: one wiring for one or many (group_bisection.py)
        runs = member_runs(p.benches, p.recipe, tools.executor, (p.bench, tools.runner), wrap)
        group = GroupBisection(
            p.repo, tools.builder, runs.runs, settings, events, next_phase=runs.next_phase,
            reverter=_reverter(p, tools.mirror), dependencies=superproject(tools.builder, p.repo),
        ).run(p.good, p.bad, verify_revert=mode is VerifyMode.REVERT)  # fmt: skip
        checked = checked_ends(tools.builder, [o for _, o in group.members], max(1, probes))
        group = replace(group, members=tuple((m, o) for (m, _), o in zip(group.members, checked, strict=True)))
        executor_info = tools.executor.describe()
        fingerprint = watch.close()
    ctx = RunContext(
        repo=p.repo.path,
        recipe=p.recipe,
        bench=p.bench,
        executor=p.executor_name,
        config=config,
        seed=seed,
        workdir=p.workdir.root,
        wall_s=time.monotonic() - start,
        builds_fresh=tools.builder.fresh_builds,
        probes=probes,
        verify=mode,
        executor_info=executor_info,
    )
    if len(group.members) > 1:  # the result of schema 4 (result/writer.py), every member in it
        benches = {b.name: b for b in p.benches}
        own = member_evidence(group, benches, tools.executor)
        ctx = replace(ctx, member_specs=benches, member_evidence=own)
        return build_result(group, ctx, provenance(p.recipe.path, fingerprint))
    # a group of one: its result as a benchmark alone's always read (result/writer.build_result),
    # with the evidence of the runner itself (not the daemon's recording wrapper): it holds the kernels
    ((_, single),) = group.members
    evidence = evidence_of(tools.runner, culprit_steps(single))
    return build_result(single, ctx, provenance(p.recipe.path, fingerprint), evidence)


def run_compare(p: Plan, config: TestConfig, seed: int, events: Events | None) -> CompareResult:
    """A single sequential comparison: is `bad` (candidate) worse than `good` (reference)?"""
    config = with_recipe(config, p)
    with opened(p) as tools:
        watch = watched(tools.executor, p.recipe, events)
        # `attrib compare` decides by the indifference zone, as the default search does
        stage = Stage(tools.runner, p.bench, Settings(config, seed), watch, round_context=tools.executor.round)
        evaluation = stage.over(p.repo, tools.builder)
        (comp,) = evaluation.compare([p.bad], p.good, Purpose.COMPARE, evaluation.config.standalone())
        fingerprint = watch.close()
    # medians: a comparison is a pair of history points (history/attrib_result.py)
    records = evaluation.records
    medians = {s: statistics.median(records[s].samples) for s in (p.good, p.bad) if s in records and records[s].samples}
    return compare_result(comp, p.bench, medians, fingerprint)


def built_checkout(repo_path: Path, rev: str, recipe: Recipe, executor_name: str, workdir: Path | None) -> Path:
    """Build one revision as a bisection would (same cache) and return its checkout:
    what `attrib inspect --commit` compiles kernels from."""
    repo = GitRepo(repo_path)
    sha = repo.resolve(rev)
    kind = check_executor(executor_name, recipe.build, recipe.path.parent)
    bench = recipe.benchmarks[0]
    p = Plan(repo, sha, sha, recipe, bench, kind, WorkDir.for_repo(repo.path, workdir))
    with opened(p) as tools:
        record = tools.builder.build(repo.info(sha))
    if not record.ok:
        raise InputError(f"--commit {rev} ({sha[:10]}) does not build: {record.reason} (log: {record.log_path})")
    return Path(record.checkout)
