"""Trees whose build reads a dependency pinned as a real git submodule (or a pin file): a
"compiler" repository and a "kernel" superproject that rolls its pin. Used by the tests and by
benchmarks/dependency_rolls.py.

The compiler's cost.txt is the kernel's cost: the build copies it (and a nested submodule's,
summed) into out/cost, and the benchmark prints that cost with uniform noise of a known
standard deviation (`noise_pct`), so the step a commit makes is exactly what it writes. A cost
of "broken" fails the build. Gitlinks are written with `git update-index --cacheinfo 160000`
and a .gitmodules of file:// URLs: what `git submodule add` commits, without cloning each pin.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

BUILD_SH = """#!/bin/sh
# The kernel's build: its cost is what every pinned dependency's cost.txt says, summed.
set -e
mkdir -p out
total=0
for f in $(find third_party -name cost.txt | sort); do
  c=$(cat "$f")
  case "$c" in ''|*[!0-9]*) echo "$f: not a cost: $c" >&2; exit 1;; esac
  total=$((total + c))
done
test "$total" -gt 0 || { echo "no dependency checked out" >&2; exit 1; }
echo "$total" > out/cost
"""

BENCH_SH = """#!/bin/sh
# One sample per repetition: the built cost with uniform noise of sd (the file noise) %.
reps=${1:-10}
awk -v c="$(cat out/cost)" -v n="$reps" -v s="$(od -An -N4 -tu4 /dev/urandom)" -v pct="$(cat noise)" \\
  'BEGIN { srand(s); for (i = 0; i < n; i++) printf "%.6f\\n", c * (1 + pct / 100 * 3.4641 * (rand() - 0.5)) }'
"""

RECIPE = """schema = 1
name = "kernel"

[build]
commands = ["sh build.sh"]
timeout_s = 120

