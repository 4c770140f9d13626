"""The daemon's nightly-history routes, included by server.create_app (one call):

  POST /v1/results       X-Attrib-Signature-256 over the raw body, checked by auth.verify_signature
                         (the same check as POST /v1/regressions), before anything is parsed; the
                         body is bounded by the server's MAX_BODY_BYTES like every other
  GET  /series           the series view, SERIES_PER_PAGE series a page (?project=NAME&page=N):
                         each series as an SVG with its change points, linked to their
                         bisections; Authorization: Bearer <secret>, or HTTP Basic with the
                         secret as password, so a person can open it in a browser
  GET  /series/{id}.svg  one series' plot alone (same authentication)

Work that runs git or blocks on SQLite runs in the thread pool, as the flag routes do. Text
from results files is escaped and, in the page, isolated in <bdi> so that a right-to-left name
cannot reorder the page's own text around it.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from attrib.core.detect import ChangeDirection
from attrib.daemon.answers import FiniteJSONResponse
from attrib.daemon.auth import SignaturePolicy, Unauthorized, check_bearer, check_token, verify_signature
from attrib.daemon.config import Settings
from attrib.daemon.flags import mirror_path
from attrib.daemon.nightly import SERIES_PER_PAGE, Nightly
from attrib.daemon.store import Store
from attrib.errors import FlagError, RepoError
from attrib.gitrepo import is_git_url
from attrib.history.order import GitLine, ordered
from attrib.history.plot import Mark, series_svg
from attrib.history.projects import ProjectConfig
from attrib.history.store import Change, FlagState, Series

_SVG_RE = re.compile(r"^([0-9]{1,12})\.svg$")
_PAGE_RE = re.compile(r"[1-9][0-9]{0,8}")


def check_viewer(authorization: str | None, secret: str) -> None:
    """Bearer for scripts; Basic (any user name, the secret as password) for a browser."""
    scheme, _, value = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        check_bearer(authorization, secret)
        return
    try:
        _, _, password = base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise Unauthorized("malformed Authorization: Basic credentials") from None
    check_token(password, secret, "Authorization: Basic password")


def include(app: FastAPI, store: Store, settings: Settings) -> None:
    nightly = Nightly(store, settings)

    def _viewer(request: Request) -> Response | None:
        try:
            check_viewer(request.headers.get("Authorization"), settings.secret)
        except Unauthorized as exc:
            return JSONResponse({"error": str(exc)}, status_code=401, headers={"WWW-Authenticate": 'Basic realm="attrib"'})
        return None

    policy = SignaturePolicy(settings.secret, settings.signature_tolerance_s, settings.allow_legacy_signature)

    @app.post("/v1/results")
    async def results(request: Request) -> Response:
        body = await request.body()  # bounded by server.BoundedBodies, like every route's
        # No replay memory needed: the same body again adds nothing (ingestion is idempotent).
        verify_signature(request.headers, body, policy)
        # A bad upload (BadRows, IngestError: InputErrors) is answered 400 by server._handlers.
        return FiniteJSONResponse(await run_in_threadpool(nightly.receive, body))

    @app.get("/series", response_class=HTMLResponse)
    def series_page(request: Request, project: str | None = None, page: str = "1") -> Response:
        denied = _viewer(request)
        if denied:
            return denied
        # Checked here, after the secret (FastAPI would answer a bad integer with 422 first).
        if not _PAGE_RE.fullmatch(page):
            raise FlagError("page", f"{page[:20]!r}: expected a page number from 1")
        if project is not None and project not in settings.history.projects:
            return JSONResponse({"error": f"no project {project[:100]!r}", "field": "project"}, status_code=404)
        return HTMLResponse(_page(nightly, settings, project, int(page)))

    @app.get("/series/{name}")
    def series_plot(request: Request, name: str) -> Response:
        denied = _viewer(request)
        if denied:
            return denied
        m = _SVG_RE.match(name)
        found = nightly.history.series(ids=[int(m.group(1))]) if m else []
        project = settings.history.projects.get(found[0].project) if found else None
        if not found or project is None:
            return JSONResponse({"error": f"no series {name}"}, status_code=404)
        return Response(_svg(nightly, project, found[0]), media_type="image/svg+xml")


def _line(project: ProjectConfig, settings: Settings) -> list[str]:
    """The branch's first-parent line as the daemon last fetched it (a page view fetches nothing)."""
    path = mirror_path(project.repo, settings.state) if is_git_url(project.repo) else Path(project.repo)
    try:
        return GitLine(path, project.branch).line()
    except RepoError:
        return []


