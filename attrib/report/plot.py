"""Pictures of a result: a text sparkline (always) and a PNG plot (when matplotlib is installed).

Both read only the result (its per-commit `quantiles` and `sample_values`), so a stored result
re-renders exactly as the live one did.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attrib.core.model import Purpose, Verdict
from attrib.result.types import BisectResult, CommitRow, Role

SPARK_BLOCKS = "▁▂▃▄▅▆▇█"
SPARK_SKIP = "×"  # did not build or run: no samples
PLOT_SIZE_PX = (1000, 450)
PLOT_DPI = 100


def plot_available() -> bool:
    """matplotlib is an optional extra (`attrib[plot]`); without it the report is text only."""
    return importlib.util.find_spec("matplotlib") is not None


def _tested(result: BisectResult) -> list[CommitRow]:
    return [row for row in result.commits if row.samples or row.verdict is Verdict.SKIP]


def series_sparkline(values: Sequence[float], change_at: int | None, min_change_pct: float) -> list[str]:
    """A nightly series as two monospace lines: each night's value, and a caret under the first
    night after the change (the plot a tracker without images still shows)."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    span = max(hi - lo, abs(lo) * min_change_pct / 100)
    marks = "".join(SPARK_BLOCKS[0 if span <= 0 else round((v - lo) / span * (len(SPARK_BLOCKS) - 1))] for v in values)
    lines = ["nightly " + marks]
    if change_at is not None and 0 <= change_at < len(values):
        lines.append(" " * (len("nightly ") + change_at) + "^ change")
    return lines


def sparkline(result: BisectResult) -> list[str]:
    """Two monospace lines: the median of each tested commit in history order, and a caret
    under each culprit. Trackers that show no images still show the step."""
    rows = _tested(result)
    medians = [row.median for row in rows if row.median is not None]
    if not medians:
        return []
    lo, hi = min(medians), max(medians)
    # At least the recipe's minimum change spans the blocks: a 0.1 % wobble must not look like a step.
    span = max(hi - lo, abs(lo) * result.settings.min_change_pct / 100)
    culprits = {c.commit for c in result.culprits}
    marks, carets = [], []
    for row in rows:
        m = row.median
        if m is None:
            marks.append(SPARK_SKIP)
        else:
            level = 0 if span <= 0 else round((m - lo) / span * (len(SPARK_BLOCKS) - 1))
            marks.append(SPARK_BLOCKS[level])
        carets.append("^" if row.commit in culprits else " ")
    line = "good " + "".join(marks) + " bad"
    lines = [line]
    if culprits & {row.commit for row in rows}:
        lines.append("     " + "".join(carets).rstrip())
    return lines


def _scale(unit: str, values: list[float]) -> tuple[float, str]:
    """A display scale so the axis reads 1.02 ms rather than 0.00102 s."""
    if unit != "s" or not values:
        return 1.0, unit
    top = max(abs(v) for v in values)
    for factor, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        if top >= factor:
            return factor, name
    return 1e-9, "ns"


