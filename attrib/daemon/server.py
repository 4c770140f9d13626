"""The daemon's HTTP API (FastAPI on uvicorn) and `serve`, which runs it with the workers.

Every body is read by bodies.BoundedBodies first (at most MAX_BODY_BYTES from any framing,
a bounded number at once); authentication happens on those raw bytes before anything is parsed
or stored (auth.py):
  POST /v1/results           same signature; nightly results (results_api.py, with GET /series)
  POST /v1/regressions       X-Attrib-Signature-256: t=<unix>,v1=<hex HMAC-SHA256("<t>.<body>")>
  POST /v1/webhooks/github   X-Hub-Signature-256 (GitHub's own header); a failed workflow_run
                             makes the daemon fetch the run's attrib-flag artifact
                             (github_artifacts.py) only after this check
  POST /v1/webhooks/gitlab   X-Gitlab-Token: <secret>
  GET ..., POST .../cancel   Authorization: Bearer <secret>
every comparison with hmac.compare_digest. An authentic request already accepted (a replay) is
answered from the store with the first answer, before any validation. The interactive docs
(/docs, /openapi.json) are off: they would be the only unauthenticated routes. `serve` holds
the state directory's lock (owner.py) for the daemon's life.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import re
import socket
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.concurrency import run_in_threadpool

from attrib.core.model import JobState
from attrib.daemon.answers import FiniteJSONResponse
from attrib.daemon.auth import SignaturePolicy, Verified, check_bearer, verify_github, verify_gitlab, verify_signature
from attrib.daemon.bodies import ASGIApp, BoundedBodies
from attrib.daemon.config import Settings, github_token
from attrib.daemon.connections import guarded_h11
from attrib.daemon.flags import FlagContext, WorkflowRun, parse_body, prepare_group
from attrib.daemon.github_artifacts import ARTIFACT_NAME, DEADLINE_GRACE_S, FETCH_DEADLINE_S, fetch_flag
from attrib.daemon.grouping import covering, joins
from attrib.daemon.headers import SecurityHeaders
from attrib.daemon.owner import StateOwner
from attrib.daemon.senders import Sender, check_sender, github_event, gitlab_event
from attrib.daemon.store import Accepted, Job, Store
from attrib.daemon.worker import WorkerPool
from attrib.errors import (
    BadRows,
    FlagError,
    FlagRefused,
    IngestError,
    InputError,
    QueueFull,
    StateError,
    Unauthorized,
    UpstreamError,
)
from attrib.result import to_json

log = logging.getLogger("attrib.daemon")

MAX_BODY_BYTES = 1 << 20  # a flag is a few hundred bytes; a check_run payload a few tens of KiB
MAX_BODIES = 8  # bodies being read at once: at most 8 MiB of request bodies in memory
BODY_SLOT_WAIT_S = 10.0  # a request waits this long for its turn to send its body, then 503
BODY_READ_TIMEOUT_S = 30.0  # a body slower than this (a trickle holding a slot) gets 408
MAX_CONNECTIONS = 1024  # uvicorn's limit_concurrency: requests beyond it get 503 at once
MAX_PER_CLIENT = 32  # connections one client address may hold; more are closed at once
FD_HEADROOM = 256  # file descriptors beyond MAX_CONNECTIONS: the database, git, the workers
MAX_LIST = 1000  # jobs one GET /v1/jobs returns at most
RETRY_AFTER_S = 30  # what a 429 tells the sender
STOP_TIMEOUT_S = 30.0  # how long a stopping daemon waits for workers to hand their jobs back
GITHUB_FETCHES = 4  # artifact fetches at once; more wait for a thread (within the deadline)
_JOB_ID_RE = re.compile(r"^[0-9a-f]{16}$")


def create_app(store: Store, settings: Settings) -> ASGIApp:
    """The API behind the body bound (bodies.py): no route reads an unbounded body; every
    answer, refusals of the bound included, carries the security headers (headers.py)."""
    return SecurityHeaders(
        BoundedBodies(
            _api(store, settings),
            max_bytes=MAX_BODY_BYTES,
            max_concurrent=MAX_BODIES,
            slot_wait_s=BODY_SLOT_WAIT_S,
            read_timeout_s=BODY_READ_TIMEOUT_S,
        )
    )


def _handlers(app: FastAPI) -> None:
    """Errors caught once, here, for every route: each class of attrib.errors to its status."""

    @app.exception_handler(Unauthorized)
    async def _unauthorized(request: Request, exc: Unauthorized) -> Response:
        return JSONResponse({"error": str(exc)}, status_code=401, headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(InputError)
    async def _bad_input(request: Request, exc: InputError) -> Response:
        # Every InputError is the request's fault: a flag's field, an upload's rows, a revision.
        answer: dict[str, Any] = {"error": str(exc)}
        if isinstance(exc, FlagError):
            answer["field"] = exc.field
        if isinstance(exc, BadRows):
            answer["errors"] = [str(e) for e in exc.errors]
        elif isinstance(exc, IngestError):
            answer["errors"] = [str(exc)]
        # An authentic flag its sender may not send (a fork's run, another repository): 403.
        return JSONResponse(answer, status_code=403 if isinstance(exc, FlagRefused) else 400)

    @app.exception_handler(QueueFull)
    async def _full(request: Request, exc: QueueFull) -> Response:
        return JSONResponse({"error": str(exc)}, status_code=429, headers={"Retry-After": str(RETRY_AFTER_S)})

    @app.exception_handler(StateError)
    async def _state(request: Request, exc: StateError) -> Response:
        log.error("%s", exc)
        return JSONResponse({"error": str(exc)}, status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)})

    @app.exception_handler(UpstreamError)
    async def _upstream(request: Request, exc: UpstreamError) -> Response:
        log.warning("%s", exc)
        return JSONResponse({"error": str(exc)}, status_code=502)


def _api(store: Store, settings: Settings) -> FastAPI:
    app = FastAPI(
        title="attrib daemon", docs_url=None, redoc_url=None, openapi_url=None, default_response_class=FiniteJSONResponse
    )
    _handlers(app)
    ctx = FlagContext(settings.state, settings.recipes_dir, settings.allow_http_repos)
    policy = SignaturePolicy(settings.secret, settings.signature_tolerance_s, settings.allow_legacy_signature)
    # Its own small pool: a slow GitHub must not take the threads that validate other flags.
    github_pool = ThreadPoolExecutor(max_workers=GITHUB_FETCHES, thread_name_prefix="attrib-github")

    def _accept(flag: dict[str, Any], route: str, body: bytes, verified: Verified, sender: Sender | None = None) -> Accepted:
        # Runs in the thread pool: validation runs git (and may fetch a URL), the store blocks.
        # A webhook's flag is checked against its sender first (daemon/senders.py). A flag naming
        # several benchmarks is a group; it may join a queued job (daemon/grouping.py).
        if sender is not None:
            check_sender(sender, flag, settings.webhooks)
        job, members = prepare_group(flag, ctx)
        join, covered = joins(store, job, members, settings.group_window_s, time.time()), covering(store, job, members)
        return store.submit(job, route, body.decode("utf-8", "replace"), verified.keys, verified.expires, members, join, covered)

    def _accepted(acc: Accepted) -> JSONResponse:
        return JSONResponse(acc.answer(), status_code=202, headers={"X-Attrib-Replay": "1"} if acc.replay else None)

    async def _opening(request: Request, verify: Callable[[Mapping[str, str], bytes], Verified]) -> tuple[bytes, Verified, Response | None]:
        """What every flag route does first: the body (bounded by BoundedBodies), its signature
        on the raw bytes, then a replay answered with the first answer before any parsing."""
        body = await request.body()
        verified = verify(request.headers, body)
        earlier = await run_in_threadpool(store.answered, verified.keys)
        return body, verified, (_accepted(earlier) if earlier is not None else None)

    def _ignored(why: str) -> Response:
        return JSONResponse({"id": None, "duplicate_of": None, "ignored": why})

    @app.post("/v1/regressions")
    async def regressions(request: Request) -> Response:
        body, verified, replay = await _opening(request, lambda h, b: verify_signature(h, b, policy))
        if replay is not None:
            return replay
        # Parsing is off the event loop too: a body is up to 1 MiB of anyone's text.
        flag = await run_in_threadpool(parse_body, body)
        return _accepted(await run_in_threadpool(_accept, flag, "regressions", body, verified))

    @app.post("/v1/webhooks/github")
    async def github(request: Request) -> Response:
        body, verified, replay = await _opening(request, lambda h, b: verify_github(h, b, settings.secret))
        if replay is not None:
            return replay
        event = request.headers.get("X-GitHub-Event", "")
        found, why, sender = await run_in_threadpool(github_event, event, body, settings.github_api_url, settings.webhooks)
        route, stored = "github", body
        if isinstance(found, WorkflowRun):
            run, route = found, "github-artifact"
            found = await _artifact_flag(run)
            if found is None:
                why = f"workflow run {run.run_id} of {run.repo} has no unexpired {ARTIFACT_NAME} artifact"
            else:
                if "source" not in found and run.html_url:
                    found["source"] = run.html_url
                # The event holds no flag and the artifact expires: store the flag with its run.
                stored = json.dumps({"workflow_run": {"repository": run.repo, "id": run.run_id}, "flag": found}).encode()
        if found is None:
            return _ignored(why)
        return _accepted(await run_in_threadpool(_accept, found, route, stored, verified, sender))

    async def _artifact_flag(run: WorkflowRun) -> dict[str, Any] | None:
        """The flag in the run's artifact, fetched in the GitHub pool; the fetch's client holds
        every read to FETCH_DEADLINE_S, so the thread is free when this answers."""

        def fetch() -> dict[str, Any] | None:
            try:
                token = github_token(settings.github_token_file)
            except InputError as exc:
                raise UpstreamError(f"github:{run.repo}: {exc}") from None
            return fetch_flag(run, settings.github_api_url, token)

        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(github_pool, fetch), FETCH_DEADLINE_S + DEADLINE_GRACE_S)
        except TimeoutError:
            raise UpstreamError(f"github:{run.repo}: fetching the {ARTIFACT_NAME} artifact took longer than {FETCH_DEADLINE_S:g} s") from None

    @app.post("/v1/webhooks/gitlab")
    async def gitlab(request: Request) -> Response:
        body, verified, replay = await _opening(request, lambda h, b: verify_gitlab(h, b, settings.secret))
        if replay is not None:
            return replay
        event = request.headers.get("X-Gitlab-Event", "")
        flag, why, sender = await run_in_threadpool(gitlab_event, event, body)
        if flag is None:
            return _ignored(why)
        return _accepted(await run_in_threadpool(_accept, flag, "gitlab", body, verified, sender))

    _job_routes(app, store, settings)
    from attrib.daemon import results_api  # POST /v1/results and the series view (nightly history)

    results_api.include(app, store, settings)

    return app


def _job_routes(app: FastAPI, store: Store, settings: Settings) -> None:
    """The Bearer-authenticated reads of the queue, and cancel."""

    def _job_or_404(job_id: str) -> Job | None:
        return store.get(job_id) if _JOB_ID_RE.match(job_id) else None

    @app.get("/v1/jobs")
    def jobs(request: Request, state: str | None = None, limit: str = "100") -> Response:
        check_bearer(request.headers.get("Authorization"), settings.secret)
        # Parsed here, after the secret: FastAPI would answer a bad integer with 422 before any check.
        if not limit.isascii() or not limit.isdigit() or not 1 <= int(limit) <= MAX_LIST:
            raise FlagError("limit", f"{limit!r}: expected an integer from 1 to {MAX_LIST}")
        states = None
        if state is not None:
            try:
                states = [JobState(s) for s in state.split(",")]
            except ValueError:
                raise FlagError("state", f"{state!r}: expected one or more of {', '.join(s.value for s in JobState)}") from None
        jobs = store.jobs(int(limit), states)
        members = store.members([j.id for j in jobs])
        return JSONResponse({"jobs": [j.summary(members.get(j.id)) for j in jobs]})

    @app.get("/v1/jobs/{job_id}")
    def job(request: Request, job_id: str) -> Response:
        check_bearer(request.headers.get("Authorization"), settings.secret)
        found = _job_or_404(job_id)
        if found is None:
            return JSONResponse({"error": f"no job {job_id}"}, status_code=404)
        report = settings.job_dir(found.id) / "report.md"
        return JSONResponse(
            {
                **found.summary(store.members([found.id]).get(found.id)),
                "result": to_json(found.result) if found.result is not None else None,
                "report": f"/v1/jobs/{found.id}/report" if report.exists() else None,
            }
        )

    @app.get("/v1/jobs/{job_id}/report")
    def job_report(request: Request, job_id: str) -> Response:
        check_bearer(request.headers.get("Authorization"), settings.secret)
        found = _job_or_404(job_id)
        path = settings.job_dir(found.id) / "report.md" if found else None
        if path is None or not path.exists():
            return JSONResponse({"error": f"no report for job {job_id}"}, status_code=404)
        return PlainTextResponse(path.read_text(), media_type="text/markdown; charset=utf-8")

    @app.post("/v1/jobs/{job_id}/cancel")
    def cancel(request: Request, job_id: str) -> Response:
        check_bearer(request.headers.get("Authorization"), settings.secret)
        state = store.request_cancel(job_id) if _JOB_ID_RE.match(job_id) else None
        if state is None:
            return JSONResponse({"error": f"no job {job_id}"}, status_code=404)
        return JSONResponse({"id": job_id, "state": state.value, "cancel_requested": state is JobState.RUNNING}, status_code=202)

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request) -> Response:
        check_bearer(request.headers.get("Authorization"), settings.secret)
        return HTMLResponse(status_page(store))


def _result_cells(job: Job) -> tuple[str, str]:
    """Status and culprits of a job's result (a stored result that cannot be read leaves none,
    and the job's error says why)."""
    if job.result is None:
        return "", ""
    return job.result.status.value, ", ".join(c.commit[:10] for c in job.result.culprits)


