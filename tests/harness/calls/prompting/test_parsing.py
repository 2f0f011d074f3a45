from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.calls.prompting.parsing import (
    ParseError,
    parse_cot,
    parse_joint,
    parse_pointwise,
    parse_rubric,
    parse_summary,
    rubric_score,
)


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


def test_duplicate_keys_are_rejected() -> None:
    parsed = parse_pointwise('{"score": 2.0, "score": 9.0}', ["c1"])
    assert parsed.error is not None and parsed.error.startswith("duplicate_key:")


# ---------------------------------------------------------------- chain of thought
@pytest.mark.parametrize(
    ("text", "score"),
    [
        ('The talk is calm and warm. The clip is soft piano.\n{"score": 8.1}', 8.1),
        ('Step 1: {"mood": "tense"}.\nStep 3: fits well.\n{"score": 6.0}\n', 6.0),
        ('Maybe {"score": 2.0}? No, on reflection:\n{"score": 4.5}', 4.5),
        ('Reasoning.\n```json\n{"score": 3.0}\n```', 3.0),
        ('{"score": 9}', 9.0),
    ],
)
def test_cot_reads_the_final_json_after_reasoning(text: str, score: float) -> None:
    parsed = parse_cot(text, ["c1"])
    assert parsed.error is None
    assert parsed.scores == {"c1": score}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("The clip fits, I would say 7 out of 10.", "no_json"),
        ('Reasoning. {"score": 7.0} Hope this helps!', "extra_text"),
        ('Reasoning.\n{"score": 11.0}', "out_of_range"),
        ('Reasoning.\n{"score": 7.0, "why": "calm"}', "wrong_keys"),
        ('Reasoning.\n{"result": {"score": 7.0}}', "wrong_keys"),
        ('Reasoning.\n{"score": "7"}', "not_a_number"),
        ('Reasoning.\n{"score": NaN}', "non_finite"),
        ('Reasoning.\n{"score": 1, "score": 7}', "duplicate_key"),
    ],
)
def test_cot_applies_the_pointwise_rules_to_the_final_object(text: str, reason: str) -> None:
    parsed = parse_cot(text, ["c1"])
    assert parsed.scores == {"c1": None}
    assert parsed.error is not None and parsed.error.startswith(reason + ":")


# ---------------------------------------------------------------- joint
JOINT = ["cA", "cB", "cC", "cD"]  # presentation order: Clip 1 is cA, ...


def test_joint_scores_map_labels_back_to_candidates() -> None:
    text = '{"scores": {"Clip 2": 8.5, "Clip 1": 1.0, "Clip 4": 6, "Clip 3": 0}}'
    parsed = parse_joint(text, JOINT)
    assert parsed.error is None
    assert parsed.scores == {"cA": 1.0, "cB": 8.5, "cC": 0.0, "cD": 6.0}
    assert list(parsed.scores) == JOINT


def test_joint_ranking_becomes_scores_and_is_kept() -> None:
    parsed = parse_joint('{"ranking": ["Clip 3", "Clip 1", "Clip 4", "Clip 2"]}', JOINT)
    assert parsed.error is None
    assert parsed.scores == {"cC": 3.0, "cA": 2.0, "cD": 1.0, "cB": 0.0}
    assert parsed.extra == {"ranking": ["cC", "cA", "cD", "cB"]}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"ranking": ["Clip 1", "Clip 1", "Clip 2", "Clip 3"]}', "duplicate_label"),
        (
            '{"scores": {"Clip 1": 1, "Clip 1": 2, "Clip 2": 3, "Clip 3": 4, "Clip 4": 5}}',
            "duplicate_label",
        ),
        ('{"ranking": ["Clip 1", "Clip 2", "Clip 3"]}', "missing_label"),
        ('{"scores": {"Clip 1": 1, "Clip 2": 2, "Clip 4": 4}}', "missing_label"),
        ('{"ranking": ["Clip 1", "Clip 2", "Clip 3", "Clip 5"]}', "unknown_label"),
        ('{"scores": {"Clip 1": 1, "Clip 2": 2, "Clip 3": 3, "cD": 4}}', "unknown_label"),
        ('{"ranking": ["Clip 1", "Clip 2", "Clip 3", "Clip 4", "Clip 9"]}', "unknown_label"),
        ('{"scores": {"Clip 1": 1, "Clip 2": 2, "Clip 3": 3, "Clip 4": 12}}', "out_of_range"),
        ('{"ranking": ["Clip 1", "Clip 2", 3, "Clip 4"]}', "not_a_ranking"),
        ('{"scores": [1, 2, 3, 4]}', "not_object"),
        ('{"scores": {}, "ranking": []}', "wrong_keys"),
        ('{"score": 5}', "wrong_keys"),
        ("Clip 2 is best.", "not_json"),
    ],
)
def test_joint_rejects_with_a_reason(text: str, reason: str) -> None:
    parsed = parse_joint(text, JOINT)
    assert parsed.scores == dict.fromkeys(JOINT)
    assert parsed.error is not None and parsed.error.startswith(reason + ":"), parsed.error


