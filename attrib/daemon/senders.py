"""Who sent a webhook, and what its flag may ask the daemon to build (issue 40).

A forge's webhook is authentic when its signature holds (auth.py), but authentic is not enough:
the run that failed may be a fork's pull request, whose code is anyone's, and the flag inside
names the repository the daemon will fetch and build. So, before anything is fetched or stored:

- the sender is the repository the payload names (GitHub `repository.full_name`, GitLab
  `project.path_with_namespace`), its `Sender.key` "github:OWNER/NAME" or "gitlab:GROUP/PROJECT";
- a run of a fork's code is refused (FlagRefused, HTTP 403): a GitHub workflow run whose
  `head_repository` is not the repository (or is gone), a run or check run of a pull request
  whose head repository is not its base; a GitLab pipeline of a merge request whose source
  project is not the project (a merge request pipeline without that information included);
- the flag's `repo` must be the sender's own (one of the clone URLs the payload gives, however
  spelled: gitrepo.canonical_git_url) or one the daemon's config lists for that sender.

Both are opened only by the daemon's config, per sender (docs/daemon.md, "Webhooks: forks and
repositories"):

```toml
[webhooks."github:acme/kernels"]
repos = ["/srv/git/kernels"]   # further repositories (local paths, git URLs) its flags may name
allow_forks = false            # flags from runs of forks' code: built with this host's access
```
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attrib.codec import NonEmptyStr, config_errors, decode
from attrib.daemon.flags import WorkflowRun, github_flag, gitlab_flag, parse_body
from attrib.errors import FieldError, FlagError, FlagRefused
from attrib.gitrepo import canonical_git_url, is_git_url

_SENDER_RE = re.compile(r"^(github|gitlab):[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+$")
_GITHUB_URL_KEYS = ("clone_url", "ssh_url", "git_url", "html_url", "svn_url")
_GITLAB_URL_KEYS = ("git_http_url", "git_ssh_url", "web_url", "http_url", "ssh_url")
_MR_SOURCES = ("merge_request_event", "external_pull_request_event")


@dataclass(frozen=True)
class WebhookRule:
    """What one sender's flags may do beyond their own repository (daemon config [webhooks])."""

    repos: tuple[NonEmptyStr, ...] = ()  # local paths (absolute) or git URLs
    allow_forks: bool = False


@dataclass(frozen=True)
class Sender:
    key: str  # "github:OWNER/NAME" or "gitlab:GROUP/PROJECT"
    urls: tuple[str, ...]  # the repository's own git URLs, as the payload gives them
    fork: str = ""  # why the run is of a fork's code; "" when it is not
    fork_field: str = ""  # the payload's field that says so


