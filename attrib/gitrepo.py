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
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import git

from attrib.core.model import CommitInfo
from attrib.errors import RepoError
from attrib.fsutil import file_lock

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


@dataclass(frozen=True)
class UrlRule:
    """Which submodule URLs a job may fetch. The CLI builds the user's own tree: anything git
    fetches (ext:: stays out through GIT_ALLOW_PROTOCOL). The daemon builds what a flag named: the
    flag's URL rules (check_git_url), and a local path (or file://) only when the flag's own
    repository was local, which the daemon's settings already let a flag name."""

    allow_http: bool = True
    allow_local: bool = True

    def check(self, url: str) -> None:
        if url.startswith("-") or "::" in url:
            raise RepoError(f"{url}: not a URL git may fetch from")
        if not is_git_url(url) and "://" in url:
            raise RepoError(f"{url}: expected an https, ssh, git or file URL")
        check_git_url(url, self.allow_http)
        if not self.allow_local and (not is_git_url(url) or url.startswith("file://")):
            raise RepoError(f"{url}: a local path, refused for a repository fetched from a URL")


_DEFAULT_PORTS = {"https": "443", "http": "80", "ssh": "22", "git": "9418"}
_SCP_RE = re.compile(r"^([A-Za-z0-9._-]+)@([A-Za-z0-9.-]+):(.*)$")


def canonical_git_url(url: str) -> str:
    """One spelling per repository, for everything keyed by a repository URL (the daemon's
    deduplication, its mirrors under --state/repos, submodule mirrors): the scheme and host in
    lower case, no default port, no `localhost` host in file://, the path percent-decoded with
    `//` and `/./` collapsed (`..` kept) and no trailing `/`; a trailing `.git` dropped (forges serve
    a repository with and without it; file:// drops only a final `/.git`, the git directory of
    a working tree, since `repo` and `repo.git` are two directories there). `url` must be a git
    URL (is_git_url); git is still handed the spelling the flag gave."""
    scp = _SCP_RE.match(url) if "://" not in url else None
    if scp is not None:
        user, host, path = scp.groups()
        return f"{user}@{host.lower()}:{_clean_path(path, relative=not path.startswith('/'))}"
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    authority, slash, path = rest.partition("/")
    path = slash + path
    if scheme == "file":
        path = _clean_path(path, relative=False, forge=False)
        return f"file://{'' if authority.lower() in ('', 'localhost') else authority.lower()}{path}"
    user, at, hostport = authority.rpartition("@")
    host, colon, port = hostport.partition(":")
    keep_port = colon and port != _DEFAULT_PORTS.get(scheme)
    return f"{scheme}://{user}{at}{host.lower()}{':' + port if keep_port else ''}{_clean_path(path, relative=False)}"


def _clean_path(path: str, relative: bool, forge: bool = True) -> str:
    # `..` stays: through a symbolic link it need not lead where the text suggests.
    parts = [p for p in unquote(path).split("/") if p not in ("", ".")]
    if parts and (parts[-1] == ".git" if not forge else parts[-1].endswith(".git") and parts[-1] != ".git"):
        parts[-1] = parts[-1][: -len(".git")]
        parts = [p for p in parts if p]
    return ("" if relative else "/") + "/".join(parts)


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
        proc = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout_s, env=env)
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

    def merge_bases(self, a: str, b: str) -> list[str]:
        """Every best common ancestor of a and b; [] when their histories never meet."""
        try:
            return str(self.git.merge_base("--all", a, b)).split()
        except git.GitCommandError as exc:
            if exc.status == 1:
                return []
            raise

    @property
    def git_dir(self) -> Path:
        return Path(self._repo.git_dir)

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
        with self._worktrees_locked():
            self.git.worktree("add", "--detach", "--force", str(path), sha)

    def _worktrees_locked(self) -> AbstractContextManager[None]:
        """The mirror's worktree list changed by one at a time: git reads every entry of it when it
        adds or prunes one, and fails on another's half-made entry ("failed to read
        worktrees/<name>/commondir"), which builds at once (--probes, the end check) hit."""
        return file_lock(self.path / "attrib-worktrees.lock")

    def move(self, path: Path, sha: str, keep: str) -> None:
        """Put the worktree at `path` (one of this mirror's) at `sha` in place: files that do not
        change keep their times, which is what an incremental build's make or ninja reads;
        untracked files go, except under `keep` (the build directory)."""
        tree = git.Repo(path).git
        tree.checkout("--detach", "--force", sha)
        tree.clean("-ffdxq", "-e", f"/{keep.strip('/')}")

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
        with self._worktrees_locked():
            self.git.worktree("prune")


