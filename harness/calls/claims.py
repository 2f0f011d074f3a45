"""Cross-process claims on asking the model (`claims/cache.db` beside the cache): the holder of a
key's claim asks, others wait for its answer. A claim names its holder (host, pid, token) and
lapses at `expires` unless renewed, or when its holder is a dead process of this host."""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import NamedTuple

_HOST = socket.gethostname()
_TOKENS: dict[int, str] = {}

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, host TEXT NOT NULL, "
    "pid INTEGER NOT NULL, token TEXT NOT NULL, expires REAL NOT NULL) WITHOUT ROWID"
)
# A claim is taken when the key has none, or its claim lapsed.
_CLAIM = (
    "INSERT INTO claims VALUES (?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
    "host = excluded.host, pid = excluded.pid, token = excluded.token, "
    "expires = excluded.expires WHERE claims.expires <= ?"
)


class Holder(NamedTuple):
    host: str
    pid: int
    token: str


def owner() -> Holder:
    """This process, as it appears in the claims it holds (a fork gets its own token)."""
    pid = os.getpid()
    return Holder(_HOST, pid, _TOKENS.setdefault(pid, uuid.uuid4().hex))


def is_dead(holder: Holder) -> bool:
    """Whether a claim's holder is a process of this host that no longer runs."""
    if holder.host != _HOST:
        return False  # another machine's claim ends with its lease
    if holder.pid == os.getpid():
        return holder.token != owner().token
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    try:  # a killed process its parent has not reaped yet (Linux)
        stat = Path(f"/proc/{holder.pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


class Claims:
    """The claims table of one cache folder; a connection per thread and process."""

    def __init__(self, directory: Path, timeout_s: float = 60.0) -> None:
        self.path = directory / "cache.db"
        self.timeout_s = timeout_s
        self._local = threading.local()
        directory.mkdir(parents=True, exist_ok=True)
        self._connection()  # opened now, so a damaged file is reported before a run starts

    def _connection(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is not None and self._local.pid == os.getpid():
            return connection
        connection = sqlite3.connect(
            self.path, timeout=self.timeout_s, isolation_level=None, check_same_thread=False
        )
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute(_SCHEMA)
        self._local.connection, self._local.pid = connection, os.getpid()
        return connection

    def claim(self, key: str, lease_s: float) -> bool:
        """Take the claim on `key`; False while another holder's claim has not lapsed."""
        now = time.time()
        cursor = self._connection().execute(_CLAIM, (key, *owner(), now + lease_s, now))
        return cursor.rowcount == 1

    def renew(self, key: str, lease_s: float) -> None:
        self._connection().execute(
            "UPDATE claims SET expires = ? WHERE key = ? AND token = ?",
            (time.time() + lease_s, key, owner().token),
        )

    def release(self, key: str, token: str | None = None) -> None:
        """Remove `key`'s claim if this process (or the holder with `token`) still holds it."""
        self._connection().execute(
            "DELETE FROM claims WHERE key = ? AND token = ?", (key, token or owner().token)
        )

    def holder(self, key: str) -> Holder | None:
        """Who holds a live (not lapsed) claim on `key`."""
        sql = "SELECT host, pid, token FROM claims WHERE key = ? AND expires > ?"
        row = self._connection().execute(sql, (key, time.time())).fetchone()
        return None if row is None else Holder(*row)

    def held_elsewhere(self, key: str) -> bool:
        """Whether another live process holds the claim on `key` (a dead one's is dropped)."""
        holder = self.holder(key)
        if holder is not None and is_dead(holder):
            self.release(key, holder.token)
            return False
        return holder is not None

    def __len__(self) -> int:
        row = self._connection().execute("SELECT count(*) FROM claims").fetchone()
        return int(row[0])

    def close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None and self._local.pid == os.getpid():
            connection.close()
        self._local = threading.local()
