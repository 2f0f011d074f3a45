"""JSON text as the standard library writes and reads it, faster: the canonical form cache
keys digest, the compact form of a report's page data, and `loads`. All three are defined by
`json` (their tests hold them to it); orjson only does the work where it gives the very same
bytes or value, and `json` does the rest."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

# A run of 19 or more digits: orjson reads an integer outside 64 bits as a float. Found by
# mapping digits to "0" and all else to " " (a regular expression took 4x orjson's parse).
_DIGITS_ONLY = bytes(48 if 48 <= code <= 57 else 32 for code in range(256))
_LONG_NUMBER = b"0" * 19


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


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`: its value, or its error. orjson reads strict JSON (UTF-8, no NaN,
    no lone surrogate escape) to the same values three to five times faster; it refuses the
    rest, which `json` then reads, and text with a 19-digit number goes to `json` at once."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if _LONG_NUMBER not in data.translate(_DIGITS_ONLY):
        try:
            return orjson.loads(data)  # (bytes: orjson need not encode the text again)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


# The most a stored value may expand to when walked: values (containers, numbers, strings)
# and characters. A judge's answer holds a few values (with logprobs, some 10,000) and well
# under 1 MB of text; a walk stops at the bound, so a bomb costs ~0.1 s.
MAX_VALUE_NODES = 100_000
MAX_VALUE_CHARS = 64_000_000
MAX_VALUE_DEPTH = 64


def within_bounds_as_text(text: str) -> bool:
    """Whether JSON `text` is too short and too flat to exceed the bounds once decoded (it
    holds at most one value per character and, JSON sharing nothing, expands no further),
    so that walking it (`bounded`) can be skipped."""
    return len(text) <= MAX_VALUE_NODES and text.count("[") + text.count("{") <= MAX_VALUE_DEPTH


class TooLarge(ValueError):
    """A value that would expand beyond MAX_VALUE_NODES values or MAX_VALUE_CHARS characters,
    or nest beyond MAX_VALUE_DEPTH."""


def bounded(value: Any) -> None:
    """Raise TooLarge when walking `value` (every shared reference expanded, as json.dumps
    would) exceeds the bounds above; stops as soon as it does, so a value of 2**40 shared
    leaves costs no more than the bound."""
    nodes = chars = 0
    level: list[Any] = [value]
    for _ in range(MAX_VALUE_DEPTH + 1):  # one level of the value at a time
        below: list[Any] = []
        for current in level:
            if isinstance(current, str | bytes):
                chars += len(current)
            elif isinstance(current, dict):
                below.extend(current)
                below.extend(current.values())
            elif isinstance(current, list | tuple | set | frozenset):
                below.extend(current)
            if len(below) > MAX_VALUE_NODES:
                break
        nodes += len(level)
        if nodes + len(below) > MAX_VALUE_NODES or chars > MAX_VALUE_CHARS:
            raise TooLarge(f"expands to more than {MAX_VALUE_NODES:,} values or 64 M characters")
        if not below:
            return
        level = below
    raise TooLarge(f"nested deeper than {MAX_VALUE_DEPTH} levels")