def render_plot(result: BisectResult, path: Path) -> Path:
    """Per tested commit along the range: a box (5/25/50/75/95 %) over its jittered samples,
    the good and bad references' interquartile bands across the plot, culprits marked in red.
    Writes a PNG of exactly PLOT_SIZE_PX pixels (no tight bbox: the size is part of the contract)."""
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [row for row in _tested(result) if row.quantiles]
    quantiles = {row.commit: row.quantiles or () for row in rows}
    everything = [v for row in rows for v in row.sample_values] + [q for row in rows for q in quantiles[row.commit]]
    factor, unit = _scale(result.unit, everything)
    culprits = {c.commit for c in result.culprits}
    width, height = PLOT_SIZE_PX
    fig, (ax, side) = plt.subplots(
        1, 2, figsize=(width / PLOT_DPI, height / PLOT_DPI), dpi=PLOT_DPI, gridspec_kw={"width_ratios": [3, 1]}
    )
    try:
        _paired_shifts(side, result)
        for role, color in ((Role.GOOD, "tab:green"), (Role.BAD, "tab:red")):
            ref = next((row for row in rows if row.role is role), None)
            if ref is not None:
                band = quantiles[ref.commit]
                ax.axhspan(band[2] / factor, band[4] / factor, color=color, alpha=0.12, label=f"{role.value} reference (25-75 %)")
        rng = np.random.default_rng(0)  # fixed jitter: the same result gives the same picture
        stats = []
        for x, row in enumerate(rows):
            q = [v / factor for v in quantiles[row.commit]]
            stats.append(
                {"whislo": q[1], "q1": q[2], "med": q[3], "q3": q[4], "whishi": q[5], "fliers": [], "label": ""}
            )
            values = np.asarray(row.sample_values, dtype=float) / factor
            color = "tab:red" if row.commit in culprits else "tab:blue"
            ax.scatter(x + rng.uniform(-0.18, 0.18, values.size), values, s=6, alpha=0.45, color=color, linewidths=0)
            if row.commit in culprits:
                ax.axvline(x - 0.5, color="tab:red", linestyle="--", linewidth=1)
        if stats:
            ax.bxp(stats, positions=list(range(len(rows))), widths=0.5, showfliers=False, manage_ticks=False)
        if rows:
            # Axis from the boxes (25-75 %) plus a margin: a few 2x outliers (a noisy machine)
            # would otherwise squash the step the plot is there to show. Clipped points are counted.
            lo = min(quantiles[row.commit][2] for row in rows) / factor
            hi = max(quantiles[row.commit][4] for row in rows) / factor
            pad = 0.75 * (hi - lo or abs(hi) * 0.01 or 1.0)
            ax.set_ylim(lo - pad, hi + pad)
            shown = [v / factor for row in rows for v in row.sample_values]
            outside = sum(1 for v in shown if not lo - pad <= v <= hi + pad)
            if outside:
                ax.text(0.99, 0.98, f"{outside} samples outside the axis", transform=ax.transAxes, ha="right", va="top", fontsize=7)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels([row.commit[:7] for row in rows], rotation=60, fontsize=7, family="monospace")
        for tick, row in zip(ax.get_xticklabels(), rows, strict=True):
            if row.commit in culprits:
                tick.set_color("tab:red")
                tick.set_fontweight("bold")
        ax.set_ylabel(f"{result.benchmark} [{unit}] ({result.direction.value} is better)")
        ax.set_xlabel("tested commits in history order (culprits in red, dashed line before each)")
        ax.set_title(f"attrib: {result.benchmark}, {result.status.value.replace('_', ' ')}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", fontsize=7)
        fig.subplots_adjust(left=0.07, right=0.99, top=0.92, bottom=0.25, wspace=0.25)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=PLOT_DPI, format="png")
    finally:
        plt.close(fig)
    return path


PAIRED_PURPOSES = (Purpose.PREFLIGHT, Purpose.PROBE, Purpose.RETEST, Purpose.EXTEND, Purpose.CONFIRM)


def _paired_shifts(ax: Any, result: BisectResult) -> None:
    """Each measured comparison's paired change against its own reference, with its 95 %
    interval. Pooled levels drift with the machine; a paired shift does not, so two
    byte-identical binaries never look like a step here."""
    comps = [c for c in result.comparisons if c.purpose in PAIRED_PURPOSES and c.change_pct is not None and c.ci_pct]
    culprits = {c.commit for c in result.culprits}
    for y, c in enumerate(comps):
        assert c.change_pct is not None and c.ci_pct is not None
        lo, hi = c.ci_pct
        color = "tab:red" if c.candidate in culprits and c.purpose is Purpose.CONFIRM else "tab:blue"
        ax.errorbar(c.change_pct, y, xerr=[[c.change_pct - lo], [hi - c.change_pct]], fmt="o", ms=3, color=color)
    min_change = result.settings.min_change_pct
    ax.axvline(0.0, color="black", linewidth=0.8)
    if min_change:
        ax.axvline(min_change, color="tab:red", linestyle=":", linewidth=1, label=f"minimum change {min_change:g} %")
        ax.legend(loc="lower right", fontsize=6)
    ax.set_yticks(range(len(comps)))
    ax.set_yticklabels([f"{c.candidate[:7]} vs {c.reference[:7]}" for c in comps], fontsize=6, family="monospace")
    ax.invert_yaxis()
    ax.set_xlabel("paired change vs its reference [%] (95 % CI)", fontsize=7)
    ax.set_title("paired shifts", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
