"""The shape check of cached values: every stored answer the harness writes is well formed,
and a value of the wrong shape or with a bad count is damaged, not a crash."""

from __future__ import annotations

from harness.calls.cache import well_formed


def test_a_vector_with_extra_that_is_no_mapping_is_damaged_not_a_crash() -> None:
    assert not well_formed({"vector": [0.5], "extra": 1}, "vector")  # raised AttributeError
    assert not well_formed({"vector": [0.5], "extra": 1})
    assert not well_formed({"vector": [0.5], "extra": {0: None}}, "vector")  # AttributeError


def test_answers_as_the_harness_stores_them_are_well_formed() -> None:
    chat = {"text": '{"score": 7}', "input_tokens": 812, "output_tokens": 9, "latency_s": 0.4,
            "extra": {"input_audio_tokens": 250, "finish": "stop"}}  # fmt: skip
    assert well_formed(chat, "chat") and well_formed(chat)
    scores = {"scores": [0.5, 1, -2.0], "extra": {}}
    assert well_formed(scores, "scores", 3) and not well_formed(scores, "scores", 2)
    assert not well_formed(scores, "chat")
    assert not well_formed({"text": "t", "input_tokens": True}, "chat")
    assert not well_formed({"text": "t", "input_tokens": -1}, "chat")
    assert not well_formed({"text": "t", "extra": {"cached_tokens": "9"}}, "chat")
    assert not well_formed({"scores": [0.5, "1"]}, "scores")
    assert not well_formed({"text": "t", "latency_s": -1.0}, "chat")
