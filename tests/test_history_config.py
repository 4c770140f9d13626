"""The daemon config's [history] table and the pure flag decision."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attrib.core.detect import DetectSettings
from attrib.daemon.config import read_config
from attrib.errors import ConfigError
from attrib.history.flagging import Covered, Span, decide
from attrib.history.projects import MapRule, ProjectConfig
from attrib.history.settings import detect_settings
from attrib.history.store import FlagState


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "daemon.toml"
    path.write_text(text)
    return path


def test_history_table_is_read_with_its_mapping_and_detect_settings(tmp_path: Path):
    cfg = read_config(_write(tmp_path, '[history.projects.k]\nrepo = "/srv/k"\ndetect = { min_segment = 4 }\n'
                                       'map = [ { pattern = "gemm*", recipe = "k.toml", benchmark = "gemm" } ]\n'))  # fmt: skip
    p = cfg["history"].projects["k"]
    assert (p.repo, p.branch, p.detect.min_segment, p.rule_for("gemm_bf16"), p.rule_for("copy")) == (
        "/srv/k", "HEAD", 4, MapRule("gemm*", "k.toml", "gemm"), None
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[history.projects.k]\nrepo = "/r"\nmap = [ { pattern = "g*" } ]\n', "key 'history.projects.k.map[0].recipe': missing; expected a non-empty string"),
        ('[history.projects.k]\nrepo = "/r"\ndetect = { min_segmnet = 4 }\n', "key 'history.projects.k.detect.min_segmnet': unknown key (expected one of: min_segment, "),
        ('[history.projects.k]\nbranch = "main"\n', "key 'history.projects.k.repo': missing"),
        ('[history.projects.k]\nrepo = "/r"\ndetect = { min_segment = 1 }\n', "key 'history.projects.k.detect': min_segment must be >= 2"),
        ('[history.projects.k]\nrepo = "/r"\ndetect = 4\n', "key 'history.projects.k.detect': expected a table of detection settings, got 4"),
        ('[history.projects.k]\nrepo = "/r"\nmap = { pattern = "g*" }\n', "key 'history.projects.k.map': expected a list of {pattern, recipe, benchmark} tables"),
        ('[history.projects.k]\nrepo = "/r"\nname = "other"\n', "key 'history.projects.k.name': unknown key (a project's name is its table's name)"),
        ('[history]\npublic_url = "ftp://x"\n', "key 'history.public_url': expected an http(s) URL, got 'ftp://x'"),
        ('[history.projects.k]\nrepo = "/r"\nmax_bisections_per_day = "many"\n', "key 'history.projects.k.max_bisections_per_day': expected an integer, 0 or more, got 'many'"),
    ],
)
def test_bad_history_config_names_the_key(tmp_path: Path, text: str, expected: str):
    with pytest.raises(ConfigError) as info:
        read_config(_write(tmp_path, text))
    assert expected in str(info.value) and "\n" not in str(info.value)
    assert str(info.value).startswith(f"{tmp_path / 'daemon.toml'}: key 'history.")


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ({"min_segment": "x"}, "--setting: key 'min_segment': expected an integer, got 'x'"),
        ({"nope": "1"}, "--setting: key 'nope': unknown key (expected one of: min_segment, min_change_pct, alpha"),
        ({"min_segment": "1"}, "--setting: min_segment must be >= 2"),
    ],
)
def test_bad_detect_setting_text_is_the_same_config_error(pairs: dict[str, str], expected: str):
    # `attrib detect --setting` goes through the decoder the [history] table's detect goes through.
    with pytest.raises(ConfigError, match=re.escape(expected)):
        detect_settings(pairs, "--setting")
    assert detect_settings({"min_segment": "7", "alpha": "0.01"}, "--setting") == DetectSettings(min_segment=7, alpha=0.01)


PROJECT = ProjectConfig(name="k", repo="/r", map=(MapRule("loop*", "demo.toml", None),), max_bisections_per_day=2)


def test_decide_order_of_reasons():
    span = Span(10, 12)
    assert decide(PROJECT, "loop", False, span, [], 0).state is FlagState.RECORDED
    assert decide(PROJECT, "gemm", True, span, [], 0).state is FlagState.UNMAPPED
    dup = decide(PROJECT, "loop", True, span, [Covered(Span(11, 20), "j1", "open job")], 5)
    assert (dup.state, dup.job_id) == (FlagState.DUPLICATE, "j1")  # a covered range is no bisection, limit or not
    assert decide(PROJECT, "loop", True, span, [Covered(Span(12, 20), "j1", "open job")], 2).state is FlagState.RATE_LIMITED
    assert decide(PROJECT, "loop", True, span, [Covered(Span(0, 10), "j0", "earlier flag")], 1).state is FlagState.QUEUED


def test_spans_that_share_no_blamable_commit_do_not_overlap():
    assert Span(10, 12).overlaps(Span(11, 13)) and Span(10, 12).overlaps(Span(0, 30))
    assert not Span(10, 12).overlaps(Span(12, 14)) and not Span(10, 12).overlaps(Span(5, 10))
