"""NVBench's JSON (`--json FILE` / `--jsonbin FILE`), as nvbench/json_printer.cu writes it.

The C++ library and the cuda-bench Python package (`cuda.bench.run_all_benchmarks`) share
this printer, so one reader serves both. Layout:

    meta.version.json   {major, minor, patch, string}; "minor: backwards compatible
                        additions" (json_printer.cu), so major 1 is accepted, any other refused
    devices[]           id, name, sm_version, ... (the device facts in `context`)
    benchmarks[]        name, axes[] (name, type, flags "pow2"), states[]
    states[]            name ("Device=0 T=F32 Elements=2^24"), device, axis_values[]
                        ({name, type int64|float64|string, value as a string}), summaries[],
                        is_skipped, skip_reason
    summaries[]         {tag, name, hint, description, hide, data: [{name, type, value}]}

The central value is `nv/cold/time/gpu/mean` (seconds), the noise
`nv/cold/time/gpu/stdev/relative`. With `--jsonbin` the summary
`nv/json/bin:nv/cold/sample_times` names a sidecar file (relative to the JSON file's
directory; older NVBench wrote it relative to the working directory, which attrib's runner
makes the same) of `size` little-endian float32 GPU times, one per accepted sample.
Throttled trials are discarded by NVBench before they become samples and appear only in its
markdown log ("Warn: GPU throttled below threshold ..."): `nvbench_throttle_discards` counts
them per state. A state whose trials were all discarded has `nv/cold/sample_size` 0 and no
times: that is a failed measurement, not a malformed file.
"""

from __future__ import annotations

import itertools
import math
import re
import struct
from pathlib import Path
from typing import Any

from attrib.formats.fields import Reader, load_json
from attrib.formats.model import Measurement

JSON_MAJOR = 1  # meta.version.json.major this reader knows (json_printer::get_json_file_version)
WHAT = "NVBench JSON (--json/--jsonbin)"
GPU_MEAN = "nv/cold/time/gpu/mean"
GPU_NOISE = "nv/cold/time/gpu/stdev/relative"
SAMPLE_SIZE = "nv/cold/sample_size"
SAMPLE_TIMES = "nv/json/bin:nv/cold/sample_times"
VALUE_TYPES = ("int64", "float64", "string")
_DEVICE_FACTS = (
    "name",
    "sm_version",
    "sm_default_clock_rate",
    "number_of_sms",
    "global_memory_size",
    "l2_cache_size",
    "ecc_state",
)


def parse_nvbench(text: str, source: str, base_dir: Path | None = None) -> list[Measurement]:
    """One Measurement per state, benchmarks and states in file order. Sample sidecars are
    read only with `base_dir`; without it `samples` stays () and the summary still counts."""
    root = Reader(source, "", "", load_json(text, source, WHAT))
    meta = root.child("meta")
    version = meta.child("version")
    jv = version.child("json")
    major = jv.int("major")
    if major != JSON_MAJOR:
        raise jv.fail("major", f"is {major}; this reader knows NVBench JSON file version {JSON_MAJOR}.x")
    common = {"nvbench_json_version": jv.str("string")}
    if version.has("nvbench"):
        nvb = version.child("nvbench")
        common["nvbench_version"] = nvb.str("string")
        if nvb.has("git_sha"):
            common["nvbench_git_sha"] = nvb.str("git_sha")
    devices: dict[int, dict[str, str]] = {}
    for i, node in enumerate(root.list("devices", null_is_empty=True)):
        dev = root.item("devices", i, node)
        devices[dev.int("id")] = {f"device_{k}": _fact(dev.raw(k)) for k in _DEVICE_FACTS if dev.has(k)}
    out: list[Measurement] = []
    for i, node in enumerate(root.list("benchmarks")):
        bench = root.item("benchmarks", i, node)
        name = bench.str("name", allow_empty=False)
        bench = root.item("benchmarks", i, node, benchmark=name)
        pow2 = _pow2_axes(bench)
        for j, snode in enumerate(bench.list("states", null_is_empty=True)):
            out.append(_state(bench.item("states", j, snode), name, pow2, devices, common, base_dir))
    return out


