"""harness.core.json_text is the standard library's JSON, faster: `canonical_json` gives
json.dumps' sorted compact bytes (or its error) and `loads` gives json.loads' value (or its
error), whatever the value or text."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.json_text import canonical_json, compact_json, loads

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text()
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=24,
)


@settings(max_examples=600, deadline=None)
@given(JSON_VALUES)
def test_canonical_json_is_json_dumps_sorted_and_compact(value: object) -> None:
    # Cache keys are digests of this text: a faster encoder must give the very same bytes
    # (floats with a negative exponent, NaN, ints past 64 bits, lone surrogates included).
    try:
        reference = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        expected = reference.encode("utf-8")
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            canonical_json(value)
        return
    assert canonical_json(value) == expected


@settings(max_examples=400, deadline=None)
@given(JSON_VALUES)
def test_compact_json_is_json_dumps_compact_in_insertion_order(value: object) -> None:
    assert compact_json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_canonical_json_of_other_types_is_json_dumps_or_its_error() -> None:
    import enum

    class Colour(enum.StrEnum):
        RED = "red"

    class Size(enum.IntEnum):
        BIG = 3

    value = {"colour": Colour.RED, "size": Size.BIG, 1: "int key", "n": float("nan")}
    assert canonical_json({k: v for k, v in value.items() if k != 1}) == (
        json.dumps(
            {k: v for k, v in value.items() if k != 1},
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
    )
    with pytest.raises(TypeError):  # json.dumps cannot sort int and str keys together
        canonical_json(value)
    with pytest.raises(TypeError):
        canonical_json({"path": Path("x")})


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down (NaN equal to NaN, -0.0 not to 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def outcome(read: Any, text: str | bytes) -> tuple[str, Any]:
    try:
        return "value", read(text)
    except (ValueError, RecursionError) as exc:
        return "error", type(exc)


@settings(max_examples=600, deadline=None)
@given(JSON_VALUES, st.booleans())
def test_loads_reads_what_json_writes_as_json_loads_does(value: object, as_bytes: bool) -> None:
    text = json.dumps(value)  # NaN, Infinity, \ud800 escapes, 21-digit ints included
    given_text: str | bytes = text.encode() if as_bytes else text
    kind, ours = outcome(loads, given_text)
    assert kind == "value"
    assert same(ours, json.loads(given_text))


NUMBERS = st.from_regex(
    r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?", fullmatch=True
)


@settings(max_examples=600, deadline=None)
@given(st.one_of(NUMBERS, st.text(max_size=12), st.binary(max_size=12)))
def test_loads_of_any_text_is_json_loads_value_or_error(text: str | bytes) -> None:
    kind, ours = outcome(loads, text)
    expected_kind, expected = outcome(json.loads, text)
    assert kind == expected_kind
    if kind == "value":
        assert same(ours, expected)
    else:
        assert ours is expected


def test_loads_keeps_what_orjson_would_change() -> None:
    assert loads("18446744073709551616") == 18446744073709551616  # orjson: a float
    assert type(loads("-9223372036854775809")) is int
    assert type(loads(b"[123456789012345678901]")[0]) is int
    assert math.isinf(loads("1E400")) and math.isnan(loads("[NaN]")[0])
    assert loads('"\\ud800"') == "\ud800"
    assert loads(b"\xef\xbb\xbf[1]") == [1]  # json reads a UTF-8 BOM in bytes
    with pytest.raises(json.JSONDecodeError):
        loads("\ufeff[1]")  # and refuses one in text
