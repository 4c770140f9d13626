"""The options more than one command takes, each written once.

The statistical test's six (--alpha, --beta, --min-rounds, --max-rounds, --futility, --seed)
are one group: a command declares one parameter `tests: TestFlags` where they go, and
`with_test_flags` hands typer the six in its place and the command one `TestFlags`.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import typer

from attrib.cli.guard import err
from attrib.core.stats import DEFAULT_MAX_ROUNDS, DEFAULT_MIN_ROUNDS, DEFAULT_TEST_ALPHA, DEFAULT_TEST_BETA, TestConfig
from attrib.errors import InputError
from attrib.progress import PlainProgress, RichProgress

RepoOpt = typer.Option(..., "--repo", help="Path of the git repository to bisect.")
RecipeOpt = typer.Option(..., "--recipe", help="Recipe TOML file (docs/recipes.md).")
BenchOpt = typer.Option(None, "--benchmark", help="Benchmark name in the recipe (needed if it has several).")
GroupOpt = typer.Option(
    None, "--benchmark",
    help="Benchmark of the recipe, by name or glob ('gemm_*'; '*': every one); repeat it to bisect a group at once.",
)  # fmt: skip
ExecOpt = typer.Option("local", "--executor", help="Where builds and runs happen: local, docker or slurm (docs/slurm.md).")
WorkOpt = typer.Option(None, "--workdir", help="Cache of checkouts, builds and logs (default: ~/.cache/attrib/<repo>).")
SeedOpt = typer.Option(0, "--seed", help="Seed of the run order within rounds.")
FileIssueOpt = typer.Option(
    None, "--file-issue", help="File the report: github:OWNER/REPO, gitlab:GROUP/PROJECT or dir:PATH (culprits only)."
)
CommentOnOpt = typer.Option(
    None,
    "--comment-on",
    help="Also post the report, whatever the outcome, on github:OWNER/REPO#N or gitlab:GROUP/PROJECT#N.",
)
LabelOpt = typer.Option(None, "--label", help="Label of filed issues (repeatable) (default: performance-regression).")


@dataclass(frozen=True)
class TestFlags:
    """What the test options said, checked only by `config` (inside the command's guard, so a
    bad value is one line and exit 2)."""

    alpha: float = DEFAULT_TEST_ALPHA
    beta: float = DEFAULT_TEST_BETA
    min_rounds: int = DEFAULT_MIN_ROUNDS
    max_rounds: int = DEFAULT_MAX_ROUNDS
    futility: bool = True
    seed: int = 0

    def config(self) -> TestConfig:
        for name, value in (("--alpha", self.alpha), ("--beta", self.beta)):
            if not 0 < value < 0.5:
                raise InputError(f"{name} {value}: expected a probability between 0 and 0.5")
        if not 2 <= self.min_rounds <= self.max_rounds:
            raise InputError(
                f"--min-rounds {self.min_rounds} / --max-rounds {self.max_rounds}: expected 2 <= min <= max"
            )
        return TestConfig(
            alpha=self.alpha, beta=self.beta, min_rounds=self.min_rounds, max_rounds=self.max_rounds, futility=self.futility
        )


DEFAULT_TEST_FLAGS = TestFlags()  # a command's `tests` default, for the type checker: typer never sees it

_TEST_FLAGS = tuple(
    inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=option, annotation=kind)
    for name, kind, option in (
        ("alpha", float, typer.Option(DEFAULT_TEST_ALPHA, "--alpha", help="P(calling an unchanged commit bad), per test.")),
        ("beta", float, typer.Option(DEFAULT_TEST_BETA, "--beta", help="P(calling a commit worse by the minimum change good), per test.")),
        ("min_rounds", int, typer.Option(DEFAULT_MIN_ROUNDS, "--min-rounds", help="Rounds before any test may decide.")),
        ("max_rounds", int, typer.Option(DEFAULT_MAX_ROUNDS, "--max-rounds", help="Rounds after which a test is inconclusive.")),
        ("futility", bool, typer.Option(
            True, "--futility/--no-futility", help="Stop a test that can no longer decide by its cap (--no-futility: run it to the cap).",
        )),
        ("seed", int, SeedOpt),
    )
)  # fmt: skip


def with_test_flags(command: Callable[..., None]) -> Callable[..., None]:
    """`command` as typer reads it: its parameter `tests` stands for the test options, in its
    place in the list; what they say reaches it as one `TestFlags`."""
    own = inspect.signature(command, eval_str=True)
    params = [q for p in own.parameters.values() for q in (_TEST_FLAGS if p.name == "tests" else (p,))]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> None:
        tests = TestFlags(**{p.name: kwargs.pop(p.name) for p in _TEST_FLAGS})
        command(**kwargs, tests=tests)

    wrapper.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return wrapper


def progress() -> Any:
    if err.is_terminal:
        return RichProgress(err)
    return PlainProgress(sys.stderr)
