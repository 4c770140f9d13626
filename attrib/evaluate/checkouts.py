"""Making a checkout: the superproject's worktree, and every submodule at the commit's pin,
recursively, each from a mirror of its repository kept in the work dir.

This is the one step between a commit and a directory ready to build; what runs in that
directory afterwards is evaluate/builds.py's. A submodule's mirror is fetched only when a pin it
needs is missing, at most once per job (one `Checkouts` per job), and it is shared by every
candidate and every job of the work dir. `overrides` put a dependency at another commit than the
pin (the descent into a roll, bisection.py): {path in the superproject: commit}.

Pins live in the commit's tree (a gitlink names its commit), so the tree a build key already
holds decides every pin below it; `identity` adds what the tree does not say: that submodules
are checked out, and the overrides.
"""

from __future__ import annotations

import os
import threading
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
    read_blob,
    resolve_submodule_url,
    submodule_urls,
    tree_with_gitlinks,
)
from attrib.recipe import DependencySpec
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
        pinned: tuple[DependencySpec, ...] = (),
    ) -> None:
        self.workdir = workdir
        self.pinned = pinned  # [[dependency]]: pins kept in files of the tree
        self.mirror = mirror
        self.origin = origin  # what relative submodule URLs are relative to
        self.rule = rule  # which URLs this job may fetch (the daemon's are a flag's)
        self.fetched: set[str] = set()  # URLs fetched by this job: never twice
        self.fetches = 0  # git fetches and clones this job ran (tests and benchmarks read it)

    def identity(self, sha: str, tree: str, overrides: Overrides = NO_OVERRIDES) -> tuple[str, list[str]]:
        """What a build key is made of for `sha` with `overrides`: (the tree, extra lines). A
        tree without submodules keeps its key as it always was (no lines). With submodules the
        key says they are checked out; pins moved at the top are in the tree (the tree a commit
        rolling only those pins has: that commit's build is shared), pins moved deeper are lines.
        An override that holds a pin where it is changes nothing."""
        links = gitlinks(self.mirror.path, sha)
        if not links and not overrides and not self.pinned:
            return tree, []
        in_files = self.file_pins(sha)
        held = {p: c for p, c in overrides.items() if in_files.get(p) != c}  # the file's own pin moves nothing
        moved = self._moved(self.mirror.path, sha, self.origin, "", held)
        top = {p: c for p, c in moved.items() if p in links}
        if top:
            scratch = self.workdir.scratch(f"index-{os.getpid()}-{threading.get_ident()}")
            tree = tree_with_gitlinks(self.mirror.path, sha, top, scratch)
        nested = {p: c for p, c in moved.items() if p not in links}
        lines = ["submodules: recursive"] if links or moved else []
        lines += [d.identity() for d in self.pinned]  # the pins themselves are in the tree's files
        return tree, lines + [f"pin {p} {c}" for p, c in sorted(nested.items())]

    def file_pins(self, sha: str) -> dict[str, str]:
        """{path: commit} of the [[dependency]] pins `sha`'s files hold ("" where none can be read)."""
        out = {}
        for dep in self.pinned:
            text = read_blob(self.mirror.path, sha, dep.pin)
            out[dep.path] = (dep.commit_in(text) if text is not None else None) or ""
        return out

    def _moved(self, git_dir: Path, sha: str, base_url: str, prefix: str, overrides: Overrides) -> dict[str, str]:
        """The overrides under `prefix` that put a dependency elsewhere than its pin at `sha`;
        one whose pin cannot be read here (no mirror yet) counts as moved."""
        links = gitlinks(git_dir, sha)
        urls = submodule_urls(git_dir, sha) if links else {}
        moved = {p: c for p, c in overrides.items() if p.startswith(prefix) and p[len(prefix) :] not in links}
        for rel, pin in links.items():
            full = prefix + rel
            at = overrides.get(full, pin)
            if at != pin:
                moved[full] = at
            deeper = {p: c for p, c in overrides.items() if p.startswith(full + "/")}
            if not deeper:
                continue
            url = resolve_submodule_url(base_url, urls.get(rel, ""))
            sub = self.workdir.submodule_mirror(url)
            if rel in urls and (sub / "HEAD").exists() and has_commit(sub, at):
                moved |= self._moved(sub, at, url, full + "/", deeper)
            else:
                moved |= deeper
        return moved

    def make(self, sha: str, path: Path, overrides: Overrides = NO_OVERRIDES) -> str:
        """A fresh checkout of `sha` at `path` with its submodules; "" when it is ready, else
        the one line that says which submodule could not be had, from where."""
        self.mirror.checkout(sha, path)
        if reason := self._submodules(self.mirror.path, sha, path, self.origin, "", overrides):
            return reason
        return self._pinned(sha, path, overrides)

    def _pinned(self, sha: str, root: Path, overrides: Overrides) -> str:
        """Each [[dependency]] checked out at the commit its pin file names (or its override)."""
        pins = self.file_pins(sha)
        for dep in self.pinned:
            url = resolve_submodule_url(self.origin, dep.repository)
            pin = overrides.get(dep.path) or pins[dep.path]
            where = f"dependency {dep.path} ({url})"
            if not pin:
                return f"{where}: {dep.pin} at {sha[:10]} holds no commit" + (f" matching {dep.pin_match!r}" if dep.pin_match else "")
            target = root / dep.path
            if target.exists() and any(target.iterdir()):
                return f"{where}: {dep.path} is not empty in {sha[:10]}'s tree; the dependency cannot be checked out there"
            try:
                sub = self.mirror_holding(url, pin, dep.path)
                target.parent.mkdir(parents=True, exist_ok=True)
                with file_lock(self.workdir.submodule_lock(url)):
                    add_worktree(sub, pin, target)
            except RepoError as exc:
                return f"{where}: {str(exc).removeprefix(f'{url}: ')}"
            if reason := self._submodules(sub, pin, target, url, dep.path + "/", overrides):
                return reason
        return ""

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
                sub = self.mirror_holding(url, pin, full)
                with file_lock(self.workdir.submodule_lock(url)):
                    add_worktree(sub, pin, root / rel)
            except RepoError as exc:
                return f"submodule {full} ({url}): {str(exc).removeprefix(f'{url}: ')}"
            if reason := self._submodules(sub, pin, root / rel, url, full + "/", overrides):
                return reason
        return ""

    def mirror_holding(self, url: str, pin: str, full: str) -> Path:
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
