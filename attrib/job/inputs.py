"""A job's inputs, validated before anything is written: everything the user can get wrong
(revisions, the recipe, the benchmarks asked, the executor, the work dir, the flags) is checked
here and refused with one line (InputError and its kinds, exit 2). Making a `Plan` creates
nothing; job/run.py opens what a plan names."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from attrib.core.model import VerifyMode
from attrib.core.stats import TestConfig
from attrib.errors import GpuUnavailable, InputError, RepoError, SlurmUnavailable
from attrib.evaluate.executors import ExecutorKind, check_executor, executor_kind
from attrib.gitrepo import GitRepo, UrlRule
from attrib.recipe import BenchmarkSpec, Recipe, RunnerKind, load_recipe
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


def verify_mode(text: str) -> VerifyMode:
    try:
        return VerifyMode(text)
    except ValueError:
        raise InputError(f"--verify {text!r}: expected one of: {', '.join(VerifyMode)}") from None


def check_probes(probes: int) -> None:
    if probes < 1:
        raise InputError(f"--probes (--jobs) {probes}: expected a positive integer")


def with_recipe(config: TestConfig, p: Plan) -> TestConfig:
    """The test settings with the recipe's say: `[search] futility = false` (or --no-futility)
    runs every test to its cap."""
    return replace(config, futility=config.futility and p.recipe.futility)
