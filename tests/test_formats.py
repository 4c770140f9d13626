"""The format parsers on real tool output: Google Benchmark JSON written here by Debian's
libbenchmark, NVBench JSON from NVBench's own repository (tests/fixtures/*/README.md)."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest

from attrib.errors import FormatError, InputError
from attrib.formats import GbenchTime, Measurement, nvbench_throttle_discards, parse_gbench, parse_nvbench

FIXTURES = Path(__file__).parent / "fixtures"
GBENCH = FIXTURES / "gbench" / "bm_copy_libbenchmark-1.7.1.json"
NVBENCH = FIXTURES / "nvbench" / "axes_ref.json"


def _raw(path: Path) -> dict:
    return json.loads(path.read_text())


def test_gbench_repetitions_are_samples_and_aggregates_are_not():
    text = GBENCH.read_text()
    rows = _raw(GBENCH)["benchmarks"]
    by_name = {m.benchmark: m for m in parse_gbench(text, "bm.json")}
    assert list(by_name) == ["BM_Copy/1024", "BM_Copy/4096", "BM_Err"]
    copy = by_name["BM_Copy/1024"]
    reps = [r for r in rows if r["run_name"] == "BM_Copy/1024" and r["run_type"] == "iteration"]
    assert copy.samples == tuple(r["real_time"] for r in reps)
    agg = {r["aggregate_name"]: r for r in rows if r["run_name"] == "BM_Copy/1024" and r["run_type"] == "aggregate"}
    assert copy.value == agg["median"]["real_time"] and copy.noise == agg["cv"]["real_time"]
    assert copy.unit == "ns" and copy.state == {} and copy.usable
    assert copy.context["num_cpus"] == "2" and copy.context["library_build_type"] == "debug"
    cpu = {m.benchmark: m for m in parse_gbench(text, "bm.json", GbenchTime.CPU)}["BM_Copy/1024"]
    assert cpu.samples == tuple(r["cpu_time"] for r in reps)


def test_gbench_error_occurred_is_a_failed_measurement_with_its_message():
    err = {m.benchmark: m for m in parse_gbench(GBENCH.read_text(), "bm.json")}["BM_Err"]
    assert err.error == "boom" and err.samples == () and not err.usable and math.isnan(err.value)


def test_gbench_schema_version_1_is_read_and_others_refused():
    doc = _raw(GBENCH)
    doc["context"]["json_schema_version"] = 1  # what libbenchmark >= 1.8.4 adds
    assert len(parse_gbench(json.dumps(doc), "v1.json")) == 3
    doc["context"]["json_schema_version"] = 2
    with pytest.raises(FormatError) as exc:
        parse_gbench(json.dumps(doc), "v2.json")
    assert str(exc.value).startswith("v2.json: field 'context.json_schema_version': is 2")
    assert isinstance(exc.value, InputError)


def test_nvbench_states_carry_axes_as_nvbench_prints_them():
    ms = parse_nvbench(NVBENCH.read_text(), "axes_ref.json")
    raw = _raw(NVBENCH)
    states = [s for b in raw["benchmarks"] for s in b["states"]]
    assert len(ms) == len(states)
    for m, s in zip(ms, states, strict=True):
        # NVBench's own state name is "Device=N <axes>": our labels must reproduce it exactly.
        assert f"Device={s['device']} {m.state_label()}" == s["name"] == m.context["nvbench_state"]
    grid = ms[3]
    assert grid.benchmark == "copy_sweep_grid_shape" and grid.state == {"BlockSize": "2^8", "NumBlocks": "2^10"}
    summ = {x["tag"]: x for x in states[3]["summaries"]}
    assert grid.value == float(summ["nv/cold/time/gpu/mean"]["data"][0]["value"])
    assert grid.noise == float(summ["nv/cold/time/gpu/stdev/relative"]["data"][0]["value"])
    assert grid.unit == "s" and grid.samples == () and grid.context["device_name"] == "Quadro GV100"
    f32_dev1 = ms[10]
    assert f32_dev1.state == {"T": "F32"} and f32_dev1.context["device_name"] == "Quadro GP100"


def test_nvbench_skipped_state_keeps_nvbench_reason():
    skipped = [m for m in parse_nvbench(NVBENCH.read_text(), "axes_ref.json") if m.skipped]
    assert [(m.benchmark, m.state_label(), m.skipped) for m in skipped] == [
        ("copy_type_conversion_sweep", "In=I8 Out=I8", "Not a conversion: InputType == OutputType.")
    ]


def _with_sidecar(tmp_path: Path, values: list[float], size: int | None = None) -> str:
    """axes_ref.json's first state plus the sample-times summary json_printer.cu writes."""
    doc = _raw(NVBENCH)
    state = doc["benchmarks"][0]["states"][0]
    (tmp_path / "r.json-bin").mkdir()
    (tmp_path / "r.json-bin" / "0.bin").write_bytes(struct.pack(f"<{len(values)}f", *values))
    state["summaries"].append(
        {
            "tag": "nv/json/bin:nv/cold/sample_times",
            "name": "Sample Times File",
            "hint": "file/sample_times",
            "description": "Binary file containing sample times as little-endian float32.",
            "hide": "Not needed in table.",
            "data": [
                {"name": "filename", "type": "string", "value": "r.json-bin/0.bin"},
                {"name": "size", "type": "int64", "value": str(len(values) if size is None else size)},
            ],
        }
    )
    return json.dumps(doc, indent=2)


