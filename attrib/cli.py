"""The command line: parse, call the package, map the outcome to an exit code.

Errors are caught once, here: an AttribError becomes one line on stderr and its exit code.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from attrib import __version__
from attrib.core.model import Status, Verdict, VerifyMode
from attrib.core.stats import DEFAULT_MAX_ROUNDS, DEFAULT_MIN_ROUNDS, DEFAULT_TEST_ALPHA, DEFAULT_TEST_BETA, TestConfig
from attrib.errors import AttribError, GpuUnavailable, InputError
from attrib.fsutil import atomic_write_text
from attrib.progress import PlainProgress, RichProgress
from attrib.report.markdown import compare_line, headline, render, write_report
from attrib.result import BisectResult, dump, load_result

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_NOT_REPRODUCED = 10
EXIT_INCONCLUSIVE = 11
EXIT_PARTIAL = 13  # culprits named, but what they leave of the change is undecided and may hold another
EXIT_INTERRUPTED = 130
STATUS_EXIT = {
    Status.CULPRIT_FOUND: EXIT_OK,
    Status.NOT_REPRODUCED: EXIT_NOT_REPRODUCED,
    Status.INCONCLUSIVE: EXIT_INCONCLUSIVE,
    Status.PARTIAL: EXIT_PARTIAL,
    Status.ERROR: EXIT_FAILURE,
}
COMPARE_EXIT = {Verdict.BAD: EXIT_OK, Verdict.GOOD: EXIT_NOT_REPRODUCED, Verdict.INCONCLUSIVE: EXIT_INCONCLUSIVE}
DEMO_DIR = Path("attrib-demo")
DEMO_MARKER = ".attrib-demo"

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Find the commit(s) that made a benchmark slower.")
err = Console(stderr=True)


def _fail(message: str, code: int) -> None:
    err.print(f"attrib: error: {message}", style="bold red", highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(code)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM (a CI job cancelled) cleans up exactly like Ctrl-C


def _guard(fn: Callable[[], int]) -> None:
    """The one place errors become exit codes."""
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        code = fn()
    except AttribError as exc:
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted; builds in progress were stopped, finished ones stay cached", EXIT_INTERRUPTED)
    raise typer.Exit(code)


def _check_output(path: Path | None, option: str) -> None:
    if path is not None and not path.parent.resolve().is_dir():
        raise InputError(f"{option} {path}: directory {path.parent} does not exist")


def _config(alpha: float, beta: float, min_rounds: int, max_rounds: int, futility: bool = True) -> TestConfig:
    for name, value in (("--alpha", alpha), ("--beta", beta)):
        if not 0 < value < 0.5:
            raise InputError(f"{name} {value}: expected a probability between 0 and 0.5")
    if not 2 <= min_rounds <= max_rounds:
        raise InputError(f"--min-rounds {min_rounds} / --max-rounds {max_rounds}: expected 2 <= min <= max")
    return TestConfig(alpha=alpha, beta=beta, min_rounds=min_rounds, max_rounds=max_rounds, futility=futility)


def _progress() -> Any:
    if err.is_terminal:
        return RichProgress(err)
    return PlainProgress(sys.stderr)


def _emit(result: BisectResult, json_out: Path | None, report_out: Path | None, filing: Any = None) -> int:
    if json_out is not None:
        atomic_write_text(json_out, dump(result))
    plot = write_report(result, report_out) if report_out is not None else None
    typer.echo(_plain(headline(result)))
    for c in result.culprits:
        typer.echo(f"culprit: {c.commit} {c.subject} ({c.author}) {c.change_pct:+.2f} % CI {list(c.ci_pct)}")
    for path, what in ((json_out, "result"), (report_out, "report")):
        if path is not None:
            typer.echo(f"{what}: {path}")
    if filing is not None:  # after the files are written: a filing failure loses nothing
        _file(result, filing, plot)
    return STATUS_EXIT[result.status]


def _file(result: BisectResult, filing: Any, plot: Path | None) -> None:
    """--file-issue / --comment-on; a TrackerError from here is exit 1 (docs: README)."""
    import tempfile

    from attrib.report.plot import plot_available, render_plot

    kept = plot is not None  # written next to --report/--out; a temporary one is gone after filing
    with tempfile.TemporaryDirectory(prefix="attrib-plot-") as tmp:
        if plot is None and plot_available():
            plot = render_plot(result, Path(tmp) / "plot.png")
        filing.run(result, plot, typer.echo, plot_kept=kept)


FileIssueOpt = typer.Option(
    None, "--file-issue", help="File the report: github:OWNER/REPO, gitlab:GROUP/PROJECT or dir:PATH (culprits only)."
)
CommentOnOpt = typer.Option(
    None,
    "--comment-on",
    help="Also post the report, whatever the outcome, on github:OWNER/REPO#N or gitlab:GROUP/PROJECT#N.",
)
LabelOpt = typer.Option(None, "--label", help="Label of filed issues (repeatable) (default: performance-regression).")


def _plain(markdown: str) -> str:
    return markdown.replace("**", "").replace("`", "")


RepoOpt = typer.Option(..., "--repo", help="Path of the git repository to bisect.")
RecipeOpt = typer.Option(..., "--recipe", help="Recipe TOML file (docs/recipes.md).")
BenchOpt = typer.Option(None, "--benchmark", help="Benchmark name in the recipe (needed if it has several).")
GroupOpt = typer.Option(
    None, "--benchmark",
    help="Benchmark of the recipe, by name or glob ('gemm_*'; '*': every one); repeat it to bisect a group at once.",
)  # fmt: skip
ExecOpt = typer.Option("local", "--executor", help="Where builds and runs happen: local, docker or slurm (docs/slurm.md).")
WorkOpt = typer.Option(None, "--workdir", help="Cache of checkouts, builds and logs (default: ~/.cache/attrib/<repo>).")
AlphaOpt = typer.Option(DEFAULT_TEST_ALPHA, "--alpha", help="P(calling an unchanged commit bad), per test.")
BetaOpt = typer.Option(DEFAULT_TEST_BETA, "--beta", help="P(calling a commit worse by the minimum change good), per test.")
MinRoundsOpt = typer.Option(DEFAULT_MIN_ROUNDS, "--min-rounds", help="Rounds before any test may decide.")
MaxRoundsOpt = typer.Option(DEFAULT_MAX_ROUNDS, "--max-rounds", help="Rounds after which a test is inconclusive.")
SeedOpt = typer.Option(0, "--seed", help="Seed of the run order within rounds.")
FutilityOpt = typer.Option(
    True, "--futility/--no-futility", help="Stop a test that can no longer decide by its cap (--no-futility: run it to the cap)."
)


@app.command()
def bisect(
    repo: Path = RepoOpt,
    good: str = typer.Option(..., "--good", help="A revision where the benchmark was fine."),
    bad: str = typer.Option(..., "--bad", help="A later revision where it is worse."),
    recipe: Path = RecipeOpt,
    benchmark: list[str] | None = GroupOpt,
    executor: str = ExecOpt,
    json_out: Path | None = typer.Option(None, "--json", help="Write the result JSON here."),
    report_out: Path | None = typer.Option(None, "--report", help="Write the markdown report here."),
    workdir: Path | None = WorkOpt,
    alpha: float = AlphaOpt,
    beta: float = BetaOpt,
    min_rounds: int = MinRoundsOpt,
    max_rounds: int = MaxRoundsOpt,
    futility: bool = FutilityOpt,
    seed: int = SeedOpt,
    probes: int = typer.Option(
        1, "--probes", "--jobs", help="Commits proposed, built and measured per search step (parallel probes; --jobs is the older name)."
    ),
    verify: str = typer.Option(
        "confirm",
        "--verify",
        help="confirm: re-measure culprit^ vs culprit (always on); revert: also revert it on bad.",
    ),
    budget: str | None = typer.Option(
        None, "--budget", help='Wall time to spend, e.g. "30m" or "2h" (default: the recipe\'s [search] budget, else none).'
    ),
    file_issue: str | None = FileIssueOpt,
    comment: str | None = CommentOnOpt,
    label: list[str] | None = LabelOpt,
) -> None:
    """Bisect good..bad to the commit(s) that made BENCHMARK worse. Exit 0 culprit found,
    10 not reproduced, 11 inconclusive, 12 the environment changed under it (docs/environment.md),
    2 bad input, 1 other failure."""
    from attrib.job import plan, run_bisect, verify_mode
    from attrib.tracker import Filing

    def go() -> int:
        from attrib.recipe import parse_duration

        config = _config(alpha, beta, min_rounds, max_rounds, futility)
        budget_s = None if budget is None else parse_duration(budget)
        if budget is not None and budget_s is None:
            raise InputError(f'--budget {budget!r}: expected a duration such as "30m", "2h" or "90s"')
        _check_output(json_out, "--json")
        _check_output(report_out, "--report")
        filing = Filing.prepare(file_issue, comment, label)
        mode = verify_mode(verify)
        p = plan(repo, good, bad, recipe, benchmark or [], executor, workdir)
        progress = _progress()
        with progress if isinstance(progress, RichProgress) else nullcontext():
            result = run_bisect(p, config, seed, progress, probes=probes, verify=mode, budget_s=budget_s)
        return _emit(result, json_out, report_out, filing)

    _guard(go)


@app.command()
def compare(
    reference: str = typer.Argument(..., help="Reference revision (e.g. the culprit's parent)."),
    candidate: str = typer.Argument(..., help="Candidate revision."),
    repo: Path = RepoOpt,
    recipe: Path = RecipeOpt,
    benchmark: str | None = BenchOpt,
    executor: str = ExecOpt,
    workdir: Path | None = WorkOpt,
    json_out: Path | None = typer.Option(None, "--json", help="Write the comparison JSON here."),
    alpha: float = AlphaOpt,
    beta: float = BetaOpt,
    min_rounds: int = MinRoundsOpt,
    max_rounds: int = MaxRoundsOpt,
    futility: bool = FutilityOpt,
    seed: int = SeedOpt,
) -> None:
    """One sequential comparison: is CANDIDATE worse than REFERENCE? Exit 0 worse, 10 not worse,
    11 undecided (at the cap, or once the rounds left could not decide), 12 the environment changed
    under it, 2 bad input, 1 other failure."""
    from attrib.job import plan, run_compare

    def go() -> int:
        config = _config(alpha, beta, min_rounds, max_rounds, futility)
        _check_output(json_out, "--json")
        p = plan(repo, reference, candidate, recipe, [benchmark] if benchmark else [], executor, workdir, require_ancestor=False)
        if len(p.benches) > 1:
            raise InputError(f"attrib compare measures one benchmark; --benchmark {benchmark} names {len(p.benches)}")
        result = run_compare(p, config, seed, PlainProgress(sys.stderr))
        if json_out is not None:
            atomic_write_text(json_out, dump(result))
        typer.echo(compare_line(result, candidate, reference))
        return COMPARE_EXIT.get(result.comparison.verdict, EXIT_FAILURE)

    _guard(go)


@app.command()
def report(
    result_json: Path = typer.Argument(..., help="A result JSON written by `attrib bisect --json` or `attrib compare --json`."),
    out: Path | None = typer.Option(None, "--out", help="Write the markdown here instead of stdout."),
    file_issue: str | None = FileIssueOpt,
    comment: str | None = CommentOnOpt,
    label: list[str] | None = LabelOpt,
) -> None:
    """Render the markdown report of a stored result (and file it with --file-issue)."""
    from attrib.tracker import Filing

    def go() -> int:
        filing = Filing.prepare(file_issue, comment, label)
        result = load_result(result_json)
        if filing is not None and not isinstance(result, BisectResult):
            raise InputError(f"{result_json}: a compare result; --file-issue and --comment-on file bisection results only")
        plot = None
        if out is None:
            typer.echo(render(result))
        else:
            _check_output(out, "--out")
            plot = write_report(result, out)
        if filing is not None and isinstance(result, BisectResult):
            _file(result, filing, plot)
        return EXIT_OK

    _guard(go)


DEMO_RUNNERS = ("auto", "cupy", "command")


@app.command()
def demo(
    directory: Path = typer.Option(DEMO_DIR, "--dir", help="Where the sample tree, cache and report go."),
    seed: int = SeedOpt,
    runner: str = typer.Option(
        "auto",
        "--runner",
        help="cupy: time the tree's GEMM on the GPU; command: the CPU benchmark; auto: cupy when a GPU is usable.",
    ),
) -> None:
    """Generate the sample kernel tree (60+ commits, a planted slowdown, a broken stretch,
    churn) and bisect it with the local executor: on the GPU when there is one, else on the CPU."""
    from attrib.demo import DEMO_CUPY_RECIPE, DEMO_RECIPE, TreeSpec, generate_tree
    from attrib.job import plan, run_bisect

    def go() -> int:
        if runner not in DEMO_RUNNERS:
            raise InputError(f"--runner {runner!r}: expected one of: {', '.join(DEMO_RUNNERS)}")
        from attrib.evaluate.gpu.device import probe

        why = probe() if runner != "command" else "not asked for"
        if runner == "cupy" and why:  # before anything is written
            raise GpuUnavailable(f"benchmark 'gemm-bf16' times kernels on a GPU, and there is none here: {why}")
        use_gpu = runner != "command" and not why
        if runner == "auto" and why:
            typer.echo(f"no usable GPU ({why}): using the CPU benchmark (recipes/demo-cpu.toml)")
        if directory.exists():
            if not (directory / DEMO_MARKER).exists():
                raise InputError(f"--dir {directory}: exists and is not an attrib demo directory; choose another")
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        (directory / DEMO_MARKER).write_text("made by attrib demo; safe to delete\n")
        name, text = ("demo-cupy.toml", DEMO_CUPY_RECIPE) if use_gpu else ("demo-cpu.toml", DEMO_RECIPE)
        recipe_path = directory / name
        recipe_path.write_text(text)
        if use_gpu:
            typer.echo(
                "GPU found: bisecting the tree's bf16 tensor-core GEMM with the cupy runner (recipes/demo-cupy.toml)"
            )
        typer.echo(f"generating the sample tree in {directory / 'repo'} ...")
        tree = generate_tree(directory / "repo", TreeSpec(seed=seed))
        typer.echo(
            f"planted: {len(tree.culprits)} slowdown at {tree.culprits[0][:10]}, {len(tree.broken)} commits that do not build"
        )
        p = plan(tree.path, tree.good, tree.bad, recipe_path, [], "local", directory / "work")
        typer.echo(f"runner: {p.bench.runner} (benchmark '{p.bench.name}' of {name}; docs/recipes.md lists the runners)")
        progress = _progress()
        with progress if isinstance(progress, RichProgress) else nullcontext():
            result = run_bisect(p, TestConfig(), seed, progress, verify=VerifyMode.REVERT)
        code = _emit(result, directory / "result.json", directory / "report.md")
        found = [c.commit for c in result.culprits]
        typer.echo(
            "the planted culprit was "
            + ("found" if found == tree.culprits else f"NOT found (expected {tree.culprits[0]})")
        )
        return code

    _guard(go)


@app.command("inspect")
def inspect_cmd(
    recipe: Path | None = typer.Option(
        None, "--recipe", help="Inspect this recipe's cupy benchmarks (default: attrib's kernel suite)."
    ),
    benchmark: str | None = BenchOpt,
    repo: Path = typer.Option(Path("."), "--repo", help="Repository whose tree provides sources and headers."),
    commit: str | None = typer.Option(
        None, "--commit", help="Build this revision and compile from its checkout (default: the working tree as it is)."
    ),
    arch: list[str] | None = typer.Option(
        None, "--arch", help="Architecture(s) to compile for (default: the recipe's, else sm_90)."
    ),
    executor: str = ExecOpt,
    workdir: Path | None = WorkOpt,
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Static kernel metrics from NVRTC (registers, spills, stack, shared memory, binary size); no GPU needed.
    Exit 0, or 1 when a kernel does not compile."""
    from rich.table import Table

    from attrib.evaluate.gpu.inspection import COLUMNS, inspect, targets_from_recipe, targets_from_suite
    from attrib.job import built_checkout
    from attrib.recipe import load_recipe

    def go() -> int:
        archs: tuple[str, ...] = tuple(arch or ())
        if recipe is None:
            if commit is not None:
                raise InputError("--commit needs --recipe: the recipe says how to build the tree and what to compile")
            targets = targets_from_suite()
            archs = archs or ("sm_90",)
        else:
            loaded = load_recipe(recipe)
            checkout = built_checkout(repo, commit, loaded, executor, workdir) if commit else repo.resolve()
            targets = targets_from_recipe(loaded, benchmark, checkout)
            if not archs:
                archs = tuple(dict.fromkeys(a for b in loaded.benchmarks if b.cupy for a in b.cupy.archs))
        rows = inspect(targets, archs)
        if json_out:
            typer.echo(json.dumps([r.as_dict() for r in rows], indent=2))
        else:
            table = Table("benchmark", "function", "arch", *COLUMNS)
            for r in rows:
                if r.metrics is None:
                    table.add_row(r.benchmark, r.function, r.arch, r.error or "no ptxas report")
                else:
                    table.add_row(r.benchmark, r.function, r.arch, *(str(r.metrics.value(c)) for c in COLUMNS))
            Console(width=200).print(table)
        return EXIT_FAILURE if any(r.error for r in rows) else EXIT_OK

    _guard(go)


