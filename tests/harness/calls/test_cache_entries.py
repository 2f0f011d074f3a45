"""The shape check of cached values: its shortcut for plain values (`_plainly`) never accepts
what the shape's model refuses, and every stored answer the harness writes takes it."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from harness.calls import cache_entries as cache_values
from harness.calls.cache_entries import Shape, well_formed

numbers = st.integers(-3, 10**20) | st.floats(allow_nan=True) | st.booleans()
leaf = st.none() | numbers | st.text(max_size=4)
anything = st.recursive(
    leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=6
)  # fmt: skip
maybe = numbers | st.none() | st.text(max_size=2) | anything
values = st.fixed_dictionaries(
    {},
    optional={
        "text": st.text(max_size=5) | numbers,
        "input_tokens": maybe,
        "output_tokens": maybe,
        "latency_s": maybe,
        "extra": st.dictionaries(st.text(max_size=3) | st.integers(0, 3), maybe, max_size=2) | maybe,
        "scores": st.lists(numbers, max_size=3) | st.tuples(numbers) | maybe,
        "vector": st.lists(numbers, max_size=2),
        "other": anything,
    },
)  # fmt: skip


def _model_accepts(shape: Shape, value: dict[str, Any]) -> bool:
    try:
        cache_values._MODELS[shape].model_validate(value)
    except ValidationError:
        return False
    return True


@settings(max_examples=400, derandomize=True)
@given(value=values, shape=st.sampled_from(["chat", "scores", "vector"]))
def test_the_shortcut_accepts_only_what_the_model_accepts(
    value: dict[str, Any], shape: Shape
) -> None:
    if cache_values._plainly(shape, value):
        assert _model_accepts(shape, value)
    extra = value.get("extra") or {}
    accepted = _model_accepts(shape, value) and isinstance(extra, dict)
    assert well_formed(value, shape) == (accepted and cache_values._counts_ok(extra))


def test_a_vector_with_extra_that_is_no_mapping_is_damaged_not_a_crash() -> None:
    assert not well_formed({"vector": [0.5], "extra": 1}, "vector")  # raised AttributeError
    assert not well_formed({"vector": [0.5], "extra": 1})
    assert not well_formed({"vector": [0.5], "extra": {0: None}}, "vector")  # AttributeError


def test_answers_as_the_harness_stores_them_take_the_shortcut() -> None:
    chat = {"text": '{"score": 7}', "input_tokens": 812, "output_tokens": 9, "latency_s": 0.4,
            "extra": {"input_audio_tokens": 250, "finish": "stop"}}  # fmt: skip
    assert cache_values._plainly("chat", chat) and well_formed(chat, "chat")
    scores = {"scores": [0.5, 1, -2.0], "extra": {}}
    assert cache_values._plainly("scores", scores) and well_formed(scores, "scores", 3)
    assert not well_formed(scores, "scores", 2)
    assert not cache_values._plainly("chat", {"text": "t", "input_tokens": True})
    assert not well_formed({"text": "t", "input_tokens": -1}, "chat")
