"""Issue 31: build targets ([build] targets, `{targets}` in a build command).

A real git tree from attrib.demo, real make, the real builder: the tree's Makefile plus a
target that does not build, which only a build of every target reaches.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from conftest import spec

from attrib.demo import DEMO_RECIPE
from attrib.errors import ConfigError
from attrib.evaluate.builds import CheckoutBuilder
from attrib.evaluate.executors.local import LocalExecutor
from attrib.gitrepo import GitRepo, Mirror
from attrib.recipe import BuildSpec, parse_recipe
from attrib.workdir import WorkDir

# `docs` stands for the part of a tree the benchmark does not need, and it fails to build here
COMMAND = "printf 'docs:\\n\\tfalse\\n' > extra.mk && make -f Makefile -f extra.mk {targets}"


def _parse(extra: str, commands: str = '["make {targets}"]'):
    text = DEMO_RECIPE.replace('commands = ["make bench"]', f"commands = {commands}\n{extra}")
    return parse_recipe(tomllib.loads(text), Path("r.toml"))


def test_targets_fill_the_commands_and_bad_ones_name_the_key():
    r = _parse('targets = ["bench", "lib thing"]')
    assert r.build.targets == ("bench", "lib thing")
    assert r.build.command_lines() == ("make bench 'lib thing'",)
    assert _parse("").build.command_lines() == ("make ",)  # no targets: the build system's default
    assert _parse('targets = ["bench"]').build.cache_identity() != _parse("").build.cache_identity()
    plain = parse_recipe(tomllib.loads(DEMO_RECIPE), Path("r.toml")).build
    assert plain.command_lines() == plain.commands  # a recipe without the key runs as written
    with pytest.raises(ConfigError, match=r"build\.targets.*\{targets\}"):
        _parse('targets = ["bench"]', '["make bench"]')
    with pytest.raises(ConfigError, match=r"build\.targets"):
        _parse('targets = ["--always-make"]')


def test_the_build_compiles_only_the_targets_named(make_tree, tmp_path):
    tree = make_tree(spec(commits=2, culprits=(), broken=None, gpu_culprit=False))
    commit = GitRepo(tree.path).info(tree.bad)
    records = {}
    for name, targets in (("some", ("bench",)), ("all", ("bench", "docs"))):
        work = WorkDir((tmp_path / name).resolve())
        build = BuildSpec(commands=(COMMAND,), artifacts=("bench",), targets=targets)
        records[name] = CheckoutBuilder(work, Mirror(work.mirror, GitRepo(tree.path)), LocalExecutor(), build).build(commit)
    assert records["some"].ok, records["some"].reason
    assert "$ printf" in Path(records["some"].log_path).read_text() and "extra.mk bench\n" in Path(records["some"].log_path).read_text()
    assert not records["all"].ok and "exit 2" in records["all"].reason  # the target it did not need
