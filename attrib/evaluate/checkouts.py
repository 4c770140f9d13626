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

Everything a checkout needs is read before any of it is made (`_Plan`): the .gitmodules and pin
files of each commit, the mirrors, and the number of dependency checkouts, which is bounded
(docs/recipes.md, Dependencies). A dependency is placed only where every part of its path is a
real directory of the checkout: never through a symbolic link the tree holds.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
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
    is_text,
    mirror_url,
    read_blob,
    resolve_submodule_url,
    shown,
    submodule_urls,
    tree_with_gitlinks,
)
from attrib.recipe import DependencySpec
from attrib.workdir import WorkDir

# Bounds (docs/recipes.md, Dependencies). A pin reached along N paths of the tree is N
# checkouts, as in git's own recursive checkout: a repository pinning one commit twice at each of
# 20 levels needs 2^21. The plan counts them from each distinct pin once, and refuses beyond:
MAX_CHECKOUTS_PER_BUILD = 256  # dependency worktrees in one build's checkout, nested ones included
MAX_CHECKOUTS_PER_JOB = 4096  # made by one job (one bisection) in all
FETCH_TIMEOUT_S = 600.0  # one clone or fetch of a dependency's repository
FETCHES_DEADLINE_S = 1800.0  # every fetch of one job's dependencies together

Overrides = Mapping[str, str]
NO_OVERRIDES: Overrides = MappingProxyType({})


@dataclass(frozen=True)
class Refusal:
    """Why a checkout cannot be made, in one line. `fetch`: a repository or a pin could not be
    had (the remote's or the network's doing); otherwise the tree itself is at fault (its
    .gitmodules, a pin file, a path, a URL the rules refuse, a bound)."""

    line: str
    fetch: bool = False


@dataclass(frozen=True)
class _Placement:
    """One dependency checkout: `path` (in the superproject's checkout, or in the dependency
    above it while a plan is read), `commit` from `git_dir`."""

    path: str
    git_dir: Path
    commit: str
    url: str
    kind: str  # "submodule" or "dependency": how the line naming it starts

    @property
    def label(self) -> str:
        return f"{self.kind} {self.path} ({self.url})"


_Key = tuple[Path, str, str, str]  # (mirror, commit, what its relative URLs are relative to, overrides' prefix)


