"""core/environment.py on recorded probe outputs (tests/fixtures/environment/): the fingerprint's
keys, parsing what the probe printed, and what counts as a change."""

from __future__ import annotations

from pathlib import Path

from attrib.core.environment import (
    EnvChange,
    EnvKey,
    Fingerprint,
    changed_line,
    changes,
    first_version_line,
    parse_probe,
)

FIXTURES = Path(__file__).parent / "fixtures" / "environment"


def _probe(name: str) -> Fingerprint:
    return parse_probe((FIXTURES / name).read_text(), where="node1")


def test_an_h100_hosts_probe_reads_every_key():
    fp = _probe("probe-h100-local.txt")
    assert fp.get(EnvKey.DRIVER) == "550.54.15"
    assert fp.get(EnvKey.APP_CLOCKS) == "1980/2619 MHz"
    assert fp.get(EnvKey.COMPILER) == (
        "gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0; nvcc: Cuda compilation tools, release 12.4, V12.4.131"
    )
    assert fp.unavailable == {"image": "not in a container"}
    assert set(fp.values) == {k.value for k in EnvKey} - {"image"}
    assert fp.where == "node1"


def test_a_cpu_container_records_why_the_gpu_keys_are_missing_and_ignores_other_lines():
    fp = _probe("probe-cpu-docker.txt")
    assert fp.get(EnvKey.IMAGE) == "sha256:3f0a9c1b2e4d5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8"
    assert fp.get("probe.zlib") == "51b7f2abdade71cd9bb0e7a373ef2610ec6f9daf"
    assert fp.unavailable["gpu"] == "nvidia-smi not found"
    assert "governor" not in fp.values
    assert "Welcome to the build box" not in str(fp.values)


def test_a_driver_update_is_two_changed_keys_in_one_line():
    found = changes(_probe("probe-h100-local.txt"), _probe("probe-h100-driver-update.txt"))
    assert found == (EnvChange("cuda_runtime", "12.4", "12.5"), EnvChange("driver", "550.54.15", "550.90.07"))
    line = changed_line(found, "after the build of 1a2b3c4d5e")
    assert line == (
        "the environment changed after the build of 1a2b3c4d5e: cuda_runtime 12.4 -> 12.5; driver 550.54.15 -> 550.90.07"
    )
    assert "\n" not in line


def test_the_same_reading_twice_is_no_change_wherever_it_was_read():
    a = _probe("probe-h100-local.txt")
    b = parse_probe((FIXTURES / "probe-h100-local.txt").read_text(), where="node2")
    assert changes(a, b) == ()


def test_a_key_that_stops_reading_is_a_change_but_one_never_read_is_not():
    before = parse_probe("driver=550.54.15\n!governor=no cpufreq\n")
    after = parse_probe("!driver=nvidia-smi failed: Driver/library version mismatch\n!governor=no cpufreq\nprobe.x=1\n")
    assert changes(before, after) == (
        EnvChange("driver", "550.54.15", "unavailable (nvidia-smi failed: Driver/library version mismatch)"),
    )


def test_later_lines_win_and_blank_values_are_unavailable():
    fp = parse_probe("compiler=gcc 1.0\ncompiler=gcc 2.0\nos=\n")
    assert fp.values == {"compiler": "gcc 2.0"}
    assert fp.unavailable == {"os": "empty"}


def test_the_first_version_line_of_real_compilers_answers():
    nvcc = (
        "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2024 NVIDIA Corporation\n"
        "Built on Thu_Mar_28_02:18:24_PDT_2024\nCuda compilation tools, release 12.4, V12.4.131\n"
    )
    # the copyright line holds no x.y; the build date's 02:18 has no dot
    assert first_version_line(nvcc) == "Cuda compilation tools, release 12.4, V12.4.131"
    gcc = "gcc (Debian 12.2.0-14) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.\n"
    assert first_version_line(gcc) == "gcc (Debian 12.2.0-14) 12.2.0"
    assert first_version_line("no version here\n") is None
