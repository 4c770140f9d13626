"""The daemon config's `[history]` table: which projects send nightly results, where their
repositories are, and which recipe bisects which benchmark (docs/history.md).

```toml
[history]
public_url = "https://attrib.example.org"     # optional: links in reports point here
[history.projects.kernels]
repo = "/srv/git/kernels"                      # a local path or a git URL (mirrored under --state)
branch = "main"                                # series follow its first-parent line [HEAD]
file_issue = "github:org/kernels"              # where the bisections' reports are filed [none]
bisect_improvements = false                    # improvements are recorded, not bisected [false]
max_bisections_per_day = 5                     # per project; the rest wait for the next night [5]
max_series = 10000                             # series the project may hold; more are refused [10000]
detect = { min_segment = 5, alpha = 0.001 }    # DetectSettings fields [the detector's defaults]
map = [                                        # first matching pattern wins
  { pattern = "BM_Gemm*", recipe = "kernels.toml", benchmark = "gemm" },
]
```
Only parsing and checking here; a recipe named in `map` is checked when a flag is made from
it (flags.prepare), exactly as a flag posted by CI would be.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attrib.core.detect import DetectSettings
from attrib.errors import InputError, RecipeError
from attrib.history.settings import detect_settings

DEFAULT_MAX_BISECTIONS_PER_DAY = 5  # a bad night must not fill the queue: the rest wait a day
# Benchmarks x configurations of a real project are hundreds to a few thousand; a careless CI
# that puts a run id in a benchmark name would otherwise create series without end (issue 20).
DEFAULT_MAX_SERIES = 10_000
_PROJECT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_PROJECT_KEYS = ("repo", "branch", "file_issue", "bisect_improvements", "max_bisections_per_day", "max_series", "detect", "map")
_MAP_KEYS = ("pattern", "recipe", "benchmark")


@dataclass(frozen=True)
class MapRule:
    pattern: str  # fnmatch glob over the series' benchmark name
    recipe: str  # under the daemon's recipes directory
    benchmark: str | None  # the recipe's benchmark [its only one]

    def matches(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.pattern)


@dataclass(frozen=True)
class ProjectConfig:
    name: str
    repo: str
    branch: str = "HEAD"
    file_issue: str | None = None
    bisect_improvements: bool = False
    max_bisections_per_day: int = DEFAULT_MAX_BISECTIONS_PER_DAY
    max_series: int = DEFAULT_MAX_SERIES
    detect: DetectSettings = field(default_factory=DetectSettings)
    map: tuple[MapRule, ...] = ()

    def rule_for(self, benchmark: str) -> MapRule | None:
        return next((r for r in self.map if r.matches(benchmark)), None)


@dataclass(frozen=True)
class HistoryConfig:
    public_url: str | None = None
    projects: dict[str, ProjectConfig] = field(default_factory=dict)


def parse_history(path: Path, table: Any) -> HistoryConfig:
    if not isinstance(table, dict):
        raise RecipeError(path, "history", "expected a table")
    unknown = sorted(set(table) - {"public_url", "projects"})
    if unknown:
        raise RecipeError(path, f"history.{unknown[0]}", "unknown key; expected public_url, projects")
    url = table.get("public_url")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise RecipeError(path, "history.public_url", "expected an http(s) URL")
    projects = table.get("projects", {})
    if not isinstance(projects, dict):
        raise RecipeError(path, "history.projects", "expected a table of projects")
    return HistoryConfig(url.rstrip("/") if url else None, {n: _project(path, n, p) for n, p in projects.items()})


def _project(path: Path, name: str, t: Any) -> ProjectConfig:
    where = f"history.projects.{name}"
    if not _PROJECT_RE.match(name):
        raise RecipeError(path, where, "a project name is letters, digits, . _ - (at most 100)")
    if not isinstance(t, dict):
        raise RecipeError(path, where, "expected a table")
    unknown = sorted(set(t) - set(_PROJECT_KEYS))
    if unknown:
        raise RecipeError(path, f"{where}.{unknown[0]}", f"unknown key; expected one of: {', '.join(_PROJECT_KEYS)}")
    for key, kind in (("repo", str), ("branch", str), ("file_issue", str), ("bisect_improvements", bool), ("max_bisections_per_day", int), ("max_series", int)):
        if key in t and (not isinstance(t[key], kind) or (kind is int and isinstance(t[key], bool))):
            raise RecipeError(path, f"{where}.{key}", f"expected {kind.__name__}")
    if not t.get("repo"):
        raise RecipeError(path, f"{where}.repo", "missing: the repository the results are measured in")
    if t.get("max_bisections_per_day", 1) < 0:
        raise RecipeError(path, f"{where}.max_bisections_per_day", "expected 0 or more")
    if t.get("max_series", 1) < 1:
        raise RecipeError(path, f"{where}.max_series", "expected 1 or more")
    detect = t.get("detect", {})
    if not isinstance(detect, dict):
        raise RecipeError(path, f"{where}.detect", "expected a table of detection settings")
    try:
        settings = detect_settings(detect, f"{path}: {where}.detect")
    except InputError as exc:
        raise RecipeError(path, f"{where}.detect", str(exc).split(": ", 2)[-1]) from None
    rules = t.get("map", [])
    if not isinstance(rules, list):
        raise RecipeError(path, f"{where}.map", "expected a list of {pattern, recipe, benchmark} tables")
    return ProjectConfig(
        name=name,
        repo=t["repo"],
        branch=t.get("branch", "HEAD"),
        file_issue=t.get("file_issue"),
        bisect_improvements=t.get("bisect_improvements", False),
        max_bisections_per_day=t.get("max_bisections_per_day", DEFAULT_MAX_BISECTIONS_PER_DAY),
        max_series=t.get("max_series", DEFAULT_MAX_SERIES),
        detect=settings,
        map=tuple(_rule(path, f"{where}.map[{i}]", r) for i, r in enumerate(rules)),
    )


def _rule(path: Path, where: str, r: Any) -> MapRule:
    if not isinstance(r, dict):
        raise RecipeError(path, where, "expected a table {pattern, recipe, benchmark}")
    unknown = sorted(set(r) - set(_MAP_KEYS))
    if unknown:
        raise RecipeError(path, f"{where}.{unknown[0]}", f"unknown key; expected {', '.join(_MAP_KEYS)}")
    for key in ("pattern", "recipe"):
        if not isinstance(r.get(key), str) or not r[key]:
            raise RecipeError(path, f"{where}.{key}", "expected a non-empty string")
    if "benchmark" in r and (not isinstance(r["benchmark"], str) or not r["benchmark"]):
        raise RecipeError(path, f"{where}.benchmark", "expected a non-empty string")
    return MapRule(r["pattern"], r["recipe"], r.get("benchmark"))
