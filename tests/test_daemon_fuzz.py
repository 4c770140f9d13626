"""Fuzzing the flag and webhook parsers through a real `attrib daemon` process (issue 16):
hypothesis writes flags, check-run, workflow-run and pipeline payloads and raw bodies, near
the valid ones (real shas, the real recipe) and far from them (NUL, whitespace, deep nesting,
bytes that are not UTF-8), signs them properly so they reach the parsers, and checks for each
answer: never a 5xx from the daemon itself, nothing stored for a refused request, and at the
end a resident memory that did not grow with the inputs and a log without a traceback.

Bounded: a fixed number of examples, no shrinking database, every request with a timeout."""

from __future__ import annotations

import json
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import Proc, daemon_process, github_repository, gitlab_project, webhook_tables
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_daemon_api import repo as repo  # noqa: F401  (the module-scoped git repository fixture)

from attrib.daemon.flags import FIELDS
from attrib.demo import DEMO_RECIPE

SECRET = "fuzz-secret-0123456789abcdef"
EXAMPLES = 120
MEMORY_GROWTH_MIB = 64  # far below what unbounded bodies or leaks would add over the examples
# 502: the workflow_run path asks GitHub (here a closed loopback port) and says it cannot reach it.
# 403: a fork's run, or a flag for another repository than its sender's (daemon/senders.py).
ANSWERS = {200, 202, 400, 401, 403, 413, 429, 502}


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory, repo) -> Iterator[Proc]:  # noqa: F811
    recipes = tmp_path_factory.mktemp("fuzz-recipes")
    (recipes / "demo.toml").write_text(DEMO_RECIPE)
    tables = webhook_tables(repo[0])
    with daemon_process(tmp_path_factory.mktemp("fuzz"), SECRET, recipes, tables=tables, github_api_url="http://127.0.0.1:9") as p:
        yield p


def _scalars() -> st.SearchStrategy[Any]:
    return st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40)