def parse_webhooks(path: Path, table: Any) -> dict[str, WebhookRule]:
    """The [webhooks] table of the daemon config: sender key -> rule; ConfigError naming the key."""
    out: dict[str, WebhookRule] = {}
    with config_errors(path):
        if not isinstance(table, dict):
            raise FieldError("webhooks", "expected a table of senders, such as [webhooks.\"github:acme/kernels\"]")
        for key, t in table.items():
            where = f'webhooks."{key}"'
            if not _SENDER_RE.match(key):
                raise FieldError(where, 'expected a sender "github:OWNER/NAME" or "gitlab:GROUP/PROJECT"')
            rule: WebhookRule = decode(WebhookRule, t, where, strict=True)
            for repo in rule.repos:
                if not is_git_url(repo) and not repo.startswith("/"):
                    raise FieldError(f"{where}.repos", f"{repo!r}: expected an absolute path or a git URL")
            out[key.casefold()] = rule  # GitHub and GitLab names are case-insensitive
    return out


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _urls(repository: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(u for k in keys if isinstance(u := repository.get(k), str) and is_git_url(u))


def _pr_fork(pulls: Any, field: str) -> str:
    """Why a payload's pull_requests show a fork's: a head repository that is not the base."""
    for i, pr in enumerate(pulls if isinstance(pulls, list) else []):
        head, base = _obj(_obj(_obj(pr).get("head")).get("repo")), _obj(_obj(_obj(pr).get("base")).get("repo"))
        if head.get("id") != base.get("id") or head.get("url") != base.get("url"):
            return f"{field}[{i}]: pull request #{_obj(pr).get('number')} comes from {head.get('url') or 'another repository'}"
    return ""


def github_sender(event: str, payload: dict[str, Any]) -> Sender:
    """The repository a GitHub check_run or workflow_run event comes from, and whether its run
    is of a fork's code."""
    repository = _obj(payload.get("repository"))
    name = repository.get("full_name")
    if not isinstance(name, str) or not _SENDER_RE.match(f"github:{name}") or name.count("/") != 1:
        raise FlagError("repository.full_name", "expected OWNER/NAME (the repository that sent the event)")
    key = f"github:{name}"
    urls = _urls(repository, _GITHUB_URL_KEYS)
    run = _obj(payload.get(event))
    if event == "workflow_run":
        head = run.get("head_repository")
        head_name = _obj(head).get("full_name")
        if not isinstance(head_name, str) or head_name.casefold() != name.casefold() or _obj(head).get("id", repository.get("id")) != repository.get("id"):
            why = f"the run's code is from {head_name if isinstance(head_name, str) else 'a repository that is gone'}, not {name}"
            return Sender(key, urls, why, "workflow_run.head_repository")
    fork = _pr_fork(run.get("pull_requests"), f"{event}.pull_requests")
    return Sender(key, urls, fork, f"{event}.pull_requests" if fork else "")


def gitlab_sender(payload: dict[str, Any]) -> Sender:
    """The project a GitLab pipeline event comes from, and whether it ran a fork's code."""
    project = _obj(payload.get("project"))
    name = project.get("path_with_namespace")
    if not isinstance(name, str) or not _SENDER_RE.match(f"gitlab:{name}"):
        raise FlagError("project.path_with_namespace", "expected GROUP/PROJECT (the project that sent the event)")
    key, urls = f"gitlab:{name}", _urls(project, _GITLAB_URL_KEYS)
    mr = payload.get("merge_request")
    source = _obj(payload.get("object_attributes")).get("source")
    if isinstance(mr, dict):
        ids = (mr.get("source_project_id"), mr.get("target_project_id"), project.get("id"))
        if ids[0] is None or len(set(ids)) != 1:
            return Sender(key, urls, f"merge request !{mr.get('iid')} comes from project {ids[0]}, not {name} ({ids[2]})", "merge_request.source_project_id")
    elif source in _MR_SOURCES:
        return Sender(key, urls, f"a {source} pipeline without its merge_request: its source project is unknown", "object_attributes.source")
    return Sender(key, urls)


def github_event(
    event: str, body: bytes, api_url: str, rules: Mapping[str, WebhookRule]
) -> tuple[dict[str, Any] | WorkflowRun | None, str, Sender | None]:
    """A GitHub webhook's flag (or the run to fetch it from), why none, and its sender; a fork's
    run is refused here, before its artifact is fetched with the daemon's token."""
    payload = parse_body(body)
    found, why = github_flag(event, payload, api_url)
    if found is None:
        return None, why, None
    sender = github_sender(event, payload)
    check_sender(sender, {}, rules)
    return found, why, sender


def gitlab_event(event: str, body: bytes) -> tuple[dict[str, Any] | None, str, Sender | None]:
    """A GitLab pipeline hook's flag, why none, and its sender."""
    payload = parse_body(body)
    flag, why = gitlab_flag(event, payload)
    return (flag, why, gitlab_sender(payload)) if flag is not None else (None, why, None)


def _same_url(a: str, b: str) -> bool:
    return _spellings(a) & _spellings(b) != set()


def _spellings(url: str) -> set[str]:
    """A git URL's canonical spelling (case-folded: forges' names are case-insensitive), and
    for scp-like `user@host:path` its ssh:// equivalent."""
    one = canonical_git_url(url).casefold()
    out = {one}
    if "://" not in one and ":" in one:
        host, _, path = one.partition(":")
        out.add(f"ssh://{host}/{path.lstrip('/')}")
    return out


def _same_path(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def check_sender(sender: Sender, flag: dict[str, Any], rules: Mapping[str, WebhookRule]) -> None:
    """FlagRefused unless `sender` may send `flag`: not a fork's run (unless allowed), and for
    its own repository or one its rule lists. Runs before the flag is validated: a refused
    flag's repository is never fetched."""
    rule = rules.get(sender.key.casefold(), WebhookRule())
    config = f'[webhooks."{sender.key}"]'
    if sender.fork and not rule.allow_forks:
        raise FlagRefused(sender.fork_field, f"{sender.fork}: a fork's code is not built with this daemon's access (allow_forks in {config})")
    repo = flag.get("repo")
    if not isinstance(repo, str):
        return  # flags.prepare names what is wrong with it
    if is_git_url(repo):
        allowed = any(_same_url(repo, u) for u in (*sender.urls, *(r for r in rule.repos if is_git_url(r))))
    else:
        allowed = Path(repo).is_absolute() and any(_same_path(repo, r) for r in rule.repos if not is_git_url(r))
    if not allowed:
        raise FlagRefused("repo", f"{repo!r} is not the repository of {sender.key}, nor one that repos in {config} lists")
