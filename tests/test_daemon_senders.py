"""A webhook's flag is checked against its sender before anything is fetched or stored (issue 40,
point 1): a run of a fork's code is refused (403), and so is a flag for another repository than
the one that sent the event, unless the daemon's [webhooks] config allows it for that sender.

The daemon is the real app on uvicorn (test_daemon_api.running); GitHub is the loopback fake
of tests/fake_github_actions.py, which records every request (a refused fork's run must not
make the daemon ask GitHub for its artifact with the daemon's token). Payloads are shaped as
GitHub's (octokit/webhooks' payload examples: workflow_run.completed.with-pull-requests,
check_run.completed) and GitLab's (its "Pipeline events" docs) are.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import FORGE_REPO, github_repository, gitlab_project
from fake_github_actions import TOKEN, FakeActions, serving
from test_daemon_api import SECRET, Daemon, good_flag, running, webhook_rules
from test_daemon_api import repo as repo  # noqa: F401  (the module-scoped git repository fixture)
from test_daemon_api import settings as settings  # noqa: F401
from test_daemon_github_artifacts import zip_of

from attrib.daemon.auth import github_signature
from attrib.daemon.config import Settings, read_config
from attrib.daemon.senders import Sender, WebhookRule, check_sender
from attrib.errors import ConfigError, FlagRefused

RUN = 289782451
FORK = github_repository("mallory/kernels", 999)


@pytest.fixture
def github() -> Iterator[FakeActions]:
    with serving() as fake:
        yield fake


def _daemon(settings: Settings, github: FakeActions, tmp_path: Path, rules: dict[str, WebhookRule]) -> Any:  # noqa: F811
    token_file = tmp_path / "github-token"
    token_file.write_text(TOKEN + "\n")
    return running(replace(settings, github_api_url=github.api_url, github_token_file=token_file, webhooks=rules))


def workflow_run(head: dict[str, Any] | None, event: str = "pull_request", pulls: list[Any] | None = None) -> dict[str, Any]:
    return {
        "action": "completed",
        "repository": github_repository(),
        "sender": {"login": "mallory", "id": 31337, "type": "User"},
        "workflow_run": {
            "id": RUN, "name": "perf", "event": event, "status": "completed", "conclusion": "failure",
            "head_branch": "speedup", "head_sha": "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
            "html_url": f"https://github.com/{FORGE_REPO}/actions/runs/{RUN}",
            "artifacts_url": f"https://api.github.com/repos/{FORGE_REPO}/actions/runs/{RUN}/artifacts",
            "head_repository": head, "repository": github_repository(), "pull_requests": pulls or [],
        },
    }  # fmt: skip


def post_github(daemon: Daemon, payload: dict[str, Any], event: str) -> tuple[int, dict[str, Any]]:
    body = json.dumps(payload).encode()
    status, answer, _ = daemon.post("/v1/webhooks/github", body, {"X-GitHub-Event": event, "X-Hub-Signature-256": github_signature(body, SECRET)})
    return status, answer


def post_gitlab(daemon: Daemon, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    body = json.dumps(payload).encode()
    status, answer, _ = daemon.post("/v1/webhooks/gitlab", body, {"X-Gitlab-Token": SECRET, "X-Gitlab-Event": "Pipeline Hook"})
    return status, answer


def refused(daemon: Daemon, status: int, answer: dict[str, Any], field: str) -> str:
    assert status == 403 and answer["field"] == field, (status, answer)
    assert "\n" not in answer["error"]
    counts = daemon.store.counts()
    assert counts["jobs"] == 0 and counts["flags"] == 0, counts  # nothing stored
    assert not (daemon.settings.state / "repos").exists() or not any((daemon.settings.state / "repos").iterdir())  # nothing fetched
    return str(answer["error"])


def test_a_forks_pull_request_run_is_refused_before_github_is_asked(settings: Settings, github: FakeActions, tmp_path: Path, repo):  # noqa: F811
    github.add(RUN, 7, zip_of({"flag.json": json.dumps(good_flag(repo)).encode()}))
    with _daemon(settings, github, tmp_path, webhook_rules(repo[0])) as daemon:
        status, answer = post_github(daemon, workflow_run(FORK), "workflow_run")
        assert "mallory/kernels" in refused(daemon, status, answer, "workflow_run.head_repository")
        status, answer = post_github(daemon, workflow_run(None), "workflow_run")  # the fork was deleted since
        refused(daemon, status, answer, "workflow_run.head_repository")
        assert github.seen == []  # the daemon's token went nowhere
        # The same run from a branch of the repository itself is the daemon's to fetch and queue.
        status, answer = post_github(daemon, workflow_run(github_repository()), "workflow_run")
        assert status == 202 and answer["id"], answer


def test_a_forks_run_is_taken_where_the_config_allows_forks(settings: Settings, github: FakeActions, tmp_path: Path, repo):  # noqa: F811
    github.add(RUN, 7, zip_of({"flag.json": json.dumps(good_flag(repo)).encode()}))
    rules = {f"github:{FORGE_REPO}": WebhookRule(repos=(str(repo[0]),), allow_forks=True)}
    with _daemon(settings, github, tmp_path, rules) as daemon:
        status, answer = post_github(daemon, workflow_run(FORK), "workflow_run")
        assert status == 202 and answer["id"], answer


def test_a_check_run_of_a_forks_pull_request_is_refused(settings: Settings, github: FakeActions, tmp_path: Path, repo):  # noqa: F811
    flag = good_flag(repo)
    pull = {"number": 2, "head": {"ref": "x", "repo": {"id": 999, "url": "https://api.github.com/repos/mallory/kernels"}},
            "base": {"ref": "main", "repo": {"id": github_repository()["id"], "url": f"https://api.github.com/repos/{FORGE_REPO}"}}}  # fmt: skip
    run = {"conclusion": "failure", "status": "completed", "output": {"title": "perf", "summary": None, "text": f"```attrib-flag\n{json.dumps(flag)}\n```"}}
    payload = {"action": "completed", "check_run": {**run, "pull_requests": [pull]}, "repository": github_repository()}
    with _daemon(settings, github, tmp_path, webhook_rules(repo[0])) as daemon:
        status, answer = post_github(daemon, payload, "check_run")
        assert "mallory/kernels" in refused(daemon, status, answer, "check_run.pull_requests")
        status, answer = post_github(daemon, {**payload, "repository": None}, "check_run")  # no sender: not taken
        assert status == 400 and answer["field"] == "repository.full_name", answer
        same = {**pull, "head": pull["base"]}
        status, answer = post_github(daemon, {**payload, "check_run": {**run, "pull_requests": [same]}}, "check_run")
        assert status == 202 and answer["id"], answer


def test_a_flag_for_another_repository_than_the_sender_is_refused(settings: Settings, github: FakeActions, tmp_path: Path, repo):  # noqa: F811
    """Nothing is configured for this sender: only its own URLs may be flagged. The repository
    named is never mirrored (the refusal comes before the fetch)."""
    other = tmp_path / "elsewhere"
    payload = {"action": "completed", "repository": github_repository(),
               "check_run": {"conclusion": "failure", "output": {"text": ""}}}  # fmt: skip
    with _daemon(settings, github, tmp_path, {}) as daemon:
        for named in (str(repo[0]), f"file://{other}", "https://github.com/mallory/kernels.git", "git@github.com:mallory/kernels.git"):
            flag = {**good_flag(repo), "repo": named}
            payload["check_run"]["output"]["text"] = f"```attrib-flag\n{json.dumps(flag)}\n```"
            status, answer = post_github(daemon, payload, "check_run")
            assert f"github:{FORGE_REPO}" in refused(daemon, status, answer, "repo"), named
        # The sender's own repository, however spelled, is not refused (this host cannot reach
        # github.com: the fetch is what fails, 400, after the check).
        for named in ("https://github.com/Acme/Kernels", "ssh://git@github.com/acme/kernels.git"):
            payload["check_run"]["output"]["text"] = f"```attrib-flag\n{json.dumps({**good_flag(repo), 'repo': named})}\n```"
            status, answer = post_github(daemon, payload, "check_run")
            assert status != 403, (named, answer)


def test_gitlab_merge_requests_from_a_fork_project_are_refused(settings: Settings, github: FakeActions, tmp_path: Path, repo):  # noqa: F811
    project = gitlab_project()
    flag = json.dumps(good_flag(repo))
    attrs = {"id": 31, "status": "failed", "source": "merge_request_event", "ref": "refs/merge-requests/1/head",
             "variables": [{"key": "ATTRIB_FLAG", "value": flag}]}  # fmt: skip
    mr = {"id": 1, "iid": 1, "source_branch": "speedup", "target_branch": "main", "source_project_id": 4242, "target_project_id": project["id"]}
    payload = {"object_kind": "pipeline", "object_attributes": attrs, "merge_request": mr, "project": project}
    with _daemon(settings, github, tmp_path, webhook_rules(repo[0])) as daemon:
        status, answer = post_gitlab(daemon, payload)
        assert "4242" in refused(daemon, status, answer, "merge_request.source_project_id")
        status, answer = post_gitlab(daemon, {**payload, "merge_request": None})  # an MR pipeline that hides its source
        refused(daemon, status, answer, "object_attributes.source")
        status, answer = post_gitlab(daemon, {**payload, "project": None})
        assert status == 400 and answer["field"] == "project.path_with_namespace", answer
        status, answer = post_gitlab(daemon, {**payload, "project": gitlab_project("other/group")})  # not configured
        refused(daemon, status, answer, "merge_request.source_project_id")
        same = {**mr, "source_project_id": project["id"]}
        status, answer = post_gitlab(daemon, {**payload, "merge_request": same})
        assert status == 202 and answer["id"], answer


def test_check_sender_matches_the_senders_own_urls_however_spelled():
    sender = Sender("github:acme/kernels", tuple(github_repository()[k] for k in ("clone_url", "ssh_url", "git_url", "html_url")))
    for url in ("https://github.com/acme/kernels", "https://GitHub.com/ACME/kernels.git/", "git@github.com:acme/kernels", "ssh://git@github.com/acme/kernels"):
        check_sender(sender, {"repo": url}, {})
    for url in ("https://github.com/acme/kernels-fork", "https://evil.example/acme/kernels.git", "/srv/git/kernels", "kernels"):
        with pytest.raises(FlagRefused):
            check_sender(sender, {"repo": url}, {})
    check_sender(sender, {"repo": "/srv/git/kernels/"}, {"github:acme/kernels": WebhookRule(repos=("/srv/git/kernels",))})
    check_sender(sender, {"repo": 7}, {})  # not text: flags.prepare says what is wrong with it


def test_the_webhooks_config_is_checked_key_by_key(tmp_path: Path):
    config = tmp_path / "daemon.toml"
    config.write_text('[webhooks."github:acme/kernels"]\nrepos = ["/srv/git/kernels"]\nallow_forks = true\n')
    assert read_config(config)["webhooks"] == {"github:acme/kernels": WebhookRule(("/srv/git/kernels",), True)}
    for text, key in (
        ('[webhooks."acme/kernels"]\n', 'webhooks."acme/kernels"'),
        ('[webhooks."github:acme/kernels"]\nallow_fork = true\n', "allow_fork"),
        ('[webhooks."github:acme/kernels"]\nrepos = ["relative/path"]\n', "repos"),
        ('[webhooks."github:acme/kernels"]\nallow_forks = "yes"\n', "allow_forks"),
    ):
        config.write_text(text)
        with pytest.raises(ConfigError) as err:
            read_config(config)
        assert key in str(err.value) and "\n" not in str(err.value), str(err.value)
