"""gitrepo.canonical_git_url: one spelling per repository (issue 33, point 6). The daemon keys
its deduplication and its mirrors on it (tests/test_daemon_careless.py checks that against a
real daemon with file:// spellings); here the spellings no local test can fetch (https, ssh)."""

from __future__ import annotations

import pytest

from attrib.gitrepo import canonical_git_url, is_git_url

SAME = {
    "https://github.com/acme/kernels": [
        "https://github.com/acme/kernels.git", "https://GitHub.com/acme/kernels/", "https://github.com:443/acme/kernels",
        "https://github.com//acme/./kernels", "https://github.com/acme/kernels.git/", "https://github.com/acme/%6Bernels",
    ],
    "ssh://git@github.com/acme/kernels": ["ssh://git@github.com:22/acme/kernels.git", "ssh://git@GITHUB.com/acme//kernels/"],
    "git@github.com:acme/kernels": ["git@github.com:acme/kernels.git", "git@GitHub.com:acme/kernels/", "git@github.com:./acme/kernels"],
    "file:///srv/kernels": ["file:///srv/kernels/", "file://localhost/srv/kernels", "file:///srv/kernels/.git", "file:////srv/./kernels"],
}  # fmt: skip
DIFFERENT = [
    ("https://github.com/acme/kernels", "https://github.com/acme/kernels2"),
    ("https://github.com/acme/kernels", "https://github.com:8443/acme/kernels"),
    ("https://github.com/acme/kernels", "https://alice@github.com/acme/kernels"),  # kept: who fetches matters
    ("file:///srv/kernels", "file:///srv/kernels.git"),  # two directories on a disk
    ("file:///srv/x/../kernels", "file:///srv/kernels"),  # through a link, .. need not go back
    ("git@github.com:acme/kernels", "git@github.com:/acme/kernels"),  # relative to home, or not
    ("ssh://git@github.com/acme/kernels", "ssh://deploy@github.com/acme/kernels"),
]


@pytest.mark.parametrize(("canonical", "spellings"), SAME.items())
def test_spellings_of_one_repository_are_one_url(canonical: str, spellings: list[str]):
    assert canonical_git_url(canonical) == canonical
    for url in spellings:
        assert is_git_url(url), url
        assert canonical_git_url(url) == canonical, url


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_different_repositories_stay_apart(a: str, b: str):
    assert canonical_git_url(a) != canonical_git_url(b)


def test_canonical_is_idempotent_and_still_a_git_url():
    for canonical, spellings in SAME.items():
        for url in [canonical, *spellings]:
            once = canonical_git_url(url)
            assert canonical_git_url(once) == once and is_git_url(once)


def test_submodule_mirrors_key_on_the_canonical_url(tmp_path):
    from attrib.workdir import WorkDir

    wd = WorkDir(tmp_path)
    spellings = ["https://github.com/acme/lib.git", "https://github.com/acme/lib/", "https://GITHUB.com:443/acme/lib"]
    assert len({wd.submodule_mirror(u) for u in spellings}) == 1
    assert len({wd.submodule_lock(u) for u in spellings}) == 1
    assert wd.submodule_mirror("../lib") != wd.submodule_mirror("../lib2")  # a path is keyed as written
