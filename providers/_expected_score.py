"""The expected score `sum(v * P(v))` over the admissible score strings ("0".."10", "0.0".."10.0")
from a judge's token probabilities (`score: expected`; docs/providers.md). Local judges score
every string by its full continuation probability after `"score": ` over a trie of token paths
(`score_strings`); API judges see only the alternatives along their answer (`top_logprobs`),
and a value they cannot resolve counts as `unresolved_mass` (`api_expected_score`)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

SCORE_STRINGS: tuple[str, ...] = (
    *(str(v) for v in range(11)),
    *(f"{v}.{d}" for v in range(10) for d in range(10)),
    "10.0",
)
_SCORE_KEY = re.compile(r'"score"\s*:\s*(?=\d)')
_NUMBER = re.compile(r"\d+(?:\.\d+)?")

Path = tuple[int, ...]
LogProbs = NDArray[np.float64]
# (answer ids before the number, token paths) -> per path, log-probabilities (len(path)+1, V):
# row k is the next-token distribution after the answer prefix and path[:k].
PathScorer = Callable[[list[int], list[Path]], list[LogProbs]]


def score_start(text: str) -> int | None:
    """Character offset where the number of the answer's last `"score": <number>` begins."""
    found = list(_SCORE_KEY.finditer(text))
    return found[-1].end() if found else None


@dataclass(frozen=True)
class ContinuationMask:
    """Vocabulary tokens that start with a digit or a point (they continue a number)."""

    mask: NDArray[np.bool_]

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> ContinuationMask:
        mask = np.zeros(len(tokenizer), dtype=bool)
        for token, token_id in tokenizer.get_vocab().items():
            if any(ch.isdigit() or ch == "." for ch in token):
                text = tokenizer.convert_tokens_to_string([token])
                mask[token_id] = bool(text) and (text[0].isdigit() or text[0] == ".")
        return cls(mask)

    def share(self, logprobs: LogProbs) -> float:
        width = min(len(self.mask), len(logprobs))
        return float(np.exp(logprobs[:width][self.mask[:width]]).sum())


def plan_paths(paths: Mapping[str, Path]) -> list[Path]:
    """The fewest token paths whose forward passes give every distribution the strings need."""
    needed: set[Path] = set()
    for text, path in paths.items():
        needed.update(path[:k] for k in range(len(path)))
        if "." not in text:
            needed.add(path)
    return sorted(
        node
        for node in needed
        if not any(len(other) > len(node) and other[: len(node)] == node for other in needed)
    )


def string_probabilities(
    paths: Mapping[str, Path],
    rows: Sequence[Path],
    logprobs: Sequence[LogProbs],
    continues: ContinuationMask,
) -> dict[str, float]:
    """P(string) for every admissible string, from the distributions along `rows`."""
    after: dict[Path, LogProbs] = {}
    for row, values in zip(rows, logprobs, strict=True):
        for k in range(len(row) + 1):
            after.setdefault(row[:k], values[k])
    probs = {}
    for text, path in paths.items():
        logp = sum(float(after[path[:k]][path[k]]) for k in range(len(path)))
        p = math.exp(logp)
        if "." not in text:
            p *= max(0.0, 1.0 - continues.share(after[path]))
        probs[text] = p
    return probs


def summarize(probs: Mapping[str, float]) -> dict[str, Any] | None:
    """The expected score, the probability mass on admissible strings, and P(whole part)."""
    mass = sum(probs.values())
    if mass <= 0.0:
        return None
    expected = sum(float(text) * p for text, p in probs.items()) / mass
    by_whole = [0.0] * 11
    for text, p in probs.items():
        by_whole[int(float(text))] += p / mass
    return {
        "expected_score": round(min(10.0, max(0.0, expected)), 4),
        "score_mass": round(mass, 4),
        "score_probs": [round(p, 4) for p in by_whole],
    }


def score_strings(
    tokenizer: Any, continues: ContinuationMask, answer_ids: Sequence[int], scorer: PathScorer
) -> dict[str, Any] | None:
    """A local judge's expected score (None: no `"score": <number>` in the answer)."""
    ids = list(answer_ids)
    text = tokenizer.decode(ids, skip_special_tokens=True)
    start = score_start(text)
    if start is None:
        return None
    step = next(
        (
            i
            for i in range(len(ids))
            if len(tokenizer.decode(ids[: i + 1], skip_special_tokens=True)) > start
        ),
        None,
    )
    if step is None:
        return None
    # Text of the number's first token before the number itself (a space it carries).
    lead = text[len(tokenizer.decode(ids[:step], skip_special_tokens=True)) : start]
    paths = {s: tuple(tokenizer.encode(lead + s, add_special_tokens=False)) for s in SCORE_STRINGS}
    rows = plan_paths(paths)
    return summarize(string_probabilities(paths, rows, scorer(ids[:step], rows), continues))


