"""records.jsonl of a run: streamed to disk, sorted from the file, never held whole."""

from __future__ import annotations

import asyncio
import gc
import random
from pathlib import Path
from typing import Any

import pytest

from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig, provider_config
from harness.core.records import Record, RecordsFile, RecordWriter, read_records, sort_records
from harness.runs.runner import Runner
from tests.conftest import write_tiny_dataset


def test_sorting_a_records_file_orders_by_item_repeat_and_candidates(tmp_path: Path) -> None:
    records = [
        Record(item_id=f"d{i}", candidates=[f"c{c}"], repeat=r, scores={f"c{c}": float(n)})
        for n, (i, r, c) in enumerate((i, r, c) for i in range(4) for r in range(2) for c in (2, 1))
    ]
    records.append(Record(item_id="unknown", candidates=["x"], scores={"x": 1.0}))
    # two records that tie on the key (a conversation's turns) keep the order they came in
    records += [
        Record(item_id="d1", candidates=["c9"], scores={"c9": 1.0}, extra={"turn": t})
        for t in (1, 2)
    ]
    shuffled = records[:]
    random.Random(3).shuffle(shuffled)
    shuffled.sort(key=lambda r: r.extra.get("turn", 0))  # turn 1 before turn 2 in the file
    partial = tmp_path / "records.partial.jsonl"
    writer = RecordWriter(partial)
    for record in shuffled:
        writer.write(record)
    writer.close()
    out = tmp_path / "records.jsonl"
    sort_records(partial, out, ["d0", "d1", "d2", "d3"])
    got = list(read_records(out))
    keys = [(r.item_id, r.repeat, r.candidates) for r in got]
    order = {f"d{i}": i for i in range(4)}
    assert keys == sorted(keys, key=lambda k: (order.get(k[0], 99), k[1], k[2]))
    turns = [r.extra["turn"] for r in got if "turn" in r.extra]
    assert turns == [1, 2]
    expected = "".join(r.model_dump_json(exclude_defaults=True) + "\n" for r in got)
    assert out.read_text() == expected and len(got) == len(records)
    assert [r.item_id for r in RecordsFile(out)] == [r.item_id for r in got]  # read again
    assert not partial.exists()  # moved into place


def test_records_already_in_order_are_moved_as_they_are(tmp_path: Path) -> None:
    partial = tmp_path / "records.partial.jsonl"
    writer = RecordWriter(partial)
    for item in ("d0", "d1"):
        writer.write(Record(item_id=item, candidates=["c1"], scores={"c1": 1.0}))
    writer.close()
    written = partial.read_bytes()
    inode = partial.stat().st_ino
    out = tmp_path / "records.jsonl"
    sort_records(partial, out, ["d0", "d1"])
    assert out.read_bytes() == written and not partial.exists()
    assert out.stat().st_ino == inode  # renamed, not copied line by line


def test_a_run_does_not_hold_its_records_until_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", n_items=15, seconds=0.05)
    config = ExperimentConfig(
        name="flat", dataset=dataset, provider=provider_config(name="mock"), n_bootstrap=20
    )
    runner = Runner(
        config,
        cache=ResponseCache(tmp_path / "cache"),
        results_dir=tmp_path / "results",
        show_progress=False,
    )
    alive: list[int] = []
    finish = runner._finish

    def records_alive() -> int:
        gc.collect()
        return sum(type(o) is Record for o in gc.get_objects())  # no weak proxy dereferenced

    before = records_alive()  # other tests of this process may still hold some

    def counted(*args: Any) -> Any:
        alive.append(records_alive() - before)
        return finish(*args)

    monkeypatch.setattr(runner, "_finish", counted)
    result = asyncio.run(runner.run())
    assert result.stats.calls == 60 and result.aggregate.n_items == 15
    assert alive and alive[0] < 10  # not the run's 60 records
    assert len(list(read_records(result.out_dir / "records.jsonl"))) == 60


def test_the_writer_flushes_a_tenth_of_a_second_at_a_time_and_at_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.core.records as records_module
    from harness.core.records import RecordWriter

    path = tmp_path / "records.partial.jsonl"
    record = Record(item_id="d0", candidates=["a"], scores={"a": 1.0})
    monkeypatch.setattr(records_module, "FLUSH_EVERY_S", 3600.0)
    writer = RecordWriter(path)
    writer.write(record)
    assert path.read_bytes() == b""  # held in the buffer: its answer is in the cache
    writer.close()
    assert path.read_text().count("\n") == 1
    monkeypatch.setattr(records_module, "FLUSH_EVERY_S", 0.0)
    writer = RecordWriter(path)
    writer.write(record)
    assert path.read_text().count("\n") == 1  # on disk before the writer is closed
    writer.close()