def status_page(store: Store) -> str:
    """A small page of the queue and recent results. Every value is escaped: repo names,
    sources and errors come from flags, i.e. from outside, and isolated in <bdi> (their
    direction cannot reorder the page's own text)."""
    e = html.escape

    def b(text: str) -> str:
        return f"<bdi>{e(text)}</bdi>"

    counts = store.counts()
    rows = []
    jobs = store.jobs(50)
    groups = store.members([j.id for j in jobs])
    for j in jobs:
        status, culprits = _result_cells(j)
        phase = j.progress.get("phase", "") if j.state is JobState.RUNNING else (j.error or "")
        report = f'<a href="/v1/jobs/{e(j.id)}/report">report</a>' if j.state is JobState.DONE else ""
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{cell}</td>"
                for cell in (
                    f'<a href="/v1/jobs/{e(j.id)}">{e(j.id)}</a>',
                    e(j.state.value),
                    e(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(j.created))),
                    b(j.repo),
                    e(f"{j.good[:10]}..{j.bad[:10]}"),
                    _members_cell(groups.get(j.id), j.benchmark),
                    e(status),
                    e(culprits),
                    b(str(phase)),
                    b(j.source or ""),
                    report,
                )
            )
            + "</tr>"
        )
    summary = ", ".join(f"{e(k[5:])}: {v}" for k, v in sorted(counts.items()) if k.startswith("jobs_"))
    head = "".join(
        f"<th>{h}</th>" for h in ("job", "state", "created (UTC)", "repo", "range", "benchmark", "status", "culprits", "now / error", "source", "")
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>attrib daemon</title>"
        "<style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:left}</style></head><body>"
        f"<h1>attrib daemon</h1><p>{summary or 'no jobs yet'}; {counts['flags']} flags, {counts['samples']} runs recorded;"
        " <a href='/series'>nightly series</a></p>"
        f"<table><tr>{head}</tr>{''.join(rows)}</table></body></html>"
    )


