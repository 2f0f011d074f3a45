"""Keeping API keys out of everything the harness writes."""

from __future__ import annotations

import os
import re

_SECRET_NAME = re.compile(r"(API_KEY|_TOKEN|_SECRET)$")
_KEY_SHAPES = re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,})")
REDACTED = "[REDACTED]"


def secret_values() -> list[str]:
    values = [v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 6]
    return sorted(set(values), key=len, reverse=True)


def scrub(text: str) -> str:
    """Replace every secret from the environment, and anything shaped like an API key."""
    for value in secret_values():
        text = text.replace(value, REDACTED)
    return _KEY_SHAPES.sub(REDACTED, text)
