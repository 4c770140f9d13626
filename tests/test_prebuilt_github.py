"""Issue 31: prebuilt binaries from GitHub Actions ([build.prebuilt_github]).

Real git trees from attrib.demo built by the real builder; their binaries zipped as
upload-artifact zips them, served by a fake GitHub Actions on loopback that is strict about the
REST contract (tests/fake_github_actions.py: paths, query, Authorization, Accept, API version;
its storage host refuses any Authorization header). The bisections run through the real CLI.
"""

from __future__ import annotations

import hashlib
import io
import random
import socket
import stat
import tomllib
import zipfile
from pathlib import Path

import pytest
from conftest import bisect_cli, spec
from fake_github_actions import REPO, TOKEN, WORKFLOW, FakeActions, recipe_table, serving, tar_gz, zip_of

from attrib.core.model import BuildHow
from attrib.demo import DEMO_RECIPE
from attrib.errors import ConfigError
from attrib.evaluate import prebuilt_github
from attrib.evaluate.builds import CheckoutBuilder
from attrib.evaluate.executors.local import LocalExecutor
from attrib.gitrepo import GitRepo, Mirror
from attrib.recipe import BuildSpec, PrebuiltGithub, parse_recipe
from attrib.workdir import WorkDir

TOKEN_ENV = "ATTRIB_TEST_PREBUILT_TOKEN"


def _builder(tmp_path: Path, repo: Path, name: str, source: PrebuiltGithub | None) -> CheckoutBuilder:
    work = WorkDir((tmp_path / name).resolve())
    build = BuildSpec(commands=("make bench",), env={"CFLAGS": "-O2"}, artifacts=("bench",), prebuilt_github=source)
    return CheckoutBuilder(work, Mirror(work.mirror, GitRepo(repo)), LocalExecutor(), build)


def _source(api_url: str, artifact: str = "bench-{sha}") -> PrebuiltGithub:
    return PrebuiltGithub(REPO, WORKFLOW, artifact, api_url, TOKEN_ENV)