def _pow2_axes(bench: Reader) -> set[str]:
    """Axes NVBench prints as 2^k (int64 axes with the flag "pow2")."""
    names: set[str] = set()
    for k, node in enumerate(bench.list("axes", null_is_empty=True)):
        axis = bench.item("axes", k, node)
        if axis.str("type") == "int64" and "pow2" in axis.str("flags").split(","):
            names.add(axis.str("name"))
    return names


def _state(
    st: Reader,
    bench: str,
    pow2: set[str],
    devices: dict[int, dict[str, str]],
    common: dict[str, str],
    base_dir: Path | None,
) -> Measurement:
    state_name = st.str("name")
    device = st.int("device")
    axes: dict[str, str] = {}
    for k, node in enumerate(st.list("axis_values", null_is_empty=True)):
        av = st.item("axis_values", k, node)
        axes[av.str("name", allow_empty=False)] = _axis_shown(av, pow2)
    context = {**common, **devices.get(device, {}), "device": str(device), "nvbench_state": state_name}
    if st.bool("is_skipped"):
        reason = st.str("skip_reason") if st.has("skip_reason") else ""
        return Measurement(bench, axes, math.nan, "s", skipped=reason or "skipped by NVBench", context=context)
    summaries: dict[str, Reader] = {}
    for k, node in enumerate(st.list("summaries", null_is_empty=True)):
        s = st.item("summaries", k, node)
        summaries[s.str("tag", allow_empty=False)] = s
    if SAMPLE_SIZE in summaries and _value(summaries[SAMPLE_SIZE], "value", "int64") == 0 and GPU_MEAN not in summaries:
        return Measurement(
            bench,
            axes,
            math.nan,
            "s",
            error="NVBench accepted no sample (every trial discarded, e.g. throttled, before its timeout)",
            context=context,
        )
    if GPU_MEAN not in summaries:
        raise st.fail(
            "summaries", f"no summary '{GPU_MEAN}'; attrib reads NVBench's cold GPU time (a cold measurement writes it)"
        )
    mean = _value(summaries[GPU_MEAN], "value", "float64")
    if not mean > 0:
        raise summaries[GPU_MEAN].fail("data", f"'{GPU_MEAN}' is {mean!r}; expected a positive time")
    noise = _value(summaries[GPU_NOISE], "value", "float64") if GPU_NOISE in summaries else None
    samples: tuple[float, ...] = ()
    if SAMPLE_TIMES in summaries and base_dir is not None:
        samples = _sidecar(summaries[SAMPLE_TIMES], base_dir)
    return Measurement(
        bench, axes, mean, "s", samples, noise if noise is not None and math.isfinite(noise) else None, "", "", context
    )


def _axis_shown(av: Reader, pow2: set[str]) -> str:
    """An axis value as NVBench prints it in a state name (state::get_axis_values_as_string)."""
    kind = av.str("type")
    name = av.str("name")
    if kind not in VALUE_TYPES:
        raise av.fail("type", f"is {kind!r}; expected one of {', '.join(VALUE_TYPES)}")
    text = av.str("value")
    if kind == "string":
        return text
    try:
        number = int(text) if kind == "int64" else float(text)
    except ValueError:
        raise av.fail("value", f"{text!r} is not an {kind}") from None
    if kind == "float64":
        return f"{number:.5g}"
    if name in pow2:
        if not isinstance(number, int) or number <= 0 or number & (number - 1):  # a float here would be a TypeError
            raise av.fail("value", f"{number} is not a power of two, but axis '{name}' is pow2")
        return f"2^{int(number).bit_length() - 1}"
    return str(number)


def _value(summ: Reader, name: str, kind: str) -> Any:
    """The typed value `name` of a summary's data list (json_printer.cu: write_named_values)."""
    tag = summ.str("tag")
    for k, node in enumerate(summ.list("data", null_is_empty=True)):
        d = summ.item("data", k, node)
        if d.str("name") != name:
            continue
        if d.str("type") != kind:
            raise d.fail("type", f"'{tag}' {name} has type {d.raw('type')!r}; expected {kind!r}")
        text = d.str("value")
        try:
            return int(text) if kind == "int64" else float(text) if kind == "float64" else text
        except ValueError:
            raise d.fail("value", f"'{tag}' {name} {text!r} is not an {kind}") from None
    raise summ.fail("data", f"'{tag}' has no value '{name}'")


