"""The sample kernel tree behind `attrib demo`, also used by the end-to-end tests.

It writes a real git repository whose benchmark is a real C program, compiled with cc and
timed with clock_gettime: a dependent xorshift chain, so the compiler cannot shortcut it and
its run time is proportional to the work knob in params.h. A culprit raises that knob (the
slowdown is real CPU work, not a sleep); a broken stretch leaves a syntax error in util.c for
a few commits; churn touches docs and unrelated code; a merge brings a side branch in.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from attrib.shipped import Shipped, shipped_dir

# The recipes ship with attrib (recipes/ at the top level): one copy, read by the demo and by users.
RECIPES_DIR = shipped_dir(Shipped.RECIPES)
DEMO_RECIPE = (RECIPES_DIR / "demo-cpu.toml").read_text()
DEMO_CUPY_RECIPE = (RECIPES_DIR / "demo-cupy.toml").read_text()

# The kernel library's tuning header. The planted culprit drops the padding: each shared-memory
# row of the 16-bit tiles becomes 64 bytes, so the mma fragment loads of rows g and g+2 hit
# the same banks (4-way conflicts) and 2 KiB of shared memory per block is "saved".
GEMM_TILE_H = """#ifndef DEMO_GEMM_TILE_CUH
#define DEMO_GEMM_TILE_CUH
/* Shared-memory row padding of the GEMM's 64x32 16-bit tiles, in elements. */
#define SMEM_PAD {pad}
#endif
"""

BENCH_C = r"""/* One sample per repetition: CPU seconds spent in a dependent xorshift chain. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "params.h"

unsigned long util_checksum(unsigned long x);

static double seconds(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The process's CPU time, not the wall clock: on a shared virtual machine the time the host
   takes the CPU away (steal) is not this loop's cost, and it was half the spread of the wall
   clock's paired rounds (measured 2026-12-01: sd 3.6 % against 6.5-8.4 %). */
static double now(void) { return seconds(CLOCK_PROCESS_CPUTIME_ID); }

