"""The command line: one package at the top, driving the layers below it; nothing imports it.

Parse, call the package, map the outcome to an exit code. Errors are caught once (guard.py):
an AttribError becomes one line on stderr and its exit code. The commands are grouped by what
they drive: run.py (bisect, compare, report), tools.py (demo, inspect, images build),
daemon.py (daemon, submit, jobs, status, cancel), history.py (history add|push, detect); the
options more than one command takes are written once in options.py.
"""

from __future__ import annotations

import typer

from attrib import __version__
from attrib.cli import daemon, history, run, tools
from attrib.cli.guard import (
    COMPARE_EXIT,
    EXIT_BAD_INPUT,
    EXIT_FAILURE,
    EXIT_INCONCLUSIVE,
    EXIT_INTERRUPTED,
    EXIT_NOT_REPRODUCED,
    EXIT_OK,
    EXIT_PARTIAL,
    STATUS_EXIT,
    guard,
)

__all__ = [
    "COMPARE_EXIT", "EXIT_BAD_INPUT", "EXIT_FAILURE", "EXIT_INCONCLUSIVE", "EXIT_INTERRUPTED", "EXIT_NOT_REPRODUCED",
    "EXIT_OK", "EXIT_PARTIAL", "STATUS_EXIT", "app",
]  # fmt: skip

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Find the commit(s) that made a benchmark slower.")
run.register(app)
tools.register(app)
daemon.register(app, guard)
history.register(app, guard)


@app.callback(invoke_without_command=True)
def main(version: bool = typer.Option(False, "--version", help="Print the version and exit.")) -> None:
    if version:
        typer.echo(f"attrib {__version__}")
        raise typer.Exit(0)
