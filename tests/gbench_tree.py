"""A small C++ project measured with Google Benchmark, with real git history and one planted
slowdown: the test tree of the gbench runner (tests/test_runner_gbench.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from conftest import OneCulpritTree, git

BENCH_CC = r"""#include <benchmark/benchmark.h>
#include <cstdint>
#include "work.h"

// A serial chain of multiply-adds: its time is WORK_ROUNDS times one dependent step.
static void BM_Mix(benchmark::State& state) {
  std::uint64_t acc = 1;
  for (auto _ : state) {
    for (int i = 0; i < WORK_ROUNDS; ++i) {
      acc = acc * 6364136223846793005ULL + 1442695040888963407ULL;
      benchmark::DoNotOptimize(acc);
    }
  }
}
BENCHMARK(BM_Mix)->Iterations(40);

static void BM_MixSmall(benchmark::State& state) {
  std::uint64_t acc = 1;
  for (auto _ : state) {
    for (int i = 0; i < 1000; ++i) { acc = acc * 3 + 1; benchmark::DoNotOptimize(acc); }
  }
}
BENCHMARK(BM_MixSmall)->Iterations(100);

static void BM_Fails(benchmark::State& state) {
  for (auto _ : state) {
    state.SkipWithError("input file missing");
    break;
  }
}
BENCHMARK(BM_Fails);

BENCHMARK_MAIN();
"""

BUILD = "c++ -O2 -std=c++17 -o bench_mix bench.cc -lbenchmark -lpthread"

RECIPE = f"""schema = 1
name = "gbench-tree"

[build]
commands = ["{BUILD}"]
timeout_s = 120

[[benchmark]]
name = "mix"
runner = "gbench"
command = ["./bench_mix"]
reps = 5
min_change_pct = 10
unit = "us"

[benchmark.gbench]
filter = "^BM_Mix/"
time = "cpu_time"   # this process's CPU time: steadier than wall time on a shared CI machine
"""

BASE_ROUNDS = 40_000  # ~0.1 ms per iteration on the CI machine
SLOWDOWN = 1.4


def make_gbench_tree(path: Path, commits: int = 10, culprit_at: int = 6) -> OneCulpritTree:
    """`commits` commits after the first; the one at `culprit_at` raises WORK_ROUNDS by SLOWDOWN."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "test")
    (path / "bench.cc").write_text(BENCH_CC)
    (path / "work.h").write_text(f"#define WORK_ROUNDS {BASE_ROUNDS}\n")
    (path / "NOTES.md").write_text("# notes\n")
    (path / ".gitignore").write_text("bench_mix\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "BM_Mix: a serial multiply-add chain")
    good = git(path, "rev-parse", "HEAD")
    culprit = ""
    for i in range(1, commits + 1):
        if i == culprit_at:
            (path / "work.h").write_text(f"#define WORK_ROUNDS {int(BASE_ROUNDS * SLOWDOWN)}\n")
            msg = "mix: more rounds for better diffusion"
        else:
            with (path / "NOTES.md").open("a") as f:
                f.write(f"- note {i}\n")
            msg = f"notes: entry {i}"
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", msg)
        if i == culprit_at:
            culprit = git(path, "rev-parse", "HEAD")
    return OneCulpritTree(path, good, git(path, "rev-parse", "HEAD"), culprit)


def gbench_missing() -> str:
    """Why Google Benchmark programs cannot be built here ("" when they can)."""
    if shutil.which("c++") is None:
        return "no C++ compiler (c++)"
    probe = subprocess.run(
        ["c++", "-x", "c++", "-", "-o", "/dev/null", "-lbenchmark", "-lpthread"],
        input="#include <benchmark/benchmark.h>\nBENCHMARK_MAIN();\n",
        capture_output=True,
        text=True,
    )
    return "" if probe.returncode == 0 else "libbenchmark-dev is not installed (.ci/run installs it)"
