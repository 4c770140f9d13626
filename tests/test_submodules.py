"""Trees with real git submodules (file:// URLs) build: every checkout has its submodules at the
commit's pins, recursively, from mirrors in the work dir fetched once per job; a submodule that
cannot be had is one line naming its path and URL; the pins are in the build key."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli
from dependency_tree import BUILD_SH, Repo, dependency, git, kernel, recipe_text

from attrib.errors import RepoError
from attrib.evaluate.builds import CheckoutBuilder
from attrib.evaluate.checkouts import Checkouts
from attrib.evaluate.executors.local import LocalExecutor
from attrib.gitrepo import GitRepo, Mirror
from attrib.recipe import BuildSpec
from attrib.workdir import WorkDir

SPEC = BuildSpec(commands=("sh build.sh",), timeout_s=60)


def _builder(repo: Path, work: Path) -> tuple[CheckoutBuilder, GitRepo]:
    source = GitRepo(repo)
    wd = WorkDir.for_repo(repo, work)
    mirror = Mirror(wd.mirror, source)
    return CheckoutBuilder(wd, mirror, LocalExecutor(), SPEC, Checkouts(wd, mirror, origin=str(repo))), source


def _build(builder: CheckoutBuilder, source: GitRepo, sha: str, **kw):
    return builder.build(source.info(sha), **kw)


def roll_tree(tmp_path: Path, n_dep: int = 8, culprit: int = 5, n_super: int = 12, roll: int = 7):
    """compiler: cost 100, 106 from commit `culprit` on; kernel: pins compiler[0] until commit
    `roll`, which rolls it to the compiler's last commit."""
    compiler = dependency(tmp_path / "compiler", ["106" if i >= culprit else "100" for i in range(n_dep)])
    pins: list[dict[str, tuple[Repo, str]]] = [{} for _ in range(n_super)]
    pins[0] = {"third_party/compiler": (compiler, compiler.commits[0])}
    pins[roll] = {"third_party/compiler": (compiler, compiler.commits[-1])}
    return compiler, kernel(tmp_path / "kernel", 1.0, pins)


def test_the_fixture_is_what_git_submodule_reads(tmp_path: Path):
    """The trees the tests make are real submodules: git's own recursive clone gets the pins."""
    compiler, k = roll_tree(tmp_path)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--recurse-submodules", str(k.path), str(clone))
    assert (clone / "third_party/compiler/cost.txt").read_text() == "106\n"
    assert git(clone / "third_party/compiler", "rev-parse", "HEAD") == compiler.commits[-1]


def test_every_checkout_has_its_pins_and_each_mirror_is_fetched_once_per_job(tmp_path: Path):
    compiler, k = roll_tree(tmp_path)
    builder, source = _builder(k.path, tmp_path / "work")
    before, after = _build(builder, source, k.commits[3]), _build(builder, source, k.commits[9])
    assert before.ok and after.ok, (before.reason, after.reason)
    assert (Path(before.checkout) / "out/cost").read_text() == "100\n"
    assert (Path(after.checkout) / "out/cost").read_text() == "106\n"
    sub = Path(after.checkout) / "third_party/compiler"
    assert git(sub, "rev-parse", "HEAD") == compiler.commits[-1]  # a real checkout of the pin
    assert builder.checkouts.fetches == 1  # the mirror is cloned once; the second pin was in it
    # A second job on the same work dir: the mirror holds both pins, nothing is fetched.
    again, source = _builder(k.path, tmp_path / "work")
    assert _build(again, source, k.commits[1]).ok
    assert again.checkouts.fetches == 0
    # A pin the mirror lacks (the compiler moved on since) is fetched, once.
    compiler.commit("compiler change late", {"cost.txt": "120\n"})
    k.commit("roll again", links={"third_party/compiler": (compiler, compiler.commits[-1])})
    third, source = _builder(k.path, tmp_path / "work")
    late = _build(third, source, k.commits[-1])
    assert late.ok and (Path(late.checkout) / "out/cost").read_text() == "120\n"
    assert third.checkouts.fetches == 1


def test_a_submodule_that_cannot_be_fetched_is_one_line_naming_path_and_url(tmp_path: Path):
    k = Repo.init(tmp_path / "kernel")
    ghost = Repo(tmp_path / "no-such-compiler")
    k.commit("start", {"build.sh": "true\n"}, {"third_party/compiler": (ghost, "1" * 40)})
    builder, source = _builder(k.path, tmp_path / "work")
    rec = _build(builder, source, k.commits[0])
    assert not rec.ok
    assert "\n" not in rec.reason
    assert rec.reason.startswith(f"submodule third_party/compiler ({ghost.url}): cannot fetch")
    assert rec.reason in Path(rec.log_path).read_text()


