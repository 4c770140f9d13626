"""The daemon under hostile and careless input, round three (issue 33): each probe against a
real `attrib daemon` process on loopback (tests/daemon_proc.py), written to fail on the code
before the issue. Every wait is bounded; the only clocks are the clients' timeouts, which the
old code ran past (a stall) and the new one does not come near."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest
from daemon_proc import Proc, daemon_process
from test_daemon_api import good_flag
from test_daemon_api import repo as repo  # noqa: F401  (the module-scoped git repository fixture)

from attrib.demo import DEMO_RECIPE

SECRET = "careless-secret-0123456789abcdef"


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    recipes = tmp_path_factory.mktemp("careless-recipes")
    (recipes / "demo.toml").write_text(DEMO_RECIPE)
    with daemon_process(tmp_path_factory.mktemp("careless"), SECRET, recipes) as p:
        yield p


# --- 1. untrusted text is read in linear time, off the event loop -------------------------------


def _check_run(text: str) -> bytes:
    run = {"conclusion": "failure", "output": {"title": "perf", "summary": "s", "text": text}}
    return json.dumps({"action": "completed", "check_run": run}).encode()


def test_a_hostile_check_run_does_not_stall_the_daemon(proc: Proc, repo):
    """GitHub allows 65,535 characters of output text: all newlines after an opening fence
    took the old pattern hours. The client's timeout (60 s) is the only clock here: the old
    daemon answered neither request within it."""
    hostile = _check_run("```attrib-flag\n" + "\n" * 65_500)
    answers: dict[str, object] = {}
    sender = threading.Thread(target=lambda: answers.update(hostile=proc.github(hostile)[:2]))
    sender.start()
    status, page, _ = proc.get("/v1/jobs", SECRET)  # sent while the hostile one is in flight
    sender.join(120)
    assert status == 200 and page == {"jobs": []}
    assert answers["hostile"] == (200, {"id": None, "duplicate_of": None, "ignored": "the check run's output has no ```attrib-flag block"})
    # and a real block in the same place is still a flag
    text = "perf regressed\n```attrib-flag\n" + json.dumps(good_flag(repo)) + "\n```\n"
    status, answer, _ = proc.github(_check_run(text))
    assert status == 202 and answer["id"], answer


def test_a_hostile_body_of_escaped_quotes_is_answered(proc: Proc):
    """A signed body that opens a string and escapes every quote after it: the old nesting
    check took quadratic time (1 MiB: hours) before the parser refused it."""
    body = b'{"a": "' + b'\\"' * ((1 << 20) // 2 - 8)
    status, answer, _ = proc.flag(body)
    assert status == 400 and answer["field"] == "body" and "not JSON" in answer["error"], answer

