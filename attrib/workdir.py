"""The work directory's layout, in one place: where the mirror, submodule mirrors, checkouts,
build records, logs, locks, incremental trees, the compiler cache, process ledgers and scratch
trees of a repository's bisections live.

Several bisections (CLI runs, daemon workers) may share one work dir: every writer takes the
lock named here for what it writes, and every path is derived from this layout, never spelled
out at the call site.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from attrib.gitrepo import canonical_git_url, is_git_url


def default_root(repo_path: Path) -> Path:
    """$XDG_CACHE_HOME/attrib/<repo name>-<hash of its path>: one per repository."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attrib"
    digest = hashlib.sha256(str(repo_path.resolve()).encode()).hexdigest()[:12]
    return base / f"{repo_path.resolve().name}-{digest}"


@dataclass(frozen=True)
class WorkDir:
    root: Path

    @classmethod
    def for_repo(cls, repo_path: Path, root: Path | None = None) -> WorkDir:
        return cls((root or default_root(repo_path)).resolve())

    @property
    def mirror(self) -> Path:
        """The bare shared clone every checkout is made from (and revert commits are made in)."""
        return self.root / "mirror.git"

    def submodule_mirror(self, url: str) -> Path:
        """The bare mirror of one submodule's repository, shared by every checkout and job that
        pins a commit of it: named by the URL (its last part for the eye, a hash of its canonical
        spelling for identity: `.../lib.git` and `.../lib/` are one mirror)."""
        digest = _url_digest(url)
        name = "".join(c if c.isalnum() or c in "._-" else "_" for c in url.rstrip("/").rsplit("/", 1)[-1])[:40]
        return self.root / "submodules" / f"{name.removesuffix('.git')}-{digest}.git"

    def submodule_lock(self, url: str) -> Path:
        return self.lock("submodule-" + _url_digest(url))

    def checkout(self, key: str) -> Path:
        return self.root / "checkouts" / key

    def build_record(self, key: str) -> Path:
        return self.root / "builds" / f"{key}.json"

    def build_log(self, key: str) -> Path:
        return self.root / "logs" / f"{key}.log"

    def lock(self, name: str) -> Path:
        return self.root / "locks" / f"{name}.lock"

    @property
    def mirror_lock(self) -> Path:
        return self.lock("mirror")

    def compiler_cache(self, tool: str) -> Path:
        """A compiler cache's directory when the recipe names none ([build] cache_dir)."""
        return self.root / "compiler-cache" / tool

    def incremental_tree(self, identity: str) -> Path:
        """The persistent worktree incremental builds reuse ([build] incremental), for builds of
        one identity (the recipe's [build] and the executor). Named `0`, as when there were
        slots: the trees earlier work dirs left are found again."""
        return self.root / "incremental" / identity / "0"

    def incremental_marker(self, identity: str) -> Path:
        """Beside the tree: the commit it was last built at (empty when none, or when that build
        did not finish)."""
        tree = self.incremental_tree(identity)
        return tree.with_name(tree.name + ".sha")

    def incremental_lock(self, identity: str) -> Path:
        """The tree's lock. It keeps the name it had when a build identity had numbered trees, so
        a build of an older attrib on the same work dir still excludes this one."""
        return self.lock(f"incremental-{identity}-0")

    def process_ledger(self, token: str) -> Path:
        """One local executor's ledger (evaluate/executors/processes.py): its token and the
        processes that carry it, while it is open."""
        return self.root / "processes" / token

    def process_ledgers(self) -> list[Path]:
        """The ledgers left in this work dir (a process that died with its executor open)."""
        return sorted((self.root / "processes").glob("*"))

    def scratch(self, name: str) -> Path:
        return self.root / "scratch" / name


def _url_digest(url: str) -> str:
    """A repository's identity: its canonical URL (gitrepo.canonical_git_url), a path as written."""
    return hashlib.sha256((canonical_git_url(url) if is_git_url(url) else url).encode()).hexdigest()[:16]
