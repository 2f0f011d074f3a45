from __future__ import annotations

import pytest

from harness.parsing import parse_pointwise


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ('{"score": 7.3}', 7.3),
        ('  {"score": 0}\n', 0.0),
        ('{"score": 10.0}', 10.0),
        ('```json\n{"score": 4.5}\n```', 4.5),
        ('```\n{"score": 4.5}\n```', 4.5),
    ],
)
def test_accepts_the_contract(text: str, score: float) -> None:
    parsed = parse_pointwise(text, ["c1"])
    assert parsed.error is None
    assert parsed.scores == {"c1": score}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("7.3", "not_object"),
        ("the score is 7", "not_json"),
        ('{"score": 7.3', "not_json"),
        ('{"score": 7.3} I hope this helps', "extra_text"),
        ('Sure! {"score": 7.3}', "not_json"),
        ('{"rating": 7.3}', "wrong_keys"),
        ('{"score": 7.3, "reason": "calm"}', "wrong_keys"),
        ('{"score": "7.3"}', "not_a_number"),
        ('{"score": true}', "not_a_number"),
        ('{"score": null}', "not_a_number"),
        ('{"score": [7]}', "not_a_number"),
        ('{"score": 10.5}', "out_of_range"),
        ('{"score": -0.1}', "out_of_range"),
        ('{"score": NaN}', "non_finite"),
        ('{"score": Infinity}', "non_finite"),
        ('{"score": 1e400}', "non_finite"),
    ],
)
def test_rejects_with_a_reason(text: str, reason: str) -> None:
    parsed = parse_pointwise(text, ["c1"])
    assert parsed.scores == {"c1": None}
    assert parsed.error is not None
    assert parsed.error.startswith(reason + ":")
