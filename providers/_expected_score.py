"""The expected score of a local judge's answer from the token probabilities at the step
where the score's number starts (`expected_score: true`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

_SCORE_START = re.compile(r'"score"\s*:\s*(?=-?\d)')


_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class DigitTable:
    """Vocabulary tokens that spell a whole number 0..10 (surrounding spaces allowed)."""

    ids: NDArray[np.int64]
    values: NDArray[np.int64]

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> DigitTable:
        ids, values = [], []
        for token, token_id in tokenizer.get_vocab().items():
            if not any(ch.isdigit() for ch in token):
                continue
            text = tokenizer.convert_tokens_to_string([token]).strip()
            if _DIGITS.fullmatch(text) and int(text) <= 10:
                ids.append(token_id)
                values.append(int(text))
        return cls(np.array(ids, dtype=np.int64), np.array(values, dtype=np.int64))

    @property
    def has_ten(self) -> bool:
        return bool((self.values == 10).any())


def expected_score(
    tokenizer: Any,
    table: DigitTable,
    new_ids: Sequence[int],
    step_logits: Sequence[NDArray[np.float32]],
) -> dict[str, Any] | None:
    """The probability-weighted score of one greedy answer, or None where the answer holds
    no `"score": <number>`.

    At the step where the score's number starts, the probabilities of the tokens that spell
    0..10 (renormalised over those tokens) give E[v] for the leading whole number v; the
    expected score is the greedy score moved by E[v] - v_greedy, so a greedy "7.5" with
    E[v] = 6.8 gives 7.3. Where the tokenizer spells 10 as "1" + "0" and the greedy answer
    is 10, P(10) is split off P("1") with the next step's P("0"). `digit_mass` is the share
    of the step's probability on number tokens (near 1 when the model answers as asked).
    """
    text = tokenizer.decode(list(new_ids), skip_special_tokens=True)
    match = _SCORE_START.search(text)
    if match is None:
        return None
    number = re.match(r"-?\d+(?:\.\d+)?", text[match.end() :])
    if number is None:
        return None
    start = match.end()
    step = None
    for i in range(len(new_ids)):
        if len(tokenizer.decode(list(new_ids[: i + 1]), skip_special_tokens=True)) > start:
            step = i
            break
    if step is None or step >= len(step_logits):
        return None
    logits = np.asarray(step_logits[step], dtype=np.float64)
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    mass = probs[table.ids]
    total = float(mass.sum())
    if total <= 0.0:
        return None
    by_value = np.bincount(table.values, weights=mass, minlength=11)[:11] / total
    greedy = float(number.group())
    leading = int(number.group().lstrip("-").split(".")[0])
    if not table.has_ten and leading == 10 and step + 1 < len(step_logits):
        zero_ids = table.ids[table.values == 0]
        nxt = np.asarray(step_logits[step + 1], dtype=np.float64)
        p_next = np.exp(nxt - nxt.max())
        p_zero = float(p_next[zero_ids].sum() / p_next.sum())
        by_value[10], by_value[1] = by_value[1] * p_zero, by_value[1] * (1 - p_zero)
    mean_leading = float((np.arange(11) * by_value).sum())
    value = min(10.0, max(0.0, greedy + mean_leading - leading))
    return {
        "expected_score": round(value, 4),
        "digit_mass": round(total, 4),
        "digit_probs": [round(float(p), 4) for p in by_value],
    }