def test_a_nested_submodule_is_checked_out_at_the_pin_of_its_parent(tmp_path: Path):
    llvm = dependency(tmp_path / "llvm", ["7", "9"])
    compiler = dependency(
        tmp_path / "compiler", ["100", "100"],
        [{"llvm": (llvm, llvm.commits[0])}, {"llvm": (llvm, llvm.commits[1])}],
    )  # fmt: skip
    k = kernel(tmp_path / "kernel", 1.0, [{"third_party/compiler": (compiler, compiler.commits[0])},
                                          {"third_party/compiler": (compiler, compiler.commits[1])}])  # fmt: skip
    builder, source = _builder(k.path, tmp_path / "work")
    first, second = _build(builder, source, k.commits[0]), _build(builder, source, k.commits[1])
    assert (Path(first.checkout) / "out/cost").read_text() == "107\n"
    assert (Path(second.checkout) / "out/cost").read_text() == "109\n"


def test_the_pins_are_in_the_build_key_and_a_tree_without_submodules_keeps_its_key(tmp_path: Path):
    compiler, k = roll_tree(tmp_path)
    builder, source = _builder(k.path, tmp_path / "work")
    info = source.info(k.commits[3])
    pinned = builder.key(info)
    assert builder.key(info, {"third_party/compiler": compiler.commits[0]}) == pinned  # the pin itself
    assert builder.key(info, {"third_party/compiler": compiler.commits[2]}) != pinned
    plain = Repo.init(tmp_path / "plain")
    plain.commit("one", {"build.sh": "true\n"})
    builder, source = _builder(plain.path, tmp_path / "work2")
    info = source.info(plain.commits[0])
    # the formula of every build key before submodules were checked out
    old = "\n".join([info.tree, SPEC.cache_identity(), LocalExecutor().identity()])
    assert builder.key(info) == hashlib.sha256(old.encode()).hexdigest()[:24]
    assert builder.key(info) != pinned


def test_bisect_of_a_submodule_tree_builds_both_ends_and_names_the_roll(tmp_path: Path):
    """Before: "the good revision did not build" (checkouts had empty submodule directories)."""
    _, k = roll_tree(tmp_path, n_super=10, roll=6)
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(recipe_text())
    out = tmp_path / "result.json"
    res = run_cli(
        "bisect", "--repo", k.path, "--good", k.commits[0], "--bad", k.commits[-1], "--recipe", recipe,
        "--workdir", tmp_path / "work", "--json", out, "--report", tmp_path / "report.md",
    )  # fmt: skip
    assert res.code == 0, res.stdout + res.stderr
    result = json.loads(out.read_text())
    assert [c["commit"] for c in result["culprits"]][:1] == [k.commits[6]]
    assert not result["build_failures"]


def test_the_users_repository_is_left_alone(tmp_path: Path):
    _, k = roll_tree(tmp_path)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=k.path, capture_output=True, text=True).stdout
    builder, source = _builder(k.path, tmp_path / "work")
    assert _build(builder, source, k.commits[-1]).ok
    assert subprocess.run(["git", "status", "--porcelain"], cwd=k.path, capture_output=True, text=True).stdout == status
    assert not (k.path / ".git/modules").exists()


def test_the_daemons_rule_refuses_submodule_urls_a_flag_may_not_name(tmp_path: Path):
    """A flagged URL repository's submodules: no plain http, no ext::, no local paths; the
    refusal is that commit's build failure, one line, and nothing is fetched."""
    from attrib.daemon.flags import submodule_rule
    from attrib.gitrepo import UrlRule

    compiler, k = roll_tree(tmp_path)
    source = GitRepo(k.path)
    wd = WorkDir.for_repo(k.path, tmp_path / "work")
    mirror = Mirror(wd.mirror, source)
    rule = submodule_rule("https://example.com/kernel.git", allow_http=False)
    builder = CheckoutBuilder(wd, mirror, LocalExecutor(), SPEC, Checkouts(wd, mirror, str(k.path), rule))
    rec = builder.build(source.info(k.commits[0]))
    assert not rec.ok and "\n" not in rec.reason
    assert rec.reason.startswith(f"submodule third_party/compiler ({compiler.url}): ") and "local path" in rec.reason
    assert builder.checkouts.fetches == 0 and not (tmp_path / "work/submodules").exists()
    # a flag that named a local repository may pin local submodules, as the CLI's user may
    assert submodule_rule(str(k.path), allow_http=False) == UrlRule(allow_http=False, allow_local=True)
    strict = UrlRule(allow_http=False, allow_local=False)
    for url, why in [
        ("http://example.com/c.git", "plain http"),
        ("ext::sh -c touch% /tmp/pwned", "not a URL git may fetch"),
        ("-upload-pack=evil", "not a URL git may fetch"),
        ("/etc", "local path"),
        ("ftp://example.com/c.git", "expected an https"),
    ]:
        with pytest.raises(RepoError) as caught:
            strict.check(url)
        assert why in str(caught.value) and url in str(caught.value)
    strict.check("https://example.com/c.git")
    UrlRule(allow_http=True, allow_local=False).check("http://example.com/c.git")


