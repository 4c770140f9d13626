"""The markdown report and the plot, rendered from real result documents (attrib's engine on
simulated histories, tests/sim_results.py). Golden files pin the whole text of the main
outcomes; regenerate them with ATTRIB_UPDATE_GOLDEN=1 after a deliberate change, and read the diff."""

from __future__ import annotations

import os
import struct
from dataclasses import replace
from pathlib import Path

import pytest
from sim_results import simulated_result

from attrib.core.model import SearchMethod, Status
from attrib.report.markdown import headline, render_markdown
from attrib.report.plot import PLOT_SIZE_PX, plot_available, render_plot, sparkline
from attrib.result.types import BisectResult, Environment

GOLDEN = Path(__file__).parent / "golden"
OUTCOMES = ("culprit", "two_culprits", "not_reproduced", "inconclusive")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, BisectResult]:
    tmp = tmp_path_factory.mktemp("sim")
    return {name: simulated_result(name, tmp) for name in OUTCOMES}


@pytest.mark.parametrize("name", OUTCOMES)
def test_golden(results, name):
    text = render_markdown(results[name], plot="plot.png" if name == "culprit" else None)
    path = GOLDEN / f"{name}.md"
    if os.environ.get("ATTRIB_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{path} differs; if intended, rerun with ATTRIB_UPDATE_GOLDEN=1 and review"


# The default search's reports, over the same histories and one whose machine drifts: every
# sentence the posterior search's path puts in front of a reader is pinned here.
POSTERIOR_OUTCOMES = (*OUTCOMES, "drift")


@pytest.fixture(scope="module")
def posterior_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, BisectResult]:
    tmp = tmp_path_factory.mktemp("sim-posterior")
    return {name: simulated_result(name, tmp, SearchMethod.POSTERIOR) for name in POSTERIOR_OUTCOMES}


@pytest.mark.parametrize("name", POSTERIOR_OUTCOMES)
def test_golden_posterior(posterior_results, name):
    text = render_markdown(posterior_results[name])
    path = GOLDEN / f"posterior_{name}.md"
    if os.environ.get("ATTRIB_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{path} differs; if intended, rerun with ATTRIB_UPDATE_GOLDEN=1 and review"


def test_the_posterior_reports_say_what_the_search_does_today(posterior_results):
    # The drift line named a drift fit the posterior search no longer has (removed in 864552a):
    # it runs the reference in every round and reads each block against it.
    drifted = posterior_results["drift"]
    assert drifted.drift and all(r.settings.search is SearchMethod.POSTERIOR for r in posterior_results.values())
    text = render_markdown(drifted)
    assert "runs the reference in every round and reads each block against it" in text
    assert "fits a drift" not in text
    assert [posterior_results[n].status for n in ("culprit", "two_culprits", "not_reproduced")] == [
        Status.CULPRIT_FOUND, Status.CULPRIT_FOUND, Status.NOT_REPRODUCED
    ]


NOISY = ("noisy_preflight", "noisy_tree")  # the posterior search at noise too high for the minimum (issue 34)


@pytest.fixture(scope="module")
def noisy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, BisectResult]:
    tmp = tmp_path_factory.mktemp("noisy")
    return {name: simulated_result(name, tmp) for name in NOISY}


