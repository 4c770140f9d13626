"""Dependency trees written by an attacker or a careless hand, on real git repositories with real
submodules (tests/dependency_tree.py): a dependency is never checked out through a symbolic link
the tree holds; names, .gitmodules and pin files that are not UTF-8 are one line (a skip at a
candidate, exit 2 at the references), never a traceback; and the number of dependency checkouts,
the size of a pin file and the time spent fetching are bounded (docs/recipes.md, Dependencies)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_cli
from dependency_tree import BENCH_SH, BUILD_SH, Repo, dependency, git, recipe_text

from attrib.core.model import RollRelation
from attrib.evaluate import checkouts as checkouts_module
from attrib.evaluate.builds import CheckoutBuilder
from attrib.evaluate.checkouts import Checkouts
from attrib.evaluate.executors.local import LocalExecutor
from attrib.gitrepo import GitRepo, Mirror
from attrib.recipe import BuildSpec, DependencySpec
from attrib.recipe import dependency as dependency_module
from attrib.rolls import superproject
from attrib.workdir import WorkDir

SPEC = BuildSpec(commands=("sh build.sh",), timeout_s=60)
LATIN1 = b"caf\xe9"  # "café" in Latin-1: not UTF-8


def _builder(repo: Path, work: Path, pinned: tuple[DependencySpec, ...] = ()) -> tuple[CheckoutBuilder, GitRepo]:
    source = GitRepo(repo)
    wd = WorkDir.for_repo(repo, work)
    mirror = Mirror(wd.mirror, source)
    return CheckoutBuilder(wd, mirror, LocalExecutor(), SPEC, Checkouts(wd, mirror, str(repo), pinned=pinned)), source


def _commit_bytes(repo: Repo, message: str, files: dict[bytes, bytes]) -> str:
    """A commit writing files whose names and contents are any bytes."""
    for name, data in files.items():
        path = Path(os.fsdecode(repo.path)) / os.fsdecode(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        subprocess.run(["git", "add", "--", name], cwd=repo.path, check=True)
    git(repo.path, "commit", "-q", "--allow-empty", "-m", message)
    repo.commits.append(git(repo.path, "rev-parse", "HEAD"))
    return repo.commits[-1]


def _gitmodules(entries: list[tuple[bytes, bytes, bytes]]) -> bytes:
    """A .gitmodules of (name, path, url) entries, as bytes."""
    return b"".join(b'[submodule "%s"]\n\tpath = %s\n\turl = %s\n' % e for e in entries)


# --- 3. never through a symbolic link ------------------------------------------------------


def test_a_dependency_under_a_symlinked_directory_is_refused_and_nothing_is_written_there(tmp_path: Path):
    """Before: the [[dependency]] was checked out through `third_party -> elsewhere`."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    compiler = dependency(tmp_path / "compiler", ["100"])
    k = Repo.init(tmp_path / "kernel")
    (k.path / "third_party").symlink_to(elsewhere)
    git(k.path, "add", "third_party")
    sha = k.commit("start", {"build.sh": BUILD_SH, "pin.txt": compiler.commits[0] + "\n"})
    spec = DependencySpec(compiler.url, "pin.txt", "third_party/compiler")
    builder, source = _builder(k.path, tmp_path / "work", (spec,))
    rec = builder.build(source.info(sha))
    assert not rec.ok
    assert list(elsewhere.iterdir()) == []  # before: the dependency's files
    assert rec.reason == (
        f"dependency third_party/compiler ({compiler.url}): third_party is a symbolic link in {sha[:10]}'s tree;"
        " a dependency is never checked out through one"
    )


