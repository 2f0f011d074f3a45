"""The one response cache: diskcache (SQLite, shared by processes) keyed by a hash of everything
that can change an answer. Raw answers are stored (parsing is redone), errors never; values are
JSON text, and one that cannot be read is a miss counted in `damaged`. A claim per key keeps two
processes from paying for the same answer."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

import diskcache
from diskcache.core import MODE_PICKLE, MODE_RAW, MODE_TEXT, UNKNOWN
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

from harness.calls.claims import Claims
from harness.core.errors import StorageError
from harness.core.files import parse_json, plain_pickle, read_bytes
from harness.core.json_text import canonical_json
from harness.core.paths import contained
from harness.core.sanitize import clean_value
from harness.core.types import Request

CACHE_SCHEMA_VERSION = 1
DEFAULT_CACHE_DIR = Path(".cache/responses")
CLAIM_LEASE_S = 60.0
MAX_VALUE_FILE_BYTES = 64 << 20  # an answer stored in a file of its own (over 32 KB)


Shape = Literal["chat", "scores", "vector"]


Count = Annotated[StrictInt, Field(ge=0)]
Number = StrictInt | StrictFloat


class _Value(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    extra: dict[str, Any] = Field(default_factory=dict)
    latency_s: Annotated[Number, Field(ge=0)] | None = None


class _Chat(_Value):
    text: str
    input_tokens: Count | None = None
    output_tokens: Count | None = None


class _Scores(_Value):
    scores: list[Number]


class _Vector(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    vector: list[Number]


_MODELS: dict[Shape, type[BaseModel]] = {"chat": _Chat, "scores": _Scores, "vector": _Vector}


def _counts_ok(extra: dict[str, Any]) -> bool:
    return all(
        type(name) is str
        and (not name.endswith("_tokens") or value is None or (type(value) is int and value >= 0))
        for name, value in extra.items()
    )


def well_formed(value: Any, shape: Shape | None = None, length: int | None = None) -> bool:
    if not isinstance(value, dict):
        return False
    shapes: tuple[Shape, ...] = (shape,) if shape else ("chat", "scores", "vector")
    for name in shapes:
        try:
            _MODELS[name].model_validate(value)
        except ValidationError:
            continue
        extra = value.get("extra") or {}
        if not isinstance(extra, dict) or not _counts_ok(extra):  # (a vector declares none)
            return False
        return length is None or name != "scores" or len(value["scores"]) == length
    return False


class DamagedEntry(Exception):
    """A stored value that cannot be read back as plain data."""


def default_cache_dir() -> Path:
    return Path(os.environ.get("BGM_JUDGE_CACHE", DEFAULT_CACHE_DIR))


def cache_key(payload: dict[str, Any]) -> str:
    body = canonical_json({**payload, "cache_schema": CACHE_SCHEMA_VERSION})
    return hashlib.sha256(body).hexdigest()


def request_key(
    provider: dict[str, Any], request: Request, *, audio: bool = True, **context: Any
) -> str:
    """The one key recipe of a model call: the provider's identity, the request's key fields
    and the call's context; `audio=False` leaves audio out (a summary's key never had it)."""
    fields = request.key_fields()
    if not audio:
        fields.pop("audio", None)
    return cache_key({"provider": provider, **fields, **context})


_ABSENT = object()  # no value under a key (a stored JSON `null` is a damaged value)


class JsonDisk(diskcache.Disk):  # type: ignore[misc]
    """diskcache's storage with JSON text values."""

    def store(self, value: Any, read: bool, key: Any = UNKNOWN) -> Any:
        return super().store(json.dumps(value, default=_numpy_to_json), read, key=key)

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool) -> Any:
        try:
            if filename is not None:  # a large value, in a file inside the cache folder
                path = contained(Path(self._directory), str(filename), "a cache value's file")
                data = read_bytes(path, limit=MAX_VALUE_FILE_BYTES)
                value = data.decode("utf-8") if mode == MODE_TEXT else data
            if mode == MODE_PICKLE:
                return clean_value(plain_pickle(bytes(value)))
            if mode == MODE_TEXT or (mode == MODE_RAW and isinstance(value, str)):
                return clean_value(parse_json(value, "a cached value"))
        except Exception as exc:  # a truncated or missing file, text that is not JSON
            raise DamagedEntry(f"{type(exc).__name__}: {exc}") from None
        raise DamagedEntry(f"a value stored in mode {mode}")

    def get(self, key: Any, raw: bool) -> Any:
        if not raw:
            raise DamagedEntry("a pickled key")
        return super().get(key, raw)


def _numpy_to_json(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} cannot be stored in the response cache")


