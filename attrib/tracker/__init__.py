"""Filing a result into an issue tracker: `--file-issue` and `--comment-on`.

Rules: only a found culprit opens (or updates) an issue (status culprit_found, or partial: its
culprits are named, its report says what is left unexplained); one issue per culprit, whatever the
benchmarks it moved, deduplicated by a hidden fingerprint sha256(project, culprit): the same
culprit in the same tracker project is the same issue, whichever machine or clone bisected it
and whichever group of benchmarks it was found in. An issue filed before groups carries the
per-benchmark fingerprint sha256(project, culprit, benchmark) and is found by it too. When an
open issue exists, the report is added as a comment that names the benchmarks the issue did
not list yet (each issue and comment lists its benchmarks in a hidden marker). Any outcome (not
reproduced, inconclusive) may go where the caller asked with --comment-on. A change the
environment made (a toolkit upgrade in the nightly history, history/environment.py) is one issue
per environment change, fingerprinted by the change itself (`file_environment`).

The PNG plot goes where the tracker takes it (dir: copies it, GitLab uploads it); where it
cannot (GitHub's API, a failed upload) the body keeps the sparkline and says in one line why the
plot is missing and where the PNG is. A plot that did not make it never stops the filing.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from attrib.core.model import Status
from attrib.errors import InputError, TargetError
from attrib.http import Sleep
from attrib.report.group import group_title, issue_lines
from attrib.report.markdown import member_lines, render_markdown, title
from attrib.result.types import BisectResult, CulpritRecord
from attrib.tracker.base import FINGERPRINT_MARK, MEMBERS_MARK, RUN_MARK, Attached, Posted, Sink, marker

DEFAULT_LABEL = "performance-regression"
KINDS = ("github", "gitlab", "dir")

# The forges' own naming rules, so that a target that names no project is refused before any
# work (a flag reaches the daemon from the network: `github:../..` must never become a path
# like /repos/../../issues). GitHub: an owner is 1-39 letters, digits or hyphens, not starting
# or ending with a hyphen; a repository 1-100 letters, digits, '.', '_' or '-', not '.' or '..'.
# GitLab: each group/subgroup/project path is letters, digits, '_', '-' or '.', not starting
# with '-' or '.', not ending with '.', '.git' or '.atom', at most 255 characters; at most 20
# levels of subgroups.
_GITHUB_OWNER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?")
_GITHUB_REPO = re.compile(r"[A-Za-z0-9._-]{1,100}")
_GITLAB_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}")
GITLAB_MAX_DEPTH = 21  # a top-level group, 20 levels of subgroups (the project is the last)


@dataclass(frozen=True)
class Target:
    kind: str  # github | gitlab | dir
    project: str  # OWNER/REPO, GROUP/[SUBGROUP/]PROJECT, or a directory
    number: int | None = None  # --comment-on: the issue to comment on


def project_problem(kind: str, project: str) -> str | None:
    """Why `project` is no GitHub (kind "github") or GitLab project path; None when it is one."""
    parts = project.split("/")
    if kind == "github":
        if len(parts) != 2:
            return "expected OWNER/REPO"
        owner, repo = parts
        if not _GITHUB_OWNER.fullmatch(owner):
            return f"owner {owner!r}: expected 1-39 letters, digits or hyphens, not starting or ending with a hyphen"
        if not _GITHUB_REPO.fullmatch(repo) or repo in (".", ".."):
            return f"repository {repo!r}: expected 1-100 letters, digits, '.', '_' or '-' (not '.' or '..')"
        return None
    if not 2 <= len(parts) <= GITLAB_MAX_DEPTH:
        return f"expected GROUP/[SUBGROUP/...]PROJECT, 2 to {GITLAB_MAX_DEPTH} parts"
    for part in parts:
        if not _GITLAB_SEGMENT.fullmatch(part) or part.endswith((".", ".git", ".atom")):
            return (
                f"path {part!r}: expected letters, digits, '_', '-' or '.', not starting with '-' or '.',"
                " not ending with '.', '.git' or '.atom'"
            )
    return None


def parse_target(spec: str, option: str = "--file-issue") -> Target:
    """`github:OWNER/REPO`, `gitlab:GROUP/PROJECT` or `dir:PATH`; with --comment-on, github and
    gitlab take `#NUMBER` (the triggering issue). A project path is checked against the
    forge's naming rules (project_problem)."""
    comment = option == "--comment-on"
    expected = (
        "expected github:OWNER/REPO#NUMBER or gitlab:GROUP/PROJECT#NUMBER"
        if comment
        else "expected github:OWNER/REPO, gitlab:GROUP/PROJECT or dir:PATH"
    )
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in (("github", "gitlab") if comment else KINDS) or not rest:
        raise TargetError(option, spec, expected)
    if kind == "dir":
        return Target(kind, rest)
    number = None
    if comment:
        project, hash_, num = rest.rpartition("#")
        if not hash_ or not num.isdigit() or int(num) < 1:
            raise TargetError(option, spec, expected)
        rest, number = project, int(num)
    if "/" not in rest or (kind == "github" and rest.count("/") != 1) or any(c.isspace() for c in rest):
        raise TargetError(option, spec, expected)
    problem = project_problem(kind, rest)
    if problem is not None:
        raise TargetError(option, spec, problem)
    return Target(kind, rest, number)