[[benchmark]]
name = "cost"
runner = "command"
command = ["sh", "bench.sh", "{{reps}}"]
unit = "ms"
direction = "lower"
timeout_s = 60
reps = 10
min_change_pct = {min_change_pct}
"""


def git(repo: Path, *args: str) -> str:
    env_args = ["-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "protocol.file.allow=always"]
    return subprocess.run(["git", *env_args, *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@dataclass
class Repo:
    path: Path
    commits: list[str] = field(default_factory=list)

    @classmethod
    def init(cls, path: Path) -> Repo:
        path.mkdir(parents=True)
        git(path, "init", "-q", "-b", "main")
        return cls(path)

    @property
    def url(self) -> str:
        return f"file://{self.path}"

    def commit(
        self, message: str, files: dict[str, str] | None = None, links: dict[str, tuple[Repo, str]] | None = None,
        relative: bool = False,
    ) -> str:
        """One commit writing `files` and pinning `links` ({path: (repository, commit)});
        `relative`: .gitmodules says ../<name> (resolved against the repository's own URL)."""
        files, links = files or {}, links or {}
        for name, text in files.items():
            (self.path / name).parent.mkdir(parents=True, exist_ok=True)
            (self.path / name).write_text(text)
            git(self.path, "add", name)
        for path, (repo, sha) in links.items():
            git(self.path, "config", "-f", ".gitmodules", f"submodule.{path}.path", path)
            url = f"../{repo.path.name}" if relative else repo.url
            git(self.path, "config", "-f", ".gitmodules", f"submodule.{path}.url", url)
            git(self.path, "add", ".gitmodules")
            git(self.path, "update-index", "--add", "--cacheinfo", f"160000,{sha},{path}")
        git(self.path, "commit", "-q", "--allow-empty", "-m", message)
        self.commits.append(git(self.path, "rev-parse", "HEAD"))
        return self.commits[-1]


def dependency(path: Path, costs: list[str], links: list[dict[str, tuple[Repo, str]]] | None = None) -> Repo:
    """A dependency with one commit per cost (cost.txt), each pinning links[i] if given."""
    repo = Repo.init(path)
    for i, cost in enumerate(costs):
        repo.commit(f"compiler change {i}", {"cost.txt": cost + "\n", "notes.txt": f"revision {i}\n"}, (links or [{}] * len(costs))[i])
    return repo


def kernel(path: Path, noise_pct: float, pins: list[dict[str, tuple[Repo, str]]], relative: bool = False) -> Repo:
    """The superproject: commit i pins pins[i] (an empty dict: churn, pins unchanged)."""
    repo = Repo.init(path)
    base = {"build.sh": BUILD_SH, "bench.sh": BENCH_SH, "noise": f"{noise_pct}\n"}
    for i, links in enumerate(pins):
        # a roll changes the pins only, as a roll commit does
        files = {**base, "README": f"kernel revision {i}\n"} if i == 0 else {} if links else {"README": f"kernel revision {i}\n"}
        repo.commit(f"kernel change {i}" if not links or i == 0 else f"roll {', '.join(links)}", files, links, relative)
    return repo


def recipe_text(min_change_pct: float = 3.0) -> str:
    return RECIPE.format(min_change_pct=min_change_pct)


@dataclass(frozen=True)
class Family:
    """One tree of a family, and what a bisection of good..bad must end with: `chain`, the roll
    in the kernel then the commit in each dependency below it; `ambiguous`, the untestable
    commits the innermost may be ambiguous with; `relation`, how the roll moves the pin."""

    name: str
    kernel: Repo
    good: str
    bad: str
    chain: tuple[str, ...]
    n_super: int
    n_dep: int
    ambiguous: tuple[str, ...] = ()
    relation: str = "forward"
    recipe_extra: str = ""  # appended to the recipe: a [[dependency]] table


def _pins(n_super: int, roll: int, first: dict[str, tuple[Repo, str]], rolled: dict[str, tuple[Repo, str]]):
    pins: list[dict[str, tuple[Repo, str]]] = [{} for _ in range(n_super)]
    pins[0], pins[roll] = first, rolled
    return pins


def _costs(n: int, culprit: int, before: int = 100, step: int = 6, broken: tuple[int, ...] = ()) -> list[str]:
    return ["broken" if i in broken else str(before + step if i >= culprit else before) for i in range(n)]


def family(
    name: str, root: Path, n_super: int = 12, n_dep: int = 16, noise_pct: float = 1.0, at: float = 0.6, relative: bool = False
) -> Family:
    """The families of benchmarks/dependency_rolls.py (and the tests): the kernel rolls its
    compiler at commit `roll` from the compiler's first commit to its last; the compiler's step
    is at `culprit`."""
    roll, culprit = max(1, int(n_super * at)), max(1, int(n_dep * at))
    path = "third_party/compiler"
    if name == "roll":  # `relative`: the .gitmodules URL is ../compiler
        c = dependency(root / "compiler", _costs(n_dep, culprit))
        pins = _pins(n_super, roll, {path: (c, c.commits[0])}, {path: (c, c.commits[-1])})
        k = kernel(root / "kernel", noise_pct, pins, relative)
        return Family(name, k, k.commits[0], k.commits[-1], (k.commits[roll], c.commits[culprit]), n_super, n_dep)
    if name == "two-rolled":  # the docs dependency rolls in the same commit and changes nothing
        c = dependency(root / "compiler", _costs(n_dep, culprit))
        d = dependency(root / "docs", ["0"] * n_dep)
        first = {path: (c, c.commits[0]), "third_party/docs": (d, d.commits[0])}
        rolled = {path: (c, c.commits[-1]), "third_party/docs": (d, d.commits[-1])}
        k = kernel(root / "kernel", noise_pct, _pins(n_super, roll, first, rolled))
        return Family(name, k, k.commits[0], k.commits[-1], (k.commits[roll], c.commits[culprit]), n_super, n_dep)
    if name == "nested":  # the compiler rolls its llvm once, and the step is in llvm
        llvm = dependency(root / "llvm", _costs(n_dep, culprit, before=50))
        links = [{"llvm": (llvm, llvm.commits[0 if i < n_dep // 2 else -1])} for i in range(n_dep)]
        c = dependency(root / "compiler", ["100"] * n_dep, links)
        k = kernel(root / "kernel", noise_pct, _pins(n_super, roll, {path: (c, c.commits[0])}, {path: (c, c.commits[-1])}))
        chain = (k.commits[roll], c.commits[n_dep // 2], llvm.commits[culprit])
        return Family(name, k, k.commits[0], k.commits[-1], chain, n_super, n_dep)
    if name == "pin-file":  # no submodule: ci/compiler.txt holds the commit, as PyTorch's triton.txt does
        c = dependency(root / "compiler", _costs(n_dep, culprit))
        k = Repo.init(root / "kernel")
        files = {"build.sh": BUILD_SH, "bench.sh": BENCH_SH, "noise": f"{noise_pct}\n"}
        for i in range(n_super):
            pin = c.commits[-1] if i >= roll else c.commits[0]
            if i in (0, roll):
                k.commit("start" if i == 0 else "roll the compiler pin", {**(files if i == 0 else {}), "ci/compiler.txt": pin + "\n"})
            else:
                k.commit(f"kernel change {i}", {"README": f"kernel revision {i}\n"})
        extra = f'\n[[dependency]]\nrepository = "{c.url}"\npin = "ci/compiler.txt"\npath = "third_party/compiler"\n'
        chain = (k.commits[roll], c.commits[culprit])
        return Family(name, k, k.commits[0], k.commits[-1], chain, n_super, n_dep, recipe_extra=extra)
    if name == "broken-inside":  # the compiler commit just before the step does not build
        c = dependency(root / "compiler", _costs(n_dep, culprit, broken=(culprit - 1,)))
        k = kernel(root / "kernel", noise_pct, _pins(n_super, roll, {path: (c, c.commits[0])}, {path: (c, c.commits[-1])}))
        chain = (k.commits[roll], c.commits[culprit])
        return Family(name, k, k.commits[0], k.commits[-1], chain, n_super, n_dep, ambiguous=(c.commits[culprit - 1],))
    if name == "backwards":  # the kernel pinned a newer, faster compiler and rolls back to an old one
        c = dependency(root / "compiler", _costs(n_dep, culprit, before=106, step=-6))
        k = kernel(root / "kernel", noise_pct, _pins(n_super, roll, {path: (c, c.commits[-1])}, {path: (c, c.commits[0])}))
        return Family(name, k, k.commits[0], k.commits[-1], (k.commits[roll],), n_super, n_dep, relation="backward")
    if name == "unrelated":  # the roll pins a commit of another history in the same repository
        c = dependency(root / "compiler", _costs(n_dep, n_dep))
        git(c.path, "checkout", "-q", "--orphan", "rewrite")
        c.commit("compiler rewritten", {"cost.txt": "106\n"})
        k = kernel(root / "kernel", noise_pct, _pins(n_super, roll, {path: (c, c.commits[0])}, {path: (c, c.commits[-1])}))
        return Family(name, k, k.commits[0], k.commits[-1], (k.commits[roll],), n_super, n_dep, relation="unrelated")
    raise ValueError(f"no family {name!r}")


FAMILIES = ("roll", "two-rolled", "nested", "pin-file", "broken-inside", "backwards", "unrelated")


def chain_of(culprit: dict) -> tuple[list[str], list[dict]]:
    """(the shas a result's culprit names, roll then each commit inside; the roll records
    walked), following at each level the first roll that names a commit."""
    shas, rolls = [culprit["commit"]], []
    while culprit.get("rolls"):
        roll = next((r for r in culprit["rolls"] if r["culprits"]), culprit["rolls"][0])
        rolls.append(roll)
        if not roll["culprits"]:
            break
        culprit = roll["culprits"][0]
        shas.append(culprit["commit"])
    return shas, rolls
