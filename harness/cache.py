"""The one response cache: diskcache keyed by a hash of everything that can change an answer.

Successful raw answers are stored (including ones that fail to parse: parsing is redone from
the raw text); errors never are. diskcache is SQLite underneath, so several processes can
share one cache directory safely.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import diskcache

CACHE_SCHEMA_VERSION = 1
DEFAULT_CACHE_DIR = Path(".cache/responses")


def default_cache_dir() -> Path:
    return Path(os.environ.get("BGM_JUDGE_CACHE", DEFAULT_CACHE_DIR))


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cache_key(payload: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of `payload` plus the cache schema version."""
    body = canonical_json({**payload, "cache_schema": CACHE_SCHEMA_VERSION})
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        # No eviction: a cached answer is paid for; losing it silently would cost money.
        self._store = diskcache.Cache(
            str(self.directory), size_limit=2**50, eviction_policy="none", timeout=60
        )

    def get(self, key: str) -> dict[str, Any] | None:
        value = self._store.get(key)
        return value if isinstance(value, dict) else None

    def set(self, key: str, value: dict[str, Any]) -> None:
        self._store.set(key, value)

    def __contains__(self, key: str) -> bool:
        return key in self._store

    def __len__(self) -> int:
        return len(self._store)

    def close(self) -> None:
        self._store.close()