def open_sink(target: Target, env: dict[str, str] | None = None, sleep: Sleep | None = None) -> Sink:
    """The sink for a target; checks what can be checked before any work (the token is set)."""
    from attrib.tracker.directory import Directory
    from attrib.tracker.github import GitHub
    from attrib.tracker.gitlab import GitLab

    if target.kind == "github":
        return GitHub(target.project, env, sleep)
    if target.kind == "gitlab":
        return GitLab(target.project, env, sleep)
    return Directory(target.project)


def fingerprint(project: str, culprit: str, benchmark: str | None = None) -> str:
    """A culprit's issue in `project`; with `benchmark`, the per-benchmark fingerprint issues
    filed before groups carry (still looked for, never written for a culprit again)."""
    key = f"{project}\n{culprit}" if benchmark is None else f"{project}\n{culprit}\n{benchmark}"
    return hashlib.sha256(key.encode()).hexdigest()


def members_marker(labels: Sequence[str]) -> str:
    # JSON inside an HTML comment: '>' escaped so that no label can end the comment
    return marker(MEMBERS_MARK, json.dumps(list(labels)).replace(">", "\\u003e"))


def named_members(text: str) -> set[str]:
    """Every benchmark the members markers in an issue's text (body and comments) name."""
    out: set[str] = set()
    for m in re.finditer(rf"<!-- {MEMBERS_MARK}: (\[.*?\]) -->", text):
        try:
            labels = json.loads(m.group(1))
        except ValueError:
            continue  # a marker someone edited: it names nothing
        out |= {x for x in labels if isinstance(x, str)} if isinstance(labels, list) else set()
    return out


@dataclass(frozen=True)
class Filed:
    action: str  # opened | commented | skipped
    where: str  # URL, file, or why it was skipped


def environment_fingerprint(project: str, change: str) -> str:
    """An environment change's issue in `project` (`change`: its keys and values, canonical)."""
    return hashlib.sha256(f"{project}\nenvironment\n{change}".encode()).hexdigest()


def file_environment(sink: Sink, title: str, body: str, change: str, series: Sequence[str], labels: list[str]) -> Filed:
    """One issue per environment change (history/environment.py), whatever the series it moved,
    deduplicated like a culprit's: by a hidden fingerprint of the change. An open twin gets a
    comment only when this upload names series it did not list (a late machine's nightly)."""
    fp = environment_fingerprint(sink.project, change)
    run_id = uuid.uuid4().hex
    marks = f"{marker(FINGERPRINT_MARK, fp)}\n{marker(RUN_MARK, run_id)}\n{members_marker(series)}\n"
    existing = sink.find_open([fp], labels[0] if labels else None)
    if existing is None:
        return Filed("opened", sink.create(title, marks + body, labels, run_id).url)
    added = [x for x in series if x not in named_members(existing.text)]
    if not added:
        return Filed("skipped", f"{existing.url} lists every series already")
    lead = f"attrib saw this environment change move {len(added)} more series: {', '.join(f'`{x}`' for x in added)}."
    return Filed("commented", sink.comment(existing.number, f"{marks}{lead}\n\n{body}", run_id).url)


def _mention(sink: Sink, culprit: CulpritRecord) -> str:
    login = sink.handle(culprit.commit)
    who = f"@{login}" if login else culprit.author
    return f"cc {who}: attrib attributes this regression to `{culprit.commit[:10]}`, your commit."


def _attach(sink: Sink, plot: Path | None, fp: str, kept: bool, log: Callable[[str], None]) -> Attached | None:
    """The plot on the sink, or the line the body carries instead: why, and where the PNG is
    (`kept`: it stays on disk, next to --report/--out; otherwise it was a temporary file)."""
    if plot is None:
        return None
    attached = sink.attach(plot, fp)
    if attached.missing is None:
        return attached
    where = (
        f"it is at `{plot.resolve()}` on the machine that ran attrib"
        if kept
        else "it was not kept (a report file, --report or --out, keeps it next to the report)"
    )
    line = f"{attached.missing}; {where}."
    log(f"{sink.target}: {line}")
    return Attached(missing=line)


def _body(
    result: BisectResult, fp: str, run_id: str, plot: Attached | None, lead: str = "", culprit: CulpritRecord | None = None
) -> str:
    """The markers, the lead line and the report: a single benchmark's whole report; for a
    group, the culprit with its members and the largest member's report (report/group.py)."""
    marks = f"{marker(FINGERPRINT_MARK, fp)}\n{marker(RUN_MARK, run_id)}\n"
    if culprit is not None:
        marks += members_marker([ch.label for ch in culprit.members]) + "\n"
    link, figure = (plot.link, plot.markdown or plot.missing) if plot else (None, None)
    if culprit is not None and result.group:
        # one member's report folded: the run's builds, time and build failures are said there, once
        lines = issue_lines(result, culprit, partial(member_lines, run_wide=True))
        lines += [f"![plot]({link})" if link else figure or "", ""]
        return marks + (f"{lead}\n\n" if lead else "") + "\n".join(lines)
    return marks + (f"{lead}\n\n" if lead else "") + render_markdown(result, plot=link, figure=figure)


