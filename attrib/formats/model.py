"""The one record every format parser returns (see attrib/formats/__init__.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Measurement:
    benchmark: str
    state: Mapping[str, str]
    value: float
    unit: str
    samples: tuple[float, ...] = ()
    noise: float | None = None
    skipped: str = ""
    error: str = ""
    context: Mapping[str, str] = field(default_factory=dict)
    sample_s: float | None = (
        None  # wall seconds the samples took, where the format says (gbench: iterations x real time)
    )

    @property
    def usable(self) -> bool:
        """Measured: neither skipped nor failed, with a finite central value."""
        return not self.skipped and not self.error and math.isfinite(self.value)

    def state_label(self) -> str:
        """`T=F32 Elements=2^24`, as NVBench prints a state (without its device)."""
        return " ".join(f"{k}={v}" for k, v in self.state.items())
