"""One bisection from validated inputs to a result document: the seam the CLI (and later the
daemon) call. Everything the user can get wrong is checked before anything is written."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Collection, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import assert_never, cast

from attrib.core.model import CommitInfo, Note, NoteKind, Purpose, VerifyMode
from attrib.core.stats import TestConfig
from attrib.errors import GpuUnavailable, InputError, RepoError, SlurmUnavailable
from attrib.evaluate.builds import CheckoutBuilder
from attrib.evaluate.checkouts import Checkouts
from attrib.evaluate.evaluation import Settings, Stage
from attrib.evaluate.executors import Executor, ExecutorKind, check_executor, executor_kind, make_executor
from attrib.evaluate.executors.slurm_plan import machine_class
from attrib.evaluate.fingerprint import watched
from attrib.evaluate.runners import Runner, Step, evidence_of
from attrib.evaluate.runners.command import CommandRunner
from attrib.evaluate.runners.cupy import CupyRunner, sharing_one_worker
from attrib.evaluate.runners.multi import one_process, process_key
from attrib.evaluate.shared import SharedRuns
from attrib.events import Events
from attrib.fsutil import file_lock
from attrib.gitrepo import GitRepo, Mirror, UrlRule, origin_of
from attrib.group_bisection import GroupBisection, MemberRun
from attrib.outcome import Member, Outcome, Reverter
from attrib.recipe import BenchmarkSpec, Recipe, RunnerKind, load_recipe
from attrib.result import BisectResult, CompareResult
from attrib.result.gather import provenance
from attrib.result.writer import RunContext, build_result, compare_result
from attrib.rolls import superproject
from attrib.workdir import WorkDir, default_root


@dataclass(frozen=True)
class Plan:
    """Validated inputs of one bisection or comparison. Making one creates nothing."""

    repo: GitRepo
    good: str
    bad: str
    recipe: Recipe
    bench: BenchmarkSpec
    executor_name: ExecutorKind
    workdir: WorkDir
    run_id: str | None = None  # slurm: names its jobs (a daemon job: d<id>, found again on restart)
    # slurm: the daemon's stop check (cancel, stopping, lease lost), polled while jobs wait
    stop_check: Callable[[], str | None] | None = None
    submodule_urls: UrlRule = UrlRule()  # which submodule URLs its checkouts may fetch
    members: tuple[BenchmarkSpec, ...] = ()  # a group's benchmarks in the order asked (`bench`: the first)

    @property
    def benches(self) -> tuple[BenchmarkSpec, ...]:
        return self.members or (self.bench,)


def plan(
    repo_path: Path,
    good_rev: str,
    bad_rev: str,
    recipe_path: Path,
    benchmarks: Sequence[str],
    executor: str,
    workdir: Path | None,
    *,
    require_ancestor: bool = True,
    run_id: str | None = None,
) -> Plan:
    """Validate every input; raises InputError (exit 2) with one line, and creates nothing.
    `benchmarks`: names or globs of the recipe's benchmarks (Recipe.select); several make a group
    bisection, none the recipe's one benchmark."""
    kind = executor_kind(executor)  # parsed here, at the edge; checked against the engine last
    recipe = load_recipe(recipe_path)
    benches = recipe.select(benchmarks)
    bench = benches[0]
    repo = GitRepo(repo_path)
    good, bad = repo.resolve(good_rev), repo.resolve(bad_rev)
    if good == bad:
        raise RepoError(f"--good {good_rev} and --bad {bad_rev} are the same commit ({good[:10]})")
    if require_ancestor and not repo.is_ancestor(good, bad):
        raise RepoError(f"--good {good_rev} ({good[:10]}) is not an ancestor of --bad {bad_rev} ({bad[:10]})")
    for b in benches:
        if kind is ExecutorKind.SLURM and b.runner == RunnerKind.CUPY:
            raise InputError(
                f"benchmark '{b.name}': runner \"cupy\" times kernels inside attrib's process, "
                "not as a Slurm job; --executor slurm runs the command, gbench and nvbench runners"
            )
        check_runner_requirements(b)
    if workdir is None and kind is ExecutorKind.SLURM and recipe.slurm and recipe.slurm.shared_dir:
        workdir = Path(recipe.slurm.shared_dir) / default_root(repo.path).name  # the nodes must see it
    # Last, because it talks to the engine: an unreachable engine or missing image is bad input too.
    check_executor(kind, recipe.build, recipe.path.parent)
    root = WorkDir.for_repo(repo.path, workdir)
    if kind is ExecutorKind.SLURM and recipe.slurm and recipe.slurm.shared_dir:
        if not root.root.is_relative_to(Path(recipe.slurm.shared_dir).resolve()):
            raise SlurmUnavailable(
                f"[slurm] shared_dir {recipe.slurm.shared_dir}: the work dir {root.root} is not under it; "
                "give --workdir under it, or leave --workdir out to use it"
            )
    return Plan(repo, good, bad, recipe, bench, kind, root, run_id, members=benches if len(benches) > 1 else ())