def test_a_path_that_is_a_gitlink_and_a_symlink_at_once_is_refused(tmp_path: Path):
    """A tree may hold `sub` twice (git mktree does not refuse it): git checks out the symbolic
    link, and the submodule went through it. Before: the compiler's files landed in elsewhere/."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    compiler = dependency(tmp_path / "compiler", ["100"])
    k = Repo.init(tmp_path / "kernel")
    k.commit("start", {"build.sh": BUILD_SH, ".gitmodules": f'[submodule "sub"]\n\tpath = sub\n\turl = {compiler.url}\n'})
    link = _blob(k.path, str(elsewhere))
    entries = git(k.path, "ls-tree", "HEAD") + f"\n160000 commit {compiler.commits[0]}\tsub\n120000 blob {link}\tsub\n"
    tree = subprocess.run(["git", "mktree"], cwd=k.path, input=entries, capture_output=True, text=True, check=True).stdout.strip()
    sha = git(k.path, "commit-tree", tree, "-p", "HEAD", "-m", "sub twice")
    git(k.path, "update-ref", "refs/heads/main", sha)
    builder, source = _builder(k.path, tmp_path / "work")
    rec = builder.build(source.info(sha))
    assert not rec.ok
    assert list(elsewhere.iterdir()) == []  # before: the dependency's files
    assert rec.reason == (
        f"submodule sub ({compiler.url}): sub is a symbolic link in {sha[:10]}'s tree; a dependency is never checked out through one"
    )


def _blob(repo: Path, text: str) -> str:
    return subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=repo, input=text, capture_output=True, text=True, check=True
    ).stdout.strip()


# --- 4. bytes that are not UTF-8 -------------------------------------------------------------


def _plain_kernel(root: Path, n: int = 8, latin1_at: int = 4) -> Repo:
    """A kernel without dependencies whose cost never changes; commit `latin1_at` adds a file
    with a Latin-1 name."""
    k = Repo.init(root / "kernel")
    k.commit("start", {"build.sh": "mkdir -p out; echo 100 > out/cost\n", "bench.sh": BENCH_SH, "noise": "1\n"})
    for i in range(1, n):
        if i == latin1_at:
            _commit_bytes(k, "a Latin-1 name", {LATIN1 + b".txt": b"x\n"})
        else:
            k.commit(f"change {i}", {"README": f"revision {i}\n"})
    return k


def test_a_latin1_file_name_in_the_tree_does_not_end_the_bisection(tmp_path: Path):
    """Before: gitlinks() read `git ls-tree -z` as UTF-8, and every bisection over such a tree
    was a traceback (exit 1); the commit before gitlinks() gave exit 10, as it is again."""
    k = _plain_kernel(tmp_path)
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(recipe_text())
    res = run_cli(
        "bisect", "--repo", k.path, "--good", k.commits[0], "--bad", k.commits[-1], "--recipe", recipe,
        "--workdir", tmp_path / "work",
    )  # fmt: skip
    assert res.code == 10, res.stdout + res.stderr
    assert "Traceback" not in res.stderr


def _sub_kernel(root: Path, gitmodules: bytes | None = None, name: bytes = b"sub") -> tuple[Repo, Repo, str]:
    """A kernel pinning a compiler at `sub`, with `gitmodules` as its .gitmodules (default: the
    submodule `name` at the compiler's URL)."""
    compiler = dependency(root / "compiler", ["100", "106"])
    k = Repo.init(root / "kernel")
    git(k.path, "update-index", "--add", "--cacheinfo", f"160000,{compiler.commits[0]},sub")
    text = gitmodules if gitmodules is not None else _gitmodules([(name, b"sub", compiler.url.encode())])
    sha = _commit_bytes(k, "start", {b"build.sh": BUILD_SH.replace("third_party", "sub").encode(), b".gitmodules": text})
    return k, compiler, sha


def test_a_latin1_submodule_name_builds_and_a_latin1_url_is_one_line(tmp_path: Path):
    """git reads a .gitmodules of any bytes; attrib read its output as UTF-8 (a traceback). A
    name is only a key: the checkout builds. A URL that is not UTF-8 is that commit's failure."""
    k, _, sha = _sub_kernel(tmp_path / "a", name=LATIN1)
    builder, source = _builder(k.path, tmp_path / "a/work")
    rec = builder.build(source.info(sha))
    assert rec.ok, rec.reason
    assert (Path(rec.checkout) / "out/cost").read_text() == "100\n"
    k, _, sha = _sub_kernel(tmp_path / "b", _gitmodules([(b"sub", b"sub", b"file:///srv/" + LATIN1)]))
    builder, source = _builder(k.path, tmp_path / "b/work")
    rec = builder.build(source.info(sha))
    assert not rec.ok
    assert rec.reason == f"submodule sub: .gitmodules of {sha[:10]} gives a url that is not UTF-8: file:///srv/caf\\xe9"


def test_a_gitmodules_git_cannot_read_is_one_line_naming_it(tmp_path: Path):
    k, _, sha = _sub_kernel(tmp_path, b"[submodule \"sub\"\n\tpath = sub\n")
    builder, source = _builder(k.path, tmp_path / "work")
    rec = builder.build(source.info(sha))
    assert not rec.ok and "\n" not in rec.reason
    assert rec.reason.startswith(f".gitmodules of {sha[:10]}: bad config line 2")


def test_a_garbage_or_oversized_pin_file_is_that_commits_failure_in_one_line(tmp_path: Path):
    """Before: bytes that are not UTF-8 were a traceback while the build key was made; a pin
    file of any size was read whole (256 MiB: 846 MiB). Now its size is asked first."""
    compiler = dependency(tmp_path / "compiler", ["100"])
    k = Repo.init(tmp_path / "kernel")
    start = k.commit("start", {"build.sh": BUILD_SH, "pin.txt": compiler.commits[0] + "\n"})
    garbage = _commit_bytes(k, "garbage pin", {b"pin.txt": bytes(range(128, 256)) * 4})
    long = compiler.commits[0].encode() + b"\n#" + b"x" * 4096  # the pin is there: only the size refuses it
    big = _commit_bytes(k, "a pin before a long comment", {b"pin.txt": long})
    where = f"dependency third_party/compiler ({compiler.url})"
    builder, source = _builder(k.path, tmp_path / "work", (DependencySpec(compiler.url, "pin.txt", "third_party/compiler"),))
    assert builder.build(source.info(start)).ok
    rec = builder.build(source.info(garbage))
    assert not rec.ok and rec.reason == f"{where}: pin.txt at {garbage[:10]} holds no commit"
    rec = builder.build(source.info(big))
    cap = dependency_module.PIN_FILE_MAX_BYTES
    assert not rec.ok and rec.reason == f"{where}: pin.txt at {big[:10]} is {len(long)} bytes; at most {cap} are read"
    # with pin_match (a DEPS-like file) the bound is larger, and as strict
    cap = dependency_module.PIN_MATCH_FILE_MAX_BYTES
    deps = b"rev = '%s'\n" % compiler.commits[0].encode() + b"#" * cap
    huge = _commit_bytes(k, "a huge DEPS", {b"DEPS": deps})
    spec = DependencySpec(compiler.url, "DEPS", "third_party/compiler", r"rev = '(\w+)'")
    builder, source = _builder(k.path, tmp_path / "work2", (spec,))
    rec = builder.build(source.info(huge))
    assert not rec.ok and rec.reason == f"{where}: DEPS at {huge[:10]} is {len(deps)} bytes; at most {cap} are read"


def test_a_roll_whose_gitmodules_cannot_be_read_is_unavailable_not_a_traceback(tmp_path: Path):
    k, compiler, _ = _sub_kernel(tmp_path)
    git(k.path, "update-index", "--cacheinfo", f"160000,{compiler.commits[1]},sub")
    roll = _commit_bytes(k, "roll, and a URL that is not UTF-8", {b".gitmodules": _gitmodules([(b"sub", b"sub", b"/srv/" + LATIN1)])})
    builder, source = _builder(k.path, tmp_path / "work")
    (src,) = superproject(builder, source).rolls(roll)
    assert src.roll.relation is RollRelation.UNAVAILABLE and src.roll.path == "sub"
    assert "not UTF-8" in src.roll.why


def _cli(tmp_path: Path, k: Repo, good: str, bad: str, extra: str = ""):
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(recipe_text() + extra)
    out = tmp_path / "result.json"
    res = run_cli(
        "bisect", "--repo", k.path, "--good", good, "--bad", bad, "--recipe", recipe, "--workdir", tmp_path / "work",
        "--json", out,
    )  # fmt: skip
    return res, (json.loads(out.read_text()) if out.exists() else None)


def _pinned_kernel(root: Path) -> tuple[Repo, Repo, Repo, str]:
    """A kernel with a submodule (the compiler, at third_party/compiler) and a [[dependency]]
    pinned in ci/tool.txt (the tool, at third_party/tool); its first commit, and the recipe's
    table for the tool."""
    compiler = dependency(root / "compiler", ["100", "106"])
    tool = dependency(root / "tool", ["0"])
    k = Repo.init(root / "kernel")
    files = {"build.sh": BUILD_SH, "bench.sh": BENCH_SH, "noise": "1\n", "ci/tool.txt": tool.commits[0] + "\n"}
    k.commit("start", files, {"third_party/compiler": (compiler, compiler.commits[0])})
    extra = f'\n[[dependency]]\nrepository = "{tool.url}"\npin = "ci/tool.txt"\npath = "third_party/tool"\n'
    return k, compiler, tool, extra


def test_a_candidate_with_a_bad_gitmodules_or_pin_file_is_a_skip_and_the_bisection_goes_on(tmp_path: Path):
    """Before: a traceback (exit 1) at the first such commit the search built."""
    k, compiler, tool, extra = _pinned_kernel(tmp_path)
    gitmodules = (k.path / ".gitmodules").read_bytes()
    k.commit("change 1", {"README": "1\n"})
    bad_modules = _commit_bytes(k, "a .gitmodules git cannot read", {b".gitmodules": b"[submodule \"x\"\n"})
    bad_pin = _commit_bytes(k, "restored, and a pin file of garbage", {b".gitmodules": gitmodules, b"ci/tool.txt": b"\xff\xfe" * 64})
    k.commit("change 5", {"README": "5\n"})
    k.commit("the pin restored", {"ci/tool.txt": tool.commits[0] + "\n"})
    roll = k.commit("roll the compiler", links={"third_party/compiler": (compiler, compiler.commits[1])})
    k.commit("change 8", {"README": "8\n"})
    res, result = _cli(tmp_path, k, k.commits[0], k.commits[-1], extra)
    assert res.code == 0, res.stdout + res.stderr
    assert result is not None and result["culprits"][0]["commit"] == roll
    assert result["culprits"][0]["rolls"][0]["culprits"][0]["commit"] == compiler.commits[1]
    expected = {
        bad_modules: f".gitmodules of {bad_modules[:10]}: bad config line 2",
        bad_pin: f"dependency third_party/tool ({tool.url}): ci/tool.txt at {bad_pin[:10]} holds no commit",
        k.commits[4]: f"dependency third_party/tool ({tool.url}): ci/tool.txt at {k.commits[4][:10]} holds no commit",
    }
    failures = result["build_failures"]
    assert failures, "the search built none of the commits at fault: this test checks nothing"
    for f in failures:
        assert f["reason"].startswith(expected[f["commit"]]) and "\n" not in f["reason"], f


@pytest.mark.parametrize("fault", ["gitmodules", "pin file", "fan-out"])
def test_a_reference_at_fault_is_one_line_exit_2_before_any_build(tmp_path: Path, fault: str):
    k, _, tool, extra = _pinned_kernel(tmp_path)
    if fault == "gitmodules":
        _commit_bytes(k, "a .gitmodules git cannot read", {b".gitmodules": b"[submodule \"x\"\n"})
        role, sha, line = "good", k.commits[-1], f".gitmodules of {k.commits[-1][:10]}: bad config line 2"
        k.commit("more", {"README": "1\n"})
    elif fault == "pin file":
        k.commit("more", {"README": "1\n"})
        _commit_bytes(k, "a pin file of garbage", {b"ci/tool.txt": b"\xff\xfe" * 64})
        role, sha = "bad", k.commits[-1]
        line = f"dependency third_party/tool ({tool.url}): ci/tool.txt at {sha[:10]} holds no commit"
    else:
        fan = _fan(tmp_path, 8)  # 2^9 - 2 checkouts below the fan: over the bound
        k.commit("more", {"README": "1\n"})
        sha = k.commit("pin the fan", links={"third_party/fan": (fan, fan.commits[-1])})
        role, line = "bad", f"the checkout of {sha[:10]} needs more than {MAX_PER_BUILD} dependency checkouts"
    good, bad = (k.commits[-2], k.commits[-1]) if role == "bad" else (k.commits[-2], k.commits[-1])
    res, _ = _cli(tmp_path, k, good, bad, extra)
    assert res.code == 2, res.stdout + res.stderr
    (said,) = res.stderr.strip().splitlines()
    assert said.startswith(f"error: the {role} revision {sha[:10]}: {line}") or f"the {role} revision {sha[:10]}: {line}" in said, said
    assert not list((tmp_path / "work/builds").glob("*.json"))  # nothing built, nothing stored


# --- 5. bounds ------------------------------------------------------------------------------

MAX_PER_BUILD = 256  # docs/recipes.md; checked against the module's below


def _fan(root: Path, levels: int) -> Repo:
    """A repository whose commit i pins its commit i-1 twice (at a/ and b/): the checkout of its
    last commit holds 2^(levels+1) - 2 submodule checkouts, of levels + 1 distinct commits."""
    fan = Repo.init(root / "fan")
    fan.commit("leaf", {"cost.txt": "1\n"})
    for i in range(levels):
        below = fan.commits[-1]
        fan.commit(f"level {i + 1}", {"cost.txt": "0\n"}, {"a": (fan, below), "b": (fan, below)})
    return fan


def _worktrees(git_dir: Path) -> int:
    """The worktrees made from a bare mirror (its own entry not counted)."""
    out = subprocess.run(["git", "--git-dir", str(git_dir), "worktree", "list", "--porcelain"], capture_output=True, text=True)
    return out.stdout.count("worktree ") - 1


def test_a_fan_out_of_pins_is_counted_from_its_distinct_pins_and_refused_beyond_the_bound(tmp_path: Path):
    """Before: a fan of 20 levels asked for 2^21 worktrees (1,400 made in 90 s). Now its 21
    distinct commits are read once each, and nothing is checked out."""
    fan = _fan(tmp_path / "big", 20)
    k = Repo.init(tmp_path / "kernel")
    sha = k.commit("pin the fan", {"build.sh": BUILD_SH}, {"third_party/fan": (fan, fan.commits[-1])})
    builder, source = _builder(k.path, tmp_path / "work")
    rec = builder.build(source.info(sha))
    assert not rec.ok
    assert rec.reason == (
        f"the checkout of {sha[:10]} needs more than {MAX_PER_BUILD} dependency checkouts (one at every path that pins"
        f" a submodule, nested ones included); at most {MAX_PER_BUILD} are made for one build"
    )
    assert _worktrees(builder.workdir.submodule_mirror(fan.url)) == 0
    # within the bound a fan is checked out whole: 3 levels, 1 + 14 checkouts, 8 leaves
    small = _fan(tmp_path / "small", 3)
    sha = k.commit("pin a small fan", links={"third_party/fan": (small, small.commits[-1])})
    builder, source = _builder(k.path, tmp_path / "work2")
    rec = builder.build(source.info(sha))
    assert rec.ok, rec.reason
    assert (Path(rec.checkout) / "out/cost").read_text() == "8\n"
    assert _worktrees(builder.workdir.submodule_mirror(small.url)) == 15
    assert checkouts_module.MAX_CHECKOUTS_PER_BUILD == MAX_PER_BUILD  # the bound docs/recipes.md gives


def test_a_job_makes_a_bounded_number_of_dependency_checkouts_in_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(checkouts_module, "MAX_CHECKOUTS_PER_JOB", 3, raising=False)
    compiler, docs = dependency(tmp_path / "compiler", ["100", "106"]), dependency(tmp_path / "docs", ["0"])
    k = Repo.init(tmp_path / "kernel")
    links = {"third_party/compiler": (compiler, compiler.commits[0]), "third_party/docs": (docs, docs.commits[0])}
    first = k.commit("start", {"build.sh": BUILD_SH}, links)
    second = k.commit("roll", links={"third_party/compiler": (compiler, compiler.commits[1])})
    builder, source = _builder(k.path, tmp_path / "work")
    assert builder.build(source.info(first)).ok
    rec = builder.build(source.info(second))
    assert not rec.ok
    assert rec.reason == (
        f"the checkout of {second[:10]} needs 2 dependency checkouts and this job has made 2; at most 3 are made in one job"
    )


@pytest.fixture
def silent_git_daemon() -> Iterator[tuple[int, list[socket.socket]]]:
    """A loopback server that accepts git:// connections and never answers: an unreachable
    submodule URL that waits as long as it is let (each accepted connection kept)."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    server.close()
    for conn in accepted:
        conn.close()


def test_the_fetches_of_a_job_have_a_deadline_in_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, silent_git_daemon: tuple[int, list[socket.socket]]
):
    """Before: each unreachable URL waited 900 s, with no bound over all of them. Each fetch
    is now within FETCH_TIMEOUT_S and what is left of FETCHES_DEADLINE_S: here 1 s and 2.5 s,
    so of five unreachable URLs at most three are tried, and the rest are refused at once."""
    port, accepted = silent_git_daemon
    monkeypatch.setattr(checkouts_module, "FETCH_TIMEOUT_S", 1.0)
    monkeypatch.setattr(checkouts_module, "FETCHES_DEADLINE_S", 2.5, raising=False)
    k = Repo.init(tmp_path / "kernel")
    k.commit("start", {"build.sh": BUILD_SH})
    for i in range(5):  # commit i pins dep{i} only
        url = f"git://127.0.0.1:{port}/dep{i}.git"
        (k.path / ".gitmodules").write_text(f'[submodule "dep{i}"]\n\tpath = dep{i}\n\turl = {url}\n')
        git(k.path, "add", ".gitmodules")
        if i:
            git(k.path, "rm", "-q", "--cached", f"dep{i - 1}")
        git(k.path, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},dep{i}")
        git(k.path, "commit", "-qm", f"pin dep{i}")
        k.commits.append(git(k.path, "rev-parse", "HEAD"))
    builder, source = _builder(k.path, tmp_path / "work")
    reasons = [builder.build(source.info(sha)).reason for sha in k.commits[1:]]
    assert len(accepted) <= 3, reasons
    assert reasons[0] == f"submodule dep0 (git://127.0.0.1:{port}/dep0.git): fetching timed out after 1 s"
    assert reasons[-1] == f"submodule dep4 (git://127.0.0.1:{port}/dep4.git): not fetched: this job's fetches of dependencies took their 2.5 s"
