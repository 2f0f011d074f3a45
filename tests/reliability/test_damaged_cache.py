"""A damaged cache never blocks a run: a damaged entry is a miss (asked again, and reported),
a damaged cache.db is one line naming the folder and how to recover (exit 2), and a full
disk stops the run with one line, losing no answer that was stored: the re-run pays at most
for the requests that were in flight."""

from __future__ import annotations

import errno
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.calls import cache as cache_module
from harness.calls.cache import ResponseCache
from harness.cli.main import app
from harness.fake_api import FakeServer
from tests.reliability.conftest import (
    MakeDataset,
    answered_per_body,
    fast_settings,
    paid_twice,
    read_jsonl,
    write_experiment,
)

N_ITEMS = 10
CONCURRENCY = 4


def _run(experiment: Path, work: Path) -> Any:
    return CliRunner().invoke(
        app,
        [
            "run",
            str(experiment),
            "--results-dir",
            str(work / "results"),
            "--cache-dir",
            str(work / "cache"),
            "--no-progress",
        ],
    )


def _one_error_line(result: Any) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return str(lines[0])


def test_a_damaged_value_file_is_a_miss(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    big = {"text": "x" * 100_000, "input_tokens": 1}  # stored in a file of its own
    cache.set("big", big)
    cache.set("small", {"text": "ok"})
    (value_file,) = [p for p in (tmp_path / "cache").rglob("*.val")]
    value_file.write_bytes(value_file.read_bytes()[:100])
    assert cache.get("big") is None and cache.get("small") == {"text": "ok"}
    assert cache.damaged == {"big"}
    cache.set("big", big)  # asked again: stored again
    assert cache.get("big") == big
    cache.close()


def test_damaged_entries_are_asked_again_and_reported(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=N_ITEMS, n_clips=16)
    with FakeServer(fast_settings()) as server:
        experiment = write_experiment(tmp_path / "exp.yaml", dataset, server)
        assert _run(experiment, tmp_path).exit_code == 0
        first = (tmp_path / "results" / "soak" / "metrics.json").read_text()
        with sqlite3.connect(tmp_path / "cache" / "cache.db") as db:
            damaged = db.execute(
                "UPDATE Cache SET value = substr(value, 1, 7) WHERE rowid % 3 = 0"
            ).rowcount
        assert damaged >= 10
        server.reset()
        again = _run(experiment, tmp_path)
        asked = server.stats()["requests"]
    assert again.exit_code == 0, again.output
    assert asked == damaged  # exactly the damaged answers were asked again
    run = json.loads((tmp_path / "results" / "soak" / "run.json").read_text())
    assert run["cache_repaired"] == damaged and run["model_calls"] == damaged
    assert f"{damaged} damaged cache entries" in again.output
    assert (tmp_path / "results" / "soak" / "metrics.json").read_text() == first


DAMAGE = {
    "garbage": lambda data: b"\x00not a database\xff" * 512,
    "truncated": lambda data: data[:1500],
    "header_zeroed": lambda data: b"\x00" * 100 + data[100:],
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_cache_database_is_one_line_and_exit_2(
    damage: str, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=2)
    with FakeServer(fast_settings()) as server:
        experiment = write_experiment(tmp_path / "exp.yaml", dataset, server)
        assert _run(experiment, tmp_path).exit_code == 0
        db = tmp_path / "cache" / "cache.db"
        db.write_bytes(DAMAGE[damage](db.read_bytes()))
        server.reset()
        result = _run(experiment, tmp_path)
        assert server.stats()["requests"] == 0
    line = _one_error_line(result)
    assert str(tmp_path / "cache") in line and "damaged" in line
    assert "move it aside" in line


def test_a_full_disk_stops_the_run_and_loses_nothing_stored(
    make_dataset: MakeDataset,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dataset = make_dataset(n_items=N_ITEMS, n_clips=16)
    stored = 0
    original = cache_module.JsonDisk.store

    def store_until_full(self: Any, value: Any, read: bool, **kwargs: Any) -> Any:
        nonlocal stored
        if stored >= 12:
            raise OSError(errno.ENOSPC, "No space left on device")
        stored += 1
        return original(self, value, read, **kwargs)

    with FakeServer(fast_settings()) as server:
        experiment = write_experiment(
            tmp_path / "exp.yaml", dataset, server, max_concurrency=CONCURRENCY
        )
        with monkeypatch.context() as patched:
            patched.setattr(cache_module.JsonDisk, "store", store_until_full)
            full = _run(experiment, tmp_path)
        line = _one_error_line(full)
        assert "full" in line and str(tmp_path / "cache") in line
        partial = tmp_path / "results" / "soak" / "records.partial.jsonl"
        assert partial.exists() and not partial.with_name("records.jsonl").exists()
        resumed = _run(experiment, tmp_path)
        twice = paid_twice(server)
        answered = sum(answered_per_body(server).values())
    assert resumed.exit_code == 0, resumed.output
    assert twice <= CONCURRENCY  # at most the requests in flight when the disk filled up
    assert answered <= 4 * N_ITEMS + CONCURRENCY
    records = read_jsonl(tmp_path / "results" / "soak" / "records.jsonl")
    assert len(records) == 4 * N_ITEMS and not any(r.get("error") for r in records)
