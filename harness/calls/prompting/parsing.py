"""Strict parsing of judge answers: a rejected answer is never a score, only a reason. The one
leniency: a code fence around the whole answer is unwrapped."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from functools import wraps
from typing import Any

from harness.core.predictions import scores_from_ranking
from harness.core.sanitize import clean_value

MIN_SCORE, MAX_SCORE = 0.0, 10.0
_FENCE = re.compile(r"^```(?:json|JSON)?[ \t]*\n(?P<body>.*?)\n?```$", re.DOTALL)


class ParseError(ValueError):
    """Why an answer was rejected; `reason` is a short machine-readable tag."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class ParsedAnswer:
    """Scores by candidate id (None where the answer gave none) or the reason it failed."""

    scores: dict[str, float | None]
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _reject_constant(name: str) -> float:
    raise ParseError("non_finite", f"{name} is not a valid score")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ParseError("duplicate_key", f"key {key!r} appears more than once")
        obj[key] = value
    return obj


_STRICT = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys)


def unwrap_fence(text: str) -> str:
    text = text.strip()
    match = _FENCE.match(text)
    return match.group("body").strip() if match else text


def loads_object(text: str) -> dict[str, Any]:
    """The answer as exactly one JSON object, nothing before or after it."""
    text = unwrap_fence(text)
    if not text:
        raise ParseError("empty", "the answer is empty")
    try:
        value, end = _STRICT.raw_decode(text)
    except json.JSONDecodeError as exc:
        raise ParseError("not_json", f"{exc.msg} at char {exc.pos}") from None
    except RecursionError:
        raise ParseError("not_json", "nesting too deep") from None
    except ParseError:
        raise
    except ValueError:  # an integer literal past Python's int-string conversion limit
        raise ParseError("not_json", "a number literal is too long") from None
    if text[end:].strip():
        raise ParseError("extra_text", f"text after the JSON object: {text[end:].strip()[:40]!r}")
    if not isinstance(value, dict):
        raise ParseError("not_object", f"expected a JSON object, got {type(value).__name__}")
    cleaned: dict[str, Any] = clean_value(value)  # no lone surrogate ("\\ud800" in its JSON)
    return cleaned


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


Parse = Callable[[str, list[str]], ParsedAnswer]


def _reported(parse: Parse) -> Parse:
    """`parse` with a ParseError given back as the answer's error (and no score)."""

    @wraps(parse)
    def parsed(text: str, candidates: list[str]) -> ParsedAnswer:
        try:
            return parse(text, candidates)
        except ParseError as exc:
            return ParsedAnswer(dict.fromkeys(candidates), error=str(exc))

    return parsed


@_reported
def parse_pointwise(text: str, candidates: list[str]) -> ParsedAnswer:
    (candidate,) = candidates
    return ParsedAnswer({candidate: parse_score_object(text)})


# ---------------------------------------------------------------- chain of thought
FINAL_OBJECT_TRIES = 64  # '{' positions tried from the end, bounding the work on odd input


def final_object_span(text: str) -> tuple[int, int] | None:
    """Start and end of the JSON object that ends `text` (a closing fence aside), or None;
    found leniently, parsed strictly by the caller."""
    end = len(text.rstrip())
    if text[:end].endswith("```"):
        end = len(text[: end - 3].rstrip())
    if not text[:end].endswith("}"):
        return None
    decoder = json.JSONDecoder()
    start = end
    for _ in range(FINAL_OBJECT_TRIES):
        start = text.rfind("{", 0, start)
        if start == -1:
            return None
        try:
            _, stop = decoder.raw_decode(text[:end], start)
        except (ValueError, RecursionError):  # JSONDecodeError, or an over-long integer
            continue
        if stop == end:
            return start, end
    return None


@_reported
def parse_cot(text: str, candidates: list[str]) -> ParsedAnswer:
    """Reasoning, then `{"score": x}` last (a closing fence may follow), read as pointwise."""
    (candidate,) = candidates
    span = final_object_span(text)
    if span is None:
        if "{" in text:
            raise ParseError("extra_text", "the answer must end with the JSON object")
        raise ParseError("no_json", "no JSON object in the answer")
    return ParsedAnswer({candidate: parse_score_object(text[span[0] : span[1]])})


