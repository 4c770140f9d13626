"""attrib/codec.py, the one decoder: the two modes (a document ignores unknown keys, a
configuration refuses them), the rules' wording, and the dotted path of the first misfit."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import pytest

from attrib.codec import NonEmptyStr, PositiveInt, Rule, config_errors, decode, decode_table, encode
from attrib.core.model import Direction
from attrib.errors import ConfigError, FieldError

Port = Annotated[int, Rule(lambda v: 0 < v < 65536, "a port number (1 to 65535)")]


@dataclass(frozen=True)
class Inner:
    name: NonEmptyStr
    port: Port = 80


@dataclass(frozen=True)
class Outer:
    inners: tuple[Inner, ...]
    direction: Direction = Direction.LOWER
    note: str | None = None
    where: Path | None = None
    tags: dict[str, str] = field(default_factory=dict)
    ci: tuple[float, float] | None = None


def _fails(data: object, *, strict: bool, tp: object = Outer) -> tuple[str, str]:
    with pytest.raises(FieldError) as info:
        decode(tp, data, strict=strict)
    return info.value.path, info.value.expected


def test_a_record_survives_encode_and_decode():
    value = Outer((Inner("a", 8080), Inner("b")), Direction.HIGHER, "n", Path("/x"), {"k": "v"}, (1.0, 2.5))
    assert decode(Outer, encode(value)) == value == decode(Outer, encode(value), strict=True)


def test_a_document_ignores_unknown_keys_and_a_configuration_refuses_them():
    data = {"inners": [{"name": "a", "colour": "red"}]}
    assert decode(Outer, data) == Outer((Inner("a"),))
    assert _fails(data, strict=True) == ("inners[0].colour", "unknown key (expected one of: name, port)")


def test_missing_keys_say_what_was_expected_in_a_configuration():
    assert _fails({"inners": [{}]}, strict=False) == ("inners[0].name", "missing")
    assert _fails({"inners": [{}]}, strict=True) == ("inners[0].name", "missing; expected a non-empty string")


@pytest.mark.parametrize(
    ("data", "path", "expected"),
    [
        ({"inners": [{"name": ""}]}, "inners[0].name", "expected a non-empty string, got ''"),
        ({"inners": [{"name": 3}]}, "inners[0].name", "expected a non-empty string, got 3"),  # the rule words a wrong type too
        ({"inners": [{"name": "a", "port": 0}]}, "inners[0].port", "expected a port number (1 to 65535), got 0"),
        ({"inners": [{"name": "a", "port": True}]}, "inners[0].port", "expected a port number (1 to 65535), got True"),
        ({"inners": "a"}, "inners", "expected a list, got 'a'"),
        ({"inners": [], "direction": "up"}, "direction", 'expected one of "lower", "higher", got \'up\''),
        ({"inners": [], "tags": {"k": 1}}, "tags.k", "expected a string, got 1"),
        ({"inners": [], "ci": [1.0]}, "ci", "expected a list of 2, got 1 items"),
        ({"inners": [], "where": ""}, "where", "expected a path string, got ''"),
    ],
)
def test_the_first_misfit_is_named_by_its_dotted_path(data, path, expected):
    assert _fails(data, strict=True) == (path, expected)


def test_a_rule_over_records_lets_the_records_name_their_own_field():
    Many = Annotated[tuple[Inner, ...], Rule(lambda v: len(v) > 0, "at least one inner table")]
    assert _fails({"name": "x"}, strict=True, tp=Many) == ("", "expected at least one inner table, got a table")
    assert _fails([], strict=True, tp=Many) == ("", "expected at least one inner table, got []")
    assert _fails([{"name": ""}], strict=True, tp=Many) == ("[0].name", "expected a non-empty string, got ''")


def test_a_document_may_say_null_where_a_configuration_has_no_null():
    assert _fails({"inners": [], "note": 3}, strict=False) == ("note", "expected null or a string, got 3")
    assert _fails({"inners": [], "note": 3}, strict=True) == ("note", "expected a string, got 3")


def test_a_record_that_checks_its_own_ranges_is_named_at_its_table():
    @dataclass(frozen=True)
    class Range:
        low: int = 0
        high: int = 1

        def __post_init__(self) -> None:
            if self.high <= self.low:
                raise ValueError(f"high must be above low ({self.low}), got {self.high}")

    assert _fails({"r": {"low": 5}}, strict=True, tp=dict[str, Range]) == ("r", "high must be above low (5), got 1")


def test_a_table_declared_key_by_key_and_its_boundary_error():
    keys = {"name": NonEmptyStr, "count": PositiveInt}
    assert decode_table(keys, {"name"}, {"name": "a"}) == {"name": "a"}
    with pytest.raises(ConfigError) as info, config_errors(Path("/etc/x.toml")):
        decode_table(keys, {"name"}, {"name": "a", "count": -1}, "section")
    assert str(info.value) == "/etc/x.toml: key 'section.count': expected a positive integer, got -1"
    assert (info.value.path, info.value.key) == (Path("/etc/x.toml"), "section.count")