def test_a_dependency_pinned_on_a_line_of_a_file_is_checked_out_where_the_build_expects_it(tmp_path: Path):
    """[[dependency]] with pin_match: the commit on a DEPS-like line; a commit whose file names
    none is that commit's build failure, one line."""
    from attrib.recipe import DependencySpec

    compiler = dependency(tmp_path / "compiler", ["100", "106"])
    k = Repo.init(tmp_path / "kernel")
    deps = 'vars = {{\n  "compiler_revision": "{}",\n}}\n'
    k.commit("start", {"build.sh": BUILD_SH, "DEPS": deps.format(compiler.commits[0])})
    k.commit("roll", {"DEPS": deps.format(compiler.commits[1])})
    k.commit("typo", {"DEPS": deps.format("not-a-commit")})
    spec = DependencySpec(compiler.url, "DEPS", "third_party/compiler", r'"compiler_revision": "(\w+)"')
    source = GitRepo(k.path)
    wd = WorkDir.for_repo(k.path, tmp_path / "work")
    mirror = Mirror(wd.mirror, source)
    builder = CheckoutBuilder(wd, mirror, LocalExecutor(), SPEC, Checkouts(wd, mirror, str(k.path), pinned=(spec,)))
    first, rolled, typo = (builder.build(source.info(s)) for s in k.commits)
    assert (Path(first.checkout) / "out/cost").read_text() == "100\n"
    assert (Path(rolled.checkout) / "out/cost").read_text() == "106\n"
    assert git(Path(rolled.checkout) / "third_party/compiler", "rev-parse", "HEAD") == compiler.commits[1]
    assert not typo.ok and typo.reason == (
        f"dependency third_party/compiler ({compiler.url}): DEPS at {k.commits[2][:10]} holds no commit "
        f"matching '\"compiler_revision\": \"(\\\\w+)\"'"
    )
    # the override of the descent puts it elsewhere, and the file's own pin shares the build
    info = source.info(k.commits[0])
    assert builder.key(info, {"third_party/compiler": compiler.commits[0]}) == builder.key(info)
    moved = builder.build(info, {"third_party/compiler": compiler.commits[1]})
    assert (Path(moved.checkout) / "out/cost").read_text() == "106\n" and moved.key != first.key


@pytest.mark.parametrize(
    ("table", "key", "expected"),
    [
        ('repository = "x"\npin = "a.txt"\npath = "../up"', "dependency[0].path", "without '..'"),
        ('repository = "x"\npin = "a.txt"\npath = "d"\npin_match = "("', "dependency[0].pin_match", "not a regular expression"),
        ('repository = "x"\npin = "a.txt"\npath = "d"\npin_match = "rev"', "dependency[0].pin_match", "one group"),
        ('pin = "a.txt"\npath = "d"', "dependency[0].repository", "missing"),
        ('repository = "x"\npin = "a.txt"\npath = "d"\n[[dependency]]\nrepository = "y"\npin = "b"\npath = "d/e"',
         "dependency[1].path", "already another dependency's checkout"),
    ],
)  # fmt: skip
def test_a_bad_dependency_table_is_one_line_naming_its_key(tmp_path: Path, table: str, key: str, expected: str):
    from attrib.errors import ConfigError
    from attrib.recipe import load_recipe

    path = tmp_path / "recipe.toml"
    path.write_text(recipe_text() + "\n[[dependency]]\n" + table + "\n")
    with pytest.raises(ConfigError) as caught:
        load_recipe(path)
    assert key in str(caught.value) and expected in str(caught.value) and "\n" not in str(caught.value)


def test_an_incremental_recipe_builds_a_tree_with_pinned_dependencies_clean(tmp_path: Path):
    """An incremental tree is moved by git alone and would keep the old pins: a build with
    [[dependency]] pins (or a roll's override) is built clean in its own checkout."""
    from attrib.core.model import BuildHow
    from attrib.recipe import DependencySpec

    compiler = dependency(tmp_path / "compiler", ["100", "106"])
    k = Repo.init(tmp_path / "kernel")
    k.commit("start", {"build.sh": BUILD_SH, "pin.txt": compiler.commits[0] + "\n"})
    k.commit("roll", {"pin.txt": compiler.commits[1] + "\n"})
    # a build that does not notice a missing dependency: the incremental tree would give cost 1
    lenient = "mkdir -p out; cat third_party/compiler/cost.txt > out/cost 2>/dev/null || echo 1 > out/cost"
    spec = BuildSpec(commands=(lenient,), timeout_s=60, incremental=True, build_dir="out", artifacts=("out/cost",))
    source = GitRepo(k.path)
    wd = WorkDir.for_repo(k.path, tmp_path / "work")
    mirror = Mirror(wd.mirror, source)
    pinned = (DependencySpec(compiler.url, "pin.txt", "third_party/compiler"),)
    builder = CheckoutBuilder(wd, mirror, LocalExecutor(), spec, Checkouts(wd, mirror, str(k.path), pinned=pinned))
    for sha, cost in zip(k.commits, ("100\n", "106\n"), strict=True):
        rec = builder.build(source.info(sha))
        assert rec.ok and rec.how is BuildHow.CLEAN, rec.reason
        assert (Path(rec.checkout) / "out/cost").read_text() == cost