static unsigned long chain(long n, unsigned long x) {
    for (long i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 10;
    long work = (long)WORK_BASE * WORK_PCT / 100;
    unsigned long sink = 0;
    srand((unsigned)(seconds(CLOCK_MONOTONIC) * 1e6));
    if (STATED_NOISE_PCT > 0) {
        /* Samples drawn from a stated distribution instead of timed: the work level (1 ms at
           100 %), log-normal with this sd in %: for tests whose verdict must not depend on
           the machine's load. */
        for (int r = 0; r < reps; r++) {
            double u1 = (rand() + 1.0) / (RAND_MAX + 2.0), u2 = (rand() + 1.0) / (RAND_MAX + 2.0);
            double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
            printf("%.9f\n", 1e-3 * WORK_PCT / 100.0 * exp(STATED_NOISE_PCT / 100.0 * z));
        }
        fprintf(stderr, "checksum %lu\n", util_checksum(sink));
        return 0;
    }
    for (int r = -1; r < reps; r++) {  /* r = -1 is a warm-up */
        double t0 = now();
        sink += chain(work, 88172645463325252UL + (unsigned long)r);
        /* Optional bimodal interference: a fraction of repetitions does extra work. */
        if (INTERFERE_PCT > 0 && rand() % 100 < INTERFERE_PCT)
            sink += chain(work * INTERFERE_EXTRA_PCT / 100, (unsigned long)r);
        double dt = now() - t0;
        if (r >= 0) printf("%.9f\n", dt);
    }
    fprintf(stderr, "checksum %lu\n", util_checksum(sink));
    return 0;
}
"""

UTIL_C = """/* Unrelated helper code: churn lands here. revision {rev} */
unsigned long util_checksum(unsigned long x) {{
    return x ^ 0x9e3779b97f4a7c15UL;
}}
"""

MAKEFILE = """CC ?= cc
CFLAGS ?= -O2

bench: bench.c util.c params.h
\t$(CC) $(CFLAGS) -o bench bench.c util.c -lm
"""

PARAMS_H = """#ifndef PARAMS_H
#define PARAMS_H
#define WORK_BASE {work_base}L
#define WORK_PCT {work_pct}
#define INTERFERE_PCT {interfere_pct}
#define INTERFERE_EXTRA_PCT {interfere_extra_pct}
#define STATED_NOISE_PCT {stated_noise_pct}
#endif
"""

AUTHORS = (
    ("Ada Kernel", "ada@example.com"),
    ("Grace Tile", "grace@example.com"),
    ("Linus Warp", "linus@example.com"),
    ("Edsger Block", "edsger@example.com"),
)

CHURN_SUBJECTS = (
    "docs: clarify the tuning notes",
    "util: tidy the checksum helper",
    "docs: add a changelog entry",
    "build: comment the makefile",
    "util: rename a local",
    "docs: fix a typo",
)


@dataclass(frozen=True)
class TreeSpec:
    """What to plant. Indices count commits after the root commit (1 = first commit after it)."""

    commits: int = 64
    culprits: tuple[tuple[int, int], ...] = ((41, 10),)  # (index, slowdown in % of base work)
    broken: tuple[int, int] | None = (30, 35)  # commits in [start, end) fail to build
    merge_at: int | None = None  # index on the main line of a --no-ff merge of a side branch
    side_commits: int = 4  # commits on that side branch
    side_culprit: tuple[int, int] | None = None  # (index on the side branch, slowdown %)
    work_base: int = 2_000_000  # about 2 ms per repetition on a current x86 core
    interfere_pct: int = 0  # % of repetitions that do extra work (bimodal interference)
    interfere_extra_pct: int = 30
    # > 0: the benchmark prints samples drawn from a stated distribution (log-normal around its
    # work level, this sd in %) instead of timing itself: a verdict that cannot depend on load
    stated_noise_pct: float = 0.0
    seed: int = 0
    # the first culprit also drops the GEMM tile padding: the GPU demo's culprit, same commit
    gpu_culprit: bool = True


@dataclass
class GeneratedTree:
    path: Path
    good: str
    bad: str
    culprits: list[str] = field(default_factory=list)  # shas, in history order
    broken: list[str] = field(default_factory=list)
    merge: str | None = None


class _Writer:
    def __init__(self, path: Path, spec: TreeSpec) -> None:
        self.path = path
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.tick = 1_700_000_000
        self.work_pct = 100
        self.retiled = False

    def git(self, *args: str, env: dict[str, str] | None = None) -> str:
        ident = {"GIT_AUTHOR_NAME": "attrib demo", "GIT_AUTHOR_EMAIL": "demo@example.com"}
        ident |= {"GIT_COMMITTER_NAME": "attrib demo", "GIT_COMMITTER_EMAIL": "demo@example.com"}
        full = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", **ident, **(env or {})}
        out = subprocess.run(["git", *args], cwd=self.path, env=full, check=True, capture_output=True, text=True)
        return out.stdout.strip()

    def write(self, name: str, text: str) -> None:
        (self.path / name).write_text(text)

    def params(self) -> None:
        s = self.spec
        self.write(
            "params.h",
            PARAMS_H.format(
                work_base=s.work_base,
                work_pct=self.work_pct,
                interfere_pct=s.interfere_pct,
                interfere_extra_pct=s.interfere_extra_pct,
                stated_noise_pct=s.stated_noise_pct,
            ),
        )

    def commit(self, subject: str) -> str:
        self.tick += 3600
        name, email = AUTHORS[self.rng.randrange(len(AUTHORS))]
        date = f"{self.tick} +0000"
        env = {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
            "GIT_COMMITTER_DATE": date,
        }
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", subject, env=env)
        return self.git("rev-parse", "HEAD")

    def churn(self, i: int, keep_util: bool = False) -> str:
        subject = CHURN_SUBJECTS[self.rng.randrange(len(CHURN_SUBJECTS))]
        if keep_util and subject.startswith("util"):
            subject = "docs: note the work in progress"  # do not repair a planted build break
        if subject.startswith("docs"):
            notes = self.path / "NOTES.md"
            notes.write_text(notes.read_text() + f"- note {i}: {self.rng.random():.6f}\n")
        elif subject.startswith("build"):
            self.write("Makefile", MAKEFILE + f"# revision {i}\n")
        else:
            self.write("util.c", UTIL_C.format(rev=i))
        return self.commit(f"{subject} (#{i})")

    def slowdown(self, pct: int, i: int) -> str:
        self.work_pct += pct
        self.params()
        if self.spec.gpu_culprit and not self.retiled:
            self.retiled = True
            self.write("include/demo/gemm_tile.cuh", GEMM_TILE_H.format(pad=0))
            return self.commit(
                f"kernel: pack the GEMM smem tiles (no padding, 2 KiB less per block); deepen the hash chain by {pct} % (#{i})"
            )
        return self.commit(f"kernel: deepen the hash chain by {pct} % for better mixing (#{i})")


def generate_tree(path: Path, spec: TreeSpec = TreeSpec()) -> GeneratedTree:
    """Write the repository at `path` (created; must not exist or be empty) and return its truth."""
    path.mkdir(parents=True, exist_ok=True)
    w = _Writer(path, spec)
    w.git("init", "-q", "-b", "main")
    w.write("bench.c", BENCH_C)
    w.write("util.c", UTIL_C.format(rev=0))
    w.write("Makefile", MAKEFILE)
    w.write("NOTES.md", "# Tuning notes\n")
    w.write(".gitignore", "bench\n")
    (path / "include" / "demo").mkdir(parents=True, exist_ok=True)
    w.write("include/demo/gemm_tile.cuh", GEMM_TILE_H.format(pad=8))
    w.params()
    tree = GeneratedTree(path=path, good=w.commit("initial kernel and benchmark"), bad="")
    culprits = dict(spec.culprits)
    broken_from, broken_to = spec.broken or (0, 0)
    for i in range(1, spec.commits + 1):
        if i == broken_from:
            w.write("util.c", UTIL_C.format(rev=i) + "this line does not compile\n")
            sha = w.commit(f"util: start the checksum rewrite (#{i})")
        elif i == broken_to:
            w.write("util.c", UTIL_C.format(rev=i))
            if i in culprits:  # the fix also slows the kernel: the culprit hides behind the break
                sha = w.slowdown(culprits[i], i)
                tree.culprits.append(sha)
            else:
                sha = w.commit(f"util: finish the checksum rewrite, builds again (#{i})")
        elif i in culprits:
            sha = w.slowdown(culprits[i], i)
            tree.culprits.append(sha)
        elif i == spec.merge_at:
            sha = _merge_side_branch(w, spec, tree, i)
        else:
            sha = w.churn(i, keep_util=broken_from <= i < broken_to)
        if broken_from <= i < broken_to:
            tree.broken.append(sha)
    tree.bad = w.git("rev-parse", "HEAD")
    return tree


def _merge_side_branch(w: _Writer, spec: TreeSpec, tree: GeneratedTree, i: int) -> str:
    """A side branch forked one commit back, with its own commits, merged with --no-ff."""
    w.git("checkout", "-q", "-b", f"topic-{i}", "HEAD~1")
    main_pct = w.work_pct
    side_pct = _work_pct_at(w)
    w.work_pct = side_pct
    for j in range(1, spec.side_commits + 1):
        if spec.side_culprit and spec.side_culprit[0] == j:
            tree.culprits.append(w.slowdown(spec.side_culprit[1], i * 100 + j))
        else:
            w.write(f"side_{j}.md", f"side change {j}\n")
            w.commit(f"topic: side change {j} (#{i}.{j})")
    side_extra = w.work_pct - side_pct
    w.git("checkout", "-q", "main")
    w.git("merge", "-q", "--no-ff", "--no-commit", "-X", "ours", f"topic-{i}", env={"GIT_EDITOR": "true"})
    w.work_pct = main_pct + side_extra
    w.params()  # the merge resolution keeps both lines' work
    tree.merge = w.commit(f"Merge branch 'topic-{i}' (#{i})")
    return tree.merge


def _work_pct_at(w: _Writer) -> int:
    text = (w.path / "params.h").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("#define WORK_PCT"))
    return int(line.split()[-1])


# A kernel suite in one process: each run prints `name value` lines, REPS per kernel, each its
# cost in kernels.json times exp(noise), the noise Gaussian in log space with a known sd, drawn
# fresh in every process (a synthetic measurement, so the noise is exactly what was asked for).
GROUP_BENCH_PY = """import json, math, random
costs = json.load(open("kernels.json"))
rng = random.Random()
for _ in range({reps}):
    for name, cost in costs.items():
        print(name, cost * math.exp(rng.gauss(0.0, {noise})))
"""
GROUP_RECIPE = """schema = 1
name = "kernel-suite"
[build]
commands = [{build}]
[[benchmark]]
name = "suite"
runner = "command"
command = ["python3", "bench.py"]
unit = "ms"
reps = {reps}
adapt_reps = false
min_change_pct = {min_change}
names = [{names}]
"""


@dataclass
class GroupTree:
    path: Path
    recipe: Path
    good: str
    bad: str
    culprits: dict[str, tuple[str, ...]]  # culprit sha -> the kernels it slowed, in history order


def generate_group_tree(
    path: Path,
    kernels: int,
    commits: int,
    culprits: tuple[tuple[int, tuple[int, ...], float], ...],
    *,
    noise: float = 0.01,
    reps: int = 10,
    min_change_pct: float = 2.0,
    seed: int = 0,
    build_seconds: float = 0.0,
) -> GroupTree:
    """A real git repository of `commits` commits after the root whose benchmark measures
    `kernels` kernels (k00, k01, ...) in one process (GROUP_BENCH_PY) with per-sample noise of sd
    `noise` (log space), and its recipe beside it (GROUP_RECIPE, path/../<name>.toml). Each culprit
    (index, kernel indices, factor) multiplies those kernels' costs by the factor at that commit;
    every other commit touches a notes file. `build_seconds` > 0: the recipe's build also runs
    `sleep <build_seconds>` after the py_compile, so each build takes about that much more real
    wall time (idle, not CPU: a stand-in for a slow build; 0 leaves the recipe as it was)."""
    if not (build_seconds >= 0 and math.isfinite(build_seconds)):
        raise ValueError(f"build_seconds must be a finite number >= 0, not {build_seconds!r}")
    path.mkdir(parents=True)
    w = _Writer(path, TreeSpec(seed=seed))
    rng = random.Random(seed)
    names = [f"k{i:02d}" for i in range(kernels)]
    build = ['"python3 -m py_compile bench.py"'] + ([f'"sleep {build_seconds:g}"'] if build_seconds > 0 else [])
    costs = {n: round(rng.uniform(1.0, 5.0), 3) for n in names}
    w.git("init", "-q", "-b", "main")
    w.write("bench.py", GROUP_BENCH_PY.format(reps=reps, noise=noise))
    w.write("kernels.json", json.dumps(costs, indent=1))
    w.write("notes.txt", "0\n")
    good = w.commit("kernel suite")
    planted = {i: (ks, f) for i, ks, f in culprits}
    truth: dict[str, tuple[str, ...]] = {}
    for i in range(1, commits + 1):
        if i in planted:
            ks, factor = planted[i]
            for k in ks:
                costs[names[k]] = round(costs[names[k]] * factor, 6)
            w.write("kernels.json", json.dumps(costs, indent=1))
            truth[w.commit(f"tune launch heuristics ({len(ks)} kernels)")] = tuple(names[k] for k in ks)
        else:
            w.write("notes.txt", f"{i}\n")
            w.commit(f"notes {i}")
    recipe = path.parent / f"{path.name}.toml"
    recipe.write_text(
        GROUP_RECIPE.format(
            build=", ".join(build), reps=reps, min_change=min_change_pct, names=", ".join(f'"{n}"' for n in names)
        )
    )
    return GroupTree(path, recipe, good, w.git("rev-parse", "HEAD"), truth)
