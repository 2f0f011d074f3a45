"""Fuzz of response-cache values (issue 27: D1, D2 closed as a class): any JSON value, any
plain-data pickle and any bytes stored under a key read back as a well-formed answer or as a
counted damaged entry (a miss), and what a run does with a cached answer (summing its usage,
pricing it) never fails on one that was read back."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import diskcache
from hypothesis import given
from hypothesis import strategies as st

from harness.calls.answerer import Asked
from harness.calls.cache import ResponseCache, well_formed
from harness.calls.pricing import Cost, Price, Usage
from harness.core.records import Record
from tests.reliability.fuzz._contract import SETTINGS, json_values, within_contract

KEYS = ["text", "input_tokens", "output_tokens", "extra", "latency_s", "scores", "vector",
        "batch", "input_audio_tokens", "cached_input_tokens"]  # fmt: skip

chat_like = st.fixed_dictionaries(
    {"text": st.text(max_size=20)},
    optional={
        "input_tokens": json_values(KEYS),
        "output_tokens": st.integers(min_value=-5, max_value=10**6) | st.none(),
        "extra": st.dictionaries(st.sampled_from(KEYS), json_values(KEYS), max_size=3)
        | json_values(KEYS),
        "latency_s": st.floats(allow_nan=True) | st.text(max_size=3),
    },
)
values = st.one_of(chat_like, json_values(KEYS))


def _use(answer: dict[str, Any]) -> None:
    """What the call path and pricing do with a cached judge's answer."""
    asked: Asked[Any] = Asked()
    asked._add(answer, True)
    record = Record(
        item_id="d0",
        candidates=["a", "b"],
        scores={},
        raw=answer["text"],
        input_tokens=asked.input_tokens,
        output_tokens=asked.output_tokens,
        extra=asked.extra,
    )
    Usage().add(record)
    Cost().add(record, Price(input=1.0, output=2.0))


def _read_back(cache: ResponseCache, key: str) -> None:
    def read() -> None:
        got = cache.get(key, "chat")
        if got is None:
            assert key in cache.damaged or key not in cache
            return
        assert well_formed(got, "chat")
        _use(got)

    within_contract(read)


def test_any_json_value_is_an_answer_or_a_counted_miss(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    keys = iter(range(10**6))

    @SETTINGS
    @given(value=values)
    def check(value: Any) -> None:
        key = f"k{next(keys)}"
        cache._store.set(key, value)  # stored as the harness stores any value: JSON text
        _read_back(cache, key)

    check()
    cache.close()


def test_any_pickle_is_an_answer_or_a_counted_miss(tmp_path: Path) -> None:
    """Plain-data pickles (an older harness), shared-reference chains of any depth (D2) and
    arbitrary bytes stored in pickle mode."""
    folder = tmp_path / "cache"
    cache = ResponseCache(folder)
    keys = iter(range(10**6))

    @SETTINGS
    @given(
        value=values,
        raw=st.binary(max_size=200),
        depth=st.sampled_from([0, 1, 8, 40]),
    )
    def check(value: Any, raw: bytes, depth: int) -> None:
        shared: list[Any] = ["x"]
        for _ in range(depth):
            shared = [shared, shared]
        n = next(keys)
        stored = {
            f"plain{n}": pickle.dumps(value, protocol=4),
            f"shared{n}": pickle.dumps({"text": "t", "extra": {"s": shared}}, protocol=4),
            f"raw{n}": raw,
        }
        old = diskcache.Cache(str(folder))
        for key, data in stored.items():
            old.set(key, 0)
            old._sql(
                "UPDATE Cache SET mode = ?, value = ? WHERE key = ?",
                (diskcache.core.MODE_PICKLE, data, key),
            )
        old.close()
        for key in stored:
            _read_back(cache, key)

    check()
    cache.close()