class _Plan:
    """The dependency checkouts of one commit's checkout with `overrides`, read before any is
    made. Each (mirror, commit) is read once, its submodules kept with paths relative to it and
    its count of checkouts below it, so counting costs the distinct pins, not the paths to them;
    the placements are listed (at their paths in the checkout) only when their number is within
    MAX_CHECKOUTS_PER_BUILD."""

    def __init__(self, checkouts: Checkouts, overrides: Overrides) -> None:
        self.c = checkouts
        self.overrides = overrides
        self.children: dict[_Key, list[tuple[_Placement, _Key]]] = {}
        self.counts: dict[_Key, int] = {}

    def key(self, git_dir: Path, sha: str, base_url: str, prefix: str) -> _Key:
        # a commit's subtree is the same wherever it sits, unless an override reaches into it
        held = prefix if any(p.startswith(prefix) for p in self.overrides) else ""
        return (git_dir, sha, base_url, held)

    def make(self, sha: str) -> list[_Placement] | Refusal:
        """Every placement, parents before children, in the order they are checked out."""
        c = self.c
        tops: list[tuple[_Placement, _Key]] = []
        top = self.key(c.mirror.path, sha, c.origin, "")
        if (refused := self.read(top, "", 0)) is not None:
            return refused
        tops += self.children[top]
        for dep in c.pinned:
            url = resolve_submodule_url(c.origin, dep.repository)
            where = f"dependency {dep.path} ({url})"
            try:
                pin = self.overrides.get(dep.path) or c.read_pin(dep, sha)
                c.rule.check(url)
            except RepoError as exc:
                return Refusal(f"{where}: {str(exc).removeprefix(f'{url}: ')}")
            try:
                sub = c.mirror_holding(url, pin, dep.path)
            except RepoError as exc:
                return Refusal(f"{where}: {str(exc).removeprefix(f'{url}: ')}", fetch=True)
            below = self.key(sub, pin, url, dep.path + "/")
            if (refused := self.read(below, dep.path + "/", 1)) is not None:
                return refused
            tops.append((_Placement(dep.path, sub, pin, url, "dependency"), below))
        n = sum(1 + self.counts[k] for _, k in tops)
        if n > MAX_CHECKOUTS_PER_BUILD:
            return Refusal(
                f"the checkout of {sha[:10]} needs more than {MAX_CHECKOUTS_PER_BUILD} dependency checkouts (one at every path"
                f" that pins a submodule, nested ones included); at most {MAX_CHECKOUTS_PER_BUILD} are made for one build"
            )
        out: list[_Placement] = []
        self.expand(tops, "", out)
        return out

    def expand(self, below: list[tuple[_Placement, _Key]], prefix: str, out: list[_Placement]) -> None:
        for placement, key in below:
            full = prefix + placement.path
            out.append(replace(placement, path=full))
            self.expand(self.children[key], full + "/", out)

    def read(self, key: _Key, prefix: str, depth: int) -> Refusal | None:
        """Read the commit at `key` and everything below it into `children` and `counts`."""
        if key in self.counts:
            return None
        if depth > MAX_CHECKOUTS_PER_BUILD:  # a chain that deep is over the bound anyway
            return Refusal(f"submodule {shown(prefix.rstrip('/'))}: nested more than {MAX_CHECKOUTS_PER_BUILD} deep")
        git_dir, sha, base_url, _ = key
        kids = self.links(git_dir, sha, base_url, prefix)
        if isinstance(kids, Refusal):
            return kids
        self.children[key] = []
        total = 0
        for placement in kids:
            below = prefix + placement.path + "/"
            child = self.key(placement.git_dir, placement.commit, placement.url, below)
            if (refused := self.read(child, below, depth + 1)) is not None:
                return refused
            self.children[key].append((placement, child))
            total += 1 + self.counts[child]
            if total > MAX_CHECKOUTS_PER_BUILD:
                break  # over the bound: the rest need not be read (nor fetched)
        self.counts[key] = total
        return None

    def links(self, git_dir: Path, sha: str, base_url: str, prefix: str) -> list[_Placement] | Refusal:
        """The submodules of commit `sha` (at `prefix` of the checkout; their paths relative to
        it), their mirrors holding their pins (or the overrides')."""
        links = gitlinks(git_dir, sha)
        if not links:
            return []
        inside = f"submodule {prefix.rstrip('/')}: " if prefix else ""
        if len(links) > MAX_CHECKOUTS_PER_BUILD:  # refused before any of them is fetched
            return Refusal(f"{inside}{sha[:10]} holds {len(links)} submodules; at most {MAX_CHECKOUTS_PER_BUILD} are made for one build")
        try:
            urls = submodule_urls(git_dir, sha)
        except RepoError as exc:
            return Refusal(f"{inside}{exc}")
        out = []
        for rel, pin in sorted(links.items()):
            full = prefix + rel
            if not is_text(full) or any(part in ("", ".", "..", ".git") for part in rel.split("/")):
                why = "not UTF-8" if not is_text(full) else "a part of it is '', '.', '..' or '.git'"
                return Refusal(f"submodule {shown(full)}: a gitlink of {sha[:10]} at a path attrib does not check out ({why})")
            if rel not in urls:
                return Refusal(f"submodule {full}: .gitmodules of {sha[:10]} gives no url for it")
            if not is_text(urls[rel]):
                bad = shown(urls[rel])
                return Refusal(f"submodule {full}: .gitmodules of {sha[:10]} gives a url that is not UTF-8: {bad}")
            url = resolve_submodule_url(base_url, urls[rel])
            pin = self.overrides.get(full, pin)
            try:
                self.c.rule.check(url)
            except RepoError as exc:
                return Refusal(f"submodule {full} ({url}): {str(exc).removeprefix(f'{url}: ')}")
            try:
                sub = self.c.mirror_holding(url, pin, full)
            except RepoError as exc:
                return Refusal(f"submodule {full} ({url}): {str(exc).removeprefix(f'{url}: ')}", fetch=True)
            out.append(_Placement(rel, sub, pin, url, "submodule"))
        return out


