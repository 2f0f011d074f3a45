"""Keeping API keys out of everything the harness writes and prints.

`scrub` removes the value of every variable whose name says it holds a secret
(`*API_KEY`, `*_TOKEN`, `*_SECRET`), every value registered as in use (`register`: the keys
providers actually read, whatever their variable's name, and credentials found in base
URLs), anything shaped like an API key, and credentials written into URLs
(`http://user:KEY@host`, `?key=KEY`).
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any

_SECRET_NAME = re.compile(r"(API_KEY|_TOKEN|_SECRET)$")
_KEY_SHAPES = re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,})")
_URL_USERINFO = re.compile(r"(?<=://)[^/\s@?#]+@")
_URL_SECRET_PARAM = re.compile(
    r"(?i)([?&](?:key|api[_-]?key|access[_-]?token|token|secret|password|sig|signature)=)"
    r"[^&\s#\"']+"
)
REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 6  # shorter values would scrub ordinary words
_IN_USE: set[str] = set()


def register(value: str | None) -> None:
    """Scrub `value` from now on (a key a provider read, a password in a URL)."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        _IN_USE.add(value)


def secret_values() -> list[str]:
    named = {v for k, v in os.environ.items() if _SECRET_NAME.search(k)}
    values = {v for v in named | _IN_USE if len(v) >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


@lru_cache(maxsize=8)
def _pattern(values: tuple[str, ...]) -> re.Pattern[str] | None:
    return re.compile("|".join(map(re.escape, values))) if values else None


def scrub(text: str) -> str:
    """`text` without any secret (see the module's docstring)."""
    pattern = _pattern(tuple(secret_values()))
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    text = _URL_USERINFO.sub(REDACTED + "@", text)
    text = _URL_SECRET_PARAM.sub(lambda m: m.group(1) + REDACTED, text)
    return _KEY_SHAPES.sub(REDACTED, text)


def scrub_value(value: Any) -> Any:
    """`value` (JSON-like: dicts, lists, strings) with every string scrubbed."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {key: scrub_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_value(item) for item in value]
    return value
