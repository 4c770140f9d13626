"""Strict readers for the output of the benchmark tools kernel trees already use.

One parser per format, shared by the runners (attrib/evaluate/runners/gbench.py, nvbench.py)
and by history ingestion, so that a result file means the same thing wherever attrib reads it:

- `parse_gbench(text, source, time=GbenchTime.REAL)`: Google Benchmark's
  `--benchmark_format=json` (or `--benchmark_out_format=json`) document.
- `parse_nvbench(text, source, base_dir=None)`: NVBench's `--json` / `--jsonbin` document,
  written by the C++ library and, through the same printer, by the cuda-bench Python package
  (`cuda.bench`). With `base_dir` (the directory of the JSON file) the per-sample times of
  `--jsonbin` are read from their sidecar files.
- `nvbench_throttle_discards(log)`: how many trials NVBench discarded as throttled, per state,
  counted from its markdown log (the JSON never mentions them).

Each returns one `Measurement` per benchmark (gbench) or per state (NVBench):

    benchmark  the tool's benchmark name ("BM_Copy/1024", "copy_type_sweep")
    state      NVBench axis values as NVBench prints them ({"T": "F32", "Elements": "2^24"});
               empty for gbench
    value      the central value: gbench's median aggregate (or the median of the
               repetitions), NVBench's mean cold GPU time; NaN when skipped or failed
    unit       the unit of value and samples as the tool states it ("ns", "s")
    samples    per-repetition (gbench) or per-sample (NVBench --jsonbin) values; () when the
               format has none (NVBench --json only, a failed or skipped benchmark)
    noise      the tool's own relative noise (gbench's cv aggregate, NVBench's relative
               stdev of GPU times) or None when it gives none or cannot estimate one
    skipped    the tool's skip reason, or ""
    error      the tool's own failure message (gbench error_occurred, an NVBench state with
               no accepted sample), or ""
    context    machine and device facts as strings (host, CPUs, GPU name, tool version);
               gbench's own `env.<key>` context entries (`--benchmark_context`) kept as written

Strictness: each parser checks the version field its tool writes (gbench
`context.json_schema_version` 1 when present, absent before libbenchmark 1.8.4; NVBench
`meta.version.json` major 1) and every field it reads. Anything else raises one
`FormatError` naming the source, the benchmark and the field. The parsers never print, never
run anything and read no file except NVBench's sample sidecars under `base_dir`.
"""

from __future__ import annotations

from attrib.formats.gbench import GbenchTime, parse_gbench
from attrib.formats.model import Measurement
from attrib.formats.nvbench import nvbench_throttle_discards, parse_nvbench

__all__ = ["GbenchTime", "Measurement", "nvbench_throttle_discards", "parse_gbench", "parse_nvbench"]
