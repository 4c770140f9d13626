"""`attrib demo` end to end, as the README's first command runs it."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

pytestmark = pytest.mark.slow


def test_demo_finds_the_planted_culprit(tmp_path):
    res = run_cli("demo", "--dir", tmp_path / "d")
    assert res.code == 0, res.stdout + res.stderr
    assert "the planted culprit was found" in res.stdout
    result = json.loads((tmp_path / "d" / "result.json").read_text())
    assert result["status"] == "culprit_found" and len(result["culprits"]) == 1
    assert result["range_commits"] >= 60
    assert "Culprit found" in (tmp_path / "d" / "report.md").read_text()
    # Running it again replaces its own directory; it refuses to clobber anything else.
    assert run_cli("demo", "--dir", tmp_path / "d").code == 0
    other = tmp_path / "mine"
    other.mkdir()
    refused = run_cli("demo", "--dir", other)
    assert refused.code == 2 and "not an attrib demo directory" in refused.stderr
