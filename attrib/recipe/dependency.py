"""The recipe's [[dependency]] tables (docs/recipes.md, Dependencies): a dependency pinned in a
file of the tree rather than as a submodule (PyTorch's .ci/docker/ci_commit_pins/triton.txt,
a DEPS-like line). Each commit's checkout gets the dependency at the pinned commit, at the path
the build expects it, and a change of the pin is a roll that can be descended into."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attrib.errors import ConfigError
from attrib.recipe.checks import _STR, Check, _check_table, _rule, relative_path

_RELATIVE: Check = _rule(str, relative_path, "a path relative to the checkout, without '..'")
_DEPENDENCY: dict[str, tuple[Check, bool]] = {
    "repository": (_STR, True),
    "pin": (_RELATIVE, True),
    "pin_match": (_STR, False),
    "path": (_RELATIVE, True),
}
_SHA = re.compile(r"[0-9a-f]{40}")
# A pin file is read only up to a size (docs/recipes.md, Dependencies): a pin is a commit id,
# so a file that holds one on its first line is small; a DEPS-like file read with pin_match
# holds other lines too (Chromium's DEPS is ~200 KiB).
PIN_FILE_MAX_BYTES = 4096
PIN_MATCH_FILE_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class DependencySpec:
    """[[dependency]]: `repository` (a git URL, or a path), `pin` (the file of the tree that
    holds its commit), `pin_match` (a regular expression whose one group is the commit, matched
    line by line; none: the file's first non-empty line is the commit) and `path` (where the
    build expects its checkout)."""

    repository: str
    pin: str
    path: str
    pin_match: str | None = None

    def identity(self) -> str:
        return f"dependency {self.path} from {self.repository} pinned by {self.pin} {self.pin_match or ''}".rstrip()

    @property
    def max_bytes(self) -> int:
        """How much of the pin file is read: larger is refused before it is read."""
        return PIN_FILE_MAX_BYTES if self.pin_match is None else PIN_MATCH_FILE_MAX_BYTES

    def commit_in(self, text: str) -> str | None:
        """The full commit the pin file's text names, or None."""
        if self.pin_match is None:
            first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
            return first if _SHA.fullmatch(first) else None
        pattern = re.compile(self.pin_match)
        for line in text.splitlines():
            m = pattern.search(line)
            if m and _SHA.fullmatch(m.group(1)):
                return m.group(1)
        return None


def parse_dependencies(path: Path, tables: Any) -> tuple[DependencySpec, ...]:
    if not isinstance(tables, list | tuple):
        raise ConfigError(path, "dependency", "expected [[dependency]] tables")
    out: list[DependencySpec] = []
    for i, table in enumerate(tables):
        prefix = f"dependency[{i}]."
        t = _check_table(path, prefix, table, _DEPENDENCY)
        if "pin_match" in t:
            try:
                groups = re.compile(t["pin_match"]).groups
            except re.error as exc:
                raise ConfigError(path, prefix + "pin_match", f"not a regular expression: {exc}") from None
            if groups != 1:
                raise ConfigError(path, prefix + "pin_match", "expected a regular expression with one group: the commit")
        taken = [d.path for d in out]
        if any(t["path"].rstrip("/") == p or t["path"].startswith(p.rstrip("/") + "/") for p in taken):
            raise ConfigError(path, prefix + "path", f"'{t['path']}' is already another dependency's checkout")
        out.append(DependencySpec(t["repository"], t["pin"], t["path"].rstrip("/"), t.get("pin_match")))
    return tuple(out)
