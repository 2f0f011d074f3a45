"""The run folder's ledger of batch jobs (`batches.jsonl`, appended and fsynced): a job is written
`submitting` before it is sent and `submitted` once accepted, so a killed run's re-run attaches
to every job not `collected` and pays once. A torn or foreign line is skipped and counted."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from harness.core.errors import HarnessError
from harness.core.files import lines

LEDGER_NAME = "batches.jsonl"


@dataclass
class LedgerEntry:
    label: str
    keys: list[str]
    api: str
    batch_id: str | None = None
    closed: bool = False  # collected, or never created (abandoned)
    events: list[str] = field(default_factory=list)


class _Event(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    event: Literal["submitting", "submitted", "collected", "abandoned"]
    label: str
    keys: list[str] | None = None
    api: str | None = None
    id: str | None = None


class BatchLedger:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.torn_lines = 0
        self._check()  # before any request is sent

    def _check(self) -> None:
        if self.path.exists() and not self.path.is_file():
            raise HarnessError(
                f"{self.path}: the batch ledger is not a file; move it aside (the jobs it "
                "names, if any, are then not attached to) and run again"
            )

    def _append(self, event: dict[str, Any]) -> None:
        self._check()
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
        found: dict[str, LedgerEntry] = {}
        self.torn_lines = 0
        self._check()
        if not self.path.is_file():
            return []
        for _, line in lines(self.path):
            try:
                event = _Event.model_validate_json(line)
            except (ValidationError, ValueError, RecursionError):  # torn or damaged
                self.torn_lines += bool(line.strip())
                continue
            kind, label = event.event, event.label
            if kind == "submitting":
                found[label] = LedgerEntry(label, list(event.keys or []), event.api or "")
            entry = found.get(label)
            if entry is None:
                continue
            entry.events.append(kind)
            if kind in ("submitted", "collected") and event.id:
                entry.batch_id = event.id
            entry.closed = entry.closed or kind in ("collected", "abandoned")
        return list(found.values())

    def open_entries(self) -> list[LedgerEntry]:
        return [entry for entry in self.entries() if not entry.closed]
