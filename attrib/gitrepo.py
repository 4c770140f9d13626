"""Git at the edge: revisions, ranges, commit metadata, and checkouts that never touch the
user's repository.

Checkouts come from a bare mirror under the work dir, cloned with `--shared` (its objects are
read through git's alternates, so nothing is copied). `git worktree add` runs against that
mirror: the user's working tree, index and even `.git/worktrees` stay exactly as they were.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import git

from attrib.core.model import CommitInfo
from attrib.errors import RepoError

# A revision as a user or a CI job writes it: names, shas, ~ ^ @ { } : / . -, never a leading '-'
# (which git would read as an option) and never whitespace or control characters.
_REV_RE = re.compile(r"[A-Za-z0-9_./@^~{}:+=-]{1,256}")


def validate_revision_text(rev: str) -> None:
    # fullmatch: with match and "$", "HEAD\n" passed ($ matches before a trailing newline).
    if not _REV_RE.fullmatch(rev) or rev.startswith("-"):
        raise RepoError(f"revision {rev!r}: not a valid revision name")


# Repositories attrib may clone from a URL that came over the network (the daemon's flags):
# plain transports only. git's ext:: (runs a command) and anything starting with '-' (an
# option) never reach git; GIT_ALLOW_PROTOCOL enforces the same list inside git (redirects,
# alternates, submodules). file:// reads what a local path could read anyway. Plain http://
# brings code in cleartext that is then built and run: only where a setting allows it.
_URL_RE = re.compile(r"^(https?|ssh|git|file)://[A-Za-z0-9._~:@%+/-]+$|^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[A-Za-z0-9._~/+-]+$")
_PROTOCOLS = ("https", "ssh", "git", "file")


def is_git_url(text: str) -> bool:
    """A URL form git may fetch (scheme://... or scp-like user@host:path), not a local path."""
    return bool(_URL_RE.match(text))


def allowed_protocols(allow_http: bool) -> str:
    """The value of GIT_ALLOW_PROTOCOL for fetching flagged URLs."""
    return ":".join((*_PROTOCOLS, *(("http",) if allow_http else ())))


def check_git_url(url: str, allow_http: bool) -> None:
    if url.startswith("http://") and not allow_http:
        raise RepoError(
            f"{url}: plain http:// is refused (the code would arrive in cleartext and then be built and run);"
            " use https://, ssh or git, or allow http repositories in the daemon's settings"
        )


def git_failure_line(stderr: str, returncode: int) -> str:
    """The line of git's stderr that says what went wrong: its first `fatal:`/`error:` line
    (the last one is often only "and the repository exists.")."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        for prefix in ("fatal: ", "error: "):
            if ln.startswith(prefix):
                return ln[len(prefix) :]
    return lines[0] if lines else f"git exited with {returncode}"


def mirror_url(url: str, dest: Path, timeout_s: float, allow_http: bool = False) -> None:
    """Clone `url` as a bare mirror at `dest`, or fetch into the one already there. The caller
    holds a lock on `dest`; RepoError in one line naming the URL when git cannot."""
    check_git_url(url, allow_http)
    if (dest / "HEAD").exists():
        argv = ["git", "-C", str(dest), "fetch", "--prune", "--quiet", "origin"]
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        argv = ["git", "clone", "--mirror", "--quiet", "--", url, str(dest)]
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ALLOW_PROTOCOL": allowed_protocols(allow_http)}
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        raise RepoError(f"{url}: fetching timed out after {timeout_s:g} s") from None
    if proc.returncode != 0:
        raise RepoError(f"{url}: cannot fetch: {git_failure_line(proc.stderr, proc.returncode)}")


class GitRepo:
    """The user's repository, opened read-only in spirit: we only ever read from it."""

    def __init__(self, path: Path) -> None:
        self.path = path.resolve()
        try:
            self._repo = git.Repo(self.path, search_parent_directories=False)
        except git.NoSuchPathError:
            raise RepoError(f"repo {path}: no such directory") from None
        except git.InvalidGitRepositoryError:
            raise RepoError(f"repo {path}: not a git repository") from None
        self.git = self._repo.git

    def resolve(self, rev: str) -> str:
        """Full sha of the commit `rev` names, or RepoError naming the revision."""
        validate_revision_text(rev)
        try:
            out = self.git.rev_parse("--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
        except git.GitCommandError:
            raise RepoError(f"revision {rev!r}: unknown in {self.path}") from None
        return str(out).strip()

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        try:
            self.git.merge_base("--is-ancestor", ancestor, descendant)
        except git.GitCommandError as exc:
            if exc.status == 1:
                return False
            raise
        return True

    def first_parent_chain(self, good: str, bad: str) -> list[str]:
        """Commits on bad's first-parent line that good does not contain, oldest first."""
        out = self.git.rev_list("--first-parent", "--reverse", bad, f"^{good}")
        return [line for line in str(out).splitlines() if line]

    def merge_base(self, a: str, b: str) -> str:
        return str(self.git.merge_base(a, b)).strip()

    def info(self, sha: str) -> CommitInfo:
        c = self._repo.commit(sha)
        if c.parents:
            files = str(self.git.diff_tree("--no-commit-id", "--name-only", "-r", "-m", "--first-parent", sha))
        else:
            files = str(self.git.ls_tree("-r", "--name-only", sha))
        return CommitInfo(
            sha=c.hexsha,
            tree=c.tree.hexsha,
            subject=c.summary if isinstance(c.summary, str) else c.summary.decode(),
            author=str(c.author.name),
            author_email=str(c.author.email),
            date=c.authored_datetime.isoformat(),
            parents=tuple(p.hexsha for p in c.parents),
            files=tuple(sorted({f for f in files.splitlines() if f})),
        )


_ATTRIB_IDENTITY = {
    "GIT_AUTHOR_NAME": "attrib",
    "GIT_AUTHOR_EMAIL": "attrib@localhost",
    "GIT_COMMITTER_NAME": "attrib",
    "GIT_COMMITTER_EMAIL": "attrib@localhost",
}


class Mirror:
    """A bare, shared clone of the user's repository from which checkouts are made."""

    def __init__(self, path: Path, source: GitRepo) -> None:
        self.path = path
        self.source = source
        if not (self.path / "HEAD").exists() or not self._usable():
            shutil.rmtree(self.path, ignore_errors=True)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            git.Repo.clone_from(str(source.path), str(self.path), bare=True, shared=True, no_tags=True)
        self.git = git.Repo(self.path).git

    def _usable(self) -> bool:
        try:
            git.Repo(self.path).git.rev_parse("--verify", "HEAD")
        except (git.GitCommandError, git.InvalidGitRepositoryError):
            return False
        return True

    def checkout(self, sha: str, path: Path) -> None:
        """A fresh detached worktree of `sha` at `path`, replacing whatever half-made one was there."""
        self.discard(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.git.worktree("add", "--detach", "--force", str(path), sha)

    def revert(self, culprit: str, onto: str, scratch: Path) -> str | None:
        """A commit that reverts `culprit` on top of `onto`, kept under refs/attrib/ in the
        mirror (never in the user's repository); None when the revert does not apply cleanly."""
        ref = f"refs/attrib/revert/{culprit}-{onto}"
        try:
            return str(self.git.rev_parse("--verify", "--quiet", ref)).strip()
        except git.GitCommandError:
            pass
        self.checkout(onto, scratch)
        try:
            wt = git.Repo(scratch).git
            parents = str(wt.rev_list("--parents", "-n", "1", culprit)).split()
            args = ["--no-edit", *(["-m", "1"] if len(parents) > 2 else []), culprit]
            try:
                wt.revert(*args, env=_ATTRIB_IDENTITY)
            except git.GitCommandError:
                return None
            sha = str(wt.rev_parse("HEAD")).strip()
            self.git.update_ref(ref, sha)
            return sha
        finally:
            self.discard(scratch)

    def discard(self, path: Path) -> None:
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
        self.git.worktree("prune")