# ---------------------------------------------------------------- joint
def _check_labels(given: list[str], labels: list[str]) -> None:
    unknown = [label for label in given if label not in labels]
    if unknown:
        raise ParseError("unknown_label", f"{unknown[0]!r} is not one of {labels}")
    duplicates = sorted({label for label in given if given.count(label) > 1})
    if duplicates:
        raise ParseError("duplicate_label", f"{duplicates[0]!r} appears more than once")
    missing = [label for label in labels if label not in given]
    if missing:
        raise ParseError("missing_label", f"no answer for {missing}")


def parse_joint(text: str, candidates: list[str], *, partial: bool = False) -> ParsedAnswer:
    """`{"scores": {label: score}}` or `{"ranking": [label, ...]}` (best first), every label
    once (label i: candidates[i]); a ranking scores N-1 .. 0. With `partial` any prefix will
    do: unlisted candidates tie below, unknown or repeated labels are skipped and counted."""
    from harness.calls.prompting.joint import clip_labels

    labels = clip_labels(len(candidates))
    by_label = dict(zip(labels, candidates, strict=True))
    try:
        try:
            obj = loads_object(text)
        except ParseError as exc:
            if exc.reason == "duplicate_key":
                raise ParseError("duplicate_label", exc.detail) from None
            raise
        if set(obj) == {"scores"}:
            given = obj["scores"]
            if not isinstance(given, dict):
                raise ParseError("not_object", "'scores' must map each clip label to a score")
            _check_labels(list(given), labels)
            scored = {by_label[label]: check_score(v, label) for label, v in given.items()}
            return ParsedAnswer({cid: scored[cid] for cid in candidates})
        if set(obj) == {"ranking"}:
            ranking = obj["ranking"]
            if not isinstance(ranking, list) or not all(isinstance(x, str) for x in ranking):
                raise ParseError("not_a_ranking", "'ranking' must be a list of clip labels")
            if partial:
                return _ranked_prefix(ranking, by_label, candidates)
            _check_labels(ranking, labels)
            ranked = [by_label[label] for label in ranking]
            scores = dict[str, float | None](scores_from_ranking(ranked, candidates))
            return ParsedAnswer(scores, extra={"ranking": ranked})
        raise ParseError(
            "wrong_keys", f"expected exactly 'scores' or 'ranking', got {sorted(obj)[:5]}"
        )
    except ParseError as exc:
        return ParsedAnswer(dict.fromkeys(candidates), error=str(exc))


def _ranked_prefix(
    ranking: list[str], by_label: dict[str, str], candidates: list[str]
) -> ParsedAnswer:
    ranked: list[str] = []
    unknown = repeated = 0
    for label in ranking:
        cid = by_label.get(label.strip())
        if cid is None:
            unknown += 1
        elif cid in ranked:
            repeated += 1
        else:
            ranked.append(cid)
    if not ranked:
        raise ParseError("no_known_label", f"none of the {len(ranking)} entries is a clip label")
    extra = {
        "ranking": ranked,
        "unlisted": len(candidates) - len(ranked),
        "unknown_labels": unknown,
        "repeated_labels": repeated,
    }
    return ParsedAnswer(dict(scores_from_ranking(ranked, candidates)), extra=extra)


def parse_ranked_prefix(text: str, candidates: list[str]) -> ParsedAnswer:
    return parse_joint(text, candidates, partial=True)


# ---------------------------------------------------------------- rubric
RUBRIC_WEIGHTS = {"A": Decimal("0.2"), "B": Decimal("0.5"), "C": Decimal("0.3")}
VOCALS_CAP, LOW_ACOUSTIC_CAP, LOW_ACOUSTIC_BELOW = Decimal("2.0"), Decimal("3.0"), 3.0