def _again(project: str, result: BisectResult, c: CulpritRecord, existing: Posted) -> str:
    """The first line of a comment on a culprit's open issue: the benchmarks this bisection adds
    to those the issue (and its comments) named; an issue filed before groups names the one
    benchmark of its fingerprint."""
    known = named_members(existing.text)
    known |= {ch.label for ch in c.members if fingerprint(project, c.commit, ch.label) == existing.fingerprint}
    added = [ch.label for ch in c.members if ch.label not in known]
    names = ", ".join(f"`{x}`" for x in added)
    if not c.members or not known:
        return f"attrib measured this regression again (`{result.benchmark}`, `{c.commit[:10]}`)."
    if not added:
        return f"attrib measured this regression again (`{c.commit[:10]}`); it moved no benchmark this issue does not list."
    return f"attrib measured this regression again (`{c.commit[:10]}`); it also moved {len(added)} benchmark(s) this issue did not list: {names}."


def file_issues(
    result: BisectResult,
    sink: Sink,
    labels: list[str],
    plot: Path | None = None,
    log: Callable[[str], None] = lambda line: None,
    plot_kept: bool = True,
) -> list[Filed]:
    """One issue per culprit (or a comment on its open twin). Nothing for other outcomes."""
    if result.status not in (Status.CULPRIT_FOUND, Status.PARTIAL):
        # a partial attribution names its culprits too (its report says what is left unexplained)
        why = f"not filed in {sink.target}: status {result.status.value}; only a found culprit opens an issue (use --comment-on)"
        log(why)
        return [Filed("skipped", why)]
    filed = []
    for c in result.culprits:
        fp = fingerprint(sink.project, c.commit)
        # issues filed before groups: one per (culprit, benchmark)
        before = [fingerprint(sink.project, c.commit, label) for label in [ch.label for ch in c.members] or [result.benchmark]]
        run_id = uuid.uuid4().hex
        existing = sink.find_open([fp, *before], labels[0] if labels else None)
        ref = _attach(sink, plot, existing.fingerprint if existing else fp, plot_kept, log)
        if existing is not None:
            lead = _again(sink.project, result, c, existing)
            body = _body(result, existing.fingerprint, run_id, ref, lead, c)
            posted: Posted = sink.comment(existing.number, body, run_id)
            filed.append(Filed("commented", posted.url))
        else:
            body = _body(result, fp, run_id, ref, _mention(sink, c), c)
            posted = sink.create(group_title(result, c) if result.group else title(result, c), body, labels, run_id)
            filed.append(Filed("opened", posted.url))
        log(f"{filed[-1].action}: {filed[-1].where}")
    return filed


def comment_on(
    result: BisectResult,
    sink: Sink,
    number: int,
    plot: Path | None = None,
    filed: list[Filed] | None = None,
    log: Callable[[str], None] = lambda line: None,
    plot_kept: bool = True,
) -> Filed:
    """The report of any outcome as a comment on the issue the caller named."""
    run_id = uuid.uuid4().hex
    fp = fingerprint(sink.project, f"comment-on#{number}", result.benchmark)
    ref = _attach(sink, plot, fp, plot_kept, log)
    opened = [f.where for f in filed or [] if f.action != "skipped"]
    lead = ("Filed: " + ", ".join(opened)) if opened else ""
    posted = sink.comment(number, _body(result, fp, run_id, ref, lead), run_id)
    log(f"commented: {posted.url}")
    return Filed("commented", posted.url)


@dataclass(frozen=True)
class Filing:
    """What --file-issue/--comment-on/--label asked for, validated before any work starts (a
    bisection can take an hour; a typo or a missing token must not wait for its end)."""

    file_sink: Sink | None
    comment_sink: Sink | None
    number: int | None
    labels: list[str]

    @classmethod
    def prepare(cls, file_issue: str | None, comment: str | None, labels: list[str] | None) -> Filing | None:
        if file_issue is None and comment is None:
            return None
        labels = list(labels) if labels else [DEFAULT_LABEL]
        if any(not label.strip() or "," in label for label in labels):
            raise InputError(f"--label {labels!r}: expected non-empty labels without commas")
        file_sink = open_sink(parse_target(file_issue)) if file_issue is not None else None
        target = parse_target(comment, "--comment-on") if comment is not None else None
        comment_sink = open_sink(target) if target is not None else None
        return cls(file_sink, comment_sink, target.number if target else None, labels)

    def run(
        self, result: BisectResult, plot: Path | None, log: Callable[[str], None], plot_kept: bool = True
    ) -> None:
        """`plot_kept`: the PNG stays where it is (next to the report) after filing; a body that
        cannot carry the plot names its path then."""
        filed = file_issues(result, self.file_sink, self.labels, plot, log, plot_kept) if self.file_sink else []
        if self.comment_sink is not None and self.number is not None:
            comment_on(result, self.comment_sink, self.number, plot, filed, log, plot_kept)