@pytest.mark.parametrize("name", NOISY)
def test_golden_at_noise_too_high_for_the_minimum(noisy, name):
    text = render_markdown(noisy[name])
    path = GOLDEN / f"{name}.md"
    if os.environ.get("ATTRIB_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{path} differs; if intended, rerun with ATTRIB_UPDATE_GOLDEN=1 and review"


def test_the_noise_warning_is_said_once_under_the_headline(noisy):
    # where the user reads it, whichever test showed it, an undecided preflight's report too
    # (before, that warning went to the log only)
    assert noisy["noisy_preflight"].status is Status.INCONCLUSIVE
    assert len(noisy["noisy_tree"].culprits) == 2
    for result in noisy.values():
        text = render_markdown(result)
        first_screen = text.split("\n## ")[0]
        assert text.count("warning: the per-round noise is") == 1
        assert "warning: the per-round noise is" in first_screen and "smallest min_change_pct" in first_screen
    tree = render_markdown(noisy["noisy_tree"])
    # its remaining-change tests ran on while the unexplained change reached the minimum (no
    # futility stop there: issue 39), ended undecided, and the headline says what is left
    assert "stayed undecided" in tree and "unexplained, undecided at this noise" in tree


def test_the_simulated_outcomes_are_the_ones_the_golden_files_claim(results):
    # The goldens are only worth something if the inputs are the outcomes they are named for.
    assert [results[n].status for n in OUTCOMES] == [
        Status.CULPRIT_FOUND, Status.CULPRIT_FOUND, Status.NOT_REPRODUCED, Status.INCONCLUSIVE
    ]
    assert len(results["culprit"].culprits) == 1 and len(results["two_culprits"].culprits) == 2
    assert results["culprit"].build_failures, "the culprit scenario shows a build failure excerpt"


def test_headlines_say_what_happened_in_one_line(results):
    c = results["culprit"].culprits[0]
    line = headline(results["culprit"])
    assert "\n" not in line
    assert line.startswith("**Culprit found** in") and c.subject in line and c.author in line
    assert f"{c.change_pct:+.1f} %" in line and "gemm_fp16" in line
    assert headline(results["two_culprits"]).startswith("**2 culprits found**")
    assert headline(results["not_reproduced"]).startswith("**Not reproduced**")
    u = results["inconclusive"].unresolved[0]
    assert f"`{u.last_good[:10]}`..`{u.first_bad[:10]}`" in headline(results["inconclusive"])


def test_first_screen_is_short_and_details_come_after(results):
    text = render_markdown(results["culprit"])
    first_section = text.index("\n## ")
    assert text[:first_section].count("\n") <= 15
    assert text.index("## Tested commits") < text.index("<details>") < text.index("</details>")
    c = results["culprit"].culprits[0]
    for needed in (c.commit, c.author, c.date, *c.files, "90 % of the whole regression"):
        assert needed in text, needed


def test_static_diff_and_gpu_environment_render_when_present(results):
    r = results["culprit"]
    plain = render_markdown(r)
    assert "Static kernel diff" not in plain and "GPU: none recorded" in plain
    culprit = replace(r.culprits[0], static_diff={"registers": (96, 168), "spill_stores_bytes": (0, 24)})
    gpu = {"name": "NVIDIA H200", "driver": "570.86", "cuda": "12.8", "clocks": {"sm_mhz": 1980}}
    text = render_markdown(replace(r, culprits=(culprit,), environment=Environment(gpu=(gpu,))))
    assert "| registers | 96 | 168 | +72 (+75 %) |" in text
    assert "| spill_stores_bytes | 0 | 24 | +24 |" in text
    assert "- GPU: NVIDIA H200, driver 570.86, cuda 12.8, clocks sm_mhz 1980" in text


def test_sparkline_marks_the_step_and_the_culprits(results):
    lines = sparkline(results["two_culprits"])
    marks = lines[0].removeprefix("good ").removesuffix(" bad")
    assert marks[0] == "▁" and marks[-1] == "█"
    assert lines[1].count("^") == 2
    # Below the recipe's minimum change the line stays flat instead of magnifying noise.
    flat = sparkline(results["not_reproduced"])[0]
    assert set(flat.removeprefix("good ").removesuffix(" bad")) <= set("▁▂")


def test_skipped_builds_show_as_a_cross(results):
    assert "×" in sparkline(results["culprit"])[0]


@pytest.mark.skipif(not plot_available(), reason="matplotlib not installed (the plot extra)")
def test_plot_is_a_png_of_the_expected_size(results, tmp_path):
    path = render_plot(results["two_culprits"], tmp_path / "out" / "plot.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == PLOT_SIZE_PX
    assert len(data) > 10_000  # something was drawn, not an empty canvas


def test_report_without_matplotlib_is_text_only(results, monkeypatch):
    import attrib.report.plot

    monkeypatch.setattr(attrib.report.plot.importlib.util, "find_spec", lambda name: None)
    assert not attrib.report.plot.plot_available()
    assert "![" not in render_markdown(results["culprit"])


def test_series_sparkline_marks_the_first_night_after_the_change():
    from attrib.report.plot import series_sparkline

    values = [1.0, 1.01, 0.99, 1.0, 1.4, 1.41, 1.39]
    line, caret = series_sparkline(values, 4, 2.0)
    marks = line.removeprefix("nightly ")
    assert len(marks) == len(values) and marks[:4] == "▁▁▁▁" and set(marks[4:]) == {"█"}
    assert caret.index("^") == len("nightly ") + 4
    assert series_sparkline([], None, 2.0) == []
    assert len(series_sparkline(values, None, 2.0)) == 1  # no change position: no caret line
