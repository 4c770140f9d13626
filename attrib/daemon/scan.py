"""Linear scans of untrusted text: the nesting depth of a JSON body, and the ```attrib-flag
block of a check run's output.

Both were regular expressions that backtracked on hostile input (issue 33): the fence pattern
```` ```attrib-flag\\s*\\n(.*?)\\n\\s*``` ```` took about cubic time when its closing fence was
missing (8,000 newlines: 354 s, on the event loop), and the JSON string pattern quadratic time
on a string that never closes (`"\\"\\"\\"...`): every escaped quote started a new attempt that
ran to the end. Here every step is one C-level primitive (str.find, a translate, a possessive
character class) over characters no earlier step examined, so a scan examines each character a
bounded number of times whatever the text. `Cost` counts them; the tests bound it by the text's
length on fuzzed and adversarial input (tests/test_daemon_scan.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import accumulate

OPENER = "```attrib-flag"
FENCE = "```"
_SPACE = re.compile(r"\s*+")  # possessive: consumes a run of whitespace, never gives any back
_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(_BRACKETS)))
_LEVEL = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


@dataclass
class Cost:
    """Characters a scan examined, summed over its steps (tests bound it by the text's length)."""

    examined: int = 0


def json_depth(body: bytes, cost: Cost | None = None) -> int:
    """The deepest nesting of arrays and objects in `body`, counted outside strings, without
    parsing (malformed JSON gets a number too; the parser refuses it afterwards). A string that
    never closes runs to the end of the body."""
    cost = cost if cost is not None else Cost()
    depth = deepest = pos = 0
    n = len(body)
    while pos < n:
        quote = body.find(b'"', pos)
        end = n if quote < 0 else quote
        brackets = body[pos:end].translate(None, _NOT_BRACKETS)
        cost.examined += 2 * (end - pos) + len(brackets)
        if brackets:
            levels = list(accumulate(map(_LEVEL.__getitem__, brackets), initial=depth))
            deepest, depth = max(deepest, max(levels)), levels[-1]
        if quote < 0:
            break
        pos = _string_end(body, quote + 1, cost)
    return deepest


def _string_end(body: bytes, start: int, cost: Cost) -> int:
    """Just past the quote that closes the JSON string whose text begins at `start` (the end
    of `body` when none does). A quote closes it when an even run of backslashes precedes it;
    that run lies between the previous quote and this one, so no character is counted twice."""
    s = start
    while True:
        quote = body.find(b'"', s)
        if quote < 0:
            cost.examined += len(body) - s
            return len(body)
        run = body[s:quote]
        backslashes = len(run) - len(run.rstrip(b"\\"))
        cost.examined += 3 * (quote + 1 - s)
        if backslashes % 2 == 0:
            return quote + 1
        s = quote + 1


def _space_end(text: str, pos: int, cost: Cost) -> int:
    m = _SPACE.match(text, pos)
    assert m is not None  # \s*+ matches everywhere
    cost.examined += m.end() - pos + 1
    return m.end()


def flag_block(text: str, cost: Cost | None = None) -> str | None:
    """What the regular expression ```` ```attrib-flag\\s*\\n(.*?)\\n\\s*``` ```` (re.S) would
    capture from `text` with re.search, in linear time: the text between the opening line
    (```attrib-flag, then whitespace through a newline) and the first later newline whose next
    non-blank characters are ``` (a closing fence). None when there is no such block."""
    cost = cost if cost is not None else Cost()
    at = 0
    while True:
        opener = text.find(OPENER, at)
        cost.examined += (len(text) if opener < 0 else opener + len(OPENER)) - at
        if opener < 0:
            return None
        after = opener + len(OPENER)
        blank_end = _space_end(text, after, cost)
        last_newline = text.rfind("\n", after, blank_end)
        cost.examined += blank_end - after
        if last_newline < 0:
            at = opener + 1  # not an opening line (text after the word): the next one may be
            continue
        return _block_body(text, after, last_newline, blank_end, cost)


def _block_body(text: str, after: int, last_newline: int, blank_end: int, cost: Cost) -> str | None:
    """The body of the block whose opening line's whitespace is text[after:blank_end] (its last
    newline at `last_newline`). The regex's greedy \\s* first tries the body starting after that
    last newline and its lazy body takes the first closing fence; only when no fence follows does
    it retry from an earlier newline, which matches only a fence right after the blank lines.
    When neither holds no later opener can match either (its own opening ``` would be a
    closing fence for this one), so the answer is None."""
    start = last_newline + 1
    newline = text.find("\n", start)
    cost.examined += (len(text) if newline < 0 else newline + 1) - start
    while newline >= 0:
        fence = _space_end(text, newline + 1, cost)
        if text.startswith(FENCE, fence):
            return text[start:newline]
        newline = text.find("\n", fence)  # the newlines inside that blank run end at the same place
        cost.examined += (len(text) if newline < 0 else newline + 1) - fence
    if text.startswith(FENCE, blank_end):
        earlier = text.rfind("\n", after, last_newline)
        cost.examined += last_newline - after
        if earlier >= 0:
            return text[earlier + 1 : last_newline]
    return None
