"""The environment fingerprint in the result (schema 5), its report ("Where it ran") and
`attrib compare`'s document; a schema-4 document (tests/fixtures/schema4, written by the last
schema-4 attrib) reads with none and renders as it did. And the watch that stops a run whose
environment changes, on recorded readings."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from sim_results import simulated_result

from attrib.core.environment import GPU_KEYS, Fingerprint, parse_probe
from attrib.core.model import BuildRecord, CommitInfo, Phase, Purpose, Step, Verdict
from attrib.errors import EnvironmentChanged, ResultFormatError
from attrib.evaluate.fingerprint import EnvironmentWatch, finish
from attrib.events import NullEvents
from attrib.report.markdown import render
from attrib.result import RESULT_SCHEMA, BisectResult, CompareResult, dump, from_json, load_result
from attrib.result.types import ComparisonRecord, Environment

HERE = Path(__file__).parent
SCHEMA4 = HERE / "fixtures" / "schema4"
GOLDEN = HERE / "golden"
H100 = parse_probe((HERE / "fixtures" / "environment" / "probe-h100-local.txt").read_text(), where="gpu-node-07")


@pytest.fixture(scope="module")
def culprit(tmp_path_factory) -> BisectResult:
    return simulated_result("culprit", tmp_path_factory.mktemp("sim"))


def test_a_schema4_document_reads_with_no_fingerprint_and_renders_as_it_did():
    doc = json.loads((SCHEMA4 / "culprit.json").read_text())
    assert doc["schema"] == 4 and "fingerprint" not in doc["environment"]
    result = load_result(SCHEMA4 / "culprit.json")
    assert isinstance(result, BisectResult) and result.environment.fingerprint is None
    assert render(result) + "\n" == (SCHEMA4 / "culprit.md").read_text()
    assert from_json(json.loads(dump(result))) == result


def test_a_fingerprint_is_written_and_read_back(culprit):
    result = replace(culprit, environment=Environment(fingerprint=H100))
    doc = json.loads(dump(result))
    assert doc["schema"] == RESULT_SCHEMA >= 5  # written since schema 5
    assert doc["environment"]["fingerprint"]["values"]["driver"] == "550.54.15"
    assert doc["environment"]["fingerprint"]["unavailable"] == {"image": "not in a container"}
    assert from_json(doc) == result


def test_where_it_ran_is_in_the_report_golden(culprit):
    result = replace(culprit, environment=Environment(fingerprint=H100))
    text = render(result)
    golden = GOLDEN / "culprit_environment.md"
    assert text == golden.read_text()
    # the section is the fingerprint's, after the environment the report always had
    assert text.index("## Environment") < text.index("## Where it ran") < text.index("- driver: 550.54.15")


def test_a_bad_fingerprint_field_is_one_line_naming_it(culprit):
    doc = json.loads(dump(replace(culprit, environment=Environment(fingerprint=H100))))
    doc["environment"]["fingerprint"]["values"]["driver"] = 550
    with pytest.raises(ResultFormatError, match=r"field 'environment.fingerprint.values.driver'"):
        from_json(doc, "r.json")


def _compare(environment: Fingerprint | None) -> CompareResult:
    record = ComparisonRecord(candidate="b" * 40, reference="a" * 40, purpose=Purpose.COMPARE, verdict=Verdict.BAD, rounds=6,
                              change_pct=9.8, ci_pct=(8.1, 11.4), llr=5.1, sigma=0.01, reason="sprt")  # fmt: skip
    return CompareResult("loop", record, "s", None, {}, environment)


def test_a_comparison_carries_where_it_ran_and_a_schema4_one_reads_with_none():
    doc = json.loads(dump(_compare(H100)))
    assert doc["environment"]["values"]["gpu"] == "NVIDIA H100 80GB HBM3"
    read = from_json(doc)
    assert isinstance(read, CompareResult) and read.environment == H100
    assert "## Where it ran" in render(read) and "- app_clocks: 1980/2619 MHz" in render(read)
    old = {k: v for k, v in doc.items() if k != "environment"} | {"schema": 4}
    assert from_json(old).environment is None  # type: ignore[union-attr]
    assert "Where it ran" not in render(from_json(old))


class _Readings:
    """Recorded fingerprints, handed out one per reading."""

    def __init__(self, *fps: Fingerprint) -> None:
        self.fps, self.calls = list(fps), 0

    def __call__(self, checkout: Path) -> Fingerprint:
        self.calls += 1
        return self.fps.pop(0) if len(self.fps) > 1 else self.fps[0]


def _built(tmp_path: Path, sha: str) -> tuple[CommitInfo, BuildRecord]:
    info = CommitInfo(sha=sha * 40, tree="t", subject="s", author="a", author_email="e", date="d", parents=())
    return info, BuildRecord(key="k", commit=info.sha, tree="t", ok=True, reason="", log_path="", checkout=str(tmp_path), duration_s=0.1)


def test_the_watch_reads_at_the_first_build_at_most_every_interval_and_at_the_end(tmp_path):
    driver_update = parse_probe((HERE / "fixtures" / "environment" / "probe-h100-driver-update.txt").read_text())
    now = [0.0]
    read = _Readings(H100, H100, driver_update)
    watch = EnvironmentWatch(read, NullEvents(), interval_s=60.0, clock=lambda: now[0])
    watch.phase(Phase(Step.PREFLIGHT))  # nothing built yet: nowhere to read
    assert read.calls == 0
    watch.build_finished(*_built(tmp_path, "1"))
    now[0] = 30.0
    watch.build_finished(*_built(tmp_path, "2"))  # within the interval: not read again
    assert read.calls == 1 and watch.start == H100
    now[0] = 61.0
    watch.phase(Phase(Step.LOCATING))  # past it: read, unchanged
    assert read.calls == 2
    with pytest.raises(EnvironmentChanged) as stop:
        watch.close()  # the end always reads
    assert str(stop.value).startswith(
        "the environment changed at the end: cuda_runtime 12.4 -> 12.5; driver 550.54.15 -> 550.90.07"
    )
    assert stop.value.exit_code == 12


def test_the_watch_of_a_run_that_built_nothing_has_no_fingerprint():
    read = _Readings(H100)
    assert EnvironmentWatch(read, NullEvents()).close() is None and read.calls == 0


def test_nvidia_smis_rows_become_the_gpu_keys():
    sep = "\x1f"
    raw = parse_probe(
        f"where=n1\nraw.smi=NVIDIA H200, 570.86.15, 700.00, 1980, 3201, Disabled, Enabled{sep}"
        f"NVIDIA H200, 570.86.15, 700.00, [N/A], [N/A], Disabled, Enabled\nraw.smi_cuda=CUDA Version: 12.8\n"
        f"raw.compiler.0=nvcc{sep}nvcc: NVIDIA (R) Cuda compiler driver{sep}Cuda compilation tools, release 12.8, V12.8.61\n"
        "!raw.compiler.1=clang++: not found\n"
    )
    fp = finish(raw, ("sha256:abc", ""))
    assert fp.values == {
        "gpu": "NVIDIA H200", "driver": "570.86.15", "power_limit_w": "700.00", "app_clocks": "1980/3201 MHz",
        "mig": "Disabled", "persistence": "Enabled", "cuda_runtime": "12.8", "image": "sha256:abc",
        "compiler": "Cuda compilation tools, release 12.8, V12.8.61; clang++: not found",
    }  # fmt: skip
    assert fp.where == "n1" and fp.unavailable == {}


def test_a_recipes_environment_table_is_read_and_a_bad_one_is_one_line(tmp_path):
    import tomllib

    from attrib.demo import DEMO_RECIPE
    from attrib.errors import ConfigError
    from attrib.recipe import parse_recipe

    good = DEMO_RECIPE + '\n[environment]\ncompilers = ["nvcc"]\nprobes = { zlib = "git -C third_party/zlib rev-parse HEAD" }\n'
    recipe = parse_recipe(tomllib.loads(good), tmp_path / "r.toml")
    assert recipe.environment.compilers == ("nvcc",)
    assert recipe.environment.probes == {"zlib": "git -C third_party/zlib rev-parse HEAD"}
    for bad, key in (
        ('probes = { "two words" = "true" }', "environment.probes"),
        ('probes = { zlib = 3 }', "environment.probes"),
        ("compilers = []", "environment.compilers"),
        ('compiler = ["cc"]', "environment.compiler"),
    ):
        with pytest.raises(ConfigError) as err:
            parse_recipe(tomllib.loads(DEMO_RECIPE + f"\n[environment]\n{bad}\n"), tmp_path / "r.toml")
        assert f"key '{key}'" in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_under_slurm_each_node_is_compared_with_its_own_first_reading(tmp_path):
    n1 = parse_probe("kernel=5.15.0-105\ndriver=550.54.15\n", where="n1")
    n2 = parse_probe("kernel=6.8.0-31\ndriver=550.54.15\n", where="n2")
    n1_updated = parse_probe("kernel=5.15.0-105\ndriver=550.90.07\n", where="n1")
    read = _Readings(n1, n2, n2, n1_updated)
    watch = EnvironmentWatch(read, NullEvents(), interval_s=0.0, per_machine=True)
    watch.build_finished(*_built(tmp_path, "1"))  # n1's start
    watch.build_finished(*_built(tmp_path, "2"))  # n2's start: another node of the class, not a change
    watch.phase(Phase(Step.LOCATING))  # n2 again, unchanged
    with pytest.raises(EnvironmentChanged, match=r"at the end on n1: driver 550.54.15 -> 550.90.07 \(stopped"):
        watch.close()
    assert watch.start == n1
    # without per_machine (local, docker) the second node's kernel would have been a change
    strict = EnvironmentWatch(_Readings(n1, n2), NullEvents(), interval_s=0.0)
    strict.build_finished(*_built(tmp_path, "1"))
    with pytest.raises(EnvironmentChanged, match="kernel 5.15.0-105 -> 6.8.0-31"):
        strict.build_finished(*_built(tmp_path, "2"))


class _FakeNvml:
    """pynvml's calls the fingerprint makes, for two H100s (the second without MIG support);
    anything else is missing, as a stricter fake of the library should be."""

    NVML_CLOCK_GRAPHICS, NVML_CLOCK_MEM = 0, 2

    class NotSupported(Exception):
        pass

    def nvmlInit(self) -> None:
        self.up = True

    def nvmlShutdown(self) -> None:
        self.up = False

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetPowerManagementLimit(self, h: int) -> int:
        return 700000  # milliwatts

    def nvmlDeviceGetApplicationsClock(self, h: int, clock: int) -> int:
        return {0: 1980, 2: 2619}[clock]

    def nvmlDeviceGetMigMode(self, h: int) -> tuple[int, int]:
        if h == 1:
            raise self.NotSupported()
        return (0, 0)

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        return 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040


def test_nvml_reads_the_gpu_keys_as_nvidia_smi_writes_them(monkeypatch):
    import sys

    from attrib.evaluate.fingerprint import with_nvml
    from attrib.evaluate.gpu.nvml import gpu_fingerprint

    fake = _FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    values, why = gpu_fingerprint()
    assert why == "" and fake.up is False  # shut down again
    gpu_keys = {k: H100.values[k] for k in ("gpu", "driver", "cuda_runtime", "power_limit_w", "app_clocks", "mig", "persistence")}
    assert values == gpu_keys  # the recorded nvidia-smi reading of the same machine, key for key
    assert set(values) == set(GPU_KEYS)
    cpu_only = parse_probe("kernel=6.1\n!gpu=nvidia-smi not found\n")
    assert with_nvml(cpu_only, (values, "")).values == {"kernel": "6.1", **gpu_keys}
    assert with_nvml(cpu_only, (values, "")).unavailable == {}
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: import fails
    assert gpu_fingerprint() == ({}, "nvidia-ml-py not installed")
    assert with_nvml(cpu_only, gpu_fingerprint()).unavailable == {"gpu": "nvidia-smi not found; NVML: nvidia-ml-py not installed"}


def test_the_report_names_the_gates_exclusions_by_reason(culprit):
    from attrib.core.gpu_validity import SHARED, THERMAL, low_clock

    result = replace(culprit, excluded_samples={THERMAL: 5, SHARED: 2, low_clock(0.75): 1})
    text = render(result)
    assert (
        "- excluded samples: 8, by reason: thermal slowdown: 5, device shared with another process: 2, "
        "SM clock below 75% of the reference: 1 (flagged by the benchmark, or GPU blocks the validity gate excluded"
    ) in text