def _members_cell(members: list[str] | None, benchmark: str) -> str:
    """A job's benchmark, or a group's: how many, and each of them (folded when many)."""
    if not members:
        return f"<bdi>{html.escape(benchmark)}</bdi>"
    names = ", ".join(f"<bdi>{html.escape(m)}</bdi>" for m in members)
    return f"<details class='group'><summary>group of {len(members)}</summary>{names}</details>"


def _room_for_connections(wanted: int) -> None:
    """Raise the soft limit on open files towards `wanted` (within the hard limit): a default
    soft limit of 1024 would end accept() before MAX_CONNECTIONS were reached."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        log.info("open files limit raised from %d to %d", soft, target)


def serve(settings: Settings) -> int:
    """Run the daemon until SIGINT/SIGTERM. Holds --state's lock (a second daemon on it exits
    2), prints one line with the address it listens on and writes it to --state/daemon.json
    (with --port 0 the OS picks the port); removes daemon.json when it stops."""
    import uvicorn

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    owner = StateOwner(settings.state)
    owner.acquire()
    try:
        store = Store(settings.db_path, busy_timeout_s=settings.busy_timeout_s, max_queue=settings.max_queue)
        family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((settings.host, settings.port))
        except OSError as exc:
            sock.close()
            raise StateError(f"--host {settings.host} --port {settings.port}: cannot listen ({exc.strerror})") from None
        sock.listen(128)
        port = sock.getsockname()[1]
        url = f"http://{'[' + settings.host + ']' if family == socket.AF_INET6 else settings.host}:{port}"
        owner.announce(url)
        pool = WorkerPool(store, settings)
        pool.start()
        print(f"attrib daemon listening on {url} (state {settings.state}, {settings.workers} worker(s))", flush=True)
        _room_for_connections(MAX_CONNECTIONS + FD_HEADROOM)
        config = uvicorn.Config(
            create_app(store, settings),
            log_level="warning",
            lifespan="off",
            limit_concurrency=MAX_CONNECTIONS,
            http=guarded_h11(settings.head_timeout_s, MAX_PER_CLIENT),
        )
        try:
            uvicorn.Server(config).run(sockets=[sock])
        except KeyboardInterrupt:
            pass  # uvicorn re-raises the SIGINT/SIGTERM that stopped it, after its graceful shutdown
        finally:
            pool.stop(STOP_TIMEOUT_S)
            sock.close()
            log.info("stopped")
    finally:
        owner.release()
    return 0
