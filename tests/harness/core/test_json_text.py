"""harness.core.json_text is the standard library's JSON, faster: `canonical_json` gives
json.dumps' sorted compact bytes (or its error), whatever the value (reading JSON is
harness.core.files' `parse_json`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.json_text import canonical_json, compact_json

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