def rubric_score(a: float, b: float, c: float, vocals: bool) -> float:
    """0.2*A + 0.5*B + 0.3*C, capped at 2.0 with prominent vocals and at 3.0 when A < 3.0,
    rounded half up to one decimal. Decimal arithmetic on the numbers as written, so
    one-decimal sub-scores give the exact result (no binary floating-point drift)."""
    weighted = {"A": a, "B": b, "C": c}
    total = sum(
        (Decimal(repr(float(x))) * RUBRIC_WEIGHTS[k] for k, x in weighted.items()), Decimal(0)
    )
    if vocals:
        total = min(total, VOCALS_CAP)
    if a < LOW_ACOUSTIC_BELOW:
        total = min(total, LOW_ACOUSTIC_CAP)
    return float(total.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


@_reported
def parse_rubric(text: str, candidates: list[str]) -> ParsedAnswer:
    """`{"A": x, "B": y, "C": z, "vocals": true|false}`; the harness computes the score."""
    (candidate,) = candidates
    obj = loads_object(text)
    if set(obj) != {"A", "B", "C", "vocals"}:
        raise ParseError(
            "wrong_keys", f"expected exactly A, B, C and vocals, got {sorted(obj)[:6]}"
        )
    a, b, c = (check_score(obj[k], k) for k in "ABC")
    if not isinstance(obj["vocals"], bool):
        raise ParseError("not_a_bool", f"vocals must be true or false, got {obj['vocals']!r}")
    sub = {"A": a, "B": b, "C": c, "vocals": obj["vocals"]}
    return ParsedAnswer({candidate: rubric_score(a, b, c, obj["vocals"])}, extra={"rubric": sub})


RATINGS = ("personalization", "explanation_quality")  # the response judge's (music-crs)


@_reported
def parse_ratings(text: str, candidates: list[str]) -> ParsedAnswer:
    """`{"personalization": 1-5, "explanation_quality": 1-5}` (prompt `response_judge`), whole
    numbers, kept in `extra`: no candidate gets a score."""
    obj = loads_object(text)
    if set(obj) != set(RATINGS):
        raise ParseError(
            "wrong_keys", f"expected exactly {', '.join(RATINGS)}, got {sorted(obj)[:4]}"
        )
    for name in RATINGS:
        value = obj[name]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
            raise ParseError(
                "out_of_range",
                f"{name} must be a whole number from 1 to 5, got {json.dumps(value)[:40]}",
            )
    return ParsedAnswer(dict.fromkeys(candidates), extra={name: obj[name] for name in RATINGS})


# ---------------------------------------------------------------- summaries
SUMMARY_WORDS = (20, 35)  # what the summariser prompt asks for
SUMMARY_WORDS_ACCEPTED = (12, 50)  # what the parser accepts: models miss counts by a few


def parse_summary(text: str) -> str:
    """`{"summary": "one sentence"}` of SUMMARY_WORDS_ACCEPTED words."""
    summary = text_field(text, "summary")
    words = len(summary.split())
    low, high = SUMMARY_WORDS_ACCEPTED
    if not low <= words <= high:
        raise ParseError(
            "summary_length", f"{words} words; asked for {SUMMARY_WORDS[0]}-{SUMMARY_WORDS[1]}"
        )
    return summary


# ---------------------------------------------------------------- free-text answers
def text_field(text: str, key: str) -> str:
    """`{"<key>": "some text"}`, a non-empty string (whitespace collapsed); raises ParseError."""
    obj = loads_object(text)
    if set(obj) != {key}:
        raise ParseError("wrong_keys", f"expected exactly the key {key!r}, got {sorted(obj)[:5]}")
    value = obj[key]
    if not isinstance(value, str) or not value.strip():
        raise ParseError(f"not_a_{key}", f"{key} must be a non-empty string")
    return " ".join(value.split())


@dataclass(frozen=True)
class ParsedText:
    """A free-text answer (a summary, a simulated user's reply), or why it was unusable."""

    text: str | None
    error: str | None = None


def read_text_answer(read: Callable[[str], str], text: str) -> ParsedText:
    try:
        return ParsedText(read(text))
    except ParseError as exc:
        return ParsedText(None, str(exc))


@_reported
def parse_description(text: str, candidates: list[str]) -> ParsedAnswer:
    """`{"description": "..."}` (prompt `describe`), kept in `extra`: a retriever ranks by it."""
    description = text_field(text, "description")
    return ParsedAnswer(dict.fromkeys(candidates), extra={"description": description})
