"""`attrib daemon` and its clients `attrib submit`, `jobs`, `status`, `cancel`.

Registered on the main typer app by attrib/cli/__init__.py (one call). The clients send
through attrib.http, attrib's one HTTP client (standard library only: a CI job that flags a
regression needs no FastAPI). The daemon's address comes from --url or ATTRIB_URL; the secret
from ATTRIB_SECRET, or from a file named by --secret-file or ATTRIB_SECRET_FILE (never from a
command-line value: it would show in `ps` and in CI logs).

Retries: a connection that fails and a 5xx without a long Retry-After are tried again, at most
ATTEMPTS times in all, a few seconds together; any other answer (4xx, and the daemon's 429/503,
which ask for 30 s) is shown at once, as check_answer words it. A signed POST is signed again
for each attempt (auth.sign reads the clock then): the signature carries its time, and a
daemon refuses one older than its tolerance, so an old one must not be re-sent. Re-sending
is safe because the routes are: POST /v1/regressions merges a flag into the active job with
the same range (the answer names it: "duplicate of the active job"), POST /v1/results adds a
file once (the answer says "already in the history"), and cancelling twice is cancelling.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from attrib.errors import ClientError, InputError

DEFAULT_URL = "http://127.0.0.1:8765"
REQUEST_TIMEOUT_S = 60.0  # submission validates the flag (git, maybe a fetch) before answering
ATTEMPTS = 3
BACKOFF_S = 0.5  # then 1 s: a daemon restarting, a proxy's 502, not a daemon that is down
MAX_WAIT_S = 5.0  # the daemon's 429/503 ask for 30 s: that answer is shown, not waited out

UrlOpt = typer.Option(None, "--url", envvar="ATTRIB_URL", help=f"The daemon's address (default: {DEFAULT_URL}).")
SecretFileOpt = typer.Option(
    None, "--secret-file", envvar="ATTRIB_SECRET_FILE", help="File holding the shared secret (or set ATTRIB_SECRET)."
)


def read_client_secret(secret_file: Path | None) -> str:
    if secret_file is not None:
        from attrib.daemon.config import read_secret

        return read_secret(secret_file)
    secret = os.environ.get("ATTRIB_SECRET", "").strip()
    if not secret:
        raise InputError("no secret: set ATTRIB_SECRET, ATTRIB_SECRET_FILE or --secret-file")
    return secret


def request(
    url: str, method: str, path: str, secret: str, body: bytes | None = None, *, sign_body: bool = False
) -> tuple[int, dict[str, Any]]:
    """(status, JSON answer). HTTP errors the daemon answered are returned, not raised; an
    unreachable daemon is a ClientError."""
    from attrib.daemon.auth import SIGNATURE_HEADER, sign
    from attrib.http import HttpClient, Payload

    http = HttpClient(
        url,
        {} if sign_body else {"Authorization": f"Bearer {secret}"},
        target=f"the daemon at {url}",
        token_var="the shared secret",
        error=ClientError,
        max_attempts=ATTEMPTS,
        backoff_s=BACKOFF_S,
        max_wait_s=MAX_WAIT_S,
        timeout_s=REQUEST_TIMEOUT_S,
        unreachable=lambda reason: f"cannot reach the daemon at {url}: {reason}",
    )
    signer = (lambda data: {SIGNATURE_HEADER: sign(data, secret)}) if sign_body else None
    got = http.send(method, path, body=None if body is None else Payload(body, "application/json"), sign=signer)
    try:
        answer = json.loads(got.body) if got.body else {}
    except ValueError:
        answer = {"error": got.body.decode("utf-8", "replace")[:200]}
    return got.status, answer


def check_answer(status: int, answer: dict[str, Any], what: str) -> dict[str, Any]:
    message = str(answer.get("error", f"HTTP {status}"))
    if status == 401:
        raise ClientError(f"{what}: the daemon refused the secret ({message})")
    if status in (400, 404):
        raise InputError(f"{what}: {message}")
    if status == 429:
        raise ClientError(f"{what}: {message}")
    if status >= 300:
        raise ClientError(f"{what}: HTTP {status}: {message}")
    return answer


Guard = Callable[[Callable[[], int]], None]  # attrib/cli/guard.py's guard: errors -> exit codes


def register(app: typer.Typer, guard: Guard) -> None:
    """Add the daemon's commands to the main app; `guard` is attrib/cli/guard.py's (errors -> exit codes)."""
    for command in (_daemon, _submit, _jobs, _status, _cancel):
        app.command()(command(guard))


def _daemon(guard: Guard) -> Callable[..., None]:
    """The `attrib daemon` command."""

    def daemon(
        state: Path | None = typer.Option(None, "--state", help="Directory of the database, work dirs and reports."),
        secret_file: Path | None = typer.Option(None, "--secret-file", help="File holding the shared secret."),
        host: str | None = typer.Option(None, "--host", help="Address to listen on (default: 127.0.0.1)."),
        port: int | None = typer.Option(None, "--port", help="Port (default: 8765; 0: any free port)."),
        workers: int | None = typer.Option(None, "--workers", help="Bisections run at once (default: 1; 0: only accept and queue)."),
        executor: str | None = typer.Option(None, "--executor", help="local, docker or slurm (default: local)."),
        recipes_dir: Path | None = typer.Option(
            None, "--recipes-dir", help="Flags name recipes under this directory (default: the current one).",
        ),
        max_queue: int | None = typer.Option(None, "--max-queue", help="Queued jobs before new flags get 429 (default: 100)."),
        github_api_url: str | None = typer.Option(
            None, "--github-api-url", help="GitHub's REST API, for workflow_run artifacts (default: $GITHUB_API_URL or api.github.com).",
        ),
        github_token_file: Path | None = typer.Option(
            None, "--github-token-file", help="File holding a GitHub token with actions:read (default: $GITHUB_TOKEN).",
        ),
        config: Path | None = typer.Option(None, "--config", help="TOML file with the same settings (docs/daemon.md)."),
    ) -> None:
        """Run the service: take regression flags over HTTP, bisect them, survive restarts."""

        def go() -> int:
            from attrib.daemon.config import settings

            s = settings(
                {
                    "state": state, "secret_file": secret_file, "host": host, "port": port, "workers": workers,
                    "executor": executor, "recipes_dir": recipes_dir, "max_queue": max_queue,
                    "github_api_url": github_api_url, "github_token_file": github_token_file,
                },
                config,
            )  # fmt: skip
            try:
                from attrib.daemon.server import serve
            except ImportError as exc:
                raise InputError(f"the daemon needs its extra: pip install 'attrib[daemon]' ({exc})") from None
            return serve(s)

        guard(go)

    return daemon


def _submit(guard: Guard) -> Callable[..., None]:
    """The `attrib submit` command."""

    def submit(
        repo: str = typer.Option(..., "--repo", help="Repository: a path on the daemon's machine or a git URL."),
        good: str = typer.Option(..., "--good", help="A revision where the benchmark was fine."),
        bad: str = typer.Option(..., "--bad", help="A later revision where it is worse."),
        recipe: str = typer.Option(..., "--recipe", help="Recipe, relative to the daemon's recipes directory."),
        benchmark: list[str] | None = typer.Option(
            None, "--benchmark", help="Benchmark name in the recipe, or a glob; repeat it to flag a group."
        ),
        source: str | None = typer.Option(None, "--source", help="Free text: where the flag comes from (a CI job URL)."),
        file_issue: str | None = typer.Option(None, "--file-issue", help="Where the report is filed (github:OWNER/REPO...)."),
        url: str | None = UrlOpt,
        secret_file: Path | None = SecretFileOpt,
    ) -> None:
        """Flag a regression: sign the flag and post it to the daemon. Prints the job id."""

        def go() -> int:
            # A local path is sent absolute: the daemon's working directory is not ours.
            repo_text = str(Path(repo).resolve()) if Path(repo).exists() else repo
            flag: dict[str, str | list[str]] = {"repo": repo_text, "good": good, "bad": bad, "recipe": recipe}
            named = list(benchmark or [])
            if len(named) > 1:
                flag["benchmarks"] = named
            flag.update({k: v for k, v in (("benchmark", named[0] if len(named) == 1 else None), ("source", source), ("file_issue", file_issue)) if v})
            body = json.dumps(flag).encode()
            answer = check_answer(
                *request(url or DEFAULT_URL, "POST", "/v1/regressions", read_client_secret(secret_file), body, sign_body=True), "submit"
            )
            if answer.get("duplicate_of"):
                typer.echo(f"{answer['id']} (duplicate of the active job {answer['duplicate_of']}: merged)")
            else:
                typer.echo(f"{answer['id']} queued")
            return 0

        guard(go)

    return submit


def _jobs(guard: Guard) -> Callable[..., None]:
    """The `attrib jobs` command."""

    def jobs(
        state: str | None = typer.Option(None, "--state", help="Only these states, comma-separated."),
        json_out: bool = typer.Option(False, "--json", help="Print the daemon's JSON answer."),
        url: str | None = UrlOpt,
        secret_file: Path | None = SecretFileOpt,
    ) -> None:
        """List the daemon's jobs, newest first."""

        def go() -> int:
            path = "/v1/jobs" + (f"?state={urllib.parse.quote(state)}" if state else "")
            answer = check_answer(*request(url or DEFAULT_URL, "GET", path, read_client_secret(secret_file)), "jobs")
            if json_out:
                typer.echo(json.dumps(answer, indent=2))
                return 0
            for j in answer["jobs"]:
                names = j.get("benchmarks") or [j["benchmark"]]
                what = names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more"
                typer.echo(f"{j['id']}  {j['state']:<9}  {j['repo']}  {j['good'][:10]}..{j['bad'][:10]}  {what}")
            return 0

        guard(go)

    return jobs


