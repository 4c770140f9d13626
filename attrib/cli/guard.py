"""The command line's contract with its caller: exit codes, and the one place errors become them.

An AttribError is one line on stderr and its exit code; Ctrl-C and SIGTERM (a CI job
cancelled) are exit 130 after the builds in progress are stopped.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console

from attrib.core.model import Status, Verdict
from attrib.errors import AttribError, InputError

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

err = Console(stderr=True)


def _fail(message: str, code: int) -> None:
    err.print(f"attrib: error: {message}", style="bold red", highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(code)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM (a CI job cancelled) cleans up exactly like Ctrl-C


def guard(fn: Callable[[], int]) -> None:
    """The one place errors become exit codes."""
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        code = fn()
    except AttribError as exc:
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted; builds in progress were stopped, finished ones stay cached", EXIT_INTERRUPTED)
    raise typer.Exit(code)


def check_output(path: Path | None, option: str) -> None:
    if path is not None and not path.parent.resolve().is_dir():
        raise InputError(f"{option} {path}: directory {path.parent} does not exist")
