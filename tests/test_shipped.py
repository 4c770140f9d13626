"""The shipped data is found from a checkout: one copy each at the top level, none under attrib/
(tests/test_wheel.py proves the installed side)."""

from __future__ import annotations

from pathlib import Path

import attrib
from attrib.shipped import Shipped, shipped_dir

ROOT = Path(attrib.__file__).resolve().parents[1]


def test_a_checkout_reads_the_top_level_copies():
    expected = {Shipped.KERNELS: "gemm_mma.cu", Shipped.RECIPES: "demo-cpu.toml", Shipped.CONTAINERS: "Dockerfile.cpu"}
    for what, name in expected.items():
        where = shipped_dir(what)
        assert where == ROOT / what.value, where
        assert (where / name).is_file()
        assert not (ROOT / "attrib" / what.value).exists(), f"a second copy of {what.value}/ under attrib/"