@dataclass(frozen=True)
class TokenChoice:
    """An API answer's output token with the alternatives returned for its step."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...]

    def alternatives(self) -> dict[str, float]:
        found = dict(self.top)
        found.setdefault(self.token, self.logprob)
        return found


def _numeric_share(alternatives: Mapping[str, float], lead: str) -> dict[str, float]:
    """Probabilities of the alternatives that start the number (after `lead`), by the text."""
    return {
        token[len(lead) :]: math.exp(logprob)
        for token, logprob in alternatives.items()
        if token.startswith(lead) and token[len(lead) : len(lead) + 1].isdigit()
    }


def api_expected_score(
    tokens: Sequence[TokenChoice], *, splits_digits: bool
) -> dict[str, Any] | None:
    """The expected score of an API answer from the alternatives returned along it; None where
    the answer has no `"score": <number>` or the number's step has no usable alternative.
    `splits_digits`: the model's tokenizer writes "10" as "1", "0" (Gemini, Qwen), so a lone
    "1" is 1 or 10; otherwise (OpenAI's) a lone "1" is 1."""
    text = "".join(t.token for t in tokens)
    start = score_start(text)
    if start is None:
        return None
    offsets = np.cumsum([len(t.token) for t in tokens])
    step = int(np.searchsorted(offsets, start, side="right"))
    number = _NUMBER.match(text, start)
    if step >= len(tokens) or number is None:
        return None
    lead = text[int(offsets[step] - len(tokens[step].token)) : start]
    whole, unresolved = _whole_part(tokens, step, lead, splits_digits)
    mass = sum(whole.values())
    if mass <= 0.0:
        return None
    expected = sum(v * p for v, p in whole.items()) / mass
    expected += _decimal_part(tokens, offsets, number)
    total = mass + unresolved
    return {
        "expected_score": round(min(10.0, max(0.0, expected)), 4),
        "score_probs": [round(whole.get(v, 0.0) / mass, 4) for v in range(11)],
        "unresolved_mass": round(unresolved / total, 4),
    }


def _whole_part(
    tokens: Sequence[TokenChoice], step: int, lead: str, splits_digits: bool
) -> tuple[dict[int, float], float]:
    """P(whole part = v) from the number's first step, and the mass left unresolved."""
    whole: dict[int, float] = {}
    unresolved = 0.0
    chosen = tokens[step].token[len(lead) :]
    for rest, p in _numeric_share(tokens[step].alternatives(), lead).items():
        digits = re.match(r"\d+", rest)
        assert digits is not None
        value, ends = int(digits.group()), len(digits.group()) < len(rest)
        if value > 10:
            continue  # not a score
        if rest != "1" or ends or not splits_digits:
            whole[value] = whole.get(value, 0.0) + p
        elif rest == chosen and step + 1 < len(tokens):
            # "1" then the next token: "0" makes 10, anything but a digit leaves 1.
            following = tokens[step + 1].alternatives()
            total = sum(math.exp(lp) for lp in following.values())
            ten = sum(math.exp(lp) for t, lp in following.items() if t.startswith("0"))
            other = sum(math.exp(lp) for t, lp in following.items() if t[:1].isdigit()) - ten
            whole[10] = whole.get(10, 0.0) + p * ten / total
            whole[1] = whole.get(1, 0.0) + p * max(0.0, total - ten - other) / total
        else:
            unresolved += p
    return whole, unresolved


def _decimal_part(
    tokens: Sequence[TokenChoice], offsets: NDArray[np.int64], number: re.Match[str]
) -> float:
    """E[decimal digit] / 10 at the step that writes the answer's decimal digit (0 if none)."""
    point = number.group().find(".")
    if point < 0:
        return 0.0
    at = number.start() + point + 1
    step = int(np.searchsorted(offsets, at, side="right"))
    lead = "".join(t.token for t in tokens)[int(offsets[step] - len(tokens[step].token)) : at]
    digits = {
        int(rest[0]): p
        for rest, p in _numeric_share(tokens[step].alternatives(), lead).items()
        if len(rest) == 1 or not rest[1].isdigit()
    }
    total = sum(digits.values())
    return sum(d * p for d, p in digits.items()) / total / 10 if total > 0 else 0.0
