"""The real regressions benchmarks/real/run.py bisects: where each comes from and how it is built.

Every case is a regression a tree's own developers found and named (issue, pull request or
revert), with the range, the culprit they named and the workload we time. Builds use only the
system gcc/cmake/make; the workload is one of our C programs in workloads/, compiled against the
candidate's own sources. `{bench}` in a build command is that program's absolute path, `{clock}`
the define that picks its clock (run.py --clock).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Case:
    name: str
    mirror: str  # owner+name under the mirror root (what the fetch tool writes)
    good: str
    bad: str
    culprits: tuple[str, ...]  # what the developers named, full shas
    also_named: tuple[str, ...]  # commits named alongside (reverted together), not the step
    source: str  # where the developers named it
    claim: str  # what they measured
    workload: str  # file in workloads/
    build: tuple[str, ...]
    command: tuple[str, ...]  # the benchmark argv; {reps} as attrib's command runner takes it
    notes: tuple[str, ...] = field(default_factory=tuple)


# Flags every build shares: no debug info and the checkout's path mapped away, so that two
# commits whose code is the same give byte-identical binaries (attrib's same-binary rule).
CFLAGS = "-O2 -ffile-prefix-map=$PWD=."

CASES: tuple[Case, ...] = (
    Case(
        name="zlibng-1935",
        mirror="zlib-ng+zlib-ng",
        good="0456bce1cc3097db0db6db8568f9ff222683d64e",
        bad="a31e6ddecf2fd4ad98a859d73c15db5a19d3ea94",
        culprits=("322753f36e833343ae030e499564691da15eef32",),
        also_named=("56d3d9851a824aeb921c9853042776866aa195a3",),
        source="zlib-ng/zlib-ng#1935 (names 322753f); reverted with 56d3d98 in #1938",
        claim="a 1000-byte random block written 100 times, level 6: 93.85 us -> 192.60 us (+105 %)",
        workload="zlibng_repeat.c",
        build=(
            "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DZLIB_COMPAT=ON -DBUILD_SHARED_LIBS=OFF"
            " -DZLIB_ENABLE_TESTS=OFF -DWITH_GTEST=OFF -DWITH_GZFILEOP=OFF"
            ' "-DCMAKE_C_FLAGS=-ffile-prefix-map=$PWD=." >/dev/null',
            "cmake --build build -j2 >/dev/null",
            f"cc {CFLAGS} -Ibuild {{clock}} {{bench}} build/libz.a -o attrib-bench",
        ),
        command=("./attrib-bench", "{reps}", "40"),
    ),
    Case(
        name="xxhash-871",
        mirror="Cyan4973+xxHash",
        good="6078dd6a888eee8d1ef243ea6bd5f6767089389e",
        bad="a60bd0598d1e3b0b6c6f180ab5cd22936ed85253",
        culprits=("7221be4f63e9810e4ac5bacb2b688feccc260aa6",),
        also_named=(),
        source="Cyan4973/xxHash#871 reverts 7221be4 (merged in #754) 'to reproduce same performance as v0.8.1'",
        claim="XXH3 17-128 byte inputs slower than v0.8.1 (no figure in the PR)",
        workload="xxh3_mid.c",
        build=("cc -O3 -ffile-prefix-map=$PWD=. -I. {clock} {bench} -o attrib-bench",),
        command=("./attrib-bench", "{reps}", "1000000"),
        notes=(
            "bad is the commit before #823, which adds tests/sanity_test_vectors.h: that blob is"
            " absent from the mirror, so later commits cannot be checked out here",
        ),
    ),
    Case(
        name="lz4-941",
        mirror="lz4+lz4",
        good="e8bd270d35d5f0f9665b801e7ee8ea37c6dc1e37",
        bad="79a7c940172ae066f9d72462d625fb43e7a0343a",
        culprits=("0e3933edd435c54cc2e21e38f5d4ba7bf644a24e",),
        also_named=(),
        source="lz4/lz4#941 reverts 0e3933e (merged in #930): 'important performance regression'",
        claim="gcc 9.3, i7-9700k: compression -3.7..4.0 %, decompression -3.8..4.3 %; 'likely a"
        " side-effect of instruction alignment'",
        workload="lz4_text.c",
        build=("cc -O3 -ffile-prefix-map=$PWD=. -Ilib {clock} {bench} lib/lz4.c -o attrib-bench",),
        command=("./attrib-bench", "{reps}", "1", "cd"),
    ),
    Case(
        name="zlib-820",
        mirror="madler+zlib",
        good="38e8ce32afbaa82f67d992b9f3056f281fe69259",
        bad="02064366155215162223417b939deebfe563ded0",
        culprits=("5c44459c3b28a9bd3283aaceab7c615f8020c531",),
        also_named=(),
        source="madler/zlib#820: madler names 5c44459 (two byte writes per distance instead of one)",
        claim="lzbench, Silesia, level 1, EPYC 9654, gcc 13: compression -1.46 %",
        workload="zlib_deflate.c",
        build=(
            "./configure --static >/dev/null",
            "make libz.a >/dev/null 2>&1",
            f"cc {CFLAGS} -I. {{clock}} {{bench}} libz.a -o attrib-bench",
        ),
        command=("./attrib-bench", "{reps}", "1", "1"),
    ),
)

# Build cases (issue 31), not run by run.py: a regression planted in a real tree by plant.py
# (`--tree libgit2`, `--tree abseil`), which writes the mirror (`--mirrors /tmp/attrib-planted`);
# what they measure is the builds.
PLANTED: tuple[Case, ...] = (
    Case(
        name="libgit2-planted",
        mirror="libgit2-planted",
        good="8c6fa0a66faaabc2955661944921b3089632822b",
        bad="d33de3b1c60b4a0bc58520b8f919e57500141797",
        culprits=("fda54a547ec6bcbf3418a4ba5d6ceaf897b7fbe6",),
        also_named=(),
        source="planted by benchmarks/real/plant.py in libgit2's last 48 first-parent commits before 0551dfd4a",
        claim="git_hash_vec computes every digest twice: git_odb_hash of a 4 KiB blob about twice as slow",
        workload="libgit2_odb_hash.c",
        build=(
            "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DBUILD_TESTS=OFF -DBUILD_CLI=OFF"
            " -DBUILD_EXAMPLES=OFF -DUSE_HTTPS=OFF -DUSE_SSH=OFF -DUSE_GSSAPI=OFF -DUSE_NTLMCLIENT=OFF"
            ' -DUSE_BUNDLED_ZLIB=ON -DREGEX_BACKEND=builtin "-DCMAKE_C_FLAGS=-ffile-prefix-map=$PWD=." >/dev/null',
            "cmake --build build -j2 >/dev/null",
            f"cc {CFLAGS} -Iinclude {{clock}} {{bench}} build/libgit2.a -lpthread -o attrib-bench",
        ),
        command=("./attrib-bench", "{reps}", "2000"),
    ),
    Case(
        name="abseil-planted",
        mirror="abseil-planted",
        good="c8c10a390166436b46c69c205500820f0e3fcafe",
        bad="d10eb63c1d0e3ee14743e0734a4b58aea54cca60",
        culprits=("8e57baf7fca185532cea165f173faed9b093d3cd",),
        also_named=(),
        source="planted by benchmarks/real/plant.py --tree abseil in abseil-cpp's last 48 first-parent commits before 926f1d05",
        claim="absl::StrCat(a, b) builds every result twice and compares: two 100-byte strings about twice as slow",
        workload="abseil_strcat.cc",
        build=(
            "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DABSL_BUILD_TESTING=OFF"
            " -DBUILD_TESTING=OFF -DABSL_PROPAGATE_CXX_STD=ON -DCMAKE_CXX_STANDARD=17"
            ' "-DCMAKE_CXX_FLAGS=-ffile-prefix-map=$PWD=." >/dev/null',
            "cmake --build build -j2 >/dev/null",
            # every library in one group (shell globs are sorted): the workload takes what StrCat needs
            f"c++ {CFLAGS} -std=c++17 -I. {{clock}} {{bench}} -Wl,--start-group build/absl/*/libabsl_*.a -Wl,--end-group"
            " -o attrib-bench",
        ),
        command=("./attrib-bench", "{reps}", "200000"),
    ),
)


def by_name(name: str) -> Case:
    for c in (*CASES, *PLANTED):
        if c.name == name:
            return c
    names = ", ".join(c.name for c in (*CASES, *PLANTED))
    raise SystemExit(f"unknown case {name!r}: expected one of {names}")
