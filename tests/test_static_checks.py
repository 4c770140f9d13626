"""The project's own static checks, as the suite's tests: the type hints hold (mypy, configured in
pyproject.toml) and the linter is clean (ruff check). Each failure names the file and line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_the_type_hints_hold(tmp_path):
    proc = _tool("mypy", "--cache-dir", str(tmp_path / "mypy"), "attrib")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_the_linter_is_clean():
    proc = _tool("ruff", "check", "--no-cache", "attrib", "tests", "benchmarks")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
