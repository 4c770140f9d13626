"""A clearly stated planted regression in a real tree, for issue 31's larger build case.

    .venv/bin/python benchmarks/real/plant.py [--mirrors /work/.mirror] [--out /tmp/attrib-planted]

libgit2 (the `fetch` tool's snapshot, /work/.mirror/libgit2+libgit2) has no regression named by
its developers that our workload times, so one is planted, and said: the last 48 first-parent
commits of 0551dfd4a (main, 2026-05 to 2026-11) are written again as a linear history, each
with its own real tree, and a commit is inserted after the 30th that makes `git_hash_vec`
(src/util/hash.c, unchanged in that range) compute every digest a second time and compare
(the object ids are the same, each costs twice the hashing). Every commit after it carries the
same change on top of its own tree. Authors, dates and messages are copied, so the shas are
the same every time: the case `libgit2-planted` (cases.py) names them. Writes
OUT/libgit2-planted/repo (a bare repository sharing the mirror's objects) and prints good,
planted, bad.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

BASE = "0551dfd4ad989b6a3d5683c0d4cf326c6efef929"
COMMITS = 48  # first-parent commits after the good one
PLANT_AFTER = 30  # the planted commit follows the 30th of them
FILE = "src/util/hash.c"
ORIGINAL = """	error = git_hash_final(out, &ctx);

done:
	git_hash_ctx_cleanup(&ctx);

	return error;
}
"""
PLANTED = """	error = git_hash_final(out, &ctx);

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
PLANT_IDENTITY = ("attrib planted regression", "attrib@localhost", "2026-11-30T12:00:00+00:00")
PLANT_MESSAGE = "hash: compute every digest twice and compare (a planted regression: benchmarks/real/plant.py)\n"


def git(repo: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, input=stdin,
        env={**os.environ, **(env or {})},
    ).stdout.strip()  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--out", type=Path, default=Path("/tmp/attrib-planted"))
    args = ap.parse_args()
    repo = args.out / "libgit2-planted" / "repo"
    if not repo.exists():
        subprocess.run(
            ["git", "clone", "--quiet", "--bare", "--shared", str(args.mirrors / "libgit2+libgit2" / "repo"), str(repo)],
            check=True,
        )
    chain = git(repo, "rev-list", "--first-parent", "--reverse", "-n", str(COMMITS + 1), BASE).split()
    index = str(repo / "plant.index")
    parent, made = "", []
    for i, sha in enumerate(chain):
        steps = [(sha, i > PLANT_AFTER)]
        if i == PLANT_AFTER:
            steps.append(("", True))  # the planted commit, on the 30th's tree
        for original, planted in steps:
            tree = git(repo, "rev-parse", f"{original or chain[i]}^{{tree}}")
            if planted:
                text = git(repo, "show", f"{tree}:{FILE}") + "\n"
                if ORIGINAL not in text:
                    sys.exit(f"{FILE} at {chain[i][:10]}: the planted change does not apply")
                blob = git(repo, "hash-object", "-w", "--stdin", stdin=text.replace(ORIGINAL, PLANTED))
                env = {"GIT_INDEX_FILE": index}
                git(repo, "read-tree", tree, env=env)
                git(repo, "update-index", "--cacheinfo", f"100644,{blob},{FILE}", env=env)
                tree = git(repo, "write-tree", env=env)
            if original:
                fields = git(repo, "show", "-s", "--format=%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI", original).split("\0")
                message = git(repo, "show", "-s", "--format=%B", original) + "\n"
            else:
                fields = [*PLANT_IDENTITY, *PLANT_IDENTITY]
                message = PLANT_MESSAGE
            env = dict(zip(
                ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
                 "GIT_COMMITTER_DATE"), fields, strict=True,
            ))  # fmt: skip
            parent = git(repo, "commit-tree", tree, *(["-p", parent] if parent else []), env=env, stdin=message)
            made.append((parent, original))
    git(repo, "update-ref", "refs/heads/planted", parent)
    planted = next(new for new, original in made if not original)
    print(f"good {made[0][0]}\nplanted {planted}\nbad {parent}\ncommits after good {len(made) - 1}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
