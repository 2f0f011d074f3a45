"""JSON text as cache keys and report pages write it, and where the first JSON object of a
model's answer closes (`first_object_end`: a local judge's stop)."""

from __future__ import annotations

import json
from typing import Any


def canonical_json(value: Any) -> bytes:
    """The UTF-8 text every cache key digests: sorted keys, no spaces, no escapes."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def compact_json(value: Any) -> str:
    """A report's page data: no spaces, no escapes."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_DECODER = json.JSONDecoder()


def first_object_end(text: str) -> int | None:
    """Where the first complete JSON object of `text` ends (the object starting at its first
    `{`), or None while there is none."""
    start = text.find("{")
    if start == -1:
        return None
    try:
        _, end = _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    return end
