"""Clearly stated planted regressions in real trees, for issue 31's larger build cases.

    .venv/bin/python benchmarks/real/plant.py [--tree libgit2|abseil]... [--mirrors /work/.mirror]
        [--out /tmp/attrib-planted]

Neither libgit2 nor abseil-cpp (the `fetch` tool's snapshots under MIRRORS) has a regression
named by its developers that a workload of ours times, so one is planted in each, and said.
For a tree (TREES): its last 48 first-parent commits before BASE are written again as a linear
history, each with its own real tree, and a commit is inserted after the 30th that makes one
function, in a file unchanged over that range, do its work twice and compare; every commit
after it carries the same change on top of its own tree. Authors, dates and messages are
copied, so the shas are the same every time: the cases `libgit2-planted` and `abseil-planted`
(cases.py) name them.

- libgit2 (0551dfd4a, main, 2026-05 to 2026-11): `git_hash_vec` (src/util/hash.c) computes
  every digest a second time and compares; the object ids are the same, each costs twice the
  hashing.
- abseil-cpp (926f1d05, master, 2026-08-13 to 08-22): `absl::StrCat(a, b)`
  (absl/strings/str_cat.cc) builds its result a second time and compares; the strings are the
  same, each costs a second allocation, copy and comparison.

Writes OUT/<tree>-planted/repo (a bare repository sharing the mirror's objects) and prints good,
planted, bad for each tree asked (libgit2 alone by default).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

COMMITS = 48  # first-parent commits after the good one
PLANT_AFTER = 30  # the planted commit follows the 30th of them


@dataclass(frozen=True)
class Plant:
    mirror: str  # owner+name under the mirror root
    base: str  # the last commit written again (the bad end's original)
    file: str  # unchanged over the range, so the same text is replaced at every commit
    original: str
    planted: str
    identity: tuple[str, str, str]  # name, email, date of the planted commit
    message: str


LIBGIT2_ORIGINAL = """	error = git_hash_final(out, &ctx);

done:
	git_hash_ctx_cleanup(&ctx);

	return error;
}
"""
LIBGIT2_PLANTED = """	error = git_hash_final(out, &ctx);

	if (error >= 0) {
		/* planted regression (attrib's benchmarks/real/plant.py): every digest twice */
		unsigned char again[GIT_HASH_MAX_SIZE];
		git_hash_ctx check;

		if ((error = git_hash_ctx_init(&check, algorithm)) < 0)
			goto done;
		for (i = 0; i < n && error >= 0; i++)
			error = git_hash_update(&check, vec[i].data, vec[i].len);
		if (error >= 0)
			error = git_hash_final(again, &check);
		git_hash_ctx_cleanup(&check);
		if (error >= 0 && memcmp(again, out, git_hash_size(algorithm)) != 0)
			error = -1;
	}

done:
	git_hash_ctx_cleanup(&ctx);

	return error;
}
"""
ABSEIL_ORIGINAL = """                                   out = Append(out, b);
                                   assert(out == begin + buf_size);
                                   return buf_size;
                                 });
  return result;
}
"""
ABSEIL_PLANTED = """                                   out = Append(out, b);
                                   assert(out == begin + buf_size);
                                   return buf_size;
                                 });
  // planted regression (attrib's benchmarks/real/plant.py): every result twice
  std::string again;
  absl::StringResizeAndOverwrite(again, static_cast<size_t>(result_size),
                                 [&a, &b](char* const begin, size_t buf_size) {
                                   Append(Append(begin, a), b);
                                   return buf_size;
                                 });
  if (again != result) ThrowStdLengthError("absl::StrCat: results differ");
  return result;
}
"""

TREES: dict[str, Plant] = {
    "libgit2": Plant(
        mirror="libgit2+libgit2",
        base="0551dfd4ad989b6a3d5683c0d4cf326c6efef929",
        file="src/util/hash.c",
        original=LIBGIT2_ORIGINAL,
        planted=LIBGIT2_PLANTED,
        identity=("attrib planted regression", "attrib@localhost", "2026-11-30T12:00:00+00:00"),
        message="hash: compute every digest twice and compare (a planted regression: benchmarks/real/plant.py)\n",
    ),
    "abseil": Plant(
        mirror="abseil+abseil-cpp",
        base="926f1d05a4f85663e4ca057f70f1a7f0a7d6b762",
        file="absl/strings/str_cat.cc",
        original=ABSEIL_ORIGINAL,
        planted=ABSEIL_PLANTED,
        # between the 30th commit (2026-08-19 14:55 -07:00) and the 31st (17:27), as if pushed then
        identity=("attrib planted regression", "attrib@localhost", "2026-08-19T16:00:00-07:00"),
        message="StrCat(a, b): build every result twice and compare (a planted regression: benchmarks/real/plant.py)\n",
    ),
}


def git(repo: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, input=stdin,
        env={**os.environ, **(env or {})},
    ).stdout.strip()  # fmt: skip


def plant(tree: Plant, mirrors: Path, repo: Path) -> list[tuple[str, str]]:
    """Writes the linear history with the planted commit into `repo`; (new sha, original sha or
    "" for the planted one) in order, good first."""
    if not repo.exists():
        subprocess.run(
            ["git", "clone", "--quiet", "--bare", "--shared", str(mirrors / tree.mirror / "repo"), str(repo)],
            check=True,
        )
    chain = git(repo, "rev-list", "--first-parent", "--reverse", "-n", str(COMMITS + 1), tree.base).split()
    index = str(repo / "plant.index")
    parent, made = "", []
    for i, sha in enumerate(chain):
        steps = [(sha, i > PLANT_AFTER)]
        if i == PLANT_AFTER:
            steps.append(("", True))  # the planted commit, on the 30th's tree
        for original, planted in steps:
            tree_sha = git(repo, "rev-parse", f"{original or chain[i]}^{{tree}}")
            if planted:
                text = git(repo, "show", f"{tree_sha}:{tree.file}") + "\n"
                if tree.original not in text:
                    sys.exit(f"{tree.file} at {chain[i][:10]}: the planted change does not apply")
                blob = git(repo, "hash-object", "-w", "--stdin", stdin=text.replace(tree.original, tree.planted))
                env = {"GIT_INDEX_FILE": index}
                git(repo, "read-tree", tree_sha, env=env)
                git(repo, "update-index", "--cacheinfo", f"100644,{blob},{tree.file}", env=env)
                tree_sha = git(repo, "write-tree", env=env)
            if original:
                fields = git(repo, "show", "-s", "--format=%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI", original).split(
                    "\0"
                )
                message = git(repo, "show", "-s", "--format=%B", original) + "\n"
            else:
                fields = [*tree.identity, *tree.identity]
                message = tree.message
            env = dict(zip(
                ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
                 "GIT_COMMITTER_DATE"), fields, strict=True,
            ))  # fmt: skip
            parent = git(repo, "commit-tree", tree_sha, *(["-p", parent] if parent else []), env=env, stdin=message)
            made.append((parent, original))
    git(repo, "update-ref", "refs/heads/planted", parent)
    return made


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", action="append", choices=tuple(TREES), help="libgit2 when none is named")
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--out", type=Path, default=Path("/tmp/attrib-planted"))
    args = ap.parse_args()
    names = args.tree or ["libgit2"]
    for name in names:
        made = plant(TREES[name], args.mirrors, args.out / f"{name}-planted" / "repo")
        planted = next(new for new, original in made if not original)
        header = f"{name}\n" if len(names) > 1 else ""
        print(f"{header}good {made[0][0]}\nplanted {planted}\nbad {made[-1][0]}\ncommits after good {len(made) - 1}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
