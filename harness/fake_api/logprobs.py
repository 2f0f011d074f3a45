"""Token log-probabilities of the fake model's answers (OpenAI `logprobs`, Gemini
`responseLogprobs`); the tokens and the score's distribution are in docs/fake_api.md."""

from __future__ import annotations

import math
import re
from typing import Any

_SCORE = re.compile(r'"score"\s*:\s*(\d+)(?:\.(\d))?')
_TOKEN = {
    "gemini": re.compile(r"\d|[A-Za-z]+|\s+|[^\sA-Za-z\d]"),
    "openai": re.compile(r"\d{1,3}|[A-Za-z]+|\s+|[^\sA-Za-z\d]"),
}
CERTAIN = 0.0  # log-probability of a token the fake model is sure of


def shares(value: int, top: int, weights: tuple[float, float, float]) -> dict[int, float]:
    """P(value) = weights[0], P(value + 1) = weights[1], P(value - 1) = weights[2] within
    [0, top], the share of a value outside going to `value`."""
    out = {value: weights[0]}
    for other, weight in ((value + 1, weights[1]), (value - 1, weights[2])):
        if 0 <= other <= top:
            out[other] = weight
        else:
            out[value] += weight
    return out


def score_distribution(text: str) -> tuple[dict[int, float], dict[int, float]] | None:
    """(P(whole part), P(decimal digit)) of the answer's last score, or None without one;
    the decimal's distribution is empty when the answer wrote no decimal."""
    found = list(_SCORE.finditer(text))
    if not found:
        return None
    whole, decimal = found[-1].group(1), found[-1].group(2)
    if int(whole) > 10:
        return None
    digits = shares(int(decimal), 9, (0.5, 0.3, 0.2)) if decimal is not None else {}
    return shares(int(whole), 10, (0.6, 0.3, 0.1)), digits


def token_steps(api: str, text: str) -> list[tuple[str, list[tuple[str, float]]]]:
    """The answer as (token, alternatives with their log-probabilities, chosen first)."""
    tokens = _TOKEN[api].findall(text)
    assert "".join(tokens) == text
    steps: list[tuple[str, list[tuple[str, float]]]] = [(t, [(t, CERTAIN)]) for t in tokens]
    found = list(_SCORE.finditer(text))
    distribution = score_distribution(text)
    if not found or distribution is None:
        return steps
    whole, digits = distribution
    starts = [0]
    for token in tokens:
        starts.append(starts[-1] + len(token))
    first = starts.index(found[-1].start(1))
    chosen = tokens[first]
    alternatives: dict[str, float] = {}
    for value, p in whole.items():
        written = str(value) if api == "openai" else str(value)[0]
        alternatives[written] = alternatives.get(written, 0.0) + p
    if api == "gemini" and chosen == "1" and tokens[first + 1] == "0":
        # Only 10 goes on after "1" among the fake's values: "0" is certain there.
        steps[first + 1] = ("0", [("0", CERTAIN)])
    steps[first] = (chosen, _ranked(chosen, alternatives))
    if digits:
        at = starts.index(found[-1].start(2))
        steps[at] = (tokens[at], _ranked(tokens[at], {str(d): p for d, p in digits.items()}))
    return steps


def _ranked(chosen: str, probs: dict[str, float]) -> list[tuple[str, float]]:
    rest = sorted((t for t in probs if t != chosen), key=lambda t: -probs[t])
    return [(t, math.log(probs[t])) for t in (chosen, *rest)]


def openai_logprobs(text: str, top: int) -> dict[str, Any]:
    """`choices[0].logprobs` of a chat completion."""
    return {
        "content": [
            {
                "token": token,
                "logprob": alternatives[0][1],
                "bytes": list(token.encode()),
                "top_logprobs": [
                    {"token": t, "logprob": lp, "bytes": list(t.encode())}
                    for t, lp in alternatives[:top]
                ],
            }
            for token, alternatives in token_steps("openai", text)
        ],
        "refusal": None,
    }


def gemini_logprobs(text: str, top: int) -> dict[str, Any]:
    """`candidates[0].logprobsResult` of a generateContent response."""
    steps = token_steps("gemini", text)
    return {
        "chosenCandidates": [
            {"token": token, "tokenId": _token_id(token), "logProbability": alternatives[0][1]}
            for token, alternatives in steps
        ],
        "topCandidates": [
            {
                "candidates": [
                    {"token": t, "tokenId": _token_id(t), "logProbability": lp}
                    for t, lp in alternatives[:top]
                ]
            }
            for _, alternatives in steps
        ],
        "logProbabilitySum": sum(alternatives[0][1] for _, alternatives in steps),
    }


def _token_id(token: str) -> int:
    return int.from_bytes(token.encode()[:4].ljust(4, b"\0"), "big") % 256_000
