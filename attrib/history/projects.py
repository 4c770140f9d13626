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
  { pattern = "*", recipe = "kernels.toml", benchmark = "{series}" },   # the series' own name
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
from typing import Annotated, Any

from attrib.codec import NonEmptyStr, Rule, config_errors, decode, decode_table
from attrib.core.detect import DetectSettings
from attrib.errors import FieldError

DEFAULT_MAX_BISECTIONS_PER_DAY = 5  # a bad night must not fill the queue: the rest wait a day
# Benchmarks x configurations of a real project are hundreds to a few thousand; a careless CI
# that puts a run id in a benchmark name would otherwise create series without end (issue 20).
DEFAULT_MAX_SERIES = 10_000
_PROJECT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
def _any(_: Any) -> bool:
    return True


_HTTP_URL = Rule(lambda v: v.startswith(("http://", "https://")), "an http(s) URL")


SERIES_NAME = "{series}"  # a map rule's benchmark that hands the series' own name to the recipe


@dataclass(frozen=True)
class MapRule:
    pattern: NonEmptyStr  # fnmatch glob over the series' benchmark name
    recipe: NonEmptyStr  # under the daemon's recipes directory
    benchmark: NonEmptyStr | None = None  # the recipe's benchmark [its only one]; "{series}": the series' name

    def matches(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.pattern)

    def member(self, series_benchmark: str) -> str | None:
        """The recipe benchmark a series of this name is bisected as (None: the recipe's only one):
        one rule serves a whole recipe of kernels when it hands on the series' own name."""
        return series_benchmark if self.benchmark == SERIES_NAME else self.benchmark


@dataclass(frozen=True)
class ProjectConfig:
    """One [history.projects.NAME] table; the field types are what the table accepts (the
    one decoder, attrib/codec.py, reads it), except `name`, which is the table's name."""

    name: str
    repo: Annotated[str, Rule(lambda v: v != "", "the repository the results are measured in (a path or a git URL)")]
    branch: NonEmptyStr = "HEAD"
    file_issue: NonEmptyStr | None = None
    bisect_improvements: bool = False
    max_bisections_per_day: Annotated[int, Rule(lambda v: v >= 0, "an integer, 0 or more")] = DEFAULT_MAX_BISECTIONS_PER_DAY
    max_series: Annotated[int, Rule(lambda v: v >= 1, "an integer, 1 or more")] = DEFAULT_MAX_SERIES
    detect: Annotated[DetectSettings, Rule(_any, "a table of detection settings")] = field(default_factory=DetectSettings)
    map: Annotated[tuple[MapRule, ...], Rule(_any, "a list of {pattern, recipe, benchmark} tables")] = ()

    def rule_for(self, benchmark: str) -> MapRule | None:
        return next((r for r in self.map if r.matches(benchmark)), None)


@dataclass(frozen=True)
class HistoryConfig:
    public_url: str | None = None
    projects: dict[str, ProjectConfig] = field(default_factory=dict)


_HISTORY_KEYS: dict[str, Any] = {
    "public_url": Annotated[str, _HTTP_URL],
    "projects": Annotated[dict[str, Any], Rule(_any, "a table of projects")],
}


def parse_history(path: Path, table: Any) -> HistoryConfig:
    """The [history] table of the daemon config at `path`; ConfigError naming the dotted key."""
    with config_errors(path):
        t = decode_table(_HISTORY_KEYS, (), table, "history")
        projects = {name: _project(name, p) for name, p in t.get("projects", {}).items()}
    url = t.get("public_url")
    return HistoryConfig(url.rstrip("/") if url else None, projects)


def _project(name: str, t: Any) -> ProjectConfig:
    where = f"history.projects.{name}"
    if not _PROJECT_RE.match(name):
        raise FieldError(where, "a project name is letters, digits, . _ - (at most 100)")
    if isinstance(t, dict) and "name" in t:
        raise FieldError(f"{where}.name", "unknown key (a project's name is its table's name)")
    project: ProjectConfig = decode(ProjectConfig, {**t, "name": name} if isinstance(t, dict) else t, where, strict=True)
    return project
