"""Annotators' rankings in SQLite, written the moment they are submitted."""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.core.dataset import Dataset
from harness.core.errors import HarnessError
from harness.core.files import parse_json

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
CREATE TABLE IF NOT EXISTS guidelines (
    annotator TEXT PRIMARY KEY,
    read_at TEXT NOT NULL        -- UTC, ISO 8601: when they confirmed reading the guidelines
);
CREATE TABLE IF NOT EXISTS practice (
    annotator TEXT NOT NULL,
    item_id TEXT NOT NULL,       -- an item of the practice set, never exported
    ranking TEXT NOT NULL,
    submitted_at TEXT NOT NULL,
    PRIMARY KEY (annotator, item_id)
);
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
        now = _now()
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

    # ------------------------------------------------------------ the study around the task
    def read_guidelines(self, annotator: str) -> None:
        self._db.execute("INSERT OR IGNORE INTO guidelines VALUES (?, ?)", (annotator, _now()))

    def has_read_guidelines(self, annotator: str) -> bool:
        row = self._db.execute("SELECT 1 FROM guidelines WHERE annotator = ?", (annotator,))
        return row.fetchone() is not None

    def save_practice(self, annotator: str, item_id: str, ranking: Sequence[str]) -> None:
        """A practice ranking (kept apart from the rankings, never exported); the first one
        for an item stays."""
        self._db.execute(
            "INSERT OR IGNORE INTO practice VALUES (?, ?, ?, ?)",
            (annotator, item_id, json.dumps(list(ranking)), _now()),
        )

    def practice_done(self, annotator: str) -> set[str]:
        rows = self._db.execute("SELECT item_id FROM practice WHERE annotator = ?", (annotator,))
        return {item_id for (item_id,) in rows}

    def secret(self) -> str:
        """A random secret of this database (made once), behind the completion codes."""
        self._db.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('secret', ?)",
            (secrets.token_hex(16),),
        )
        (value,) = self._db.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone()
        return str(value)

    def annotators(self) -> list[dict[str, Any]]:
        """Everyone who started: when they read the guidelines, practice and task counts, and
        their last submission."""
        rows = self._db.execute(
            """SELECT name,
                      (SELECT read_at FROM guidelines g WHERE g.annotator = name),
                      (SELECT COUNT(*) FROM practice p WHERE p.annotator = name),
                      (SELECT COUNT(*) FROM rankings r WHERE r.annotator = name),
                      (SELECT MAX(submitted_at) FROM rankings r WHERE r.annotator = name)
               FROM (SELECT annotator AS name FROM guidelines
                     UNION SELECT annotator FROM practice UNION SELECT annotator FROM rankings)
               ORDER BY name"""
        )
        keys = ("annotator", "guidelines_read_at", "practice_done", "done", "last_submitted_at")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def close(self) -> None:
        self._db.close()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _stored(row: tuple[str, str, str, str, str]) -> Stored:
    annotator, item_id, ranking, presented, submitted_at = row
    where = "the annotations database"
    return Stored(
        annotator,
        item_id,
        tuple(parse_json(ranking, where)),
        tuple(parse_json(presented, where)),
        submitted_at,
    )
