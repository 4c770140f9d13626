"""A series as an SVG drawn on the server: points in first-parent order, change points marked.

Plain SVG text, no library and nothing fetched from anywhere, so the daemon's page works on
a machine with no internet and no plotting extra. Every change point is a vertical band
between its two commits, red for a regression and green for an improvement (amber, class
`environment`, for one the environment made: its title names the keys), wrapped in a
link to its bisection when there is one. Every text from outside (benchmark names, config)
is escaped, and a character XML 1.0 does not allow (C0 controls, which html.escape keeps;
ingestion refuses them, but older rows may hold them) becomes U+FFFD: the SVG stays
well-formed whatever is stored.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

WIDTH, HEIGHT = 720, 220
PAD_L, PAD_R, PAD_T, PAD_B = 70, 16, 16, 34
REGRESSION_COLOUR, IMPROVEMENT_COLOUR, POINT_COLOUR = "#c0392b", "#1e8449", "#2c3e50"
ENVIRONMENT_COLOUR = "#b9770e"  # a change the environment made (a toolkit, a driver): not the code's
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_text(text: str) -> str:
    """Escaped for XML text and attributes, with characters XML cannot hold replaced."""
    return _NOT_XML.sub("\ufffd", html.escape(text))


@dataclass(frozen=True)
class Mark:
    index: int  # first point after the change
    regression: bool
    label: str  # the hover text
    href: str | None  # its bisection (job page or report)
    recovered_at: int | None = None
    environment: bool = False  # attributed to an environment change (history/environment.py)


def series_svg(commits: Sequence[str], values: Sequence[float], unit: str, marks: Sequence[Mark], title: str) -> str:
    e = xml_text
    n = len(values)
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    if hi == lo:
        lo, hi = lo - abs(lo) * 0.05 - 1e-12, hi + abs(hi) * 0.05 + 1e-12
    span_x = WIDTH - PAD_L - PAD_R
    span_y = HEIGHT - PAD_T - PAD_B

    def x(i: float) -> float:
        return PAD_L + (span_x * i / (n - 1) if n > 1 else span_x / 2)

    def y(v: float) -> float:
        return PAD_T + span_y * (1 - (v - lo) / (hi - lo))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="series" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{e(title)}">',
        f"<title>{e(title)}</title>",
        f'<rect x="{PAD_L}" y="{PAD_T}" width="{span_x}" height="{span_y}" fill="#fbfbfb" stroke="#ccc"/>',
    ]
    for m in marks:
        left, right = x(m.index - 1), x(m.index)
        colour = ENVIRONMENT_COLOUR if m.environment else REGRESSION_COLOUR if m.regression else IMPROVEMENT_COLOUR
        kind = ("regression" if m.regression else "improvement") + (" environment" if m.environment else "")
        band = (
            f'<g class="change {kind}"><title>{e(m.label)}</title>'
            f'<rect x="{left:.1f}" y="{PAD_T}" width="{max(right - left, 2):.1f}" height="{span_y}" fill="{colour}" fill-opacity="0.18"/>'
            f'<line x1="{right:.1f}" y1="{PAD_T}" x2="{right:.1f}" y2="{PAD_T + span_y}" stroke="{colour}" stroke-width="2" stroke-dasharray="4 3"/>'
            "</g>"
        )
        parts.append(f'<a href="{e(m.href)}">{band}</a>' if m.href else band)
        if m.recovered_at is not None:
            rx = x(m.recovered_at)
            parts.append(
                f'<line class="recovered" x1="{rx:.1f}" y1="{PAD_T}" x2="{rx:.1f}" y2="{PAD_T + span_y}" stroke="{colour}" stroke-width="1"/>'
            )
    if n:
        path = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        parts.append(f'<polyline points="{path}" fill="none" stroke="{POINT_COLOUR}" stroke-width="1.2"/>')
        for i, (c, v) in enumerate(zip(commits, values, strict=True)):
            parts.append(
                f'<circle class="point" cx="{x(i):.1f}" cy="{y(v):.1f}" r="2.5" fill="{POINT_COLOUR}"><title>{e(c[:10])}: {v:.6g} {e(unit)}</title></circle>'
            )
        parts += [
            f'<text x="{PAD_L - 6}" y="{PAD_T + 10}" text-anchor="end" font-size="11">{hi:.4g} {e(unit)}</text>',
            f'<text x="{PAD_L - 6}" y="{PAD_T + span_y}" text-anchor="end" font-size="11">{lo:.4g} {e(unit)}</text>',
            f'<text x="{PAD_L}" y="{HEIGHT - 10}" font-size="11" font-family="monospace">{e(commits[0][:10])}</text>',
            f'<text x="{WIDTH - PAD_R}" y="{HEIGHT - 10}" text-anchor="end" font-size="11" font-family="monospace">{e(commits[-1][:10])}</text>',
        ]
    else:
        parts.append(f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" font-size="12">no points on the branch yet</text>')
    parts.append("</svg>")
    return "".join(parts)
