"""Incremental build trees (`[build] incremental = true`, with `build_dir` and `artifacts`).

A build normally starts from nothing in its own checkout. An incremental one runs in one of a
few persistent worktrees (slots) of the work dir instead: the slot holding the commit nearest to
this one (fewest files changed) is moved to it in place, so the files that did not change keep
their times and the slot's build directory rebuilds only what depends on those that did; every
other untracked file goes. The artifacts it makes are hashed there and copied into the commit's
own checkout, where the benchmark runs them: so the benchmark must run the artifacts alone
(static or `$ORIGIN`-relative links, nothing read from the build directory by absolute path).

Why slots and not the neighbour's checkout: a build directory (CMake's above all) names its
source directory by absolute path, so it cannot be copied beside another checkout; and moving
a checkout the search still measures would change what it runs. A tree with submodules is
built clean (the slot is moved by git alone and would keep the old pins).
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import git

from attrib.evaluate.artifacts import hash_artifacts
from attrib.fsutil import atomic_write_text, file_lock
from attrib.gitrepo import Mirror
from attrib.recipe import BuildSpec
from attrib.workdir import WorkDir

SLOTS = 2  # persistent worktrees per build identity: the nearest of them is reused

Build = Callable[[Path], str]  # the recipe's commands in a directory: "" or why they failed


class IncrementalTrees:
    def __init__(self, workdir: WorkDir, mirror: Mirror, spec: BuildSpec, identity: str) -> None:
        assert spec.build_dir is not None
        self.workdir = workdir
        self.mirror = mirror
        self.spec = spec
        self.build_dir = spec.build_dir
        self.identity = hashlib.sha256(identity.encode()).hexdigest()[:16]

    def _held(self, index: int) -> str:
        """The commit slot `index` was last built at ("" when none, or its build failed)."""
        try:
            return (self._slot(index).parent / f"{index}.sha").read_text().strip()
        except OSError:
            return ""

    def _slot(self, index: int) -> Path:
        return self.workdir.incremental_slot(self.identity, index)

    def nearest(self, sha: str) -> int:
        """The slot to reuse for `sha`: the one whose commit differs from it in the fewest files;
        an empty slot before a far one only when no slot holds a commit."""
        distances = []
        for index in range(SLOTS):
            held = self._held(index)
            try:
                distances.append((self.mirror.changed_files(held, sha) if held else 1 << 30, index))
            except git.GitCommandError:
                distances.append((1 << 30, index))
        return min(distances)[1]

    def build(self, sha: str, checkout: Path, run: Build, log: TextIO) -> tuple[str, str]:
        """Build `sha` in the nearest slot and copy its artifacts into `checkout`. Returns (why it
        failed or "", the commit whose build tree was reused or "" when the slot started empty)."""
        if (checkout / ".gitmodules").exists():
            return "the tree has submodules, which an incremental tree does not follow", ""
        index = self.nearest(sha)
        slot, marker = self._slot(index), self._slot(index).parent / f"{index}.sha"
        with file_lock(self.workdir.lock(f"incremental-{self.identity}-{index}")):
            donor = self._held(index)
            try:
                if donor and slot.is_dir():
                    self.mirror.move(slot, sha, self.build_dir)
                else:
                    donor = ""
                    self.mirror.checkout(sha, slot)
            except git.GitCommandError as exc:
                return f"the incremental tree could not be moved to {sha[:10]} ({exc.status})", ""
            atomic_write_text(marker, "")  # a build that dies now leaves no donor behind
            log.write(f"# incremental: in {slot}, reusing the build tree of {donor or 'nothing (an empty slot)'}\n")
            reason = run(slot)
            if reason:
                return reason, donor
            hashed = hash_artifacts(slot, self.spec.artifacts)
            if isinstance(hashed, str):
                return hashed, donor
            for rel, _digest in hashed.files:
                target = checkout / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(slot / rel, target)
            atomic_write_text(marker, sha)
        return "", donor
