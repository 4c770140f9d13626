"""Issue 31: incremental build trees ([build] incremental = true, build_dir, artifacts).

Real git trees from attrib.demo, real make with an out-of-tree build directory, the real
builder. The demo tree changes params.h at its culprit and only docs or build comments
elsewhere.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import spec

from attrib.core.model import BuildHow, Note, NoteKind, Status
from attrib.demo import DEMO_RECIPE
from attrib.errors import ConfigError
from attrib.evaluate.builds import CheckoutBuilder
from attrib.evaluate.executors.local import LocalExecutor
from attrib.evaluate.records import CommitRecord
from attrib.gitrepo import GitRepo, Mirror
from attrib.job.end_check import checked_ends
from attrib.outcome import Culprit, Outcome
from attrib.recipe import BuildSpec, parse_recipe
from attrib.workdir import WorkDir


def _make(deps: str) -> str:
    """Objects in build/ by make, which rebuilds only what is older than its prerequisites."""
    rules = f"VPATH = ..\\nbench: bench.o util.o\\n\\tcc -o $@ $^\\n%%.o: %%.c {deps}\\n\\tcc -O2 -c $< -o $@\\n"
    return f"mkdir -p build && printf '{rules}' > build/Makefile && make -C build && cp build/bench bench"


TRACKED = _make("params.h")  # bench.o depends on the header the culprit changes
UNTRACKED = _make("")  # a build that forgets a header dependency: an incremental tree goes stale


def _builder(tmp_path: Path, repo: Path, name: str, command: str, incremental: bool) -> CheckoutBuilder:
    work = WorkDir((tmp_path / name).resolve())
    build = BuildSpec(commands=(command,), artifacts=("bench",), incremental=incremental, build_dir="build")
    return CheckoutBuilder(work, Mirror(work.mirror, GitRepo(repo)), LocalExecutor(), build)


def _compiled(log_path: str) -> list[str]:
    return sorted(line.split()[-1] for line in Path(log_path).read_text().splitlines() if line.startswith("cc -O2 -c"))


@pytest.fixture
def chain(make_tree):
    tree = make_tree(spec(commits=6, culprits=((3, 10),), broken=None, gpu_culprit=False))
    repo = GitRepo(tree.path)
    return tree, [repo.info(s) for s in repo.first_parent_chain(tree.good, tree.bad)]


def test_the_keys_parse_and_incremental_needs_a_build_dir_and_artifacts():
    base = DEMO_RECIPE.replace("[build]\n", '[build]\nartifacts = ["bench"]\nincremental = true\nbuild_dir = "build"\n', 1)
    r = parse_recipe(tomllib.loads(base), Path("r.toml"))
    assert r.build.incremental and r.build.build_dir == "build"
    plain = parse_recipe(tomllib.loads(DEMO_RECIPE), Path("r.toml"))
    assert not plain.build.incremental and plain.build.build_dir is None
    # the check of a culprit's ends is theirs too: incremental alone may turn it off
    assert not parse_recipe(tomllib.loads(base.replace("incremental = true\n", "incremental = true\ncache_check = false\n")), Path("r.toml")).build.cache_check
    # the reuse never changes what a build gives: not part of the build key
    assert r.build.cache_identity() == parse_recipe(tomllib.loads(DEMO_RECIPE.replace("[build]\n", '[build]\nartifacts = ["bench"]\n', 1)), Path("r.toml")).build.cache_identity()
    for drop, key in (('build_dir = "build"\n', "build.build_dir"), ('artifacts = ["bench"]\n', "build.artifacts")):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            parse_recipe(tomllib.loads(base.replace(drop, "")), Path("r.toml"))
    with pytest.raises(ConfigError, match=r"build\.build_dir"):
        parse_recipe(tomllib.loads(base.replace('build_dir = "build"', 'build_dir = "../out"')), Path("r.toml"))


def test_a_neighbour_reuses_the_build_tree_and_gets_the_clean_binary(chain, tmp_path):
    tree, commits = chain
    incremental = _builder(tmp_path, tree.path, "inc", TRACKED, True)
    clean = _builder(tmp_path, tree.path, "clean", TRACKED, False)
    records = [incremental.build(c) for c in commits[:5]]
    assert all(r.ok for r in records), [r.reason for r in records]
    assert records[0].how is BuildHow.CLEAN  # the first build finds no tree to move
    assert [r.how for r in records[1:]] == [BuildHow.INCREMENTAL] * 4
    compiled = [_compiled(r.log_path) for r in records]
    assert compiled[0] == ["bench.o", "util.o"]
    for commit, objs in zip(commits[1:5], compiled[1:], strict=True):
        # only what the commit changed is compiled again (every object depends on params.h)
        changed = {f[:-2] + ".o" for f in commit.files if f in ("bench.c", "util.c")}
        expected = {"bench.o", "util.o"} if "params.h" in commit.files else changed
        assert objs == sorted(expected), (commit.subject, commit.files, objs)
    assert any(objs == [] for objs in compiled[1:])  # a docs-only neighbour compiles nothing
    for commit, rec in zip(commits[:5], records, strict=True):
        assert rec.artifact == clean.build(commit).artifact  # the binary a clean build gives
        assert (Path(rec.checkout) / "bench").is_file()  # copied where the benchmark runs it
        assert incremental.differ_from_clean([(commit, rec)])[0][commit.sha] is False


def test_a_failing_incremental_build_is_built_clean_and_says_so(chain, tmp_path):
    tree, commits = chain
    # a build tree that breaks every build after the one that made it; a fresh checkout builds
    command = "test ! -e build/broken && " + TRACKED + " && touch build/broken"
    builder = _builder(tmp_path, tree.path, "w", command, True)
    first, second = builder.build(commits[0]), builder.build(commits[1])
    assert first.ok and second.ok, (first.reason, second.reason)
    assert second.how is BuildHow.CLEAN
    log = Path(second.log_path).read_text()
    assert "# incremental build failed (exit 1 from" in log and "building clean" in log
    assert second.artifact == _builder(tmp_path, tree.path, "c", TRACKED, False).build(commits[1]).artifact


def test_a_stale_incremental_tree_is_named_when_the_ends_are_checked(chain, tmp_path):
    """A build that does not track a header rebuilds nothing at the culprit: the incremental
    tree serves the parent's object, a wrong binary. The check of a culprit's end built clean
    finds it."""
    tree, commits = chain
    builder = _builder(tmp_path, tree.path, "w", UNTRACKED, True)
    culprit = next(c for c in commits if c.sha == tree.culprits[0])
    parent = next(c for c in commits if c.sha == culprit.parents[0])
    builder.build(parent)
    stale = builder.build(culprit)
    assert stale.ok and stale.how is BuildHow.INCREMENTAL and _compiled(stale.log_path) == []
    differs, seconds = builder.differ_from_clean([(culprit, stale)])
    assert differs == {culprit.sha: True} and seconds > 0


def _bisected(commits, culprit, build) -> Outcome:
    """An outcome naming `culprit` with the builds its ends got (what job.py's end check reads)."""
    parent = culprit.parents[0]
    records = {c.sha: CommitRecord(c, build(c)) for c in commits if c.sha in (parent, culprit.sha)}
    found = Culprit(culprit.sha, parent, (), None)  # type: ignore[arg-type]  # the check reads no confirmation
    return Outcome(Status.CULPRIT_FOUND, commits[0].sha, commits[-1].sha, (found,), None, (), {}, records, (), ())  # type: ignore[arg-type]


def test_the_ends_are_checked_together_and_a_stale_end_is_named_at_either_side(chain, tmp_path):
    """The culprit's two ends are built again clean at once, up to the run's build width (their
    kept records say when each started and finished), each once for a group's members sharing
    them, and a wrong binary at either end is still named."""
    tree, commits = chain
    pause = tmp_path / "pause"  # the check builds last a second: two at once overlap, one after the other do not
    builder = _builder(tmp_path, tree.path, "w", f"{UNTRACKED} && {{ test ! -e {pause} || sleep 1; }}", True)
    culprit = next(c for c in commits if c.sha == tree.culprits[0])
    parent = next(c for c in commits if c.sha == culprit.parents[0])
    assert commits[0].sha != parent.sha
    builder.build(commits[0])  # the empty tree's clean build: both ends are then incremental ones
    records = {c.sha: builder.build(c) for c in (parent, culprit)}
    assert all(r.how is BuildHow.INCREMENTAL for r in records.values())
    pause.touch()
    members = [_bisected(commits, culprit, lambda c: records[c.sha]) for _ in range(2)]  # a group's two members
    first, second = checked_ends(builder, members, 2)
    for checked in (first, second):
        assert [n for n in checked.notes if n.kind is NoteKind.CACHE_MISMATCH] == [Note(NoteKind.CACHE_MISMATCH, (culprit.sha,))]
    kept = [json.loads(builder.workdir.build_record(f"{records[c.sha].key}-uncached").read_text()) for c in (parent, culprit)]
    assert [k["artifact"] == records[c.sha].artifact for k, c in zip(kept, (parent, culprit), strict=True)] == [True, False]
    (a, b) = kept
    assert a["started"] < b["finished"] and b["started"] < a["finished"], kept  # they overlapped
    assert first.times.build_check_s > 0 and first.times.build_s == first.times.build_check_s
    assert second.times.build_check_s == 0  # the shared ends were built once, their time counted once
    assert members[0].times.build_check_s == 0 and members[0].notes == ()  # the outcomes given are not changed
    # the stale end on the other side: a tree built at the culprit moved back to its parent
    # keeps the culprit's object (the header is not tracked), while the culprit is a clean build
    other = _builder(tmp_path, tree.path, "back", UNTRACKED, True)
    back = {c.sha: other.build(c) for c in (culprit, parent)}
    assert back[culprit.sha].how is BuildHow.CLEAN and back[parent.sha].how is BuildHow.INCREMENTAL
    (checked,) = checked_ends(other, [_bisected(commits, culprit, lambda c: back[c.sha])], 2)
    assert [n for n in checked.notes if n.kind is NoteKind.CACHE_MISMATCH] == [Note(NoteKind.CACHE_MISMATCH, (parent.sha,))]


def test_the_next_bisection_in_the_same_work_dir_reuses_the_trees_the_last_one_left(chain, tmp_path):
    """The daemon's next night: another process, the same work dir. Its first build moves the
    tree the previous bisection left, and the clean binary comes out."""
    tree, commits = chain
    last_night = _builder(tmp_path, tree.path, "w", TRACKED, True)
    for c in commits[:3]:
        last_night.build(c)
    tonight = _builder(tmp_path, tree.path, "w", TRACKED, True)
    rec = tonight.build(commits[4])
    assert rec.ok and rec.how is BuildHow.INCREMENTAL, rec
    assert f"reusing the build tree of {commits[2].sha}" in Path(rec.log_path).read_text()  # the last one built
    assert rec.artifact == _builder(tmp_path, tree.path, "clean", TRACKED, False).build(commits[4]).artifact


def test_checkouts_made_and_discarded_at_once_in_one_mirror_all_succeed(chain, tmp_path):
    """Builds at once (--probes, the end check's two ends) add and prune worktrees of one mirror
    together; git reads every entry of the mirror's list then and failed on another's half-made
    one ("could not open 'worktrees/0/locked'", "failed to read worktrees/<name>/commondir")
    before the list was changed under a lock (8 threads of 40 rounds here: 3 of 3 runs failed)."""
    tree, commits = chain
    work = WorkDir((tmp_path / "w").resolve())
    mirror = Mirror(work.mirror, GitRepo(tree.path))

    def rounds(i: int) -> int:
        path = tmp_path / "wt" / str(i)
        for n in range(40):
            mirror.checkout(commits[(i + n) % len(commits)].sha, path)
            assert (path / "bench.c").is_file()
            mirror.discard(path)
        return i

    with ThreadPoolExecutor(8) as pool:
        assert sorted(pool.map(rounds, range(8))) == list(range(8))


def test_artifacts_never_reach_outside_the_checkout_through_its_links(tmp_path):
    """Issue 40 (the prebuilt archives' hole, in the incremental tree's copy): the commit's own
    `out -> /elsewhere` in the checkout, a build that makes `out` a directory in its tree. The
    copy into the checkout must not write through the link: the build of that commit fails with
    one line, and nothing appears outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = tmp_path / "repo"
    repo.mkdir()
    run = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "-b", "main")
    (repo / "bench.c").write_text("int main(void) { return 0; }\n")
    (repo / "out").symlink_to(outside)
    run("add", "-A")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "out links out")
    command = "mkdir -p build && cc -o build/bench bench.c && rm -f out && mkdir out && cp build/bench out/bench"
    work = WorkDir((tmp_path / "w").resolve())
    build = BuildSpec(commands=(command,), artifacts=("out/bench",), incremental=True, build_dir="build")
    builder = CheckoutBuilder(work, Mirror(work.mirror, GitRepo(repo)), LocalExecutor(), build)
    git_repo = GitRepo(repo)
    record = builder.build(git_repo.info(git_repo.resolve("HEAD")))
    assert list(outside.iterdir()) == []
    log = Path(record.log_path).read_text()
    assert "'out' in the checkout is a symbolic link" in log and "where the build tree has a directory" in log, log
    # the commit is then built clean in its own checkout, as any failed incremental build is
    assert record.ok and record.how is BuildHow.CLEAN, record.reason