def _marks(changes: list[Change], index: dict[str, int]) -> list[Mark]:
    out = []
    for c in changes:
        if c.after not in index:
            continue
        href = f"/v1/jobs/{c.job_id}/report" if c.job_id else f"#change-{c.id}"
        label = f"{c.direction.value} {c.change_pct:+.2f} % [{c.ci_pct[0]:+.2f}, {c.ci_pct[1]:+.2f}] {c.before[:10]}..{c.after[:10]} ({c.flag.value})"
        env = c.flag is FlagState.ENVIRONMENT
        out.append(Mark(
            index[c.after], c.direction is ChangeDirection.REGRESSION, f"{label}: {c.note}" if env else label, href,
            index.get(c.recovered or ""), env,
        ))  # fmt: skip
    return out


def _svg(nightly: Nightly, project: ProjectConfig, s: Series, line: list[str] | None = None) -> str:
    o = ordered(nightly.history.points(s.id), line if line is not None else _line(project, nightly.settings))
    index = {c: i for i, c in enumerate(o.commits)}
    return series_svg(o.commits, o.values, s.unit, _marks(nightly.history.changes(s.id), index), f"{s.project}: {s.label}")


def _bdi(text: str) -> str:
    """User text, escaped and isolated from the page's own text direction."""
    return f"<bdi>{html.escape(text)}</bdi>"


def _pages(name: str, page: int, count: int) -> str:
    last = max(1, -(-count // SERIES_PER_PAGE))
    first_shown = (page - 1) * SERIES_PER_PAGE + 1
    shown = f"series {first_shown}-{min(count, page * SERIES_PER_PAGE)} of {count}" if first_shown <= count else f"{count} series"
    links = [f"<a href='/series?project={html.escape(name)}&amp;page={n}'>{label}</a>"
             for n, label in ((page - 1, "previous"), (page + 1, "next")) if 1 <= n <= last]  # fmt: skip
    return f"<p class='pages'>page {page} of {last}: {shown} {' · '.join(links)}</p>"


def _scale_note(s: Series) -> str:
    return f", steps read as {s.scale.value}s" if s.scale else ""


def _page(nightly: Nightly, settings: Settings, only: str | None = None, page: int = 1) -> str:
    e = html.escape
    body: list[str] = []
    for name, project in sorted(settings.history.projects.items()):
        if only is not None and name != only:
            continue
        line = _line(project, settings)
        body.append(f"<h2>{_bdi(name)}</h2>")
        count = nightly.history.series_count(name)
        if not count:
            body.append("<p>no results yet</p>")
            continue
        body.append(_pages(name, page, count))
        for s in nightly.history.series_page(name, (page - 1) * SERIES_PER_PAGE, SERIES_PER_PAGE):
            changes = nightly.history.changes(s.id)
            body.append(f'<section id="series-{s.id}"><h3>{_bdi(s.label)} <small>({_bdi(s.unit)}, {e(s.direction.value)} is better{_scale_note(s)})</small></h3>')
            body.append(_svg(nightly, project, s, line))
            if changes:
                body.append("<table><tr>" + "".join(f"<th>{h}</th>" for h in ("change", "range", "p", "state", "bisection")) + "</tr>")
                groups = nightly.store.members([c.job_id for c in changes if c.job_id])
                for c in changes:
                    group = groups.get(c.job_id or "")
                    job = (
                        f'<a class="job" href="/v1/jobs/{e(c.job_id)}">{e(c.job_id)}</a> '
                        f'<a class="report" href="/v1/jobs/{e(c.job_id)}/report">report</a>'
                        + (f' <span class="group">group of {len(group)}: {", ".join(_bdi(m) for m in group)}</span>' if group else "")
                        if c.job_id
                        else _bdi(c.note)
                    )
                    recovered = f", recovered at {e(c.recovered[:10])}" if c.recovered else ""
                    body.append(
                        f'<tr id="change-{c.id}" class="change-row"><td>{e(c.direction.value)} {c.change_pct:+.2f} % '
                        f"[{c.ci_pct[0]:+.2f}, {c.ci_pct[1]:+.2f}]{recovered}</td>"
                        f"<td><code>{e(c.before[:10])}..{e(c.after[:10])}</code></td><td>{c.p_value:.2g}</td>"
                        f"<td>{e(c.flag.value)}</td><td>{job}</td></tr>"
                    )
                body.append("</table>")
            body.append("</section>")
    if not settings.history.projects:
        body.append("<p>no projects: add a [history] table to the daemon's config (docs/history.md)</p>")
    states = ", ".join(f.value for f in FlagState)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>attrib: nightly series</title>"
        "<style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:left}svg{display:block}</style></head><body>"
        f"<h1>attrib: nightly series</h1><p><a href='/'>queue</a> · change point states: {e(states)}</p>"
        + "".join(body)
        + "</body></html>"
    )