# --- submodules ------------------------------------------------------------------------------
# A gitlink is a tree entry of mode 160000 naming a commit of another repository (the pin); the
# URL to fetch it from is in the commit's own .gitmodules. attrib reads both from the commit
# itself (never from a checkout's config), so every candidate gets the pins it was committed with.

GITLINK_MODE = "160000"


def _plumbing(git_dir: Path, *args: str, check: bool = True, bytewise: bool = False) -> subprocess.CompletedProcess[bytes]:
    """git's output as bytes: a tree's names and a .gitmodules may hold any bytes, not only UTF-8
    (callers decode). `bytewise`: git's regular expressions match bytes (in a UTF-8 locale `.`
    matches no byte that is not UTF-8, and a key holding one would be missed)."""
    env = {**os.environ, "LC_ALL": "C"} if bytewise else None
    proc = subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, env=env)
    if check and proc.returncode != 0:
        raise RepoError(f"{git_dir}: git {args[0]}: {_failure(proc)}")
    return proc


def _failure(proc: subprocess.CompletedProcess[bytes]) -> str:
    return git_failure_line(proc.stderr.decode(errors="replace"), proc.returncode)


def is_text(name: str) -> bool:
    """Whether a name read from git (decoded with surrogateescape) was UTF-8: one that was not
    can name a file, but never goes into a message, a key or a result as it is."""
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


def shown(name: str) -> str:
    """A name read from git as a message may hold it: bytes that are not UTF-8 as \\xNN."""
    return name.encode(errors="surrogateescape").decode(errors="backslashreplace")


def gitlinks(git_dir: Path, sha: str) -> dict[str, str]:
    """{path: pinned commit} of every gitlink in `sha`'s tree (not descending into them). A
    path that is not UTF-8 is kept, decoded with surrogateescape (is_text says which)."""
    out = _plumbing(git_dir, "ls-tree", "-r", "-z", "--full-tree", sha).stdout
    links = {}
    for entry in out.split(b"\0"):
        meta, _, path = entry.partition(b"\t")
        parts = meta.split()
        if len(parts) == 3 and parts[0] == GITLINK_MODE.encode():
            links[path.decode(errors="surrogateescape")] = parts[2].decode()
    return links


def gitlink_changes(git_dir: Path, before: str, after: str) -> dict[str, tuple[str, str]]:
    """{path: (old pin, new pin)} of the gitlinks `after` moves relative to `before`; a gitlink
    added or removed is not a roll and is left out."""
    old, new = gitlinks(git_dir, before), gitlinks(git_dir, after)
    return {p: (old[p], new[p]) for p in sorted(old.keys() & new.keys()) if old[p] != new[p]}


def submodule_urls(git_dir: Path, sha: str) -> dict[str, str]:
    """{path: url} from the .gitmodules of commit `sha` ({} when it has none); paths and URLs
    decoded with surrogateescape, as gitlinks' paths are. RepoError in one line when the file is
    there and git cannot read it."""
    proc = _plumbing(
        git_dir, "config", "-z", "--blob", f"{sha}:.gitmodules", "--get-regexp", r"^submodule\..*\.(path|url)$",
        check=False, bytewise=True,
    )  # fmt: skip
    if proc.returncode != 0:
        # no submodule keys (1, nothing said), no .gitmodules, or one git cannot read (it says why)
        if not proc.stderr.strip() or blob_size(git_dir, sha, ".gitmodules") is None:
            return {}
        raise RepoError(f".gitmodules of {sha[:10]}: {_failure(proc)}")
    paths: dict[str, str] = {}
    urls: dict[str, str] = {}
    for entry in proc.stdout.split(b"\0"):
        key, _, value = entry.decode(errors="surrogateescape").partition("\n")
        name, _, field = key[len("submodule.") :].rpartition(".")
        (paths if field == "path" else urls)[name] = value.strip()
    return {paths[n].rstrip("/"): urls[n] for n in paths if n in urls}


