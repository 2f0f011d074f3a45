"""Strict parsing of judge answers. A rejected answer is never turned into a score: the
result carries the reason, and the raw text is kept by the caller.

The one leniency: a single markdown code fence around the whole answer is unwrapped,
because chat models add it even when told not to, and it changes nothing about the value.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

MIN_SCORE, MAX_SCORE = 0.0, 10.0
_FENCE = re.compile(r"^```(?:json|JSON)?[ \t]*\n(?P<body>.*?)\n?```$", re.DOTALL)


class ParseError(ValueError):
    """Why an answer was rejected; `reason` is a short machine-readable tag."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class ParsedAnswer:
    """Scores by candidate id (None where the answer gave none) or the reason it failed."""

    scores: dict[str, float | None]
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _reject_constant(name: str) -> float:
    raise ParseError("non_finite", f"{name} is not a valid score")


def unwrap_fence(text: str) -> str:
    text = text.strip()
    match = _FENCE.match(text)
    return match.group("body").strip() if match else text


def loads_object(text: str) -> dict[str, Any]:
    """The answer as exactly one JSON object, nothing before or after it."""
    text = unwrap_fence(text)
    if not text:
        raise ParseError("empty", "the answer is empty")
    decoder = json.JSONDecoder(parse_constant=_reject_constant)
    try:
        value, end = decoder.raw_decode(text)
    except json.JSONDecodeError as exc:
        raise ParseError("not_json", f"{exc.msg} at char {exc.pos}") from None
    except RecursionError:
        raise ParseError("not_json", "nesting too deep") from None
    if text[end:].strip():
        raise ParseError("extra_text", f"text after the JSON object: {text[end:].strip()[:40]!r}")
    if not isinstance(value, dict):
        raise ParseError("not_object", f"expected a JSON object, got {type(value).__name__}")
    return value


def check_score(value: Any, where: str = "score") -> float:
    """A number in [0, 10]: not a string, not a bool, finite."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError("not_a_number", f"{where} must be a number, got {json.dumps(value)[:40]}")
    number = float(value)
    if not math.isfinite(number):
        raise ParseError("non_finite", f"{where} is not finite")
    if not MIN_SCORE <= number <= MAX_SCORE:
        raise ParseError("out_of_range", f"{where} {number} is outside [0, 10]")
    return number


def parse_score_object(text: str) -> float:
    """`{"score": x}` and nothing else."""
    obj = loads_object(text)
    if set(obj) != {"score"}:
        raise ParseError("wrong_keys", f"expected exactly the key 'score', got {sorted(obj)[:5]}")
    return check_score(obj["score"])


def parse_pointwise(text: str, candidates: list[str]) -> ParsedAnswer:
    (candidate,) = candidates
    try:
        return ParsedAnswer({candidate: parse_score_object(text)})
    except ParseError as exc:
        return ParsedAnswer({candidate: None}, error=str(exc))
