"""Where a command forks a helper: Linux with two cores or more, nowhere else; and where it
does not, the command does the helper's work itself."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness import workers
from harness.items import Item
from harness.predictions_ahead import PredictionsReadAhead
from harness.records import read_predictions
from harness.report.figure_worker import FigureWorker


def test_one_core_or_another_system_gets_no_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda pid: {0})
    assert workers.fork_context() is None
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda pid: {0, 1})
    assert workers.fork_context() is not None or sys.platform != "linux"
    monkeypatch.setattr(workers.sys, "platform", "darwin")
    assert workers.fork_context() is None


def test_without_a_fork_the_command_does_the_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(workers.sys, "platform", "darwin")
    items = [Item(id="d1", query="rain", candidates=("a", "b"), relevant=("a",))]
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"item_id": "d1", "scores": {"a": 1, "b": 2}}) + "\n")
    with PredictionsReadAhead(path, min_bytes=0) as ahead:
        assert not ahead.started
        got = ahead.read(items)
        assert not ahead.fell_back
    assert dict(got[0]["d1"]) == dict(read_predictions(path, items)[0]["d1"])
    with FigureWorker() as drawer:
        assert not drawer.started and drawer.worker_pid is None
