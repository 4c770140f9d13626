"""The daemon's nightly history: results in, change points out, regressions to the queue.

POST /v1/results (results_api.py) hands a verified body here. The files are ingested into the
daemon's own database (history tables next to the jobs), the touched series are searched for
change points, and every change point still waiting for a decision (new ones, and those the
rate limit held back before) goes through flagging.decide: a regression becomes a job for
(last commit before, first commit after), validated by flags.prepare exactly like a flag CI
sends, and queued with route "history". The link back (which series, which change point) is
the change point's job_id in the history tables: the worker asks `origin()` for it when it
writes the report, so the job table itself did not change.

Ingestion and detection are one unit (issue 20): the rows are stored with every series they
touch marked pending, in one transaction; then every pending series of the project is detected
on its own. A series whose detection fails is named in the answer (`unanalysed`), stays
pending and is detected again with the next upload; it never stops another series' detection.
The daily limit is counted and claimed, the job queued and linked to its change point, in one
transaction (HistoryStore.claim_bisection; issue 33), and only the change points still waiting
for a decision are read: the cost of an upload follows
what it touched, not how many series the project holds.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attrib.core.detect import ChangeDirection
from attrib.daemon.config import Settings
from attrib.daemon.flags import FlagContext, _local_repo, mirror_path, prepare_group
from attrib.daemon.grouping import Join
from attrib.daemon.schema import NewJob
from attrib.daemon.store import Store
from attrib.errors import AttribError, FlagError, InputError, QueueFull, RepoError
from attrib.formats.results_csv import parse_timestamp
from attrib.formats.text import MAX_FILE_NAME, text_problem
from attrib.gitrepo import is_git_url
from attrib.history.detection import Finding, detect_series, finding_json
from attrib.history.environment import EnvGroup, EnvShift, attribute, attribute_all, env_groups, issue_body
from attrib.history.flagging import DAY_S, Covered, Decision, Span, decide, groups, union
from attrib.history.ingest import MAX_CONFIG_KEYS, InputFormat, Options, SourceFile, ingest
from attrib.history.order import GitLine, ordered
from attrib.history.projects import MapRule, ProjectConfig
from attrib.history.settings import parse_pairs
from attrib.history.store import Change, Claim, Flagged, FlagState, HistoryStore, Point, Series
from attrib.recipe import load_recipe, member_label
from attrib.result.types import DetectedChange
from attrib.tracker import DEFAULT_LABEL, file_environment, open_sink, parse_target

ENVELOPE = ("project", "files", "format", "commit", "config", "time", "environment")
MAX_FILES = 100
ROUTE = "history"
log = logging.getLogger("attrib.daemon")
DETECTED_IN = "detected in nightly history"


def parse_envelope(body: bytes) -> tuple[str, list[SourceFile], Options]:
    """{"project", "files": [{"name", "content"}], "format"?, "commit"?, "config"?: ["K=V"], "time"?,
    "environment"?: {"K": "V"}}"""
    from attrib.daemon.flags import parse_body

    data = parse_body(body)
    unknown = sorted(set(data) - set(ENVELOPE))
    if unknown:
        raise FlagError(unknown[0], f"unknown field; expected only: {', '.join(ENVELOPE)}")
    project = data.get("project")
    if not isinstance(project, str) or not project:
        raise FlagError("project", "expected the project's name")
    files = data.get("files")
    if not isinstance(files, list) or not files or len(files) > MAX_FILES:
        raise FlagError("files", f"expected a list of 1 to {MAX_FILES} {{name, content}} objects")
    sources = []
    for i, f in enumerate(files):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not isinstance(f.get("content"), str):
            raise FlagError(f"files[{i}]", "expected {name: string, content: string}")
        problem = text_problem(f["name"], MAX_FILE_NAME)
        if problem is not None:
            raise FlagError(f"files[{i}].name", problem)
        sources.append(SourceFile(f["name"], f["content"]))
    try:
        fmt = InputFormat(data.get("format") or "auto")
    except ValueError:
        raise FlagError("format", f"expected one of: {', '.join(x.value for x in InputFormat)}") from None
    for key in ("commit", "time"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise FlagError(key, "expected a string")
    config = data.get("config") or []
    if not isinstance(config, list) or not all(isinstance(c, str) for c in config):
        raise FlagError("config", "expected a list of KEY=VALUE strings")
    try:
        at = parse_timestamp(data["time"], "time", "", "") if data.get("time") else None
    except InputError as exc:
        raise FlagError("time", str(exc).removeprefix("time: ")) from None
    try:
        pairs = parse_pairs(config, "config")
    except InputError as exc:
        raise FlagError("config", str(exc)) from None
    env = data.get("environment") or {}
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()) or len(env) > MAX_CONFIG_KEYS:
        raise FlagError("environment", f'expected an object of at most {MAX_CONFIG_KEYS} strings, {{"compiler": "nvcc 12.6.85"}}')
    return project, sources, Options(fmt, data.get("commit"), pairs, at, env)


class Nightly:
    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.history = HistoryStore(settings.db_path, busy_timeout_s=settings.busy_timeout_s)
        self.ctx = FlagContext(settings.state, settings.recipes_dir, settings.allow_http_repos)
        if released := self.history.release_unqueued_claims():  # left by a daemon before issue 33
            log.warning("%d change point(s) were claimed for a bisection whose job was never recorded: retried with the next upload", released)

    def project(self, name: str) -> ProjectConfig:
        found = self.settings.history.projects.get(name)
        if found is None:
            raise FlagError("project", f"{name!r}: not a project of this daemon's [history] config")
        return found

    def receive(self, body: bytes, now: float | None = None) -> dict[str, Any]:
        """Ingest, detect, flag. BadRows (400) leaves the history as it was."""
        name, files, opts = parse_envelope(body)
        project = self.project(name)
        repo_path = _local_repo(project.repo, self.ctx)  # a URL's mirror is fetched: new commits
        line = GitLine(repo_path, project.branch)
        got = ingest(self.history, name, files, opts, line.resolve, project.max_series)
        commits = line.line()
        findings: list[Finding] = []
        unanalysed: list[dict[str, Any]] = []
        for s, mark in self.history.pending_series(name):
            try:
                found = detect_series(self.history, s, commits, project.detect)
            except Exception as exc:  # noqa: BLE001  (one series' failure, whatever it is, must not stop the others)
                log.exception("detection of series %d (%s %s) failed; it stays pending", s.id, name, s.label)
                unanalysed.append({"series": s.id, "benchmark": s.benchmark, "config": s.config,
                                   "error": f"{type(exc).__name__}: {exc}"[:500], "retried": "with the next upload"})  # fmt: skip
                continue
            self.history.detected(s.id, mark)
            findings += found
        environment: list[dict[str, Any]] = []
        flagged = self.flag_pending(project, repo_path, commits, now, environment)
        return {
            "project": name,
            "files": [{"name": g.name, "rows": g.rows, "duplicate": g.duplicate, "skipped": g.skipped} for g in got],
            "changes": [finding_json(f) for f in findings if f.new or f.recovered_now],
            "unanalysed": unanalysed,
            "flags": flagged,
            "environment": environment,
        }  # fmt: skip

    def flag_pending(
        self, project: ProjectConfig, repo_path: Path, commits: list[str], now: float | None = None,
        environment: list[dict[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """Decide every change point still waiting. Those to bisect are grouped first (one recipe,
        overlapping ranges: flagging.groups); a group joins a queued job of an overlapping range
        inside its grouping window, or is queued as one job of all its benchmarks, which takes
        one of the day's bisections (the first point `queued`, the others `grouped`).

        Waiting points cost what they touch (issue 33): the jobs that may cover them are read
        once per upload and recipe, without their results; while the day's limit is used up only
        points never decided are read (a rate-limited one would be rate limited again); a point
        whose decision did not change is neither rewritten nor reported; a point waiting longer
        than WAITING_EXPIRY_S (a week) expires first. A point the environment explains
        (history/environment.py) is no bisection: each environment change is one filed issue
        over every series it moved, described in `environment` (the answer's list)."""
        now = time.time() if now is None else now
        out = [_decided(b, c, Decision(c.flag, None, None, c.note)) for b, c in self.history.expire_waiting(project.name, now)]
        pos = {sha: i for i, sha in enumerate(commits)}
        to_queue: list[tuple[Series, Change, Span, Decision]] = []
        jobs: dict[str, _JobIndex] = {}  # per recipe, read once
        full = self.history.queued_since(project.name, now - DAY_S) >= project.max_bisections_per_day
        series_points: dict[int, list[Point]] = {}
        by_env: list[tuple[Series, Change, EnvShift]] = []
        waiting = [(s, c) for s, c in self.history.waiting_changes(project.name, new_only=full) if c.before in pos and c.after in pos]
        for s, _ in waiting:
            if s.id not in series_points:
                series_points[s.id] = self.history.points(s.id)
        # decided together: an environment change's effect is estimated over every series it moved
        blamed = attribute_all([(series_points[s.id], c) for s, c in waiting])
        for (s, c), why in zip(waiting, blamed, strict=True):
            if why.environment and why.change is not None:
                by_env.append((s, c, why.change))
                continue
            span = Span(pos[c.before], pos[c.after])
            rule = project.rule_for(s.benchmark)
            if rule is not None and rule.recipe not in jobs:
                jobs[rule.recipe] = self._jobs(rule, repo_path, pos)
            covered = jobs[rule.recipe].covering(jobs[rule.recipe].member(rule, s)) if rule else []
            regression = c.direction is ChangeDirection.REGRESSION
            d = decide(project, s.benchmark, regression, span, covered, 0)  # the day's limit: per group, below
            if d.state is FlagState.QUEUED:
                to_queue.append((s, c, span, d))
            else:
                out += self._settle([(s, c, span, d)], d, d, now)
        for group in groups([(d.rule.recipe if d.rule else "", span) for _, _, span, d in to_queue]):
            points = [to_queue[i] for i in group]
            rule = points[0][3].rule
            assert rule is not None
            out += self._queue_group(project, points, jobs[rule.recipe], commits, now)
        for g in env_groups(project.name, by_env):
            out += self._file_environment(g, project, now, environment if environment is not None else [])
        return out

    def _file_environment(self, g: EnvGroup, project: ProjectConfig, now: float, answer: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """File one environment change's issue and mark its change points ENVIRONMENT: nothing is
        queued. A filing that fails is said in the note; the attribution stands."""
        where = file_env_issue(self.settings, project, g, RERUN_EVIDENCE)
        note = f"environment: {g.change.label} moved {len(g.members)} series ({g.change_pct:+.2f} % median); {where}"
        answer.append({
            "change": g.change.label, "keys": g.change.as_json(), "series": len(g.members), "change_pct": g.change_pct,
            "ci_pct": list(g.ci_pct), "title": g.title, "issue": where,
            "benchmarks": [{"benchmark": s.benchmark, "config": s.config, "before": c.before, "after": c.after} for s, c in g.members],
        })  # fmt: skip
        out = []
        for s, c in g.members:
            if self.history.settle_waiting(c.id, FlagState.ENVIRONMENT, None, note, now):
                out.append(_decided(s, c, Decision(FlagState.ENVIRONMENT, None, None, note)))
        return out

    def _jobs(self, rule: MapRule, repo_path: Path, pos: dict[str, int]) -> _JobIndex:
        """Jobs (open or earlier, from CI or from the history) of the same repository and recipe
        over a range on the line, by the benchmarks they bisect: a change point inside one is not
        bisected again. Read once per upload and recipe, without their results."""
        recipe = str((self.settings.recipes_dir / rule.recipe).resolve())
        jobs = [j for j in self.store.ranges(str(repo_path), recipe) if j.good in pos and j.bad in pos]
        members = self.store.members([j.id for j in jobs])
        index = _JobIndex(classes=_classes(self.settings.recipes_dir / rule.recipe))
        for j in jobs:
            covered = Covered(Span(pos[j.good], pos[j.bad]), j.id, "open job" if j.state.active else "earlier flag")
            index.every.append(covered)
            for name in members.get(j.id, [j.benchmark]):
                index.by_member.setdefault(name, []).append(covered)
        return index

    def _queue_group(
        self, project: ProjectConfig, points: list[tuple[Series, Change, Span, Decision]], index: _JobIndex, commits: list[str], now: float
    ) -> list[dict[str, Any]]:
        """Validate the group's flag, then join a queued job of an overlapping range, or claim the
        day's slot and queue the job, linked to the first change point, in one transaction
        (HistoryStore.claim_bisection; the validation asks git and comes first: a daemon killed
        there has claimed nothing). The claim counts again: the limit holds under concurrency."""
        first_s, first_c, _, d = points[0]
        assert d.rule is not None
        span = union([p[2] for p in points])
        names = list(dict.fromkeys(n for s, _, _, _ in points if (n := index.member(d.rule, s))))
        what = f"{first_s.label}" + (f" and {len(points) - 1} more" if len(points) > 1 else "")
        flag: dict[str, Any] = {
            "repo": project.repo, "good": commits[span.good], "bad": commits[span.bad], "recipe": d.rule.recipe,
            "source": f"{DETECTED_IN}: {project.name} {what} {commits[span.good][:10]}..{commits[span.bad][:10]} ({first_c.change_pct:+.2f} %)",
        }  # fmt: skip
        if len(names) > 1:
            flag["benchmarks"] = names
        elif names:
            flag["benchmark"] = names[0]
        if project.file_issue:
            flag["file_issue"] = project.file_issue
        try:
            job, members = prepare_group(flag, self.ctx)
        except FlagError as exc:
            refused = Decision(FlagState.REFUSED, d.rule, note=f"the flag does not validate: {exc}")
            return self._settle(points, refused, refused, now)
        body = json.dumps({"history": {"project": project.name, "series": first_s.id, "change": first_c.id}, "flag": flag})
        joined = self.store.join(job, ROUTE, body, members, self._joins(job, span, commits, now))
        if joined is not None:
            grouped = Decision(FlagState.GROUPED, d.rule, joined, f"joined the group job {joined}")
            return self._settle(points, grouped, grouped, now)
        queued: list[Decision] = []

        def queue(conn: sqlite3.Connection) -> Flagged:
            hold = now + self.settings.group_window_s
            acc = self.store.submit_within(conn, job, ROUTE, body, members=members, hold_until=hold)
            if acc.duplicate_of:
                queued.append(Decision(FlagState.DUPLICATE, d.rule, acc.duplicate_of, f"merged into the active job {acc.duplicate_of}"))
            else:
                queued.append(Decision(FlagState.QUEUED, d.rule, acc.job_id))
            return Flagged(queued[-1].state, queued[-1].job_id, queued[-1].note)

        try:
            claim = self.history.claim_bisection(first_c.id, project.name, now - DAY_S, project.max_bisections_per_day, queue, now)
        except QueueFull as exc:
            limited = Decision(FlagState.RATE_LIMITED, d.rule, note=f"{exc}; retried with the next results")
            return self._settle(points, limited, limited, now)
        if claim is Claim.TAKEN:
            return []  # another upload decided its first point; the others are retried with the next
        if claim is Claim.LIMIT:
            limited = decide(project, first_s.benchmark, True, span, [], project.max_bisections_per_day)
            return self._settle(points, limited, limited, now)
        lead = queued[-1]
        rest = Decision(FlagState.GROUPED, d.rule, lead.job_id, f"one group with {first_s.label}: job {lead.job_id}")
        return [_decided(first_s, first_c, lead)] + self._settle(points[1:], rest, rest, now)

    def _joins(self, job: NewJob, span: Span, commits: list[str], now: float) -> list[Join]:
        """Queued jobs of the same repository and recipe, inside the grouping window, whose range
        on the line overlaps or touches `span`: the group may join the first still queued."""
        pos = {sha: i for i, sha in enumerate(commits)}
        out = []
        for j in self.store.open_groups(job.repo_path, job.recipe, job.file_issue):
            if now - j.created > self.settings.group_window_s or j.good not in pos or j.bad not in pos:
                continue
            theirs = Span(pos[j.good], pos[j.bad])
            if theirs.near(span):
                both = union([theirs, span])
                out.append(Join(j.id, commits[both.good], commits[both.bad]))
        return out

    def _settle(self, points: list[tuple[Series, Change, Span, Decision]], first: Decision, rest: Decision, now: float) -> list[dict[str, Any]]:
        out = []
        for i, (s, c, _, _) in enumerate(points):
            d = first if i == 0 else rest
            if (d.state, d.job_id, d.note) == (c.flag, c.job_id, c.note):
                continue  # still waiting, for the same reason: nothing to write or report
            if self.history.settle_waiting(c.id, d.state, d.job_id, d.note, now):
                out.append(_decided(s, c, d))
        return out


RERUN_EVIDENCE = (
    "each was measured again at its last commit before the change in the new environment, already at the new level,"
    " so no bisection was run"
)
PREFLIGHT_EVIDENCE = (
    "the bisection's preflight rebuilt both ends in today's environment and did not reproduce it:"
    " the code between them did not make it"
)


def file_env_issue(settings: Settings, project: ProjectConfig, g: EnvGroup, evidence: str) -> str:
    """One environment change's issue where the project files its bisections (a dir: sink is a
    name under --state/filed); what was done, in words. A filing failure is said, not raised."""
    if not project.file_issue:
        return "not filed: the project names no file_issue"
    sink = project.file_issue
    if sink.startswith("dir:"):
        sink = f"dir:{settings.state / 'filed' / sink[4:]}"
    body = issue_body(g, f"{base_url(settings)}/series?project={project.name}", evidence)
    try:
        filed = file_environment(
            open_sink(parse_target(sink)), g.title, body, json.dumps(g.change.as_json(), sort_keys=True),
            [s.label for s, _ in g.members], [DEFAULT_LABEL],
        )  # fmt: skip
    except AttribError as exc:
        return f"filing to {project.file_issue} failed: {exc}"
    return f"issue {filed.action}: {filed.where}"


def environment_not_reproduced(settings: Settings, job_id: str, now: float | None = None) -> str:
    """A history job whose preflight did not reproduce it (the controlled comparison: both ends
    rebuilt in today's environment), over change points whose nights differ in environment: the
    environment made them. One issue per environment change; the points are marked ENVIRONMENT
    (their job kept). What was filed, in words ("" when no point of the job changed environment)."""
    history = HistoryStore(settings.db_path, busy_timeout_s=settings.busy_timeout_s)
    try:
        changes = history.changes(job_id=job_id)
        series = {s.id: s for s in history.series(ids=sorted({c.series_id for c in changes}))}
        found: dict[str, list[tuple[Series, Change, EnvShift]]] = {}
        for c in changes:
            shift = attribute(history.points(c.series_id), c).change
            if shift is not None:
                found.setdefault(series[c.series_id].project, []).append((series[c.series_id], c, shift))
        lines = []
        for name, points in found.items():
            project = settings.history.projects.get(name)
            if project is None:  # a project dropped from the config since: nowhere to file
                continue
            for g in env_groups(name, points):
                where = file_env_issue(settings, project, g, PREFLIGHT_EVIDENCE)
                note = f"environment: {g.change.label} moved {len(g.members)} series; job {job_id} did not reproduce it; {where}"
                for _, c in g.members:
                    history.set_flag(c.id, FlagState.ENVIRONMENT, job_id, note, now)
                lines.append(f"environment {g.title}: {where}")
        return "; ".join(lines)
    finally:
        history.close()


@dataclass
class _JobIndex:
    """One recipe's jobs as covered ranges: all of them, and by the benchmarks each bisects."""

    every: list[Covered] = field(default_factory=list)
    by_member: dict[str, list[Covered]] = field(default_factory=dict)
    # the recipe's machine classes ("gpu=H100"), and its one benchmark's name when it has one
    classes: tuple[frozenset[str], str | None] = (frozenset(), None)

    def member(self, rule: MapRule, s: Series) -> str | None:
        """The member a series is bisected as: the rule's benchmark, labelled with the pairs of
        the series' configuration that name a machine class of the recipe, so that the series
        of gpu=H100 is measured on H100 nodes and the one of gpu=H200 on H200 nodes, two members
        of one job (`Recipe.select` reads the label)."""
        known, only = self.classes
        name = rule.member(s.benchmark)
        pairs = tuple(sorted((k, v) for k, v in s.config.items() if f"{k}={v}" in known))
        base = name if name is not None else only
        return member_label(base, pairs) if pairs and base is not None else name

    def covering(self, member: str | None) -> list[Covered]:
        """The jobs that bisect `member` (None: the recipe's one benchmark, so every job)."""
        return self.every if member is None else self.by_member.get(member, [])


def _classes(recipe_path: Path) -> tuple[frozenset[str], str | None]:
    """A recipe's machine classes and its one benchmark's name, for labelling members; nothing
    when it does not load (the flag's validation refuses it with its own line)."""
    try:
        recipe = load_recipe(recipe_path)
    except InputError:
        return frozenset(), None
    known = frozenset(c.label for c in recipe.slurm.classes) if recipe.slurm else frozenset()
    return known, recipe.benchmarks[0].name if len(recipe.benchmarks) == 1 else None


def _decided(s: Series | str, c: Change, d: Decision) -> dict[str, Any]:
    return {"benchmark": s if isinstance(s, str) else s.benchmark, "before": c.before, "after": c.after, "flag": d.state.value, "job": d.job_id, "note": d.note}


def base_url(settings: Settings) -> str:
    """Where links in reports point: [history] public_url, else the address the daemon listens on."""
    if settings.history.public_url:
        return settings.history.public_url
    try:
        return str(json.loads((settings.state / "daemon.json").read_text())["url"])
    except (OSError, ValueError, KeyError):
        return ""


SERIES_PER_PAGE = 50  # series one page of GET /series draws (results_api imports it)
SERIES_POINTS = 60  # nights of a series a report draws: enough to see the level before and after


def origin(settings: Settings, job_id: str) -> tuple[DetectedChange, ...]:
    """The change points a job bisects, for its report: empty when the job came from elsewhere."""
    history = HistoryStore(settings.db_path, busy_timeout_s=settings.busy_timeout_s)
    try:
        changes = history.changes(job_id=job_id)
        if not changes:
            return ()
        series = {s.id: s for s in history.series(ids=sorted({c.series_id for c in changes}))}
        drawn = {sid: _nights(history, settings, series[sid]) for sid in series}
        points = {sid: history.points(sid) for sid in series}
        pages = {sid: 1 + history.series_position(s) // SERIES_PER_PAGE for sid, s in series.items()}
    finally:
        history.close()
    base = base_url(settings)
    out = []
    for c in changes:
        commits, values = drawn[c.series_id]
        at = commits.index(c.after) if c.after in commits else None
        out.append(DetectedChange(
            series[c.series_id].project, series[c.series_id].label, c.before, c.after, c.direction,
            c.change_pct, (c.ci_pct[0], c.ci_pct[1]), c.p_value, f"{base}/series?project={series[c.series_id].project}&page={pages[c.series_id]}#change-{c.id}",
            tuple(values), at, getattr(attribute(points[c.series_id], c).change, "label", ""),
        ))  # fmt: skip
    return tuple(out)


def _nights(history: HistoryStore, settings: Settings, s: Series) -> tuple[list[str], list[float]]:
    """A series' latest SERIES_POINTS nights in first-parent order ([] when its repository's
    line cannot be read: the report then links the series without drawing it)."""
    project = settings.history.projects.get(s.project)
    if project is None:
        return [], []
    try:
        path = mirror_path(project.repo, settings.state) if is_git_url(project.repo) else Path(project.repo)
        line = GitLine(path, project.branch).line()
    except RepoError:
        return [], []
    o = ordered(history.points(s.id), line)
    return o.commits[-SERIES_POINTS:], o.values[-SERIES_POINTS:]