json_values = st.recursive(_scalars(), lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
nasty_text = st.text(alphabet=st.sampled_from([*string.printable, "\x00", "\u202e", "é", "\n", " ", "\x7f"]), max_size=30)


@st.composite
def flags(draw: st.DrawFn, repo_info: tuple[Path, list[str]]) -> dict[str, Any]:
    path, shas = repo_info
    near = {
        "repo": st.sampled_from([str(path), "file:///etc", "http://127.0.0.1:9/x.git", "relative", "-u", f" {path}"]),
        "good": st.sampled_from([shas[0], "main~11", " main", "main\n", "--all", "HEAD@{0}"]),
        "bad": st.sampled_from([shas[-1], shas[3], "main", "no-such-rev", shas[0]]),
        "recipe": st.sampled_from(["demo.toml", "../demo.toml", "/etc/passwd", "demo.toml\n"]),
        "benchmark": st.sampled_from(["loop", "nope", ""]),
        "benchmarks": st.sampled_from([["loop"], ["nope"], [], ["loop", "loop"], ["l*"], "loop", [1], [""], ["loop\n"]]),
        "source": nasty_text,
        "file_issue": st.sampled_from(["github:acme/kernels", "github:../..", "gitlab:a/b/c", "gitlab:../..", "dir:x", "dir:../x", "jira:1"]),
    }
    flag: dict[str, Any] = {}
    if draw(st.booleans()):  # a valid flag with at most one field changed: the paths that accept
        flag = {"repo": str(path), "good": shas[0], "bad": draw(st.sampled_from(shas[1:])), "recipe": "demo.toml",
                "source": draw(st.text(min_size=1, max_size=20).filter(str.strip))}  # fmt: skip
        if draw(st.booleans()):
            name = draw(st.sampled_from(FIELDS))
            flag[name] = draw(near[name] | nasty_text)
        return flag
    for name in draw(st.lists(st.sampled_from(FIELDS), unique=True, max_size=len(FIELDS))):
        flag[name] = draw(near[name] | nasty_text | json_values)
    if draw(st.booleans()):
        flag[draw(st.text(min_size=1, max_size=8))] = draw(json_values)
    return flag


def raw_bodies() -> st.SearchStrategy[bytes]:
    deep = st.integers(0, 300).map(lambda n: b"[" * n + b"]" * n)
    return st.binary(max_size=200) | deep | st.integers(0, 300).map(lambda n: b'{"a":' * n + b"1" + b"}" * n)


@st.composite
def requests(draw: st.DrawFn, repo_info: tuple[Path, list[str]]) -> tuple[str, bytes, str]:
    """(route, body, event) for one request."""
    route = draw(st.sampled_from(["regressions", "check_run", "workflow_run", "gitlab"]))
    if draw(st.integers(0, 5)) == 0:
        return route, draw(raw_bodies()), route
    flag = draw(flags(repo_info))
    if route == "regressions":
        payload: Any = flag
    elif route == "check_run":
        text = draw(st.sampled_from([f"```attrib-flag\n{json.dumps(flag)}\n```", json.dumps(flag), "```attrib-flag\n{\n```"]))
        payload = {"action": draw(st.sampled_from(["completed", "created"])),
                   "check_run": {"conclusion": draw(st.sampled_from(["failure", "success", None])), "output": draw(st.sampled_from([{"text": text}, {"summary": text}, text, None]))},
                   "repository": draw(st.sampled_from([github_repository(), github_repository("someone/else", 7), None]))}  # fmt: skip
    elif route == "workflow_run":
        payload = {"action": "completed", "repository": draw(st.sampled_from([{"full_name": "acme/kernels"}, {"full_name": "../.."}, "x"])),
                   "workflow_run": {"conclusion": draw(st.sampled_from(["failure", "success"])), "id": draw(st.integers(-2, 2**64) | json_values),
                                    "head_repository": draw(st.sampled_from([github_repository(), github_repository("fork/kernels", 9), None]))}}  # fmt: skip
    else:
        value = draw(st.sampled_from([json.dumps(flag), "{", "[" * 100]) | json_values)
        payload = {"object_kind": draw(st.sampled_from(["pipeline", "push"])),
                   "object_attributes": {"status": draw(st.sampled_from(["failed", "success"])), "variables": [{"key": "ATTRIB_FLAG", "value": value}]},
                   "project": draw(st.sampled_from([gitlab_project(), gitlab_project("someone/else", 8), None]))}  # fmt: skip
    if draw(st.booleans()):
        payload = draw(st.sampled_from([payload, [payload], {"wrapped": payload}]))
    return route, json.dumps(payload).encode(), route


def _send(proc: Proc, route: str, body: bytes) -> tuple[int, Any]:
    if route == "regressions":
        status, answer, _ = proc.flag(body)
    elif route in ("check_run", "workflow_run"):
        status, answer, _ = proc.github(body, event=route)
    else:
        status, answer, _ = proc.gitlab(body)
    return status, answer


def test_parsers_never_fail_and_never_store_a_refused_request(proc: Proc, repo):
    start = proc.memory_kib()["VmRSS"]
    seen: dict[int, int] = {}

    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(requests(repo))
    def probe(request: tuple[str, bytes, str]) -> None:
        route, body, _ = request
        before = proc.rows()
        status, answer = _send(proc, route, body)
        seen[status] = seen.get(status, 0) + 1
        assert status in ANSWERS, (status, answer, body[:200])
        if status != 202:
            assert proc.rows() == before, ("a refused request stored something", status, answer)
            if status >= 400:
                assert isinstance(answer, dict) and "\n" not in answer["error"], answer
        else:
            assert proc.rows()["flags"] in (before["flags"], before["flags"] + 1)  # stored once, or a replay

    probe()
    grown_mib = (proc.memory_kib()["VmRSS"] - start) / 1024
    assert grown_mib < MEMORY_GROWTH_MIB, f"resident memory grew {grown_mib:.0f} MiB over the examples"
    log = proc.log.read_text()
    assert "Traceback" not in log and "RecursionError" not in log, log[-2000:]
    assert seen.get(400, 0) > 0 and seen.get(202, 0) > 0, seen  # it reached the parsers and the store