def placed(executor: Executor, recipe: Recipe, bench: BenchmarkSpec) -> Executor:
    """The executor a benchmark's rounds and runs go through: under Slurm, on nodes of the
    machine class its configuration names ([slurm.classes]); elsewhere the executor itself
    (one machine: a configuration says nothing about where to run)."""
    place = getattr(executor, "placed", None)
    if place is None or recipe.slurm is None:
        return executor
    return cast(Executor, place(machine_class(recipe.slurm, bench.config)))


def make_runner(bench: BenchmarkSpec, executor: Executor) -> Runner:
    # One case per RunnerKind member; mypy's assert_never fails the build when a member has none.
    match bench.runner:
        case RunnerKind.CUPY:
            return CupyRunner(bench)
        case RunnerKind.GBENCH:
            from attrib.evaluate.runners.gbench import GbenchRunner

            return GbenchRunner(executor, bench)
        case RunnerKind.NVBENCH:
            from attrib.evaluate.runners.nvbench import NvbenchRunner

            return NvbenchRunner(executor, bench)
        case RunnerKind.COMMAND:
            return CommandRunner(executor, bench)
        case _:
            assert_never(bench.runner)


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
    watch = getattr(executor, "watch", None)
    if watch is not None and p.stop_check is not None:
        watch(p.stop_check)
    try:
        with file_lock(p.workdir.mirror_lock):
            mirror = Mirror(p.workdir.mirror, p.repo)
        checkouts = Checkouts(p.workdir, mirror, origin_of(p.repo.path), p.submodule_urls, recipe.dependencies)
        builder = CheckoutBuilder(p.workdir, mirror, executor, recipe.build, checkouts)
        runner = make_runner(p.bench, placed(executor, recipe, p.bench))
        try:
            yield Tools(executor, mirror, builder, runner)
        finally:
            if (close := getattr(runner, "close", None)) is not None:
                close()  # the cupy runner's GPU worker
    finally:
        executor.close()


def _reverter(p: Plan, mirror: Mirror) -> Reverter:
    mirror_repo = GitRepo(mirror.path)

    def revert(culprit: str, onto: str) -> CommitInfo | None:
        with file_lock(p.workdir.mirror_lock):
            sha = mirror.revert(culprit, onto, p.workdir.scratch(f"revert-{culprit[:12]}"))
        return None if sha is None else mirror_repo.info(sha)

    return revert


def verify_mode(text: str) -> VerifyMode:
    try:
        return VerifyMode(text)
    except ValueError:
        raise InputError(f"--verify {text!r}: expected one of: {', '.join(VerifyMode)}") from None


def with_recipe(config: TestConfig, p: Plan) -> TestConfig:
    """The test settings with the recipe's say: `[search] futility = false` (or --no-futility)
    runs every test to its cap."""
    return replace(config, futility=config.futility and p.recipe.futility)


def run_bisect(
    p: Plan, config: TestConfig, seed: int, events: Events | None, *, probes: int = 1, verify: VerifyMode = VerifyMode.CONFIRM,
    wrap_runner: Callable[[Runner], Runner] | None = None,
    budget_s: float | None = None,
) -> BisectResult:
    """`probes`: commits proposed per search step (`--probes`, once `--jobs`).
    `budget_s`: wall-time budget (`--budget`; default the recipe's [search] budget), after which
    the search ends with the smallest range it proved.
    `wrap_runner`: the daemon records and replays every runner call through it (daemon/recording.py)."""
    mode = verify
    if probes < 1:
        raise InputError(f"--probes (--jobs) {probes}: expected a positive integer")
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
        members, next_phase = _members(p, tools, wrap)
        group = GroupBisection(
            p.repo, tools.builder, members, settings, events, next_phase=next_phase,
            reverter=_reverter(p, tools.mirror), dependencies=superproject(tools.builder, p.repo),
        ).run(p.good, p.bad, verify_revert=mode is VerifyMode.REVERT)  # fmt: skip
        checked = _cache_checks(tools.builder, [o for _, o in group.members], max(1, probes))
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
        # each member's kernels, inspected by a runner of its own (not the daemon's recording
        # wrapper); only the cupy runner inspects what it built
        benches = {b.name: b for b in p.benches}
        own = {
            m.benchmark: evidence_of(make_runner(benches[m.benchmark], tools.executor), _culprit_steps(o))
            for m, o in group.members
            if benches[m.benchmark].runner is RunnerKind.CUPY and o.culprits
        }
        ctx = replace(ctx, member_specs=benches, member_evidence=own)
        return build_result(group, ctx, provenance(p.recipe.path, fingerprint))
    # a group of one: its result as a benchmark alone's always read (result/writer.build_result),
    # with the evidence of the runner itself (not the daemon's recording wrapper): it holds the kernels
    ((_, single),) = group.members
    evidence = evidence_of(tools.runner, _culprit_steps(single))
    return build_result(single, ctx, provenance(p.recipe.path, fingerprint), evidence)


