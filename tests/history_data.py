"""Nightly results for tests: the CSV a CI job would write, for commits of a real repository.

Values are drawn from a seeded generator around a level that steps at a given commit, so every
test knows where the change is without a hard-coded figure."""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HEADER = "commit,benchmark,value,unit,direction,timestamp,machine"


def first_parent(repo: Path, rev: str = "HEAD") -> list[str]:
    out = subprocess.run(["git", "-C", str(repo), "rev-list", "--first-parent", "--reverse", rev], check=True, capture_output=True, text=True)
    return out.stdout.split()


def levels(n: int, step_at: int | None, factor: float, seed: int, noise: float = 0.01, back_at: int | None = None) -> list[float]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        level = factor if step_at is not None and i >= step_at and (back_at is None or i < back_at) else 1.0
        out.append(level * (1 + rng.gauss(0, noise)))
    return out


def csv_text(commits: Sequence[str], values: Sequence[float], benchmark: str = "loop", machine: str = "ci-a100", day0: int = 1) -> str:
    rows = [HEADER]
    for i, (c, v) in enumerate(zip(commits, values, strict=True)):
        day = day0 + i
        rows.append(f"{c},{benchmark},{v:.9f},s,lower,2026-{1 + (day - 1) // 28:02d}-{1 + (day - 1) % 28:02d}T02:00:00Z,{machine}")
    return "\n".join(rows) + "\n"


RESULT_FIXTURE = Path(__file__).parent / "fixtures" / "schema1" / "culprit.json"


def result_doc(medians: Sequence[tuple[str, float | None]], benchmark: str = "loop", unit: str = "s") -> dict[str, Any]:
    """A whole result document as attrib wrote it (the schema-1 fixture), holding these commits'
    medians: the history reads attrib's results with the reader `attrib report` uses."""
    doc: dict[str, Any] = json.loads(RESULT_FIXTURE.read_text())
    row = doc["commits"][0]
    doc.update(benchmark=benchmark, unit=unit, commits=[{**row, "commit": sha, "median": m} for sha, m in medians])
    return doc
