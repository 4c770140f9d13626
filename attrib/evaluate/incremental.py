"""Incremental build trees (`[build] incremental = true`, with `build_dir` and `artifacts`).

A build normally starts from nothing in its own checkout. An incremental one runs in a
persistent worktree of the work dir instead (one per build identity), moved to the commit in
place, so the files that did not change keep their times and its build directory rebuilds only
what depends on those that did; every other untracked file goes. The artifacts it makes are
hashed there and copied into the commit's own checkout, where the benchmark runs them: so the
benchmark must run the artifacts alone (static or `$ORIGIN`-relative links, nothing read from
the build directory by absolute path).

Why a worktree of its own and not the neighbour's checkout: a build directory (CMake's above
all) names its source directory by absolute path, so it cannot be copied beside another
checkout; and moving a checkout the search still measures would change what it runs. A tree
with submodules is built clean (the worktree is moved by git alone and would keep the old pins).

Why one tree: a second, started where the nearest was far (the range's other end, to stay for
the next night's), was measured on zlib-ng (benchmarks/REAL.md, s38) and lost: the far end
built clean took twice what moving the one tree there did, and the next night's moves cost the
same from either tree, because what a move recompiles is set by the headers nearly every
source includes, not by how far it goes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import git

from attrib.evaluate.artifacts import hash_artifacts
from attrib.evaluate.unpacking import copy_into
from attrib.fsutil import atomic_write_text, file_lock
from attrib.gitrepo import Mirror
from attrib.recipe import BuildSpec
from attrib.workdir import WorkDir

Build = Callable[[Path], str]  # the recipe's commands in a directory: "" or why they failed


class IncrementalTrees:
    def __init__(self, workdir: WorkDir, mirror: Mirror, spec: BuildSpec, identity: str) -> None:
        assert spec.build_dir is not None
        self.workdir = workdir
        self.mirror = mirror
        self.spec = spec
        self.build_dir = spec.build_dir
        self.identity = hashlib.sha256(identity.encode()).hexdigest()[:16]

    def _tree(self) -> tuple[Path, Path]:
        """The worktree and the file naming the commit it was last built at (empty when none,
        or when that build did not finish)."""
        return self.workdir.incremental_tree(self.identity), self.workdir.incremental_marker(self.identity)

    def build(self, sha: str, checkout: Path, run: Build, log: TextIO) -> tuple[str, str]:
        """Build `sha` in the tree, moved to it, and copy its artifacts into `checkout`. Returns
        (why it failed or "", the commit whose build tree was reused or "" when it started empty)."""
        if (checkout / ".gitmodules").exists():
            return "the tree has submodules, which an incremental tree does not follow", ""
        tree, marker = self._tree()
        with file_lock(self.workdir.incremental_lock(self.identity)):
            try:
                donor = marker.read_text().strip()
            except OSError:
                donor = ""
            try:
                if donor and tree.is_dir():
                    self.mirror.move(tree, sha, self.build_dir)
                else:
                    donor = ""
                    self.mirror.checkout(sha, tree)
            except git.GitCommandError as exc:
                return f"the incremental tree could not be moved to {sha[:10]} ({exc.status})", ""
            atomic_write_text(marker, "")  # a build that dies now leaves no donor behind
            log.write(f"# incremental: in {tree}, reusing the build tree of {donor or 'nothing (a new tree)'}\n")
            reason = run(tree)
            if reason:
                return reason, donor
            hashed = hash_artifacts(tree, self.spec.artifacts)
            if isinstance(hashed, str):
                return hashed, donor
            try:
                # following none of the checkout's links: the commit's own `bin -> /elsewhere`
                # must not carry a write out of it (issue 40: the prebuilt archives' hole)
                copy_into(tree, checkout, [rel for rel, _digest in hashed.files], source="the build tree")
            except (ValueError, OSError) as exc:
                return f"its artifacts could not be copied into the checkout: {exc}", donor
            atomic_write_text(marker, sha)
        return "", donor
