"""Bad input: exit 2, one line naming what is wrong, no traceback, nothing left behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli, spec

from attrib.demo import DEMO_RECIPE


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    from attrib.demo import generate_tree

    return generate_tree(tmp_path_factory.mktemp("input") / "repo", spec(commits=6, culprits=(), broken=None))


def _bisect(tree, tmp_path: Path, **over: str | Path):
    args = {
        "--repo": tree.path,
        "--good": tree.good,
        "--bad": tree.bad,
        "--recipe": over.pop("recipe", None) or _recipe(tmp_path),
        "--workdir": tmp_path / "work",
        "--json": tmp_path / "out.json",
        "--report": tmp_path / "out.md",
    }
    args.update(over)
    flat: list[str | Path] = []
    for k, v in args.items():
        flat += [k, v]
    return run_cli("bisect", *flat)


def _recipe(tmp_path: Path, text: str = DEMO_RECIPE) -> Path:
    path = tmp_path / "recipe.toml"
    path.write_text(text)
    return path


def _assert_clean_failure(res, tmp_path: Path, *needles: str) -> None:
    assert res.code == 2, (res.code, res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert not (tmp_path / "work").exists(), "no work dir for bad input"
    assert not (tmp_path / "out.json").exists() and not (tmp_path / "out.md").exists()
    assert not list(tmp_path.glob(".out.*")), "no half-written temporary files"


def test_unknown_revision(tree, tmp_path):
    _assert_clean_failure(_bisect(tree, tmp_path, **{"--bad": "no-such-branch"}), tmp_path, "no-such-branch", "unknown")


def test_good_not_an_ancestor_of_bad(tree, tmp_path):
    res = _bisect(tree, tmp_path, **{"--good": tree.bad, "--bad": tree.good})
    _assert_clean_failure(res, tmp_path, "not an ancestor")


def test_same_commit(tree, tmp_path):
    _assert_clean_failure(_bisect(tree, tmp_path, **{"--bad": tree.good}), tmp_path, "same commit")


def test_repo_not_found(tree, tmp_path):
    res = _bisect(tree, tmp_path, **{"--repo": tmp_path / "nowhere"})
    _assert_clean_failure(res, tmp_path, "nowhere", "no such directory")


def test_repo_not_a_git_repository(tree, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    _assert_clean_failure(_bisect(tree, tmp_path, **{"--repo": plain}), tmp_path, "not a git repository")


def test_revision_that_looks_like_an_option(tree, tmp_path):
    _assert_clean_failure(_bisect(tree, tmp_path, **{"--good": "--output=/tmp/x"}), tmp_path, "not a valid revision")


def test_recipe_missing(tree, tmp_path):
    res = _bisect(tree, tmp_path, recipe=tmp_path / "absent.toml")
    _assert_clean_failure(res, tmp_path, "absent.toml", "not found")


@pytest.mark.parametrize(
    ("edit", "needles"),
    [
        (lambda t: t.replace('name = "loop"', 'name = "loop"\ncolour = "red"'), ("benchmark[0].colour", "unknown key")),
        (lambda t: t.replace("timeout_s = 120", 'timeout_s = "long"'), ("build.timeout_s", "positive number")),
        (lambda t: t.replace('commands = ["make bench"]\n', ""), ("build.commands", "missing")),
        (lambda t: t.replace("schema = 1", "schema = 7"), ("schema", "the integer 1")),
        (lambda t: t.replace('direction = "lower"', 'direction = "down"'), ("benchmark[0].direction", '"lower"')),
        (lambda t: t + "\n[oops", ("not valid TOML",)),
    ],
)
def test_recipe_invalid(tree, tmp_path, edit, needles):
    recipe = _recipe(tmp_path, edit(DEMO_RECIPE))
    _assert_clean_failure(_bisect(tree, tmp_path, recipe=recipe), tmp_path, "recipe.toml", *needles)


def test_unknown_benchmark(tree, tmp_path):
    _assert_clean_failure(_bisect(tree, tmp_path, **{"--benchmark": "nope"}), tmp_path, "nope", "loop")


def test_output_directory_missing(tree, tmp_path):
    res = _bisect(tree, tmp_path, **{"--json": tmp_path / "no" / "dir" / "out.json"})
    _assert_clean_failure(res, tmp_path, "--json", "does not exist")


def test_unknown_executor(tree, tmp_path):
    _assert_clean_failure(_bisect(tree, tmp_path, **{"--executor": "kubernetes"}), tmp_path, "--executor", "local")


def test_bad_error_rate(tree, tmp_path):
    _assert_clean_failure(_bisect(tree, tmp_path, **{"--alpha": "0.9"}), tmp_path, "--alpha")


def test_report_of_a_missing_or_wrong_file(tmp_path):
    res = run_cli("report", tmp_path / "none.json")
    assert res.code == 2 and "none.json" in res.stderr and "Traceback" not in res.stderr
    (tmp_path / "x.json").write_text('{"schema": 9}')
    res = run_cli("report", tmp_path / "x.json")
    assert res.code == 2 and "schema" in res.stderr


def test_bad_verify_mode(tree, tmp_path):
    _assert_clean_failure(_bisect(tree, tmp_path, **{"--verify": "pray"}), tmp_path, "--verify", "revert")


def test_bad_jobs(tree, tmp_path):
    _assert_clean_failure(_bisect(tree, tmp_path, **{"--jobs": "0"}), tmp_path, "--jobs", "positive")
