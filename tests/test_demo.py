"""`attrib demo` end to end, as the README's first command runs it."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

pytestmark = pytest.mark.slow


def test_demo_finds_the_planted_culprit(tmp_path):
    res = run_cli("demo", "--dir", tmp_path / "d")
    assert res.code == 0, res.stdout + res.stderr
    assert "the planted culprit was found" in res.stdout
    from attrib.evaluate.gpu.device import probe

    why = probe()
    if why:  # no GPU here: the demo says so, and why, and uses the CPU benchmark
        assert f"no usable GPU ({why}): using the CPU benchmark" in res.stdout
        assert "runner: command (benchmark 'loop' of demo-cpu.toml;" in res.stdout
    else:
        assert "runner: cupy (benchmark 'gemm-bf16' of demo-cupy.toml;" in res.stdout
    result = json.loads((tmp_path / "d" / "result.json").read_text())
    assert result["status"] == "culprit_found" and len(result["culprits"]) == 1
    assert result["range_commits"] >= 60
    assert "Culprit found" in (tmp_path / "d" / "report.md").read_text()
    # Running it again replaces its own directory; it refuses to clobber anything else.
    assert run_cli("demo", "--dir", tmp_path / "d").code == 0
    other = tmp_path / "mine"
    other.mkdir()
    refused = run_cli("demo", "--dir", other)
    assert refused.code == 2 and "not an attrib demo directory" in refused.stderr


def test_demo_asked_for_the_gpu_without_one_is_one_clear_line(tmp_path):
    from attrib.evaluate.gpu.device import probe

    if not probe():
        pytest.skip("this machine has a GPU: the cupy demo runs in scripts/gpu-check")
    res = run_cli("demo", "--dir", tmp_path / "d", "--runner", "cupy")
    assert res.code == 2
    assert "times kernels on a GPU, and there is none here" in res.stderr and res.stderr.count("\n") == 1
    assert not (tmp_path / "d").exists()  # refused before anything was written


def test_demo_cupy_recipe_file_matches_the_embedded_text():
    from attrib.demo import DEMO_CUPY_RECIPE
    from attrib.recipe import load_recipe
    from attrib.shipped import Shipped, shipped_dir

    path = shipped_dir(Shipped.RECIPES) / "demo-cupy.toml"
    assert path.read_text() == DEMO_CUPY_RECIPE
    bench = load_recipe(path).benchmark(None)
    assert bench.cupy is not None and bench.cupy.kernel == "gemm_mma" and bench.cupy.include_dirs == ("include",)
