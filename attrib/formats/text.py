"""The one rule for text that arrives in a results file (issue 20), whatever its format: it
ends up in SQLite, in one-line error messages, in the series page's HTML and in its SVG.

Refused: C0 and C1 control characters and DEL (Unicode category Cc: they make the SVG not
well-formed XML and can split a log line), and the bidirectional embedding, override and
isolate controls (U+202A-U+202E, U+2066-U+2069: they reorder the page's own text around
them). Right-to-left letters themselves are fine. Each kind of text has a length bound.
"""

from __future__ import annotations

import unicodedata

from attrib.errors import IngestError

MAX_BENCHMARK = 500  # characters of a benchmark name (and of a configuration value)
MAX_UNIT = 40
MAX_CONFIG_KEY = 100
MAX_FILE_NAME = 200
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def text_problem(value: str, max_chars: int) -> str | None:
    """Why `value` breaks the rule (one phrase), or None."""
    if len(value) > max_chars:
        return f"expected at most {max_chars} characters, got {len(value)}"
    for i, ch in enumerate(value):
        if ch in _BIDI_CONTROLS or unicodedata.category(ch) == "Cc":
            return f"character {i + 1} is the control character U+{ord(ch):04X}; expected printable text"
    return None


def check_text(value: str, max_chars: int, source: str, row: str, field: str) -> None:
    problem = text_problem(value, max_chars)
    if problem is not None:
        raise IngestError(source, row, field, problem)
