"""ResponseCache's reads: a value of another shape, or a stored JSON text too deep to walk,
is a damaged entry; a lone surrogate an older harness stored is read as a replacement."""

from __future__ import annotations

import json
from pathlib import Path

import diskcache

from harness.calls.cache import ResponseCache
from harness.core.files import MAX_VALUE_DEPTH

ANSWERS = {f"k{i}": {"text": f'{{"score": {i}}}', "input_tokens": i, "extra": {}} for i in range(6)}


def filled(folder: Path) -> ResponseCache:
    cache = ResponseCache(folder)
    for key, value in ANSWERS.items():
        cache.set(key, value)
    return cache


def test_a_value_of_another_shape_is_a_damaged_miss(tmp_path: Path) -> None:
    cache = filled(tmp_path / "cache")
    assert cache.get("k0", "chat") == ANSWERS["k0"] and cache.get("absent", "chat") is None
    assert cache.get("k1", "scores") is None
    assert cache.damaged == {"k1"}
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
    cache.close()