@pytest.fixture
def github(monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    with serving() as fake:
        yield fake


@pytest.fixture
def built(make_tree, tmp_path):
    """A tree, its commits, and each commit's `bench` as a clean build gives it."""
    tree = make_tree(spec(commits=5, culprits=((3, 10),), broken=None, gpu_culprit=False))
    repo = GitRepo(tree.path)
    commits = [repo.info(s) for s in repo.first_parent_chain(tree.good, tree.bad)]
    plain = _builder(tmp_path, tree.path, "plain", None)
    records = {c.sha: plain.build(c) for c in commits}
    benches = {sha: (Path(r.checkout) / "bench").read_bytes() for sha, r in records.items()}
    return tree, commits, records, benches


def _parse(extra: str):
    return parse_recipe(tomllib.loads(DEMO_RECIPE.replace("[build]\n", "[build]\n" + extra, 1)), Path("r.toml"))


BASE = {"repo": "acme/kernels", "workflow": "build.yml", "artifact": "bench-{sha}"}


def _table(**fields: str | None) -> str:
    merged = {k: v for k, v in {**BASE, **fields}.items() if v is not None}
    return "prebuilt_github = { " + ", ".join(f'{k} = "{v}"' for k, v in merged.items()) + " }\n"


def test_the_key_parses_is_part_of_the_build_key_and_bad_values_name_it():
    r = _parse(_table())
    assert r.build.prebuilt_github == PrebuiltGithub("acme/kernels", "build.yml", "bench-{sha}", "https://api.github.com", "GITHUB_TOKEN")
    assert r.build.prebuilt_github.artifact_name("abc") == "bench-abc"
    key = r.build.cache_identity()
    assert key != _parse("").build.cache_identity()  # an artifact is another build
    assert _parse(_table(token_env="CI_TOKEN")).build.cache_identity() == key  # credentials change no byte of it
    for field, other in (("repo", "acme/other"), ("workflow", "161335"), ("artifact", "bench"), ("api_url", "https://ghe.example/api/v3")):
        assert _parse(_table(**{field: other})).build.cache_identity() != key, field
    assert _parse(_table(api_url="https://ghe.example/api/v3/")).build.prebuilt_github.api_url == "https://ghe.example/api/v3"
    bad = {
        ("repo", "acme"): r"build\.prebuilt_github\.repo.*owner/name",
        ("workflow", "build"): r"build\.prebuilt_github\.workflow.*build\.yml",
        ("artifact", "a/b"): r"build\.prebuilt_github\.artifact",
        ("api_url", "ftp://x"): r"build\.prebuilt_github\.api_url.*http",
        ("token_env", "A-B"): r"build\.prebuilt_github\.token_env.*environment variable",
        ("workflow", None): r"build\.prebuilt_github\.workflow.*: missing",
    }
    for (field, value), match in bad.items():
        with pytest.raises(ConfigError, match=match):
            _parse(_table(**{field: value}))
    with pytest.raises(ConfigError, match=r"build\.prebuilt_github': give either build\.prebuilt .* not both"):
        _parse('prebuilt = "/ci/{sha}.tar.gz"\n' + _table())
    assert _parse(_table() + "cache_check = false\n").build.cache_check is False  # it has something to check


def test_artifacts_replace_the_build_asked_once_per_commit(built, tmp_path, github: FakeActions):
    tree, commits, records, benches = built
    published = commits[::2]
    for c in published[:-1]:
        github.publish(c.sha, zip_of({"bench": benches[c.sha]}), f"bench-{c.sha}")
    last = published[-1]  # the way to keep modes through upload-artifact: one tar inside the zip
    github.publish(last.sha, zip_of({"bench.tar.gz": tar_gz({"bench": benches[last.sha]})}, mode=0o644), f"bench-{last.sha}")
    builder = _builder(tmp_path, tree.path, "w", _source(github.api_url))
    shas = [c.sha for c in commits]
    assert builder.prebuilt_among(shas) == {c.sha for c in published}
    assert builder.prebuilt_among(shas) == {c.sha for c in published}  # remembered: GitHub not asked again
    for c in commits:
        rec = builder.build(c)
        assert rec.ok and rec.artifact == records[c.sha].artifact, rec  # the same binary either way
        log = Path(rec.log_path).read_text()
        if c in published:
            assert rec.how is BuildHow.PREBUILT and rec.note == "", rec
            assert "checked against its published sha256" in log and "$ make bench" not in log
            assert (Path(rec.checkout) / "bench").stat().st_mode & stat.S_IXUSR
        else:
            assert rec.how is BuildHow.CLEAN and "$ make bench" in log
            assert rec.note == f"no prebuilt artifact: github:{REPO} has no successful run of {WORKFLOW} for {c.sha[:12]}"
    # one listing of runs per commit, for the search and the unpacking together
    assert sorted(s.query["head_sha"] for s in github.by("api", "/runs") if "head_sha" in s.query) == sorted(shas)
    assert len(github.by("api", "/artifacts/")) == len(published)  # one download each
    # the token went to the API only; the storage host was asked without it and answered
    assert {s.authorization for s in github.by("api")} == {f"Bearer {TOKEN}"}
    assert len(github.by("storage")) == len(published) and {s.authorization for s in github.by("storage")} == {None}
    # a culprit's end that was unpacked is built here and compared: the same binary, no warning
    assert builder.differ_from_clean([(published[0], builder.build(published[0]))])[0][published[0].sha] is False


def _zip_with(name: str, data: bytes, mode: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        info = zipfile.ZipInfo(name)
        info.external_attr = mode << 16
        zf.writestr(info, data)
    return buf.getvalue()


CASES = {
    "no-run": "has no successful run of build.yml for",
    "failed-run": "has no successful run of build.yml for",
    "other-sha": "has no successful run of build.yml for",
    "no-artifact": "has no artifact named bench-",
    "expired": "has expired",
    "digest": "but GitHub's digest says",
    "garbage": "not an archive that unpacks",
    "escape": "would land outside the checkout",
    "absolute": "would land outside the checkout",
    "symlink": "is a symbolic link",
    "no-glob": "matched no file",
    "no-token": f"no token: ${TOKEN_ENV} is not set (it needs actions:read)",
    "401": f"github:{REPO}: 401 Unauthorized — the token in ${TOKEN_ENV} is wrong or expired",
    "403": f"github:{REPO}: 403 Forbidden — the token needs actions:read",
    "rate-limit": "403 rate limited",
    "429": "429 rate limited after 3 attempts",
    "unreachable": "no answer from http://127.0.0.1:",
}


@pytest.mark.parametrize("case", CASES)
def test_each_failure_is_built_as_today_and_says_why(built, tmp_path, github: FakeActions, monkeypatch, case):
    tree, commits, records, benches = built
    c = commits[1]
    name, good = f"bench-{c.sha}", zip_of({"bench": benches[c.sha]})
    api_url = github.api_url
    match case:
        case "failed-run":
            github.run(c.sha, conclusion="failure")
        case "other-sha":  # a server that ignored head_sha: another commit's run is not this one's
            github.publish(commits[0].sha, zip_of({"bench": benches[commits[0].sha]}), name)
            github.runs[c.sha] = github.runs.pop(commits[0].sha)
        case "no-artifact":
            github.publish(c.sha, good, "perf-logs")
        case "expired":
            github.publish(c.sha, good, name, expired=True)
        case "digest":  # what is served is not what GitHub recorded: another commit's binary
            github.publish(c.sha, zip_of({"bench": benches[commits[4].sha]}), name, digest=hashlib.sha256(good).hexdigest())
        case "garbage":
            github.publish(c.sha, b"PK\x03\x04 not a zip at all", name)
        case "escape":
            github.publish(c.sha, zip_of({"../../outside": b"#!/bin/sh\n", "bench": benches[c.sha]}), name)
        case "absolute":
            github.publish(c.sha, zip_of({str(tmp_path / "outside"): b"#!/bin/sh\n", "bench": benches[c.sha]}), name)
        case "symlink":
            github.publish(c.sha, _zip_with("bench", b"/bin/sh", stat.S_IFLNK | 0o777), name)
        case "no-glob":
            github.publish(c.sha, zip_of({"README": b"the binary is elsewhere\n"}), name)
        case "no-token":
            monkeypatch.delenv(TOKEN_ENV)
        case "401":
            github.token = "another-token"
        case "403":
            github.fail = 403
        case "rate-limit":
            github.rate_limited = True
        case "429":
            github.fail = 429
        case "unreachable":
            with socket.socket() as s:  # a loopback port nobody listens on
                s.bind(("127.0.0.1", 0))
                api_url = f"http://127.0.0.1:{s.getsockname()[1]}"
    if case not in ("no-token", "401", "403", "rate-limit", "429", "unreachable", "no-run", "failed-run", "other-sha", "no-artifact", "expired"):
        assert github.artifacts  # the case published something that is then refused
    builder = _builder(tmp_path, tree.path, "w", _source(api_url))
    rec = builder.build(c)
    assert rec.ok and rec.how is BuildHow.CLEAN and CASES[case] in rec.note, rec.note
    assert "\n" not in rec.note and TOKEN not in rec.note
    assert rec.artifact == records[c.sha].artifact  # built here: the clean binary
    assert f"# {rec.note}: building it" in Path(rec.log_path).read_text()
    assert not (tmp_path / "outside").exists() and not (tmp_path / "w" / "outside").exists()
    assert {s.authorization for s in github.by("storage")} <= {None}


def test_the_search_asks_a_bounded_spread_and_stops_at_a_refusal(built, tmp_path, github: FakeActions, monkeypatch):
    tree, commits, _, benches = built
    shas = [c.sha for c in commits]
    for c in commits:
        github.publish(c.sha, zip_of({"bench": benches[c.sha]}), f"bench-{c.sha}")
    monkeypatch.setattr(prebuilt_github, "MAX_LOOKUPS", 3)
    builder = _builder(tmp_path, tree.path, "w", _source(github.api_url))
    assert builder.prebuilt_among(shas) == {shas[0], shas[2], shas[4]}  # the ends and the middle
    assert len(github.by("api", "/runs")) == 3 + 3  # a runs listing and an artifacts listing each
    github.fail = 403  # credentials that stop working: one refusal ends the asking
    fresh = _builder(tmp_path, tree.path, "w2", _source(github.api_url))
    before = len(github.seen)
    assert fresh.prebuilt_among(shas) == frozenset()
    assert len(github.seen) == before + 1
    monkeypatch.delenv(TOKEN_ENV)  # no token: GitHub is not asked at all
    assert _builder(tmp_path, tree.path, "w3", _source(github.api_url)).prebuilt_among(shas) == frozenset()
    assert len(github.seen) == before + 1


def _chain_benches(tmp_path: Path, tree) -> tuple[list[str], dict[str, bytes]]:
    repo = GitRepo(tree.path)
    chain = [tree.good, *repo.first_parent_chain(tree.good, tree.bad)]
    plain = _builder(tmp_path, tree.path, "publish", None)
    records = {sha: plain.build(repo.info(sha)) for sha in chain}
    return chain, {sha: (Path(r.checkout) / "bench").read_bytes() for sha, r in records.items() if r.ok}


def _recipe(api_url: str) -> str:
    return DEMO_RECIPE.replace("[build]\n", '[build]\nartifacts = ["bench"]\n' + recipe_table(api_url, TOKEN_ENV), 1)


def _builds(doc: dict) -> list[dict]:
    """The builds a bisection made (not found in the work dir), each with its commit."""
    return [{**c["build"], "commit": c["commit"]} for c in doc["commits"] if c["build"] and not c["build"]["cached"]]


def test_a_bisection_with_artifacts_for_every_other_commit_builds_less_and_names_the_same_culprit(make_tree, tmp_path, github: FakeActions):
    tree = make_tree(spec(commits=16, culprits=((9, 10),), broken=None, gpu_culprit=False))
    chain, benches = _chain_benches(tmp_path, tree)
    for sha in chain[1::2]:
        github.publish(sha, zip_of({"bench": benches[sha]}), f"bench-{sha}")
    for name in ("plain", "github"):
        (tmp_path / name).mkdir()
    _, plain = bisect_cli(tmp_path / "plain", tree, DEMO_RECIPE.replace("[build]\n", '[build]\nartifacts = ["bench"]\n', 1))
    _, got = bisect_cli(tmp_path / "github", tree, _recipe(github.api_url))
    assert [c["commit"] for c in got["culprits"]] == [c["commit"] for c in plain["culprits"]] == tree.culprits
    compiled = [b for b in _builds(got) if b["how"] != "prebuilt"]
    unpacked = [b for b in _builds(got) if b["how"] == "prebuilt"]
    assert unpacked and all(b["commit"] in chain[1::2] for b in unpacked)
    assert len(compiled) < len(_builds(plain)), (len(compiled), len(_builds(plain)))
    shared = set(plain["artifacts"]) & set(got["artifacts"])
    assert shared and all(plain["artifacts"][s] == got["artifacts"][s] for s in shared)  # the same binaries
    report = (tmp_path / "github" / "report.md").read_text()
    assert f"- builds: {len(compiled)} clean, {len(unpacked)} prebuilt" in report


def test_digests_that_differ_never_change_a_verdict(make_tree, tmp_path, github: FakeActions):
    """Every published artifact holds the other end's binary (the bad end's, or the good end's
    where the commit's own is the bad end's) under the digest of the honest zip: each is refused
    and built, and the bisection names the culprit it names without them."""
    tree = make_tree(spec(commits=8, culprits=((5, 10),), broken=None, gpu_culprit=False))
    chain, benches = _chain_benches(tmp_path, tree)
    for sha in chain[1::2]:
        honest = hashlib.sha256(zip_of({"bench": benches[sha]})).hexdigest()
        wrong = benches[tree.bad] if benches[sha] != benches[tree.bad] else benches[tree.good]
        github.publish(sha, zip_of({"bench": wrong}), f"bench-{sha}", digest=honest)
    (tmp_path / "poisoned").mkdir()
    _, got = bisect_cli(tmp_path / "poisoned", tree, _recipe(github.api_url))
    assert [c["commit"] for c in got["culprits"]] == tree.culprits
    builds = _builds(got)
    assert builds and all(b["how"] != "prebuilt" for b in builds)
    refused = [b for b in builds if b["commit"] in chain[1::2] and b["commit"] != tree.bad]
    assert refused and all("but GitHub's digest says" in b["note"] for b in refused), refused


def test_a_wrong_binary_under_a_matching_digest_is_named_by_the_ends_check(built, tmp_path, github: FakeActions):
    """GitHub's digest says only that the zip is what CI uploaded: another toolchain's (here:
    another commit's) binary unpacks, and the check of a culprit's end built here finds it."""
    tree, commits, records, benches = built
    c = commits[2]
    github.publish(c.sha, zip_of({"bench": benches[commits[0].sha] + b"\0"}), f"bench-{c.sha}")
    builder = _builder(tmp_path, tree.path, "w", _source(github.api_url))
    rec = builder.build(c)
    assert rec.how is BuildHow.PREBUILT and rec.artifact != records[c.sha].artifact
    assert builder.differ_from_clean([(c, rec)])[0][c.sha] is True


def test_the_documented_table_loads():
    docs = (Path(__file__).resolve().parent.parent / "docs" / "recipes.md").read_text()
    (block,) = [b.split("```", 1)[0] for b in docs.split("```toml\n")[1:] if "[build.prebuilt_github]" in b]
    text = 'schema = 1\nname = "docs"\n' + block + DEMO_RECIPE[DEMO_RECIPE.index("[[benchmark]]") :]
    r = parse_recipe(tomllib.loads(text), Path("recipes.md"))
    assert r.build.prebuilt_github == PrebuiltGithub("acme/kernels", "build.yml", "bench-{sha}")


def test_an_artifact_is_unpacked_from_files_in_the_scratch_dir_never_from_memory(tmp_path, github: FakeActions, monkeypatch):
    """The zip is written to a file in the build's scratch dir as it downloads; a zip of one tar
    has that tar copied out beside it and unpacked from there; none of it outlives the unpacking."""
    sha, binary = "ab" * 20, b"\x7fELF the binary CI built"
    inner = tar_gz({"bench": binary})
    github.publish(sha, zip_of({"bench.tar.gz": inner}, mode=0o644), f"bench-{sha}")
    seen: list[tuple[Path, bytes, list[str]]] = []
    real = prebuilt_github.unpack_tar

    def spy(archive: Path, into: Path) -> None:
        seen.append((archive, archive.read_bytes(), sorted(p.name for p in archive.parent.iterdir())))
        real(archive, into)

    monkeypatch.setattr(prebuilt_github, "unpack_tar", spy)
    checkout, scratch = tmp_path / "checkout", tmp_path / "work" / "scratch" / "prebuilt-key"
    checkout.mkdir()
    got = prebuilt_github.GithubArtifacts(_source(github.api_url), ("bench",)).unpack(sha, checkout, scratch)
    assert got == prebuilt_github.Unpacked(checked=True) and (checkout / "bench").read_bytes() == binary
    ((path, content, beside),) = seen
    assert path.parent == scratch and content == inner  # the tar, copied out whole
    assert beside == ["artifact.zip", "artifact.zip.tar", "tree"]  # the zip downloaded beside it
    assert not scratch.exists()  # all of it removed with the scratch dir


def test_a_zip_member_larger_than_the_bound_is_refused_and_leaves_nothing(tmp_path, monkeypatch):
    """A zip of one tar larger than MAX_ARCHIVE_BYTES: refused (its header says so), and nothing of
    it is left beside the zip."""
    zipped = tmp_path / "artifact.zip"
    zipped.write_bytes(zip_of({"bench.tar": tar_gz({"bench": random.Random(31).randbytes(16 << 10)})}))  # incompressible
    monkeypatch.setattr(prebuilt_github, "MAX_ARCHIVE_BYTES", 1000)
    (tmp_path / "tree").mkdir()
    with pytest.raises(ValueError, match="its files add up to more than"):
        prebuilt_github.unpack_zip(zipped, tmp_path / "tree")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["artifact.zip", "tree"] and not any((tmp_path / "tree").iterdir())
