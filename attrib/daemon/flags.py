"""Regression flags: what CI sends, validated field by field before anything is stored.

A flag is a JSON object {"repo", "good", "bad", "recipe", "benchmark"? or "benchmarks"?, "source"?,
"file_issue"?}; "benchmarks" (a list of names or globs) makes a group.
It reaches the daemon directly (POST /v1/regressions, `attrib submit`) or inside a forge's
webhook payload (docs/daemon.md: the ```attrib-flag block of a GitHub check run's output, the
ATTRIB_FLAG variable of a GitLab pipeline), or a failed GitHub workflow run names the run whose
`attrib-flag` artifact holds it (fetched by github_artifacts.py). Every error names the field (HTTP 400).

Revisions are checked as revision text (gitrepo.validate_revision_text: no leading '-', no
whitespace) before git sees them, then resolved to full shas: duplicates are found by sha, so
`main~3` and its sha flagged twice are one job; a repository URL by its canonical spelling
(gitrepo.canonical_git_url), so `file:///srv/r/` and `file://localhost/srv/r/.git` are one
job and one mirror. Git runs as argv lists, never through a shell.
A JSON body is checked for nesting before the parser sees it (the parser recurses); the
filing target with the tracker's own parser (and the forge's naming rules), at the door.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attrib.daemon.grouping import MAX_GROUP_MEMBERS
from attrib.daemon.scan import flag_block, json_depth
from attrib.daemon.store import NewJob
from attrib.errors import FlagError, InputError, RepoError, TargetError
from attrib.fsutil import file_lock
from attrib.gitrepo import GitRepo, UrlRule, canonical_git_url, is_git_url, mirror_url, validate_revision_text
from attrib.recipe import Recipe, load_recipe
from attrib.tracker import parse_target

_DIR_NAME_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
FIELDS = ("repo", "good", "bad", "recipe", "benchmark", "benchmarks", "source", "file_issue")
MAX_BENCHMARKS = 1000  # names in one flag's "benchmarks": a recipe's kernels, not a dump
REQUIRED = ("repo", "good", "bad", "recipe")
MAX_TEXT = 2000  # characters of any one field: a flag is small
FREE_TEXT = ("source",)  # fields that are prose: surrounding whitespace is trimmed, not refused
DEFAULT_NAME_MAX = 255  # bytes of a file name, where the file system does not say
FETCH_TIMEOUT_S = 600.0  # cloning or fetching a flagged git URL
# Nesting of a JSON body: a flag is 1 deep, GitHub's and GitLab's payloads under 10. The limit
# is checked on the bytes (scan.json_depth, linear), before json.loads, whose recursion would
# otherwise end in a RecursionError (a 500) for a body of 10,000 brackets.
MAX_JSON_DEPTH = 64
_GITHUB_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class FlagContext:
    """What validation needs from the daemon's settings."""

    state: Path
    recipes_dir: Path
    allow_http: bool = False  # plain http:// repository URLs (gitrepo.check_git_url)


