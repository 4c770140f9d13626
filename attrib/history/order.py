"""A series in the order of the repository's history: the branch's first-parent line.

Upload time says nothing about where a commit sits (nights fail and are re-run, machines
post late); the first-parent line of the branch the nightly runs follow does. Values of a
commit not on that line (a pull request's, a side branch's) stay stored but are not part of
the series. Several values of one commit (re-runs) become their median: one point per commit.
A commit measured again in another environment (the nightly re-ran unchanged code after a
toolkit upgrade) keeps the values of the environment it was first measured in: the others are
the environment's evidence, not the code's (history/environment.py reads them), and a median of
two environments would put half of an environment's step on a commit that did not change.
"""

from __future__ import annotations

import bisect
import re
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from attrib.errors import RepoError
from attrib.gitrepo import GitRepo
from attrib.history.environment import agree
from attrib.history.store import Point

_HEX = re.compile(r"[0-9a-f]{7,40}")


class GitLine:
    """One upload's view of the branch: the first-parent line is read once (one `git rev-list`)
    and a revision that names a commit of it (its full sha, or a prefix of >= 7 hex digits that
    only one commit of the line has) resolves without a git call. Anything else (a branch name,
    a tag, a commit off the line) still goes to `git rev-parse`. Measured: 50,000 commits took
    157 s to add at a rev-parse (about 3 ms) each (benchmarks/detect_real.py --scale)."""

    def __init__(self, path: Path, branch: str = "HEAD") -> None:
        self.repo = GitRepo(path)
        self.branch = branch
        self._line: list[str] | None = None
        self._sorted: list[str] | None = None

    def resolve(self, rev: str) -> str:
        if _HEX.fullmatch(rev):
            if self._sorted is None:
                try:
                    self._sorted = sorted(self.line())
                except RepoError:  # no such branch: rev-parse below says what is wrong with rev
                    self._sorted = []
            i = bisect.bisect_left(self._sorted, rev)
            hits = self._sorted[i : i + 2]
            if hits and hits[0].startswith(rev) and (len(hits) == 1 or not hits[1].startswith(rev)):
                # a short sha another object of the repository also starts with is git's
                # "ambiguous" case; the line's commit is the one a nightly result names
                return hits[0]
        return self.repo.resolve(rev)

    def line(self) -> list[str]:
        if self._line is None:
            head = self.repo.resolve(self.branch)
            out = self.repo.git.rev_list("--first-parent", "--reverse", head)
            self._line = [s for s in str(out).splitlines() if s]
        return self._line

    def refresh(self) -> None:
        self._line = None
        self._sorted = None


@dataclass(frozen=True)
class Ordered:
    commits: list[str]  # one per point, in first-parent order
    values: list[float]
    off_line: int  # values of commits not on the line (kept, not plotted or tested)


def ordered(points: Sequence[Point], line: Sequence[str]) -> Ordered:
    pos = {sha: i for i, sha in enumerate(line)}
    by_commit: dict[str, list[float]] = defaultdict(list)
    first_env: dict[str, Mapping[str, str]] = {}
    off = 0
    for p in sorted(points, key=lambda p: p.measured_at):
        if p.commit not in pos:
            off += 1
        elif agree(first_env.setdefault(p.commit, p.environment), p.environment):
            by_commit[p.commit].append(p.value)
    commits = sorted(by_commit, key=pos.__getitem__)
    return Ordered(commits, [statistics.median(by_commit[c]) for c in commits], off)


def position(line: Sequence[str], rev_sha: str) -> int:
    try:
        return list(line).index(rev_sha)
    except ValueError:
        raise RepoError(f"revision {rev_sha[:10]}: not on the branch's first-parent line") from None
