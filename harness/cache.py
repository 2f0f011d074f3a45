"""The one response cache: diskcache keyed by a hash of everything that can change an answer.

Successful raw answers are stored (including ones that fail to parse: parsing is redone from
the raw text); errors never are. diskcache is SQLite underneath, so several processes can
share one cache directory safely, and a claim per key (in `claims/`) keeps two processes
from paying for the same answer at the same time.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import uuid
from pathlib import Path
from typing import Any

import diskcache

from harness.types import Request

CACHE_SCHEMA_VERSION = 1
DEFAULT_CACHE_DIR = Path(".cache/responses")
CLAIM_LEASE_S = 60.0
_HOST = socket.gethostname()
_TOKENS: dict[int, str] = {}


def _owner() -> dict[str, Any]:
    """This process, as it appears in the claims it holds (a fork gets its own token)."""
    pid = os.getpid()
    token = _TOKENS.setdefault(pid, uuid.uuid4().hex)
    return {"host": _HOST, "pid": pid, "token": token}


def _is_dead(holder: dict[str, Any]) -> bool:
    """Whether a claim's holder is a process of this host that no longer runs."""
    if holder.get("host") != _HOST:
        return False  # another machine's claim ends with its lease
    pid = int(holder.get("pid", 0))
    if pid == os.getpid():
        return bool(holder.get("token") != _owner()["token"])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:  # a killed process its parent has not reaped yet (Linux)
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def default_cache_dir() -> Path:
    return Path(os.environ.get("BGM_JUDGE_CACHE", DEFAULT_CACHE_DIR))


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_file(path: Path) -> str:
    """SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_key(payload: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of `payload` plus the cache schema version."""
    body = canonical_json({**payload, "cache_schema": CACHE_SCHEMA_VERSION})
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def request_key(
    provider: dict[str, Any], request: Request, *, audio: bool = True, **context: Any
) -> str:
    """The one key recipe of a model call: the provider's identity, what of the request can
    change the answer, and the call's context (template hash, repeat index when sampling is
    not deterministic, purpose). `audio=False` leaves the audio field out: the key of a
    summary has never had one, and keys stay stable so that cached answers keep answering."""
    fields = request.key_fields()
    if not audio:
        fields.pop("audio", None)
    return cache_key({"provider": provider, **fields, **context})


class ResponseCache:
    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        # No eviction: a cached answer is paid for; losing it silently would cost money.
        self._store = diskcache.Cache(
            str(self.directory), size_limit=2**50, eviction_policy="none", timeout=60
        )
        self._claims = diskcache.Cache(
            str(self.directory / "claims"), eviction_policy="none", timeout=60
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

    # ------------------------------------------------------------ cross-process claims
    def claim(self, key: str, lease_s: float = CLAIM_LEASE_S) -> bool:
        """Take the claim on asking the model for `key`; False while another process holds
        it. A claim lapses after `lease_s` unless renewed, or at once when its process died."""
        return bool(self._claims.add(key, _owner(), expire=lease_s))

    def renew(self, key: str, lease_s: float = CLAIM_LEASE_S) -> None:
        self._claims.touch(key, expire=lease_s)

    def release(self, key: str) -> None:
        with self._claims.transact():
            if self._claims.get(key) == _owner():
                self._claims.delete(key)

    def claimed_elsewhere(self, key: str) -> bool:
        """Whether another live process holds the claim on `key` (a dead one's is dropped)."""
        holder = self._claims.get(key)
        if holder is None:
            return False
        if not _is_dead(holder):
            return True
        with self._claims.transact():
            if self._claims.get(key) == holder:
                self._claims.delete(key)
        return False

    def close(self) -> None:
        self._store.close()
        self._claims.close()
