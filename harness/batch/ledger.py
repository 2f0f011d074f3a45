"""The run folder's record of the batch jobs a run submitted (`batches.jsonl`), so that every
request is paid for once even when the run is killed: a job is written down as `submitting`
(its label and request keys) before it is sent and as `submitted` (its id) as soon as it is
accepted; a re-run attaches to every job not yet `collected` instead of sending its requests
again, finding by its label a job whose id a kill kept from being written down.

One JSON object a line, appended and flushed to disk; a line torn by a kill is skipped."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LEDGER_NAME = "batches.jsonl"


@dataclass
class LedgerEntry:
    """One batch job as the ledger knows it."""

    label: str
    keys: list[str]
    api: str
    batch_id: str | None = None
    closed: bool = False  # collected, or never created (abandoned)
    events: list[str] = field(default_factory=list)


class BatchLedger:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.torn_lines = 0

    def _append(self, event: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({**event, "at": round(time.time(), 3)}, sort_keys=True) + "\n"
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def submitting(self, label: str, keys: list[str], api: str) -> None:
        self._append({"event": "submitting", "label": label, "keys": keys, "api": api})

    def submitted(self, label: str, batch_id: str) -> None:
        self._append({"event": "submitted", "label": label, "id": batch_id})

    def collected(self, label: str, batch_id: str, summary: dict[str, Any]) -> None:
        self._append({"event": "collected", "label": label, "id": batch_id, **summary})

    def abandoned(self, label: str) -> None:
        self._append({"event": "abandoned", "label": label})

    def entries(self) -> list[LedgerEntry]:
        """Every job in the ledger, in the order they were submitted."""
        found: dict[str, LedgerEntry] = {}
        self.torn_lines = 0
        if not self.path.is_file():
            return []
        for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                event = json.loads(line)
                kind, label = event["event"], str(event["label"])
            except (ValueError, KeyError, TypeError):
                self.torn_lines += bool(line.strip())
                continue
            if kind == "submitting":
                keys = [str(k) for k in event.get("keys") or []]
                found[label] = LedgerEntry(label, keys, str(event.get("api", "")))
            entry = found.get(label)
            if entry is None:
                continue
            entry.events.append(kind)
            if kind in ("submitted", "collected") and event.get("id"):
                entry.batch_id = str(event["id"])
            entry.closed = entry.closed or kind in ("collected", "abandoned")
        return list(found.values())

    def open_entries(self) -> list[LedgerEntry]:
        """The jobs submitted (or maybe submitted) and not yet collected."""
        return [entry for entry in self.entries() if not entry.closed]
