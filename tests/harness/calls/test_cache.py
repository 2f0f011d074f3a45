"""ResponseCache's reads: a block of keys read in one query gives exactly what reading each
key gives, and a stored JSON text too deep to walk is a damaged entry either way."""

from __future__ import annotations

import json
from pathlib import Path

import diskcache
import pytest

from harness.calls import cache as cache_module
from harness.calls.cache import ResponseCache
from harness.core.files import MAX_VALUE_DEPTH

ANSWERS = {f"k{i}": {"text": f'{{"score": {i}}}', "input_tokens": i, "extra": {}} for i in range(6)}


def filled(folder: Path) -> ResponseCache:
    cache = ResponseCache(folder)
    for key, value in ANSWERS.items():
        cache.set(key, value)
    return cache


def test_prefetched_reads_are_the_reads_of_each_key(tmp_path: Path) -> None:
    cache = filled(tmp_path / "cache")
    keys = [*ANSWERS, "absent"]
    one_by_one = [cache.get(key, "chat") for key in keys]
    cache.prefetch(keys)
    assert [cache.get(key, "chat") for key in keys] == one_by_one
    assert one_by_one[-1] is None and one_by_one[0] == ANSWERS["k0"]
    cache.prefetch(["k1"])
    assert cache.get("k1", "scores") is None  # the shape is checked as before
    assert cache.damaged == {"k1"}
    cache.close()


def test_a_block_of_keys_is_read_through_the_key_index(tmp_path: Path) -> None:
    cache = filled(tmp_path / "cache")
    query = cache_module.PREFETCH_QUERY.format(marks="?,?")
    plan = cache._reader().execute(f"EXPLAIN QUERY PLAN {query}", ["k1", "k2"]).fetchall()
    assert "Cache_key_raw" in str(plan), plan  # not a scan of the whole table or another index
    cache.close()


def test_a_block_of_keys_is_one_query(tmp_path: Path) -> None:
    cache = filled(tmp_path / "cache")
    statements: list[str] = []
    cache._reader().set_trace_callback(statements.append)
    cache.prefetch(list(ANSWERS))
    for key in ANSWERS:
        assert cache.get(key) == ANSWERS[key]
    assert len(statements) == 1, statements
    cache.close()


def test_what_is_read_ahead_stays_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Values read ahead but never asked for (a call that failed first) are dropped, the
    oldest first, beyond READ_AHEAD."""
    monkeypatch.setattr(cache_module, "READ_AHEAD", 4)
    cache = filled(tmp_path / "cache")
    cache.prefetch(["k0", "k1", "k2"])
    cache.prefetch(["k3", "k4"])
    assert cache.read_ahead == 4
    one_at_a_time: list[str] = []
    store_get = cache._store.get
    monkeypatch.setattr(
        cache._store, "get", lambda key, **kw: one_at_a_time.append(key) or store_get(key, **kw)
    )
    assert [cache.get(key) for key in ANSWERS] == list(ANSWERS.values())
    assert one_at_a_time == ["k0", "k5"] and cache.read_ahead == 0
    cache.close()


def test_an_answer_stored_after_the_block_was_read_is_found(tmp_path: Path) -> None:
    cache = filled(tmp_path / "cache")
    cache.prefetch(["late"])
    cache.set("late", ANSWERS["k2"])
    assert cache.get("late") == ANSWERS["k2"]
    cache.close()


def test_a_short_json_text_nested_too_deep_is_damaged(tmp_path: Path) -> None:
    """A short text cannot hold too many values, but it can nest beyond the walk's depth."""
    deep = "[" * (MAX_VALUE_DEPTH + 2) + "]" * (MAX_VALUE_DEPTH + 2)
    text = json.dumps({"text": "ok", "extra": {"x": json.loads(deep)}})
    store = diskcache.Cache(str(tmp_path / "cache"))
    store.set("deep", text, read=False)  # stored as text, as an older harness would have
    store.set("flat", json.dumps(ANSWERS["k3"]))
    store.close()
    cache = ResponseCache(tmp_path / "cache")
    assert cache.get("flat") == ANSWERS["k3"]
    assert cache.get("deep") is None
    cache.prefetch(["deep", "flat"])
    assert cache.get("flat") == ANSWERS["k3"] and cache.get("deep") is None
    assert cache.damaged == {"deep"}
    cache.close()


def test_a_lone_surrogate_stored_by_an_older_harness_is_read_as_replacement(
    tmp_path: Path,
) -> None:
    """A lone surrogate cannot be written as UTF-8 further on (records, keys, the terminal)."""
    store = diskcache.Cache(str(tmp_path / "cache"))
    store.set("escaped", json.dumps({"text": "ok \ud800", "extra": {"\udc00": "x"}}))
    store.set("pair", json.dumps({"text": "ok \U0001f3b5"}))  # a pair of escapes: one character
    store.close()
    cache = ResponseCache(tmp_path / "cache")
    assert cache.get("escaped") == {"text": "ok \ufffd", "extra": {"\ufffd": "x"}}
    assert cache.get("pair") == {"text": "ok \U0001f3b5"}
    cache.prefetch(["escaped"])
    assert cache.get("escaped") == {"text": "ok \ufffd", "extra": {"\ufffd": "x"}}
    cache.close()
