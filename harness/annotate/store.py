"""Annotators' rankings in SQLite, written the moment they are submitted.

One row per (annotator, item): the primary key means an annotator can only ever write their
own rows, and a stored ranking is final: the same ranking again is accepted (a retried
request), a different one is refused, so nothing is overwritten by a second tab or a second
person who typed the same name.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from harness.dataset import Dataset
from harness.errors import HarnessError

SCHEMA = """
CREATE TABLE IF NOT EXISTS rankings (
    annotator TEXT NOT NULL,
    item_id TEXT NOT NULL,
    ranking TEXT NOT NULL,       -- JSON list of candidate ids, best first
    presented TEXT NOT NULL,     -- JSON list: the order the candidates were shown in
    submitted_at TEXT NOT NULL,  -- UTC, ISO 8601
    PRIMARY KEY (annotator, item_id)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class RankingConflict(Exception):
    """The annotator already stored a different ranking for this item."""


@dataclass(frozen=True)
class Stored:
    annotator: str
    item_id: str
    ranking: tuple[str, ...]
    presented: tuple[str, ...]
    submitted_at: str


def dataset_fingerprint(dataset: Dataset) -> str:
    """Identity of what is being ranked: item ids and their candidates (not the rankings,
    so exporting annotations into the dataset does not change it)."""
    body = json.dumps([[item.id, list(item.candidates)] for item in dataset.items])
    return hashlib.sha256(body.encode()).hexdigest()


class RankingStore:
    def __init__(self, path: Path, dataset: Dataset) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit: each statement is its own transaction, durable when it returns.
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)
        fingerprint = dataset_fingerprint(dataset)
        self._db.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('dataset', ?)", (fingerprint,)
        )
        (stored,) = self._db.execute("SELECT value FROM meta WHERE key = 'dataset'").fetchone()
        if stored != fingerprint:
            self._db.close()
            raise HarnessError(
                f"{path} holds rankings of a different dataset (other items or candidates); "
                "use another --db"
            )

    def save(
        self, annotator: str, item_id: str, ranking: Sequence[str], presented: Sequence[str]
    ) -> bool:
        """Store a ranking; True if new, False if this exact ranking was already stored.
        Raises RankingConflict if the annotator stored a different one."""
        now = datetime.now(UTC).isoformat(timespec="seconds")
        try:
            self._db.execute(
                "INSERT INTO rankings VALUES (?, ?, ?, ?, ?)",
                (annotator, item_id, json.dumps(list(ranking)), json.dumps(list(presented)), now),
            )
        except sqlite3.IntegrityError:
            existing = self.get(annotator, item_id)
            if existing is not None and existing.ranking == tuple(ranking):
                return False
            raise RankingConflict(f"{annotator} already ranked {item_id}") from None
        return True

    def get(self, annotator: str, item_id: str) -> Stored | None:
        row = self._db.execute(
            "SELECT * FROM rankings WHERE annotator = ? AND item_id = ?", (annotator, item_id)
        ).fetchone()
        return _stored(row) if row else None

    def done(self, annotator: str) -> set[str]:
        rows = self._db.execute("SELECT item_id FROM rankings WHERE annotator = ?", (annotator,))
        return {item_id for (item_id,) in rows}

    def all(self) -> list[Stored]:
        rows = self._db.execute("SELECT * FROM rankings ORDER BY item_id, annotator")
        return [_stored(row) for row in rows]

    def progress(self) -> dict[str, int]:
        rows = self._db.execute(
            "SELECT annotator, COUNT(*) FROM rankings GROUP BY annotator ORDER BY annotator"
        )
        return {annotator: count for annotator, count in rows}

    def close(self) -> None:
        self._db.close()


def _stored(row: tuple[str, str, str, str, str]) -> Stored:
    annotator, item_id, ranking, presented, submitted_at = row
    return Stored(
        annotator, item_id, tuple(json.loads(ranking)), tuple(json.loads(presented)), submitted_at
    )