def test_nvbench_jsonbin_sidecar_gives_per_sample_times(tmp_path):
    values = [1.5e-5, 1.25e-5, 2.0e-5]
    text = _with_sidecar(tmp_path, values)
    ms = parse_nvbench(text, str(tmp_path / "r.json"), base_dir=tmp_path)
    assert ms[0].samples == tuple(struct.unpack("<3f", struct.pack("<3f", *values)))
    # Without base_dir no file is read; the summary still counts.
    without = parse_nvbench(text, "r.json")[0]
    assert without.samples == () and without.value == ms[0].value


def test_nvbench_sidecar_of_the_wrong_size_names_file_benchmark_and_field(tmp_path):
    with pytest.raises(FormatError) as exc:
        parse_nvbench(_with_sidecar(tmp_path, [1e-5, 2e-5], size=3), "r.json", base_dir=tmp_path)
    msg = str(exc.value)
    assert msg.startswith("r.json: benchmark 'copy_sweep_grid_shape': field 'benchmarks[0].states[0].summaries[")
    assert "has 8 bytes; expected 3 float32 values (12 bytes)" in msg and "\n" not in msg


def test_nvbench_version_is_checked():
    doc = _raw(NVBENCH)
    doc["meta"]["version"]["json"]["major"] = 2
    with pytest.raises(
        FormatError, match=r"field 'meta.version.json.major': is 2; this reader knows NVBench JSON file version 1.x"
    ):
        parse_nvbench(json.dumps(doc), "x.json")
    del doc["meta"]["version"]
    with pytest.raises(FormatError, match=r"field 'meta.version': missing"):
        parse_nvbench(json.dumps(doc), "x.json")


def test_throttle_discards_are_counted_per_state_from_the_markdown_log():
    log = "\n".join(
        [
            "# Devices",
            "Run:  [1/2] copy [Device=0 T=F32]",
            "Warn: GPU throttled below threshold (1100.00 MHz / 1980.00 MHz) (56% < 75%) on sample 7. Discarding previous trial and pausing for 0.050s.",
            "Warn: GPU throttled below threshold (1100.00 MHz / 1980.00 MHz) (56% < 75%) on sample 7. Discarding previous trial and pausing for 0.050s.",
            "Pass: Cold: 0.010000ms GPU, 0.020000ms CPU, 0.50s total GPU, 0.90s total wall, 50000x ",
            "Run:  [2/2] copy [Device=0 T=F64]",
            "Pass: Cold: 0.020000ms GPU, 0.030000ms CPU, 0.50s total GPU, 0.90s total wall, 25000x ",
        ]
    )
    assert nvbench_throttle_discards(log) == {("copy", "Device=0 T=F32"): 2}


def test_measurement_is_immutable():
    m = Measurement("b", {}, 1.0, "s")
    with pytest.raises(AttributeError):
        m.value = 2.0  # type: ignore[misc]
