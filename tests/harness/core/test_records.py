"""records.jsonl of a run: streamed to disk, sorted from the file, never held whole."""

from __future__ import annotations

import asyncio
import gc
import itertools
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


@pytest.mark.parametrize(
    ("scores", "extra", "same"),
    [
        ({"a": 1.5, "b": None, "c": -0.0}, {"turn": 1, "input_audio_tokens": 7}, True),
        ({"a": 1e308}, {"description": [1, (2, 3)]}, True),  # nested: read from the file
        ({"a": float("nan")}, {}, False),
        ({"a": float("-inf")}, {}, False),
        ({"a": 1.0}, {"cached_input_tokens": float("nan")}, False),
    ],
)
def test_a_record_reads_back_as_written_unless_json_drops_a_value(
    scores: dict[str, float | None], extra: dict[str, Any], same: bool
) -> None:
    from harness.core.records import reads_back_as_written

    record = Record(item_id="d0", candidates=list(scores), scores=scores, extra=extra)
    back = Record.model_validate_json(record.model_dump_json())
    assert reads_back_as_written(record) is same
    plain = [k for k, v in extra.items() if not isinstance(v, list | tuple)]
    seen = (back.scores, {k: back.extra[k] for k in plain})
    assert (seen == (record.scores, {k: extra[k] for k in plain})) is same


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


def test_the_writer_knows_when_its_lines_need_no_sorting(tmp_path: Path) -> None:
    from harness.core.records import RecordWriter, sort_records

    def rec(item: str, cand: str, repeat: int = 0) -> Record:
        return Record(item_id=item, candidates=[cand], repeat=repeat, scores={cand: 1.0})

    order = ["q2", "q1"]
    writer = RecordWriter(tmp_path / "a.jsonl", order)
    for r in (rec("q2", "a"), rec("q2", "b"), rec("q2", "b"), rec("q1", "a"), rec("q1", "a", 1)):
        writer.write(r)
    assert writer.in_order
    writer.write(rec("q2", "c"))  # an earlier item after a later one
    assert not writer.in_order
    writer.write(rec("q1", "z", 5))
    assert not writer.in_order  # once out of order, the file is sorted at the end
    writer.close()
    sort_records(tmp_path / "a.jsonl", tmp_path / "sorted.jsonl", order)
    firsts = [(r.item_id, r.candidates[0]) for r in read_records(tmp_path / "sorted.jsonl")]
    assert firsts[:4] == [("q2", "a"), ("q2", "b"), ("q2", "b"), ("q2", "c")]
    (tmp_path / "b.jsonl").write_text("not even read\n")
    sort_records(tmp_path / "b.jsonl", tmp_path / "b-sorted.jsonl", order, in_order=True)
    assert (tmp_path / "b-sorted.jsonl").read_text() == "not even read\n"
    assert not (tmp_path / "b.jsonl").exists()


CANDIDATE_LISTS = st.lists(
    st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True),
    min_size=1,
    max_size=4,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    groups=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1), CANDIDATE_LISTS), max_size=6),
    data=st.data(),
)
def test_records_handed_on_group_by_group_come_in_the_files_order(
    groups: list[tuple[int, int, list[list[str]]]], data: st.DataObject, tmp_path: Path
) -> None:
    """Groups (an item's records of one repeat) written one after another, in any order
    inside a group: `InFileOrder` hands them on exactly in the order `sort_records` leaves
    in records.jsonl, when the groups come in dataset order; else it is broken."""
    from harness.core.records import InFileOrder

    item_order = ["d0", "d1", "d2", "d3"]
    written: list[Record] = []
    for item, repeat, lists in groups:
        for n, candidates in enumerate(data.draw(st.permutations(lists))):
            scores = {c: float(n) for c in candidates}
            written.append(
                Record(item_id=f"d{item}", repeat=repeat, candidates=candidates, scores=scores)
            )
    handed: list[Record] = []
    feed = InFileOrder(item_order, handed.append)
    partial, path = tmp_path / f"p{len(written)}.jsonl", tmp_path / f"r{len(written)}.jsonl"
    writer = RecordWriter(partial, item_order)
    for record in written:
        writer.write(record)
        feed.add(record)
    writer.close()
    feed.close()
    sort_records(partial, path, item_order)
    places = [(item, repeat) for item, repeat, _ in groups]
    runs = [p for i, p in enumerate(places) if i == 0 or p != places[i - 1]]
    in_dataset_order = all(a < b for a, b in itertools.pairwise(runs))
    assert feed.broken is not in_dataset_order
    if in_dataset_order:
        assert handed == list(read_records(path))


def test_a_record_of_an_item_not_in_the_dataset_breaks_the_order() -> None:
    from harness.core.records import InFileOrder

    handed: list[Record] = []
    feed = InFileOrder(["d0"], handed.append)
    feed.add(Record(item_id="d0", candidates=["a"], scores={"a": 1.0}))
    feed.add(Record(item_id="elsewhere", candidates=["a"], scores={"a": 1.0}))
    feed.close()
    assert feed.broken and handed == []