images_app = typer.Typer(no_args_is_help=True, help="Container images for --executor docker.")
app.add_typer(images_app, name="images")


@images_app.command("build")
def images_build(
    force: bool = typer.Option(False, "--force", help="Rebuild images that exist."),
    suite: str = typer.Option("bookworm", "--suite", help="Debian suite of the base image."),
    mirror: str = typer.Option("http://deb.debian.org/debian", "--mirror", help="Debian mirror for debootstrap."),
) -> None:
    """Make attrib/debian-base (debootstrap + docker import, no registry needed) and attrib/cpu."""
    from attrib.evaluate.executors.docker import connect
    from attrib.evaluate.images import build_base, build_cpu

    def go() -> int:
        client = connect()
        build_base(client, suite=suite, mirror=mirror, force=force, log=typer.echo)
        build_cpu(client, force=force, log=typer.echo)
        return EXIT_OK

    _guard(go)


# The daemon and its clients (issue 7) live in their own module; they share _guard.
from attrib.daemon.cli_client import register as _register_daemon  # noqa: E402

_register_daemon(app, _guard)

# The nightly history and change-point detection (issue 14): their own module too.
from attrib.history.cli import register as _register_history  # noqa: E402

_register_history(app, _guard)


@app.callback(invoke_without_command=True)
def main(version: bool = typer.Option(False, "--version", help="Print the version and exit.")) -> None:
    if version:
        typer.echo(f"attrib {__version__}")
        raise typer.Exit(0)


if __name__ == "__main__":
    app()
