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

    def commit(self, message: str, files: dict[str, str] | None = None, links: dict[str, tuple[Repo, str]] | None = None) -> str:
        """One commit writing `files` and pinning `links` ({path: (repository, commit)})."""
        files, links = files or {}, links or {}
        for name, text in files.items():
            (self.path / name).parent.mkdir(parents=True, exist_ok=True)
            (self.path / name).write_text(text)
            git(self.path, "add", name)
        for path, (repo, sha) in links.items():
            git(self.path, "config", "-f", ".gitmodules", f"submodule.{path}.path", path)
            git(self.path, "config", "-f", ".gitmodules", f"submodule.{path}.url", repo.url)
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


def kernel(path: Path, noise_pct: float, pins: list[dict[str, tuple[Repo, str]]]) -> Repo:
    """The superproject: commit i pins pins[i] (an empty dict: churn, pins unchanged)."""
    repo = Repo.init(path)
    base = {"build.sh": BUILD_SH, "bench.sh": BENCH_SH, "noise": f"{noise_pct}\n"}
    for i, links in enumerate(pins):
        files = {**base, "README": f"kernel revision {i}\n"} if i == 0 else {"README": f"kernel revision {i}\n"}
        repo.commit(f"kernel change {i}" if not links or i == 0 else f"roll {', '.join(links)}", files, links)
    return repo


def recipe_text(min_change_pct: float = 3.0) -> str:
    return RECIPE.format(min_change_pct=min_change_pct)