def _placeable(root: Path, rel: str, sha: str) -> str:
    """Why a dependency cannot be checked out at `root/rel`, in one line; "" when it can
    without leaving `root`: every part of the path that exists is a real directory (never a
    symbolic link the tree holds), the last one empty."""
    at = root
    parts = rel.split("/")
    for i, part in enumerate(parts):
        at = at / part
        try:
            mode = at.lstat().st_mode
        except FileNotFoundError:
            break  # made below by attrib, inside what was checked
        if stat.S_ISLNK(mode):
            return f"{'/'.join(parts[: i + 1])} is a symbolic link in {sha[:10]}'s tree; a dependency is never checked out through one"
        if not stat.S_ISDIR(mode):
            return f"{'/'.join(parts[: i + 1])} is a file in {sha[:10]}'s tree, not a directory"
    else:
        if any(at.iterdir()):
            return f"{rel} is not empty in {sha[:10]}'s tree; the dependency cannot be checked out there"
    if not (root / rel).resolve().is_relative_to(root.resolve()):
        return f"{rel} is outside the checkout"
    return ""


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
        self.fetch_s = 0.0  # seconds this job's fetches took, against FETCHES_DEADLINE_S
        self.made = 0  # dependency checkouts this job made (or is making), against MAX_CHECKOUTS_PER_JOB
        self._counted = threading.Lock()  # builds of one job run in threads (--probes)

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
            try:
                out[dep.path] = self.read_pin(dep, sha)
            except RepoError:
                out[dep.path] = ""
        return out

    def read_pin(self, dep: DependencySpec, sha: str) -> str:
        """The commit `dep`'s pin file names at `sha`; RepoError in one line when it names none
        (no such file, no commit in it, larger than its bound: read no further)."""
        data = read_blob(self.mirror.path, sha, dep.pin, dep.max_bytes)
        commit = dep.commit_in(data.decode(errors="replace")) if data is not None else None
        if not commit:
            matching = f" matching {dep.pin_match!r}" if dep.pin_match else ""
            raise RepoError(f"{dep.pin} at {sha[:10]} holds no commit{matching}")
        return commit

    def refusal(self, sha: str, overrides: Overrides = NO_OVERRIDES) -> Refusal | None:
        """Why the checkout of `sha` with `overrides` cannot be made, read without making it
        (the mirrors it needs are fetched); None when it can."""
        plan = _Plan(self, overrides).make(sha)
        return plan if isinstance(plan, Refusal) else None

    def check_references(self, good: str, bad: str) -> None:
        """The references' own .gitmodules, pin files and dependency tree, before anything is
        built: one of them at fault is bad input (RepoError), not a build that failed. A
        repository that cannot be fetched is left to the build to say."""
        for sha, role in ((good, "good"), (bad, "bad")):
            refused = self.refusal(sha)
            if refused is not None and not refused.fetch:
                raise RepoError(f"the {role} revision {sha[:10]}: {refused.line}")

    def _moved(self, git_dir: Path, sha: str, base_url: str, prefix: str, overrides: Overrides) -> dict[str, str]:
        """The overrides under `prefix` that put a dependency elsewhere than its pin at `sha`;
        one whose pin cannot be read here (no mirror yet) counts as moved."""
        links = gitlinks(git_dir, sha)
        try:
            urls = submodule_urls(git_dir, sha) if links else {}
        except RepoError:
            urls = {}  # no pin below can be read: every deeper override counts as moved
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
        """A fresh checkout of `sha` at `path` with its dependencies (submodules, recursively,
        and [[dependency]] pins); "" when it is ready, else the one line that says which could
        not be had, from where. Nothing is checked out when the plan is refused."""
        plan = _Plan(self, overrides).make(sha)
        if isinstance(plan, Refusal):
            return plan.line
        with self._counted:
            if self.made + len(plan) > MAX_CHECKOUTS_PER_JOB:
                return (
                    f"the checkout of {sha[:10]} needs {len(plan)} dependency checkouts and this job has made {self.made};"
                    f" at most {MAX_CHECKOUTS_PER_JOB} are made in one job"
                )
            self.made += len(plan)
        self.mirror.checkout(sha, path)
        for placement in plan:
            if reason := _placeable(path, placement.path, sha):
                return f"{placement.label}: {reason}"
            target = path / placement.path
            try:
                target.mkdir(parents=True, exist_ok=True)
                with file_lock(self.workdir.submodule_lock(placement.url)):
                    add_worktree(placement.git_dir, placement.commit, target)
            except (RepoError, OSError) as exc:
                return f"{placement.label}: {str(exc).removeprefix(f'{placement.url}: ')}"
        return ""

    def mirror_holding(self, url: str, pin: str, full: str) -> Path:
        """The work dir's mirror of `url`, fetched first only when it lacks `pin`, this job has
        not fetched it yet, and the job's fetches have time left (FETCHES_DEADLINE_S)."""
        self.rule.check(url)
        dest = self.workdir.submodule_mirror(url)
        with file_lock(self.workdir.submodule_lock(url)):
            if (dest / "HEAD").exists() and has_commit(dest, pin):
                return dest
            if url not in self.fetched:
                self.fetched.add(url)
                self.fetches += 1
                self._fetch(url, dest, pin)
            if not has_commit(dest, pin):
                raise RepoError(f"commit {pin[:12]} pinned at {full} is not in that repository")
        return dest

    def _fetch(self, url: str, dest: Path, pin: str) -> None:
        """Clone or fetch `url`, then ask for `pin` by name if it is still missing: each call to
        git within FETCH_TIMEOUT_S and what is left of the job's FETCHES_DEADLINE_S."""
        for step in ("mirror", "commit"):
            if step == "commit" and has_commit(dest, pin):
                return
            left = FETCHES_DEADLINE_S - self.fetch_s
            if left <= 0:
                spent = f"this job's fetches of dependencies took their {FETCHES_DEADLINE_S:g} s"
                raise RepoError(f"{url}: not fetched: {spent}")
            started = time.monotonic()
            try:
                if step == "mirror":
                    mirror_url(url, dest, min(FETCH_TIMEOUT_S, left), self.rule.allow_http)
                else:
                    fetch_commit(dest, pin, min(FETCH_TIMEOUT_S, left), self.rule.allow_http)
            finally:
                with self._counted:
                    self.fetch_s += time.monotonic() - started