def _cache_checks(builder: CheckoutBuilder, outcomes: Sequence[Outcome], width: int) -> list[Outcome]:
    """Each culprit's two ends built again clean (a fresh checkout, nothing served from the
    compiler cache): the verdict that names a culprit rests on those two binaries, so a cache or
    an incremental tree that gave a wrong one there is said, never silent (a build per end the
    cache served or an incremental tree built; none for a clean build without a cache).
    The ends are checked together, up to the run's build width (`width`, as the preflight builds
    the range's ends), and a group's members' shared ends once. Those builds' wall time counts
    in the run's build time, and apart as its `build_check` (on the first outcome with an end)."""
    ends = {
        sha: (rec.info, rec.build)
        for o in outcomes
        for c in o.culprits
        for sha in (c.last_good, c.commit)
        if (rec := o.commits.get(sha)) is not None and rec.build is not None
    }
    differs, seconds = builder.differ_from_clean(list(ends.values()), width)
    checked = []
    for o in outcomes:
        mine = dict.fromkeys(sha for c in o.culprits for sha in (c.last_good, c.commit) if sha in ends)
        if mine and seconds:
            o.times.build_s += seconds
            o.times.build_check_s += seconds
            seconds = 0.0
        checked.append(replace(o, notes=(*o.notes, *(Note(NoteKind.CACHE_MISMATCH, (sha,)) for sha in mine if differs[sha]))))
    return checked


def _members(p: Plan, tools: Tools, wrap: Callable[[Runner], Runner]) -> tuple[dict[Member, MemberRun], Callable[[Collection[Member] | None], None]]:
    """Each member's runner: members that one process can measure together (the `name value`
    lines of one command, or benchmarks of one Google Benchmark or NVBench binary with the same
    settings: runners/multi.py) share its run, one per round for all of them
    (evaluate/shared.py); cupy members that time kernels share one GPU worker; any other member
    runs its own."""
    together: dict[Hashable, list[BenchmarkSpec]] = {}
    for b in p.benches:
        key = ("names", b.process, b.config) if b.process else process_key(b)
        together.setdefault(("alone", b.name, b.config) if key is None else key, []).append(b)
    shared: dict[Member, SharedRuns] = {}
    for benches in together.values() if len(p.benches) > 1 else ():  # a group of one shares nothing
        first = benches[0]
        if first.process:  # the one command's table, all its members' names
            parent = replace(first, name=first.process, names=tuple(b.name for b in benches))
            executor = placed(tools.executor, p.recipe, parent)
            runs = SharedRuns(CommandRunner(executor, parent), executor.round)
        elif len(benches) > 1:
            executor = placed(tools.executor, p.recipe, first)
            runs = SharedRuns(one_process(executor, benches), executor.round)
        else:
            continue
        shared.update((Member(b.name, b.config), runs) for b in benches)
    # the cupy members that time kernels: one GPU worker process serves all their kernels
    timed = [b for b in p.benches if b.cupy is not None and b.cupy.metric == "time"]
    kernels = {Member(b.name, b.config): r for b, r in zip(timed, sharing_one_worker(timed), strict=True)} if len(timed) > 1 else {}
    members: dict[Member, MemberRun] = {}
    for b in p.benches:
        m = Member(b.name, b.config)  # the same benchmark under two configurations is two members
        if m in shared:
            runs = shared[m]
            members[m] = MemberRun(b, wrap(runs.view(b.name)), runs.round_context(b.name))
        elif m in kernels:
            members[m] = MemberRun(b, wrap(kernels[m]), tools.executor.round)
        else:
            # the plan's benchmark has its runner open already (opened(): a benchmark alone's)
            executor = placed(tools.executor, p.recipe, b)
            members[m] = MemberRun(b, wrap(tools.runner if b is p.bench else make_runner(b, executor)), executor.round)

    def next_phase(measuring: Collection[Member] | None) -> None:
        for runs in dict.fromkeys(shared.values()):
            runs.next_phase(None if measuring is None else {m.benchmark for m in measuring if shared.get(m) is runs})

    return members, next_phase


def _culprit_steps(outcome: Outcome) -> list[Step]:
    """Each culprit's step where both sides built: what a runner's evidence is about."""
    steps = []
    for culprit in outcome.culprits:
        before, after = _checkout_of(outcome, culprit.last_good), _checkout_of(outcome, culprit.commit)
        if before is not None and after is not None:
            steps.append(Step(culprit.commit, before, after))
    return steps


def _checkout_of(outcome: Outcome, sha: str) -> Path | None:
    rec = outcome.commits.get(sha)
    if rec is None or rec.build is None or not rec.build.ok:
        return None
    return Path(rec.build.checkout)


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
