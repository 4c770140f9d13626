"""`attrib bisect`, `compare` and `report`: a search or one comparison, and its result shown,
written and filed."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import typer

from attrib.cli.guard import COMPARE_EXIT, EXIT_FAILURE, EXIT_OK, STATUS_EXIT, check_output, guard
from attrib.cli.options import (
    DEFAULT_TEST_FLAGS,
    BenchOpt,
    CommentOnOpt,
    ExecOpt,
    FileIssueOpt,
    GroupOpt,
    LabelOpt,
    RecipeOpt,
    RepoOpt,
    TestFlags,
    WorkOpt,
    progress,
    with_test_flags,
)
from attrib.errors import InputError
from attrib.fsutil import atomic_write_text
from attrib.progress import PlainProgress, RichProgress
from attrib.report.markdown import compare_line, headline, render, write_report
from attrib.result import BisectResult, dump, load_result


def register(app: typer.Typer) -> None:
    app.command()(with_test_flags(bisect))
    app.command()(with_test_flags(compare))
    app.command()(report)


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
    tests: TestFlags = DEFAULT_TEST_FLAGS,
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

        config = tests.config()
        budget_s = None if budget is None else parse_duration(budget)
        if budget is not None and budget_s is None:
            raise InputError(f'--budget {budget!r}: expected a duration such as "30m", "2h" or "90s"')
        check_output(json_out, "--json")
        check_output(report_out, "--report")
        filing = Filing.prepare(file_issue, comment, label)
        mode = verify_mode(verify)
        p = plan(repo, good, bad, recipe, benchmark or [], executor, workdir)
        shown = progress()
        with shown if isinstance(shown, RichProgress) else nullcontext():
            result = run_bisect(p, config, tests.seed, shown, probes=probes, verify=mode, budget_s=budget_s)
        return emit(result, json_out, report_out, filing)

    guard(go)


def compare(
    reference: str = typer.Argument(..., help="Reference revision (e.g. the culprit's parent)."),
    candidate: str = typer.Argument(..., help="Candidate revision."),
    repo: Path = RepoOpt,
    recipe: Path = RecipeOpt,
    benchmark: str | None = BenchOpt,
    executor: str = ExecOpt,
    workdir: Path | None = WorkOpt,
    json_out: Path | None = typer.Option(None, "--json", help="Write the comparison JSON here."),
    tests: TestFlags = DEFAULT_TEST_FLAGS,
) -> None:
    """One sequential comparison: is CANDIDATE worse than REFERENCE? Exit 0 worse, 10 not worse,
    11 undecided (at the cap, or once the rounds left could not decide), 12 the environment changed
    under it, 2 bad input, 1 other failure."""
    from attrib.job import plan, run_compare

    def go() -> int:
        config = tests.config()
        check_output(json_out, "--json")
        p = plan(repo, reference, candidate, recipe, [benchmark] if benchmark else [], executor, workdir, require_ancestor=False)
        if len(p.benches) > 1:
            raise InputError(f"attrib compare measures one benchmark; --benchmark {benchmark} names {len(p.benches)}")
        result = run_compare(p, config, tests.seed, PlainProgress(sys.stderr))
        if json_out is not None:
            atomic_write_text(json_out, dump(result))
        typer.echo(compare_line(result, candidate, reference))
        return COMPARE_EXIT.get(result.comparison.verdict, EXIT_FAILURE)

    guard(go)


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
            check_output(out, "--out")
            plot = write_report(result, out)
        if filing is not None and isinstance(result, BisectResult):
            file_report(result, filing, plot)
        return EXIT_OK

    guard(go)


def emit(result: BisectResult, json_out: Path | None, report_out: Path | None, filing: Any = None) -> int:
    if json_out is not None:
        atomic_write_text(json_out, dump(result))
    plot = write_report(result, report_out) if report_out is not None else None
    typer.echo(plain(headline(result)))
    for c in result.culprits:
        typer.echo(f"culprit: {c.commit} {c.subject} ({c.author}) {c.change_pct:+.2f} % CI {list(c.ci_pct)}")
    for path, what in ((json_out, "result"), (report_out, "report")):
        if path is not None:
            typer.echo(f"{what}: {path}")
    if filing is not None:  # after the files are written: a filing failure loses nothing
        file_report(result, filing, plot)
    return STATUS_EXIT[result.status]


def file_report(result: BisectResult, filing: Any, plot: Path | None) -> None:
    """--file-issue / --comment-on; a TrackerError from here is exit 1 (docs: README)."""
    import tempfile

    from attrib.report.plot import plot_available, render_plot

    kept = plot is not None  # written next to --report/--out; a temporary one is gone after filing
    with tempfile.TemporaryDirectory(prefix="attrib-plot-") as tmp:
        if plot is None and plot_available():
            plot = render_plot(result, Path(tmp) / "plot.png")
        filing.run(result, plot, typer.echo, plot_kept=kept)


def plain(markdown: str) -> str:
    return markdown.replace("**", "").replace("`", "")