class Seed(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...

    def close(self) -> None: ...


class ResponseCache:
    def __init__(self, directory: str | Path | None = None, *, seed: Seed | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.damaged: set[str] = set()  # keys whose stored value could not be read
        self.seed = seed  # asked on a miss; what it answers is copied in (`seeded` counts)
        self.seeded = 0
        self.used: set[str] = set()  # keys answered or stored since reset: a run's answers
        if self.directory.exists() and not self.directory.is_dir():
            raise StorageError(f"cache folder {self.directory} is a file, not a folder")
        with self._guard():
            # No eviction: a cached answer is paid for; losing it silently would cost money.
            self._store = diskcache.Cache(
                str(self.directory),
                size_limit=2**50,
                eviction_policy="none",
                timeout=60,
                disk=JsonDisk,
                # diskcache's default 64 MiB map and 32 MiB page cache grew a long run's
                # memory with its cache: the system's file cache serves the reads.
                sqlite_mmap_size=0,
                sqlite_cache_size=1024,  # pages of 4 KiB
            )
        with self._guard(claims=True):
            self._claims = Claims(self.directory / "claims")

    @contextmanager
    def _guard(self, claims: bool = False) -> Iterator[None]:
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            raise self._storage_error(exc, claims) from None

    def _storage_error(self, exc: sqlite3.Error | OSError, claims: bool = False) -> StorageError:
        where = self.directory / "claims" if claims else self.directory
        if _disk_full(exc):
            return StorageError(
                f"the disk holding the response cache {where} is full: the run stopped "
                "(every answer stored so far is kept); free some space and run again"
            )
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            if claims:
                return StorageError(
                    f"the claims database {where} of the response cache is damaged ({exc}): "
                    f"remove it (rm -r {where}) and run again; it holds no answers, only "
                    "which process is asking for which, and no run may be using the cache"
                )
            return StorageError(
                f"the response cache {where} is damaged ({exc}): move it aside "
                f"(mv {where} {where}.damaged) and run again; its answers will be asked again"
            )
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        return StorageError(f"cannot use the response cache {where}: {reason}")

    def get(
        self, key: str, shape: Shape | None = None, length: int | None = None
    ) -> dict[str, Any] | None:
        """The value of `key` if `well_formed` (else None, counted in `damaged`), or the seed's."""
        try:
            value = self._store.get(key, default=_ABSENT)
        except DamagedEntry:
            value = False
        except (sqlite3.Error, OSError) as exc:
            raise self._storage_error(exc) from None
        if value is _ABSENT:
            return self._from_seed(key, shape, length)
        if not well_formed(value, shape, length):  # a stored `null` too
            self.damaged.add(key)
            return self._from_seed(key, shape, length)
        self.used.add(key)
        return value  # type: ignore[no-any-return]

    def _from_seed(
        self, key: str, shape: Shape | None, length: int | None
    ) -> dict[str, Any] | None:
        if self.seed is None:
            return None
        value = self.seed.get(key)
        if value is None or not well_formed(value, shape, length):
            return None
        cleaned: dict[str, Any] = clean_value(value)
        self.set(key, cleaned)
        self.seeded += 1
        return cleaned

    def set(self, key: str, value: dict[str, Any]) -> None:
        with self._guard():
            self._store.set(key, value)
        self.used.add(key)

    def add(self, key: str, value: dict[str, Any]) -> bool:
        """Store `value` unless `key` holds one; whether it was stored."""
        with self._guard():
            return bool(self._store.add(key, value))

    def keys(self) -> Iterator[str]:
        with self._guard():
            for key in self._store.iterkeys():
                if isinstance(key, str):
                    yield key

    def __contains__(self, key: str) -> bool:
        with self._guard():
            if key in self._store:
                return True
        return self.seed is not None and self.seed.get(key) is not None

    def __len__(self) -> int:
        with self._guard():
            return len(self._store)

    # ------------------------------------------------------------ cross-process claims
    def claim(self, key: str, lease_s: float = CLAIM_LEASE_S) -> bool:
        with self._guard(claims=True):
            return self._claims.claim(key, lease_s)

    def renew(self, key: str, lease_s: float = CLAIM_LEASE_S) -> None:
        with self._guard(claims=True):
            self._claims.renew(key, lease_s)

    def release(self, key: str) -> None:
        with self._guard(claims=True):
            self._claims.release(key)

    def claimed_elsewhere(self, key: str) -> bool:
        with self._guard(claims=True):
            return self._claims.held_elsewhere(key)

    def close(self) -> None:
        self._store.close()
        self._claims.close()
        if self.seed is not None:
            self.seed.close()


def _disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return "full" in str(exc).lower()