def _sidecar(summ: Reader, base_dir: Path) -> tuple[float, ...]:
    """The per-sample GPU times of one state. A summary without filename means NVBench could
    not write the file (it logs why): no samples, the summary values still count."""
    names = {summ.item("data", k, n).str("name") for k, n in enumerate(summ.list("data", null_is_empty=True))}
    if "filename" not in names:
        return ()
    filename = _value(summ, "filename", "string")
    size = _value(summ, "size", "int64")
    path = _resolve(base_dir, filename)
    try:
        payload = path.read_bytes()
    except OSError as exc:
        raise summ.fail("data", f"sample file {filename!r} cannot be read ({exc.strerror})") from None
    if len(payload) != 4 * size:
        raise summ.fail(
            "data",
            f"sample file {filename!r} has {len(payload)} bytes; expected {size} float32 values ({4 * size} bytes)",
        )
    values = struct.unpack(f"<{size}f", payload)
    for i, v in enumerate(values):
        if not (math.isfinite(v) and v > 0):
            raise summ.fail("data", f"sample {i} of {filename!r} is {v!r}; expected a positive finite time")
    return tuple(float(v) for v in values)


def _resolve(base_dir: Path, filename: str) -> Path:
    path = Path(filename)
    if path.is_absolute():
        return path
    direct = base_dir / path
    if direct.exists():
        return direct
    # NVBench before the relocatable-sidecar change wrote the path as given to --jsonbin
    # ("out/result.json-bin/0.bin"); the sidecar directory itself still sits next to the JSON.
    for i, part in enumerate(path.parts):
        if part.endswith("-bin") and (base_dir.joinpath(*path.parts[i:])).exists():
            return base_dir.joinpath(*path.parts[i:])
    return direct


def _fact(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


# --- the markdown log: what the JSON does not say ------------------------------------------

# markdown_printer.cu: "Run:  [1/4] copy [Device=0 T=F32]" (the progress part is optional).
# What the pattern ^Run:\s+(?:\[\d+/\d+\]\s+)?(.+?) \[(.*)\]\s*$ captures, read by run_line in
# linear time: that pattern backtracked quadratically on a long line (the log is the output of
# the commit under test, whatever that commit prints).
_PROGRESS = re.compile(r"\[\d+/\d+\]")
_SPACE = re.compile(r"\s*+")
# measure_cold.cu: "Warn: GPU throttled below threshold (...) on sample N. Discarding ..."
_THROTTLED = re.compile(r"^Warn:\s+GPU throttled below threshold")


def nvbench_throttle_discards(log: str) -> dict[tuple[str, str], int]:
    """(benchmark, NVBench state name) -> trials NVBench discarded as throttled, from its
    markdown log on stdout. States with none are absent; so is everything under `--quiet`."""
    counts: dict[tuple[str, str], int] = {}
    current: tuple[str, str] | None = None
    for line in log.splitlines():
        if (run := run_line(line)) is not None:
            current = run
        elif current is not None and _THROTTLED.match(line):
            counts[current] = counts.get(current, 0) + 1
    return counts


def run_line(line: str) -> tuple[str, str] | None:
    """(benchmark, state) of an NVBench "Run:" line, exactly as the pattern above captures them,
    in linear time. The line must end with "]" (then only whitespace); the benchmark starts at
    the first place the pattern's backtracking order allows (the longest whitespace and the
    progress part first) from which a " [" follows, and ends at the first such " [": whether
    one follows is one comparison with the last " [" of the line, whatever the start."""
    if not line.startswith("Run:"):
        return None
    body = line.rstrip()
    last = body.rfind(" [")
    if not body.endswith("]") or last < 0:
        return None
    ws_end = _space_end(line, 4)
    if ws_end == 4:
        return None
    grouped: range = range(0)
    if (p := _PROGRESS.match(line, ws_end)) and (after := _space_end(line, p.end())) > p.end():
        grouped = range(after, p.end(), -1)  # the group, its whitespace longest first
    for start in itertools.chain(grouped, range(ws_end, 4, -1)):  # then no group, longest first
        if last >= start + 1:
            cut = body.find(" [", start + 1)
            return line[start:cut], body[cut + 2 : -1]
    return None


def _space_end(text: str, pos: int) -> int:
    m = _SPACE.match(text, pos)
    return m.end() if m else pos
