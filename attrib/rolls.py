"""The dependencies a commit rolls, ready to be searched: the edge behind the driver's
`outcome.Dependencies`.

A `Level` is one repository in the chain: the superproject itself (no base), or a dependency
inside it, placed at `path` in the superproject's checkout with the superproject fixed at `base`
and the dependencies above it at `fixed`. A candidate of a level is built as the base with the
level's path (and those above) overridden (evaluate/checkouts.py): the superproject at the roll's
parent, the dependency at the candidate, everything else as the parent pinned it. So the search
inside a roll is the single search, over the dependency's own first-parent graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from attrib.core.model import BuildRecord, CommitInfo, DependencyRoll, RollRelation
from attrib.errors import RepoError
from attrib.evaluate.builds import CheckoutBuilder
from attrib.gitrepo import GitRepo, gitlink_changes, is_text, resolve_submodule_url, shown, submodule_urls
from attrib.outcome import RollSource


@dataclass(frozen=True)
class LevelBuilder:
    """Builds a dependency's candidate: `base` with `fixed` and the candidate at `path`."""

    builder: CheckoutBuilder
    base: CommitInfo
    path: str
    fixed: Mapping[str, str] = field(default_factory=dict)

    def build(self, commit: CommitInfo) -> BuildRecord:
        record = self.builder.build(self.base, {**self.fixed, self.path: commit.sha})
        return replace(record, commit=commit.sha, tree=commit.tree)


@dataclass(frozen=True)
class Level:
    builder: CheckoutBuilder
    graph: GitRepo  # this level's repository (the user's, or the work dir's mirror of a dependency)
    url: str  # what relative submodule URLs of this level are relative to
    path: str = ""  # where it sits in the superproject's checkout ("" for the superproject)
    base: CommitInfo | None = None  # the superproject commit a dependency's candidates are built in
    fixed: Mapping[str, str] = field(default_factory=dict)  # the pins above this level, held

    def rolls(self, sha: str) -> list[RollSource]:
        """The dependencies `sha` rolls relative to its first parent: moved gitlinks, and at the
        top, the recipe's [[dependency]] pins whose files changed."""
        info = self.graph.info(sha)
        if not info.parents:
            return []
        parent = info.parents[0]
        git_dir = self.graph.git_dir
        out = []
        if changes := gitlink_changes(git_dir, parent, sha):
            try:
                urls, unread = submodule_urls(git_dir, sha), ""
            except RepoError as exc:
                urls, unread = {}, str(exc)
            for rel, (old, new) in changes.items():
                full = f"{self.path}/{rel}" if self.path else rel
                if unread or not is_text(full) or not is_text(urls.get(rel, "")):
                    why = unread or "its path or its url in .gitmodules is not UTF-8"
                    out.append(RollSource(DependencyRoll(shown(full), "", old, new, RollRelation.UNAVAILABLE, why)))
                    continue
                url = resolve_submodule_url(self.url, urls[rel]) if rel in urls else None
                out.append(self._roll(parent, full, old, new, url))
        if not self.path:
            checkouts = self.builder.checkouts
            before, after = checkouts.file_pins(parent), checkouts.file_pins(sha)
            for dep in checkouts.pinned:
                old, new = before[dep.path], after[dep.path]
                if old and new and old != new:
                    out.append(self._roll(parent, dep.path, old, new, resolve_submodule_url(self.url, dep.repository)))
        return out

    def _roll(self, parent: str, full: str, old: str, new: str, url: str | None) -> RollSource:
        if url is None:
            return RollSource(DependencyRoll(full, "", old, new, RollRelation.UNAVAILABLE, "no url for it in .gitmodules"))
        checkouts = self.builder.checkouts
        try:
            for pin in (old, new):
                mirror = checkouts.mirror_holding(url, pin, full)
        except RepoError as exc:
            return RollSource(DependencyRoll(full, url, old, new, RollRelation.UNAVAILABLE, str(exc).removeprefix(f"{url}: ")))
        graph = GitRepo(mirror)
        relation, why = relation_of(graph, old, new)
        roll = DependencyRoll(full, url, old, new, relation, why)
        if relation is not RollRelation.FORWARD:
            return RollSource(roll)
        base = self.base or self.graph.info(parent)
        fixed = {**self.fixed, self.path: parent} if self.path else dict(self.fixed)
        inner = Level(self.builder, graph, url, full, base, fixed)
        return RollSource(roll, graph, LevelBuilder(self.builder, base, full, fixed), inner)


def relation_of(graph: GitRepo, old: str, new: str) -> tuple[RollRelation, str]:
    if graph.is_ancestor(old, new):
        return RollRelation.FORWARD, ""
    if graph.is_ancestor(new, old):
        n = len(graph.first_parent_chain(new, old))
        return RollRelation.BACKWARD, f"the new pin is an ancestor of the old one: the roll takes {n} commits out"
    if graph.merge_bases(old, new):
        return RollRelation.DIVERGED, "the pins share history but neither contains the other: no one range to search"
    return RollRelation.UNRELATED, "the pins have no common history: the dependency was replaced, not moved"


def superproject(builder: CheckoutBuilder, repo: GitRepo) -> Level:
    """The top level of the chain: the user's repository, its commits built as they are."""
    return Level(builder, repo, builder.checkouts.origin)