def _status(guard: Guard) -> Callable[..., None]:
    """The `attrib status` command."""

    def status(
        job_id: str = typer.Argument(..., help="Job id (from `attrib submit` or `attrib jobs`)."),
        json_out: bool = typer.Option(False, "--json", help="Print the daemon's JSON answer (with the result)."),
        url: str | None = UrlOpt,
        secret_file: Path | None = SecretFileOpt,
    ) -> None:
        """One job: its state, progress, and the result's headline when done."""
        from attrib.report.markdown import headline
        from attrib.result import BisectResult, from_json

        def go() -> int:
            answer = check_answer(*request(url or DEFAULT_URL, "GET", f"/v1/jobs/{job_id}", read_client_secret(secret_file)), "status")
            if json_out:
                typer.echo(json.dumps(answer, indent=2))
                return 0
            typer.echo(f"{answer['id']} {answer['state']} (attempt {answer['attempts']})")
            if answer["state"] == "running":
                typer.echo(f"  {answer['progress'].get('phase', '')}")
            if answer.get("error"):
                typer.echo(f"  error: {answer['error']}")
            if answer.get("result"):
                result = from_json(answer["result"], f"job {answer['id']}'s result")
                if isinstance(result, BisectResult):
                    typer.echo("  " + headline(result).replace("**", "").replace("`", ""))
            if answer.get("filing"):
                typer.echo(f"  filing: {answer['filing']}")
            return 0

        guard(go)

    return status


def _cancel(guard: Guard) -> Callable[..., None]:
    """The `attrib cancel` command."""

    def cancel(
        job_id: str = typer.Argument(..., help="Job id."),
        url: str | None = UrlOpt,
        secret_file: Path | None = SecretFileOpt,
    ) -> None:
        """Cancel a job: a queued one at once, a running one at its next measurement."""

        def go() -> int:
            path = f"/v1/jobs/{urllib.parse.quote(job_id, safe='')}/cancel"
            answer = check_answer(*request(url or DEFAULT_URL, "POST", path, read_client_secret(secret_file)), "cancel")
            typer.echo(f"{answer['id']} {answer['state']}" + (" (stopping)" if answer.get("cancel_requested") else ""))
            return 0

        guard(go)

    return cancel