# ---------------------------------------------------------------- rubric
TENTHS = st.integers(min_value=0, max_value=100)


def _expected(a10: int, b10: int, c10: int, vocals: bool) -> Fraction:
    """The formula on exact fractions: sub-scores are a10/10 etc."""
    total = Fraction(2 * a10 + 5 * b10 + 3 * c10, 100)
    if vocals:
        total = min(total, Fraction(2))
    if a10 < 30:
        total = min(total, Fraction(3))
    return total


@given(TENTHS, TENTHS, TENTHS, st.booleans())
def test_rubric_score_is_the_formula_with_both_caps(
    a10: int, b10: int, c10: int, vocals: bool
) -> None:
    a, b, c = a10 / 10, b10 / 10, c10 / 10
    text = json.dumps({"A": a, "B": b, "C": c, "vocals": vocals})
    parsed = parse_rubric(text, ["c1"])
    assert parsed.error is None
    score = parsed.scores["c1"]
    assert score is not None
    expected = _expected(a10, b10, c10, vocals)
    # Round half up to one decimal, done independently on the exact value.
    assert score == float(math.floor(expected * 10 + Fraction(1, 2)) / 10)
    if vocals:
        assert score <= 2.0
    if a < 3.0:
        assert score <= 3.0
    assert parsed.extra == {"rubric": {"A": a, "B": b, "C": c, "vocals": vocals}}


@given(
    st.floats(0, 10, allow_nan=False),
    st.floats(0, 10, allow_nan=False),
    st.floats(0, 10, allow_nan=False),
    st.booleans(),
)
def test_rubric_score_bounds_for_any_sub_scores(a: float, b: float, c: float, vocals: bool) -> None:
    score = rubric_score(a, b, c, vocals)
    raw = 0.2 * a + 0.5 * b + 0.3 * c
    cap = min([raw] + ([2.0] if vocals else []) + ([3.0] if a < 3.0 else []))
    assert abs(score - cap) <= 0.05 + 1e-9
    assert score == round(score, 1)
    assert 0.0 <= score <= 10.0


def test_rubric_examples() -> None:
    assert rubric_score(8.0, 9.0, 7.0, False) == 8.2  # 1.6 + 4.5 + 2.1
    assert rubric_score(8.0, 9.0, 7.0, True) == 2.0
    assert rubric_score(2.9, 10.0, 10.0, False) == 3.0
    assert rubric_score(2.5, 1.0, 1.0, False) == 1.3  # under the cap: unchanged
    assert rubric_score(1.0, 1.0, 1.5, False) == 1.2  # 0.2 + 0.5 + 0.45 = 1.15, half up


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"A": 5, "B": 5, "C": 5}', "wrong_keys"),
        ('{"A": 5, "B": 5, "C": 5, "vocals": false, "score": 5}', "wrong_keys"),
        ('{"A": 5, "B": 11, "C": 5, "vocals": false}', "out_of_range"),
        ('{"A": 5, "B": 5, "C": "5", "vocals": false}', "not_a_number"),
        ('{"A": 5, "B": 5, "C": 5, "vocals": "no"}', "not_a_bool"),
        ('{"A": 5, "B": 5, "C": 5, "vocals": 0}', "not_a_bool"),
    ],
)
def test_rubric_rejects_with_a_reason(text: str, reason: str) -> None:
    parsed = parse_rubric(text, ["c1"])
    assert parsed.scores == {"c1": None}
    assert parsed.error is not None and parsed.error.startswith(reason + ":")


# ---------------------------------------------------------------- summaries
def test_summary_is_one_normalised_sentence() -> None:
    sentence = (
        "Two friends plan a spontaneous coast trip; mood: excited, playful, carefree, warm;"
        "  keywords: road trip, snacks, playlist; BGM: upbeat acoustic pop, mid tempo, bright."
    )
    assert parse_summary(json.dumps({"summary": sentence})) == " ".join(sentence.split())
    with pytest.raises(ParseError, match="summary_length"):
        parse_summary('{"summary": "Too short."}')
    with pytest.raises(ParseError, match="wrong_keys"):
        parse_summary('{"score": 5}')
