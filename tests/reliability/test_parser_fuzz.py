"""Fuzz of every answer parser: whatever a model sends, a parser never crashes and never
accepts a score outside [0, 10] (or NaN/Infinity).

Parsers are found, not listed: the `parse` of every registered prompt variant (with as many
candidates as its mode implies) and every `parse_*` function of `harness.calls.prompting.parsing`.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness.calls.prompting.parsing
from harness.calls.prompting.parsing import ParsedAnswer, ParseError
from harness.calls.prompting.variants import VARIANTS

TwoArgParser = Callable[[str, list[str]], ParsedAnswer]

# Keys a model might use: the real ones of every answer form, labels, and near misses.
KEYS = [
    "score", "scores", "ranking", "A", "B", "C", "vocals", "summary", "reasoning",
    "Clip 1", "Clip 2", "Clip 3", "Clip 4", "1", "2", "Score", " score", "",
]  # fmt: skip


def _numbers() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(),
        st.integers(min_value=-(10**30), max_value=10**30),
        st.floats(min_value=-1, max_value=11),
        st.sampled_from([0, 10, 10.0000001, -0.0, -1e-9, 1e308, 5e-324, 7.5]),
    )


def _json_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        _numbers(),
        st.text(max_size=20),
        _numbers().map(str),  # numbers as strings
    )
    return st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=5),
            st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), children, max_size=5),
        ),
        max_leaves=20,
    )


def _answer_objects() -> st.SearchStrategy[dict[str, Any]]:
    """Objects shaped like real answers, with wrong values where it matters."""
    labels = st.sampled_from(KEYS[9:16])
    return st.one_of(
        st.fixed_dictionaries({"score": _json_values()}),
        st.fixed_dictionaries({"score": _numbers()}),
        st.fixed_dictionaries({"scores": st.dictionaries(labels, _numbers(), max_size=5)}),
        st.fixed_dictionaries({"ranking": st.lists(labels | _json_values(), max_size=6)}),
        st.fixed_dictionaries(
            {"A": _numbers(), "B": _numbers(), "C": _numbers(), "vocals": _json_values()}
        ),
        st.fixed_dictionaries({"summary": st.text(max_size=300) | _json_values()}),
        st.dictionaries(st.sampled_from(KEYS), _json_values(), max_size=6),
    )


def _as_json(value: Any) -> str:
    return json.dumps(value, allow_nan=True)  # NaN and Infinity come out as bare literals


@st.composite
def _truncated(draw: st.DrawFn) -> str:
    text = _as_json(draw(_answer_objects()))
    return text[: draw(st.integers(min_value=0, max_value=max(len(text) - 1, 0)))]


@st.composite
def _decorated(draw: st.DrawFn) -> str:
    """A JSON answer with the noise models add: fences, prose before or after, whitespace."""
    body = _as_json(draw(_answer_objects()))
    fence = draw(st.sampled_from(["", "```json\n{}\n```", "```\n{}```", "``` {} ```"]))
    text = fence.replace("{}", body) if fence else body
    before = draw(st.sampled_from(["", "Sure! ", "Reasoning: calm piano.\n", "{", "\n\n"]))
    after = draw(st.sampled_from(["", " ", "\nThanks.", "}", "```", ", 12"]))
    return before + text + after


def _huge() -> st.SearchStrategy[str]:
    return st.sampled_from(
        [
            '{"score": ' + "9" * 5000 + "}",  # past Python's int-string conversion limit
            '{"score": 1' + "0" * 400 + ".0}",
            '{"score": 1e99999}',
            '{"score": -1e99999}',
            '{"score": 5.' + "5" * 100_000 + "}",
            '{"score": "' + "x" * 1_000_000 + '"}',
            "[" * 100_000,
            '{"score":' * 50_000,
            "x" * 2_000_000,
            '{"score": 7, "pad": "' + "y" * 500_000 + '"}',
            '{"scores": {' + ", ".join(f'"Clip {i}": 5' for i in range(10_000)) + "}}",
        ]
    )


ANSWERS = st.one_of(
    st.text(),
    st.binary().map(lambda b: b.decode("utf-8", "replace")),
    _json_values().map(_as_json),
    _answer_objects().map(_as_json),
    _truncated(),
    _decorated(),
    _huge(),
)


def _two_arg_parsers() -> list[tuple[str, TwoArgParser, int]]:
    """(name, parser, number of candidates) for every parser a run can use."""
    found: dict[tuple[str, int], TwoArgParser] = {}
    for variant in VARIANTS.values():
        counts = [1] if variant.mode == "pointwise" else [2, 3, 4]
        for n in counts:
            found[(variant.parse.__name__, n)] = variant.parse
    used = {name for name, _ in found}
    for name, function in _module_parsers(2):
        if name not in used:
            found[(name, 1)] = function
    return [(name, fn, n) for (name, n), fn in sorted(found.items())]


def _module_parsers(n_params: int) -> list[tuple[str, Any]]:
    return [
        (name, function)
        for name, function in inspect.getmembers(
            harness.calls.prompting.parsing, inspect.isfunction
        )
        if name.startswith("parse_")
        and function.__module__ == harness.calls.prompting.parsing.__name__
        and len(inspect.signature(function).parameters) == n_params
    ]


TWO_ARG = _two_arg_parsers()
ONE_ARG = _module_parsers(1)
FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _assert_valid(answer: ParsedAnswer, candidates: list[str]) -> None:
    assert isinstance(answer, ParsedAnswer)
    assert set(answer.scores) == set(candidates)
    for score in answer.scores.values():
        if score is not None:
            assert type(score) is float
            assert math.isfinite(score)
            assert 0.0 <= score <= 10.0
    if answer.error is not None:
        assert isinstance(answer.error, str) and answer.error
        assert all(score is None for score in answer.scores.values())


def test_parsers_are_found() -> None:
    names = {name for name, _, _ in TWO_ARG}
    assert "parse_pointwise" in names
    assert "parse_score_object" in dict(ONE_ARG)


@pytest.mark.parametrize(
    ("parser", "n"), [(fn, n) for _, fn, n in TWO_ARG], ids=[f"{a}-{n}" for a, _, n in TWO_ARG]
)
@FUZZ
@given(text=ANSWERS)
def test_answer_parsers_never_crash_nor_accept_out_of_range(
    parser: TwoArgParser, n: int, text: str
) -> None:
    candidates = [f"cand{i}" for i in range(n)]
    _assert_valid(parser(text, candidates), candidates)


@pytest.mark.parametrize("parser", [fn for _, fn in ONE_ARG], ids=[a for a, _ in ONE_ARG])
@FUZZ
@given(text=ANSWERS)
def test_value_parsers_raise_only_parse_errors(parser: Callable[[str], Any], text: str) -> None:
    try:
        value = parser(text)
    except ParseError as exc:
        assert exc.reason
        return
    if isinstance(value, float):
        assert math.isfinite(value) and 0.0 <= value <= 10.0


@pytest.mark.parametrize(
    "text",
    [
        '{"score": NaN}',
        '{"score": Infinity}',
        '{"score": -Infinity}',
        '{"score": 1e999}',
        '{"score": "7.5"}',
        '{"score": true}',
        '{"score": 10.5}',
        '{"score": -0.1}',
        '{"score": [7]}',
        '{"score": {"value": 7}}',
        '{"score": 7, "score": 3}',
        '{"score": ' + "9" * 5000 + "}",
    ],
)
def test_pointwise_rejects_known_bad_scores(text: str) -> None:
    answer = harness.calls.prompting.parsing.parse_pointwise(text, ["c"])
    assert answer.scores == {"c": None}
    assert answer.error
