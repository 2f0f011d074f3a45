"""JSON text as the standard library writes it, faster: the canonical form cache keys
digest and the compact form of a report's page data. Both are defined by `json` (their tests
hold them to it); orjson only does the work where it gives the very same bytes, and `json`
does the rest. (Reading JSON back is harness.core.files' `parse_json`.) `first_object_end`
says where the first JSON object of a model's answer closes (a local judge's stop)."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson


def canonical_json(value: Any) -> bytes:
    """`json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)` as
    UTF-8: the text every cache key digests. orjson writes the same bytes fifteen times
    faster for plain values; anything else goes through `json`, whose output (or error) it
    is by definition."""
    fast = _by_orjson(value, orjson.OPT_SORT_KEYS)
    if fast is not None:
        return fast
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def compact_json(value: Any) -> str:
    """`json.dumps(value, separators=(",", ":"), ensure_ascii=False)` (a report's page data):
    written by orjson where it gives the same text, else by `json`."""
    fast = _by_orjson(value, 0)
    if fast is not None:
        return fast.decode("utf-8")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _by_orjson(value: Any, option: int) -> bytes | None:
    """orjson's bytes for `value` where they are `json`'s (`_same_in_orjson`), else None."""
    if not _same_in_orjson(value):
        return None
    try:
        return orjson.dumps(value, option=option)
    except orjson.JSONEncodeError:  # an int past 64 bits, a lone surrogate, deep nesting
        return None


def _same_in_orjson(value: Any) -> bool:
    """`value` holds only what orjson writes as `json` does: dicts with str keys, lists,
    tuples, str, int, bool, None and floats that Python prints without a negative exponent
    (orjson writes 1e-05 as 0.00001 and 1e-07 as 1e-7; NaN as null). Exact types only: a
    subclass (an enum, say) may print otherwise."""
    # Every cache key walks its payload: loops written out, and plain members of a dict or
    # list are passed over where they are found, not pushed onto the stack.
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            for key in item:
                if type(key) is not str:
                    return False
            members = item.values()
        elif kind is list or kind is tuple:
            members = item
        elif kind is float:
            if not (math.isfinite(item) and (item == 0.0 or abs(item) >= 1e-4)):
                return False
            continue
        elif kind is str or kind is int or kind is bool or item is None:
            continue
        else:
            return False
        for member in members:
            kind = type(member)
            if not (kind is str or kind is int or kind is bool or member is None):
                stack.append(member)
    return True


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
