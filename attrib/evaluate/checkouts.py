"""Making a checkout: the superproject's worktree, and every submodule at the commit's pin,
recursively, each from a mirror of its repository kept in the work dir.

This is the one step between a commit and a directory ready to build; what runs in that
directory afterwards is evaluate/builds.py's. A submodule's mirror is fetched only when a pin it
needs is missing, at most once per job (one `Checkouts` per job), and it is shared by every
candidate and every job of the work dir. `overrides` put a dependency at another commit than the
pin (the descent into a roll, bisection.py): {path in the superproject: commit}.

Pins live in the commit's tree (a gitlink names its commit), so the tree a build key already
holds decides every pin below it; `key_lines` adds what the tree does not say: that submodules
are checked out, and the overrides.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from attrib.errors import RepoError
from attrib.fsutil import file_lock
from attrib.gitrepo import (
    Mirror,
    UrlRule,
    add_worktree,
    fetch_commit,
    gitlinks,
    has_commit,
    mirror_url,
    resolve_submodule_url,
    submodule_urls,
)
from attrib.workdir import WorkDir

FETCH_TIMEOUT_S = 900.0

Overrides = Mapping[str, str]
NO_OVERRIDES: Overrides = MappingProxyType({})


class Checkouts:
    def __init__(
        self,
        workdir: WorkDir,
        mirror: Mirror,
        origin: str,
        rule: UrlRule = UrlRule(),
    ) -> None:
        self.workdir = workdir
        self.mirror = mirror
        self.origin = origin  # what relative submodule URLs are relative to
        self.rule = rule  # which URLs this job may fetch (the daemon's are a flag's)
        self.fetched: set[str] = set()  # URLs fetched by this job: never twice
        self.fetches = 0  # git fetches and clones this job ran (tests and benchmarks read it)

    def key_lines(self, sha: str, overrides: Overrides = NO_OVERRIDES) -> list[str]:
        """What a build key adds to the tree: nothing for a tree without submodules (its key
        stays as it always was), else the top-level pins and every override that moves one."""
        links = gitlinks(self.mirror.path, sha)
        moved = {p: c for p, c in overrides.items() if links.get(p) != c}
        if not links and not moved:
            return []
        pins = {**links, **moved}
        return ["submodules: recursive", *(f"pin {p} {c}" for p, c in sorted(pins.items()))]

    def make(self, sha: str, path: Path, overrides: Overrides = NO_OVERRIDES) -> str:
        """A fresh checkout of `sha` at `path` with its submodules; "" when it is ready, else
        the one line that says which submodule could not be had, from where."""
        self.mirror.checkout(sha, path)
        return self._submodules(self.mirror.path, sha, path, self.origin, "", overrides)

    def _submodules(self, git_dir: Path, sha: str, root: Path, base_url: str, prefix: str, overrides: Overrides) -> str:
        links = gitlinks(git_dir, sha)
        if not links:
            return ""
        urls = submodule_urls(git_dir, sha)
        for rel, pin in sorted(links.items()):
            full = prefix + rel
            pin = overrides.get(full, pin)
            if rel not in urls:
                return f"submodule {full}: .gitmodules of {sha[:10]} gives no url for it"
            url = resolve_submodule_url(base_url, urls[rel])
            try:
                sub = self._mirror_holding(url, pin, full)
                with file_lock(self.workdir.submodule_lock(url)):
                    add_worktree(sub, pin, root / rel)
            except RepoError as exc:
                return f"submodule {full} ({url}): {str(exc).removeprefix(f'{url}: ')}"
            if reason := self._submodules(sub, pin, root / rel, url, full + "/", overrides):
                return reason
        return ""

    def _mirror_holding(self, url: str, pin: str, full: str) -> Path:
        """The work dir's mirror of `url`, fetched first only when it lacks `pin` and this job
        has not fetched it yet."""
        self.rule.check(url)
        dest = self.workdir.submodule_mirror(url)
        with file_lock(self.workdir.submodule_lock(url)):
            if (dest / "HEAD").exists() and has_commit(dest, pin):
                return dest
            if url not in self.fetched:
                self.fetched.add(url)
                self.fetches += 1
                mirror_url(url, dest, FETCH_TIMEOUT_S, self.rule.allow_http)
                if not has_commit(dest, pin):
                    fetch_commit(dest, pin, FETCH_TIMEOUT_S, self.rule.allow_http)
            if not has_commit(dest, pin):
                raise RepoError(f"commit {pin[:12]} pinned at {full} is not in that repository")
        return dest
