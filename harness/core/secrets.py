"""Keeping API keys out of everything the harness writes and prints: `scrub` removes the value
of every variable named like a secret (`*API_KEY`, `*_TOKEN`, `*_SECRET`), every value
`register`ed (keys providers read, credentials in base URLs), anything shaped like an API key,
and credentials in URLs (`http://user:KEY@host`, `?key=KEY`).
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any

_SECRET_NAME = re.compile(r"(API_KEY|_TOKEN|_SECRET)$")
# A setting's key naming a secret (`extra_body: {api_key: ...}`); not `token` alone (logprobs).
_SECRET_FIELD = re.compile(r"(?i)(api[_-]?key|password|passwd|secret|[_-]token|authorization)$")
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


def env_secrets() -> frozenset[str]:
    """The values of the variables named like a secret (a run scans once: `scrub_value`)."""
    return frozenset(v for k, v in os.environ.items() if _SECRET_NAME.search(k))


def secret_values(named: frozenset[str] | None = None) -> list[str]:
    """Every secret to scrub: `named` (default: `env_secrets()` now) and the registered ones."""
    named = env_secrets() if named is None else named
    values = {v for v in named | _IN_USE if len(v) >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


@lru_cache(maxsize=8)
def _pattern(values: tuple[str, ...]) -> re.Pattern[str] | None:
    return re.compile("|".join(map(re.escape, values))) if values else None


def scrub(text: str, named: frozenset[str] | None = None) -> str:
    """`text` without any secret (see the module's docstring); `named`: the environment's
    secrets as `env_secrets()` found them earlier (default: scan it now)."""
    pattern = _pattern(tuple(secret_values(named)))
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    text = _URL_USERINFO.sub(REDACTED + "@", text)
    text = _URL_SECRET_PARAM.sub(lambda m: m.group(1) + REDACTED, text)
    return _KEY_SHAPES.sub(REDACTED, text)


def scrub_value(value: Any, named: frozenset[str] | None = None) -> Any:
    """`value` (JSON-like) with every string scrubbed (`named` as in `scrub`)."""
    named = env_secrets() if named is None else named
    if isinstance(value, str):
        return scrub(value, named)
    if isinstance(value, dict):
        return {
            key: REDACTED
            if isinstance(key, str) and isinstance(item, str) and _SECRET_FIELD.search(key)
            else scrub_value(item, named)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [scrub_value(item, named) for item in value]
    return value