def resolve_submodule_url(base: str, url: str) -> str:
    """A .gitmodules URL as git reads it: `./x` and `../x` are relative to the superproject's
    own URL (or path), anything else is taken as written."""
    if not url.startswith(("./", "../")):
        return url
    head = base.rstrip("/")
    for part in url.split("/"):
        if part == "..":
            cut = max(head.rfind("/"), head.rfind(":") if "://" not in head else -1)
            head = head[:cut] if cut > 0 else head
        elif part not in (".", ""):
            head = f"{head}/{part}"
    return head


def tree_with_gitlinks(git_dir: Path, sha: str, links: dict[str, str], scratch_index: Path) -> str:
    """The tree `sha` would have with these gitlinks moved ({path: commit}): the tree a commit
    that only rolls those pins would have, so such a commit and the build of its parent with
    the pins overridden share one key. Written to `git_dir`'s objects (a mirror of ours)."""
    env = {**os.environ, "GIT_INDEX_FILE": str(scratch_index)}
    scratch_index.parent.mkdir(parents=True, exist_ok=True)
    try:
        for args in (
            ["read-tree", sha],
            *(["update-index", "--add", "--cacheinfo", f"{GITLINK_MODE},{c},{p}"] for p, c in sorted(links.items())),
        ):
            subprocess.run(["git", "--git-dir", str(git_dir), *args], env=env, check=True, capture_output=True)
        out = subprocess.run(["git", "--git-dir", str(git_dir), "write-tree"], env=env, check=True, capture_output=True, text=True, errors="replace")
    except subprocess.CalledProcessError as exc:
        raise RepoError(f"{git_dir}: cannot write the tree of {sha[:10]} with moved pins: {exc.stderr!s}") from None
    finally:
        scratch_index.unlink(missing_ok=True)
    return out.stdout.strip()


def blob_size(git_dir: Path, sha: str, path: str) -> int | None:
    """The size of file `path` in commit `sha`; None when it has no such file."""
    kind = _plumbing(git_dir, "cat-file", "-t", f"{sha}:{path}", check=False)
    if kind.returncode != 0 or kind.stdout.strip() != b"blob":
        return None
    return int(_plumbing(git_dir, "cat-file", "-s", f"{sha}:{path}").stdout)


def read_blob(git_dir: Path, sha: str, path: str, max_bytes: int) -> bytes | None:
    """The bytes of file `path` in commit `sha`, or None when it has no such file; RepoError
    when it is larger than `max_bytes` (its size is asked first: nothing larger is read)."""
    n = blob_size(git_dir, sha, path)
    if n is None:
        return None
    if n > max_bytes:
        raise RepoError(f"{path} at {sha[:10]} is {n} bytes; at most {max_bytes} are read")
    return _plumbing(git_dir, "cat-file", "blob", f"{sha}:{path}").stdout


def has_commit(git_dir: Path, sha: str) -> bool:
    return _plumbing(git_dir, "cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0


def fetch_commit(git_dir: Path, sha: str, timeout_s: float, allow_http: bool) -> None:
    """Ask the remote for one commit by name (a pin no branch holds any more); quiet when it
    cannot: the caller says what is missing."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ALLOW_PROTOCOL": allowed_protocols(allow_http)}
    try:
        subprocess.run(
            ["git", "--git-dir", str(git_dir), "fetch", "--quiet", "origin", sha],
            capture_output=True, text=True, errors="replace", timeout=timeout_s, env=env,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pass


def add_worktree(git_dir: Path, sha: str, path: Path) -> None:
    """A detached worktree of `sha` at `path` (an empty directory or none) from the bare
    repository `git_dir`; stale worktrees of checkouts cleaned away are pruned first."""
    _plumbing(git_dir, "worktree", "prune")
    _plumbing(git_dir, "worktree", "add", "--detach", "--force", str(path), sha)


def origin_of(repo_path: Path) -> str:
    """What a relative submodule URL is relative to: the repository's origin URL, else its path."""
    proc = subprocess.run(["git", "-C", str(repo_path), "config", "remote.origin.url"], capture_output=True, text=True, errors="surrogateescape")
    return proc.stdout.strip() or str(repo_path)