def parse_body(body: bytes) -> dict[str, Any]:
    if json_depth(body) > MAX_JSON_DEPTH:
        raise FlagError("body", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise FlagError("body", f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise FlagError("body", "expected a JSON object")
    return data


def _text(flag: dict[str, Any], name: str, required: bool) -> str | None:
    value = flag.get(name)
    if value is None:
        if required:
            raise FlagError(name, "missing")
        return None
    if not isinstance(value, str) or not value.strip():
        raise FlagError(name, "expected a non-empty string")
    if len(value) > MAX_TEXT:
        raise FlagError(name, f"expected at most {MAX_TEXT} characters, got {len(value)}")
    if "\x00" in value:
        raise FlagError(name, "contains a NUL character")
    if name in FREE_TEXT:
        return value.strip()
    if value != value.strip():
        # A name with a trailing newline is a CI's quoting slip; guessing what was meant is not ours.
        raise FlagError(name, f"{value!r}: expected no leading or trailing whitespace")
    return value


def prepare(flag: dict[str, Any], ctx: FlagContext) -> NewJob:
    """A validated job for `flag`, or FlagError naming the first bad field."""
    return prepare_group(flag, ctx)[0]


def _names(flag: dict[str, Any]) -> list[str] | None:
    """The flag's "benchmarks": 1 to MAX_BENCHMARKS names or globs; None when it has none."""
    value = flag.get("benchmarks")
    if value is None:
        return None
    if "benchmark" in flag:
        raise FlagError("benchmarks", "expected either benchmark or benchmarks, not both")
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_BENCHMARKS:
        raise FlagError("benchmarks", f"expected a list of 1 to {MAX_BENCHMARKS} benchmark names or globs")
    return [_text({"benchmarks": v}, "benchmarks", True) or "" for v in value]


def prepare_group(flag: dict[str, Any], ctx: FlagContext) -> tuple[NewJob, tuple[str, ...]]:
    """A validated job for `flag` and the benchmarks it names (one, or a group's, in the order
    asked, globs matched against the recipe), or FlagError naming the first bad field."""
    unknown = sorted(set(flag) - set(FIELDS))
    if unknown:
        raise FlagError(unknown[0], f"unknown field; expected only: {', '.join(FIELDS)}")
    repo_text, good_rev, bad_rev, recipe_text = (_text(flag, f, True) or "" for f in REQUIRED)
    bench_name = _text(flag, "benchmark", False)
    names = _names(flag)
    source = _text(flag, "source", False)
    file_issue = _text(flag, "file_issue", False)
    for name, rev in (("good", good_rev), ("bad", bad_rev)):
        try:
            validate_revision_text(rev)
        except RepoError as exc:
            raise FlagError(name, str(exc)) from None
    if file_issue is not None:
        _check_file_issue(file_issue, ctx.state)
    recipe_path = _recipe_path(recipe_text, ctx.recipes_dir)
    try:
        recipe = load_recipe(recipe_path)
    except InputError as exc:
        raise FlagError("recipe", str(exc)) from None
    try:
        members = _members(recipe, bench_name, names)
    except InputError as exc:
        raise FlagError("benchmark" if names is None else "benchmarks", str(exc)) from None
    if len(members) > MAX_GROUP_MEMBERS:
        raise FlagError("benchmarks", f"selects {len(members)} benchmarks of {recipe_text}; a group job holds at most {MAX_GROUP_MEMBERS}: flag fewer")
    repo_path = _local_repo(repo_text, ctx)
    try:
        repo = GitRepo(repo_path)
    except RepoError as exc:
        raise FlagError("repo", str(exc)) from None
    shas = {}
    for name, rev in (("good", good_rev), ("bad", bad_rev)):
        try:
            shas[name] = repo.resolve(rev)
        except RepoError as exc:
            raise FlagError(name, str(exc)) from None
    if shas["good"] == shas["bad"]:
        raise FlagError("bad", f"{bad_rev} is the same commit as good {good_rev} ({shas['good'][:10]})")
    if not repo.is_ancestor(shas["good"], shas["bad"]):
        raise FlagError("good", f"{good_rev} ({shas['good'][:10]}) is not an ancestor of bad {bad_rev} ({shas['bad'][:10]})")
    job = NewJob(
        repo=canonical_git_url(repo_text) if is_git_url(repo_text) else str(repo.path),
        repo_path=str(repo.path),
        good=shas["good"],
        bad=shas["bad"],
        good_rev=good_rev,
        bad_rev=bad_rev,
        recipe=str(recipe_path),
        benchmark=members[0],
        source=source,
        file_issue=file_issue,
        seed=secrets.randbelow(2**31),
    )
    return job, members


def _members(recipe: Recipe, name: str | None, names: list[str] | None) -> tuple[str, ...]:
    """The benchmarks a flag names: `benchmark` as it always was (a recipe benchmark, the recipe's
    only one when absent), else a member of a benchmark that prints `name value` lines, a glob,
    or a member's label with its configuration (`gemm[gpu=H100]`); `benchmarks` through the
    recipe's selection, in the order asked. Each comes back as what selects it again."""
    if names is not None:
        return tuple(recipe.label(b) for b in recipe.select(names))
    if name is None or name in {b.name for b in recipe.benchmarks}:
        return (recipe.benchmark(name).name,)
    try:
        return tuple(recipe.label(b) for b in recipe.select([name]))
    except InputError:
        recipe.benchmark(name)  # its own words: "no benchmark named ..."
        raise


def _recipe_path(text: str, recipes_dir: Path) -> Path:
    """Recipes hold build commands the daemon will run: only those under --recipes-dir are used."""
    base = recipes_dir.resolve()
    path = (base / text).resolve()
    if not path.is_relative_to(base):
        raise FlagError("recipe", f"{text!r}: expected a recipe under the daemon's recipes directory {base}")
    if not path.is_file():
        raise FlagError("recipe", f"{text!r}: no such recipe under {base}")
    return path


def _check_file_issue(spec: str, state: Path) -> None:
    """The tracker's own parser, so what is accepted here is what filing can use; a dir: name
    must be one the file system under --state can hold (NAME_MAX bytes), or the whole
    bisection would run before filing failed."""
    try:
        target = parse_target(spec)
    except TargetError as exc:
        raise FlagError("file_issue", f"{spec!r}: {exc.why.replace('dir:PATH', 'dir:NAME')}") from None
    if target.kind == "dir" and not _DIR_NAME_RE.fullmatch(target.project):
        # a flag comes over the network: it may name a folder under --state/filed, never a path
        raise FlagError("file_issue", "dir: takes a plain name (letters, digits, . _ -), filed under --state/filed/")
    if target.kind == "dir" and len(target.project.encode()) > _name_max(state):
        raise FlagError("file_issue", f"dir: a name of {len(target.project.encode())} bytes; expected at most {_name_max(state)} (a file name under --state/filed/)")


def _name_max(state: Path) -> int:
    """The longest file name the file system of --state takes (255 on Linux and macOS)."""
    try:
        return int(os.pathconf(state, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return DEFAULT_NAME_MAX


def mirror_path(text: str, state: Path) -> Path:
    """Where the daemon keeps its mirror of the git URL `text` (the series page reads it
    unfetched): one per repository, however its URL is spelled (gitrepo.canonical_git_url)."""
    return state / "repos" / (hashlib.sha256(canonical_git_url(text).encode()).hexdigest()[:16] + ".git")


def submodule_rule(repo: str, allow_http: bool) -> UrlRule:
    """The submodule URLs a flagged repository's checkouts may fetch: its own URL rules, and a
    local path only when the flag named a local repository (which the daemon already reads)."""
    return UrlRule(allow_http=allow_http, allow_local=not is_git_url(repo) or repo.startswith("file://"))


def _local_repo(text: str, ctx: FlagContext) -> Path:
    """A local path as is; a git URL is cloned (once) into --state/repos and fetched on each flag."""
    if text.startswith("-"):
        raise FlagError("repo", f"{text!r}: expected a local path or a git URL")
    if not is_git_url(text):
        if "://" in text or "::" in text:
            raise FlagError("repo", f"{text!r}: expected a local path or an https, ssh, git or file URL")
        path = Path(text)
        if not path.is_absolute():
            raise FlagError("repo", f"{text!r}: expected an absolute path (the daemon's working directory is not yours)")
        return path
    dest = mirror_path(text, ctx.state)
    with file_lock(ctx.state / "locks" / f"{dest.name}.lock"):
        try:
            mirror_url(text, dest, FETCH_TIMEOUT_S, ctx.allow_http)
        except RepoError as exc:
            raise FlagError("repo", str(exc)) from None
    return dest


# --- webhooks ----------------------------------------------------------------------------------


def flag_from_block(text: str | None) -> dict[str, Any] | None:
    """The JSON object in the first ```attrib-flag fenced block of `text`, if any (found by a
    linear scan: scan.flag_block)."""
    if not text:
        return None
    block = flag_block(text)
    if block is None:
        return None
    return parse_body(block.encode())


@dataclass(frozen=True)
class WorkflowRun:
    """A failed workflow run whose `attrib-flag` artifact holds the flag."""

    repo: str  # OWNER/NAME
    run_id: int
    html_url: str | None  # the run's page: the job's source when the flag names none


def github_flag(event: str, payload: dict[str, Any], api_url: str = "") -> tuple[dict[str, Any] | WorkflowRun | None, str]:
    """(flag, why not) for a GitHub webhook. A completed, failed check run carries the flag in
    its output's text or summary, as an ```attrib-flag block; a completed, failed workflow run
    names the run whose `attrib-flag` artifact holds it (a WorkflowRun to fetch; `api_url` is
    the only API its artifacts_url may point at). docs/daemon.md."""
    if event == "ping":
        return None, "ping"
    if event not in ("check_run", "workflow_run"):
        return None, f"event {event!r} is not check_run or workflow_run"
    obj = payload.get(event)
    if not isinstance(obj, dict):
        raise FlagError(event, "expected an object")
    if payload.get("action") != "completed" or obj.get("conclusion") != "failure":
        return None, f"{event} {payload.get('action')}/{obj.get('conclusion')}: only completed failures are flags"
    if event == "workflow_run":
        return workflow_run(payload, obj, api_url), ""
    output = obj.get("output")
    if not isinstance(output, dict):
        raise FlagError("check_run.output", "expected an object")
    for part in ("text", "summary"):
        value = output.get(part)
        if value is not None and not isinstance(value, str):
            raise FlagError(f"check_run.output.{part}", "expected a string")
        flag = flag_from_block(value)
        if flag is not None:
            return flag, ""
    return None, "the check run's output has no ```attrib-flag block"


def workflow_run(payload: dict[str, Any], run: dict[str, Any], api_url: str) -> WorkflowRun:
    """The repository and run id of a workflow_run payload. The artifacts_url is used only for
    its run id, and only when it points at the daemon's own API: the token goes nowhere else."""
    repository = payload.get("repository")
    full_name = repository.get("full_name") if isinstance(repository, dict) else None
    if not isinstance(full_name, str) or not _GITHUB_REPO_RE.match(full_name) or ".." in full_name:
        raise FlagError("repository.full_name", "expected OWNER/NAME")
    run_id = run.get("id")
    if run_id is None:
        url = run.get("artifacts_url")
        prefix = f"{api_url.rstrip('/')}/repos/{full_name}/actions/runs/"
        m = re.fullmatch(r"([0-9]{1,18})/artifacts", url[len(prefix) :]) if isinstance(url, str) and url.startswith(prefix) else None
        if m is None:
            raise FlagError("workflow_run.id", f"missing, and workflow_run.artifacts_url is not {prefix}ID/artifacts")
        run_id = int(m.group(1))
    if isinstance(run_id, bool) or not isinstance(run_id, int) or not 0 < run_id < 2**63:
        raise FlagError("workflow_run.id", "expected a positive integer")
    page = run.get("html_url")
    html_url = page if isinstance(page, str) and page.startswith("https://") and len(page) <= MAX_TEXT else None
    return WorkflowRun(full_name, run_id, html_url)


def gitlab_flag(event: str, payload: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """(flag, why not) for a GitLab pipeline hook: a failed pipeline whose ATTRIB_FLAG variable
    holds the flag JSON (docs/daemon.md)."""
    if payload.get("object_kind") != "pipeline":
        return None, f"object_kind {payload.get('object_kind')!r} is not pipeline"
    attrs = payload.get("object_attributes")
    if not isinstance(attrs, dict):
        raise FlagError("object_attributes", "expected an object")
    if attrs.get("status") != "failed":
        return None, f"pipeline status {attrs.get('status')!r}: only failed pipelines are flags"
    variables = attrs.get("variables") or []
    if not isinstance(variables, list):
        raise FlagError("object_attributes.variables", "expected a list")
    for var in variables:
        if isinstance(var, dict) and var.get("key") == "ATTRIB_FLAG":
            value = var.get("value")
            if not isinstance(value, str):
                raise FlagError("ATTRIB_FLAG", "expected a string holding the flag JSON")
            return parse_body(value.encode()), ""
    return None, "the pipeline has no ATTRIB_FLAG variable"
