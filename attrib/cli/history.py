"""`attrib history add|push` and `attrib detect`: the nightly history from the command line.

Registered on the main app by attrib/cli/__init__.py (one call). `add` and `detect` work on a history file of
their own (--db, default ./attrib-history.db) and the repository the results were measured
in (--repo, for resolving and ordering commits); `push` sends the files to a daemon, which
keeps the history in its database, detects, and queues bisections (docs/history.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import typer

from attrib.errors import InputError
from attrib.history.ingest import Options

DEFAULT_DB = Path("attrib-history.db")
DbOpt = typer.Option(DEFAULT_DB, "--db", envvar="ATTRIB_HISTORY_DB", help="The history file (SQLite).")
RepoOpt = typer.Option(Path("."), "--repo", help="The repository the results were measured in.")
ProjectOpt = typer.Option(None, "--project", help="Project name (default: the repository's directory name).")
FormatOpt = typer.Option("auto", "--format", help="auto, csv, attrib, gbench or nvbench.")
CommitOpt = typer.Option(None, "--commit", help="The commit a Google Benchmark / NVBench file measured.")
ConfigOpt = typer.Option(None, "--config", help="KEY=VALUE configuration (machine class...) of every row; repeatable.")
EnvOpt = typer.Option(
    None, "--env", help="KEY=VALUE of the environment every row ran in (compiler, driver); repeatable. Never splits a series."
)
TimeOpt = typer.Option(None, "--time", help="When files without a time were measured (ISO 8601) (default: now).")


def _read(files: list[Path]) -> list[tuple[str, str]]:
    out = []
    for f in files:
        try:
            out.append((str(f), f.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise InputError(f"{f}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{f}: cannot read ({exc})") from None
    return out


def _options(fmt: str, commit: str | None, config: list[str] | None, when: str | None, env: list[str] | None = None) -> Options:
    from attrib.formats.results_csv import parse_timestamp
    from attrib.history.ingest import InputFormat
    from attrib.history.settings import parse_pairs

    try:
        f = InputFormat(fmt)
    except ValueError:
        raise InputError(f"--format {fmt!r}: expected one of: {', '.join(x.value for x in InputFormat)}") from None
    at = parse_timestamp(when, "--time", "", "") if when else None
    return Options(f, commit, parse_pairs(config, "--config"), at, parse_pairs(env, "--env"))


Guard = Callable[[Callable[[], int]], None]  # attrib/cli/guard.py's guard: errors -> exit codes


def register(app: typer.Typer, guard: Guard) -> None:
    history_app = typer.Typer(no_args_is_help=True, help="The nightly history of benchmark results.")
    app.add_typer(history_app, name="history")
    history_app.command("add")(_add(guard))
    history_app.command("push")(_push(guard))
    app.command("detect")(_detect(guard))


def _add(guard: Guard) -> Callable[..., None]:
    """The `attrib history add` command."""

    def add(
        files: list[Path] = typer.Argument(..., help="CSV, attrib result/compare JSON, Google Benchmark or NVBench JSON."),
        db: Path = DbOpt,
        repo: Path = RepoOpt,
        project: str | None = ProjectOpt,
        fmt: str = FormatOpt,
        commit: str | None = CommitOpt,
        config: list[str] | None = ConfigOpt,
        when: str | None = TimeOpt,
        env: list[str] | None = EnvOpt,
    ) -> None:
        """Add result files to the history: all of them or, on any bad row, none."""
        from attrib.history.ingest import SourceFile, ingest
        from attrib.history.order import GitLine
        from attrib.history.store import HistoryStore

        def go() -> int:
            opts = _options(fmt, commit, config, when, env)
            line = GitLine(repo)
            name = project or line.repo.path.name
            sources = [SourceFile(n, t) for n, t in _read(files)]
            for got in ingest(HistoryStore(db), name, sources, opts, line.resolve):
                typer.echo(
                    f"{got.name}: "
                    + ("already in the history; nothing added" if got.duplicate else f"{got.rows} results added")
                    + (f" ({got.skipped} rows with an empty value skipped)" if got.skipped else "")
                )
            return 0

        guard(go)

    return add


def _push(guard: Guard) -> Callable[..., None]:
    """The `attrib history push` command."""

    def push(
        files: list[Path] = typer.Argument(..., help="Result files, as for `attrib history add`."),
        project: str = typer.Option(..., "--project", help="The project, as the daemon's config names it."),
        fmt: str = FormatOpt,
        commit: str | None = CommitOpt,
        config: list[str] | None = ConfigOpt,
        when: str | None = TimeOpt,
        env: list[str] | None = EnvOpt,
        url: str | None = typer.Option(None, "--url", envvar="ATTRIB_URL", help="The daemon's address."),
        secret_file: Path | None = typer.Option(None, "--secret-file", envvar="ATTRIB_SECRET_FILE", help="File holding the shared secret."),
    ) -> None:
        """Send result files to the daemon (signed POST /v1/results); it detects and bisects."""
        from attrib.cli.daemon import DEFAULT_URL, check_answer, read_client_secret, request

        def go() -> int:
            opts = _options(fmt, commit, config, when, env)  # bad options fail here, before anything is sent
            body = {
                "project": project, "format": fmt, "commit": commit, "config": config or [], "time": when,
                "environment": dict(opts.environment),
                "files": [{"name": n, "content": t} for n, t in _read(files)],
            }  # fmt: skip
            answer = check_answer(
                *request(url or DEFAULT_URL, "POST", "/v1/results", read_client_secret(secret_file), json.dumps(body).encode(), sign_body=True),
                "history push",
            )
            for f in answer["files"]:
                typer.echo(f"{f['name']}: " + ("already in the history" if f["duplicate"] else f"{f['rows']} results added"))
            for c in answer["changes"]:
                typer.echo(_line(c))
            for e in answer.get("environment", []):  # a daemon before issue 41 sends none
                typer.echo(f"environment {e['title']}: not bisected; {e['issue']}")
            return 0

        guard(go)

    return push


def _detect(guard: Guard) -> Callable[..., None]:
    """The `attrib detect` command."""

    def detect_cmd(
        db: Path = DbOpt,
        repo: Path = RepoOpt,
        branch: str = typer.Option("HEAD", "--branch", help="Order commits by this branch's first-parent line."),
        project: str | None = ProjectOpt,
        benchmark: str | None = typer.Option(None, "--benchmark", help="Only benchmarks matching this glob."),
        since: str | None = typer.Option(None, "--since", help="Only change points after this revision."),
        setting: list[str] | None = typer.Option(None, "--setting", help="KEY=VALUE detection setting; repeatable."),
        json_out: bool = typer.Option(False, "--json", help="Print the change points as a JSON list."),
    ) -> None:
        """Find change points in the history's series; decided ones are kept, recoveries marked."""
        from attrib.history.detection import detect_series, finding_json, select
        from attrib.history.order import GitLine, position
        from attrib.history.settings import detect_settings, parse_pairs
        from attrib.history.store import HistoryStore

        def go() -> int:
            if not db.exists():
                raise InputError(f"--db {db}: no such history file (add results with `attrib history add`)")
            settings = detect_settings(parse_pairs(setting, "--setting"), "--setting")
            line = GitLine(repo, branch)
            commits = line.line()
            start = position(commits, line.resolve(since)) if since else -1
            store = HistoryStore(db)
            name = project or line.repo.path.name
            found = [f for s in select(store, name, benchmark) for f in detect_series(store, s, commits, settings)]
            found = [f for f in found if f.change.after in commits and commits.index(f.change.after) > start]
            if json_out:
                typer.echo(json.dumps([finding_json(f) for f in found], indent=2))
            else:
                for f in found:
                    typer.echo(_line(finding_json(f)))
                if not found:
                    typer.echo("no change points")
            return 0

        guard(go)

    return detect_cmd

def _line(c: dict[str, object]) -> str:
    ci = c["ci_pct"]
    assert isinstance(ci, list)
    cfg = c["config"]
    extra = " ".join(f"{k}={v}" for k, v in cfg.items()) if isinstance(cfg, dict) else ""
    state = [s for s in ("new" if c["new"] else "", f"recovered at {str(c['recovered_at'])[:10]}" if c["recovered"] else "") if s]
    job = f" job {c['job']}" if c.get("job") else ""
    return (
        f"{c['direction']:<11} {float(c['change_pct']):+.2f} % [{ci[0]:+.2f}, {ci[1]:+.2f}]  {c['benchmark']}"  # type: ignore[arg-type]
        + (f" [{extra}]" if extra else "")
        + f"  {str(c['before'])[:10]}..{str(c['after'])[:10]}  p={float(c['p_value']):.2g}  {c['flag']}{job}"  # type: ignore[arg-type]
        + (f" ({', '.join(state)})" if state else "")
    )
