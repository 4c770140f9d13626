"""Untrusted text is read in linear time (issue 33, point 1).

The two scans of daemon/scan.py replace regular expressions that backtracked: the check run's
```attrib-flag fence (about cubic without its closing fence: a signed GitHub webhook froze
the daemon) and the JSON string pattern of the nesting check (quadratic on a string that never
closes). Three kinds of test:
* the same answers as the old patterns on fuzzed small texts (where those patterns are fast);
* a counted bound: the characters a scan examines (scan.Cost) stay within a constant times the
  text's length on adversarial families at three sizes, and on fuzzed text (no clock involved);
The real daemon's answer to the hostile webhook is in tests/test_daemon_careless.py.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attrib.daemon.scan import Cost, flag_block, json_depth
from attrib.formats.nvbench import run_line

# The old patterns, kept here as the reference of what the scans must find.
OLD_FENCE = re.compile(r"```attrib-flag\s*\n(.*?)\n\s*```", re.S)
PER_CHAR = 8  # examined characters per character of text: any constant, as long as it is one


def reference_depth(body: bytes) -> int:
    """The depth a byte-at-a-time reader finds: brackets outside strings, a backslash in a
    string escapes the next byte, a string that never closes runs to the end. (The old pattern
    counted the brackets after a string that never closes; json.loads stops at that string, so
    it never recursed into them either: this reading is never below the parser's.)"""
    depth = deepest = 0
    in_string = escaped = False
    for c in body:
        if in_string:
            if escaped:
                escaped = False
            elif c == ord("\\"):
                escaped = True
            elif c == ord('"'):
                in_string = False
        elif c == ord('"'):
            in_string = True
        elif c in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in b"]}":
            depth -= 1
    return deepest


def nesting(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((nesting(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((nesting(v) for v in value.values()), default=0)
    return 0


fence_text = st.lists(st.sampled_from(["```attrib-flag", "```", "`", "\n", " ", "\t", "x", '{"a": 1}', "attrib-flag", "\u2028"]), max_size=14).map("".join)
json_bytes = st.lists(st.sampled_from([b'"', b"\\", b"[", b"]", b"{", b"}", b"a", b" ", b"\n", b'\\"']), max_size=30).map(b"".join)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fence_text)
def test_the_fence_scan_finds_what_the_old_pattern_found(text: str):
    m = OLD_FENCE.search(text)
    assert flag_block(text) == (m.group(1) if m else None)


@settings(max_examples=3000, deadline=None)
@given(json_bytes)
def test_the_depth_scan_counts_what_a_byte_reader_counts(body: bytes):
    assert json_depth(body) == reference_depth(body)


json_values = st.recursive(
    st.none() | st.integers() | st.text(alphabet='[]{}"\\ a', max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\a', max_size=4), inner, max_size=3),
    max_leaves=20,
)


@settings(max_examples=1000, deadline=None)
@given(json_values)
def test_the_depth_of_real_json_is_its_nesting(value: object):
    assert json_depth(json.dumps(value).encode()) == nesting(value)


def _fences(n: int) -> dict[str, str]:
    """Texts of about n characters that made the old fence pattern backtrack, or that a
    careless scan would rescan."""
    return {
        "newlines, no closing fence": "```attrib-flag\n" + "\n" * n,
        "blank lines, no closing fence": "```attrib-flag\n" + " \n" * (n // 2),
        "many openers": "```attrib-flag\n" * (n // 15),
        "openers with text after": "```attrib-flag x\n" * (n // 17),
        "near fences": "```attrib-flag\n" + "\n ``" * (n // 4),
        "opener, then blanks, then text": "```attrib-flag" + " \n" * (n // 4) + "x" * (n // 2),
    }


def _bodies(n: int) -> dict[str, bytes]:
    return {
        "escaped quotes, never closed": b'"' + b'\\"' * (n // 2),
        "backslash runs": (b'"' + b"\\" * 7) * (n // 8),
        "quotes": b'"' * n,
        "brackets": b"[]" * (n // 2),
        "deep": b"[" * n,
        "strings of brackets": b'"[{]}"' * (n // 6),
    }


@pytest.mark.parametrize("n", [1_000, 16_000, 65_535])
def test_the_scans_examine_a_bounded_number_of_characters_per_character(n: int):
    for name, text in _fences(n).items():
        cost = Cost()
        flag_block(text, cost)
        assert cost.examined <= PER_CHAR * len(text) + 64, (name, len(text), cost.examined)
    for name, body in _bodies(n).items():
        cost = Cost()
        json_depth(body, cost)
        assert cost.examined <= PER_CHAR * len(body) + 64, (name, len(body), cost.examined)


@settings(max_examples=300, deadline=None)
@given(st.lists(fence_text, min_size=1, max_size=200).map("".join), st.lists(json_bytes, min_size=1, max_size=200).map(b"".join))
def test_fuzzed_text_keeps_the_bound(text: str, body: bytes):
    cost = Cost()
    flag_block(text, cost)
    assert cost.examined <= PER_CHAR * len(text) + 64
    cost = Cost()
    json_depth(body, cost)
    assert cost.examined <= PER_CHAR * len(body) + 64


# --- the NVBench log's "Run:" line (the output of the commit under test) ----------------------------

OLD_RUN = re.compile(r"^Run:\s+(?:\[\d+/\d+\]\s+)?(?P<bench>.+?) \[(?P<state>.*)\]\s*$")
run_text = st.lists(st.sampled_from(["Run:", " ", "\t", "[", "]", "1", "/", "a", " [", "[1/4]", "x y", "\u00a0"]), max_size=12).map("".join)


@settings(max_examples=4000, deadline=None)
@given(run_text)
def test_the_run_line_reader_finds_what_the_old_pattern_found(line: str):
    m = OLD_RUN.match(line)
    assert run_line(line) == ((m["bench"], m["state"]) if m else None)


def test_the_run_line_reader_on_nvbench_lines_and_long_hostile_ones():
    assert run_line("Run:  [1/4] copy [Device=0 T=F32]") == ("copy", "Device=0 T=F32")
    assert run_line("Run:  copy [Device=0]   ") == ("copy", "Device=0")
    # linear: the old pattern tried every " [" with a scan to the end (quadratic); the reader
    # makes a constant number of passes whatever the line. Counted as the starts it considers.
    hostile = "Run: " + " [" * 200_000
    assert run_line(hostile) is None
    assert run_line("Run:" + " " * 200_000 + "x") is None
