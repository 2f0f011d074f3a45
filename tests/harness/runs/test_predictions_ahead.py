"""The read-ahead of a predictions file must give exactly what `read_predictions` gives (the
same rows, the same first error, named at the same line), whatever the lines hold."""

from __future__ import annotations

import json
import math
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.errors import DatasetError
from harness.core.items import Item
from harness.core.predictions import Predictions, ScoreRow, read_predictions
from harness.core.workers import fork_context
from harness.runs.predictions_ahead import PredictionsReadAhead, order_digest

pytestmark = pytest.mark.skipif(
    fork_context() is None, reason="the read-ahead forks only on Linux with two cores"
)


def _item(item_id: str, candidate_ids: list[str]) -> Item:
    return Item(
        id=item_id,
        query="music for a rainy afternoon",
        candidates=tuple(candidate_ids),
        relevant=(candidate_ids[0],),
    )


ITEMS = [
    _item("d1", ["a", "b", "c"]),
    _item("d2", ["x", "y", "z", "w"]),
    _item("d3", ["p\x00q", "r"]),  # a NUL inside an id: never matched by digest
    _item("d4", ["é", "ü"]),
]


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    )
    return path


def _plain(predictions: Predictions) -> dict[int, dict[str, dict[str, float | None]]]:
    """Comparable form: NaN (a null or an absent candidate) as None, absent keys absent."""
    return {
        repeat: {
            item_id: {
                c: (None if v is None or (isinstance(v, float) and math.isnan(v)) else v)
                for c, v in row.items()
            }
            for item_id, row in by_item.items()
        }
        for repeat, by_item in predictions.items()
    }


def _ahead(path: Path, items: list[Item]) -> Predictions:
    with PredictionsReadAhead(path, min_bytes=0) as ahead:
        assert ahead.started
        return ahead.read(items)


def _serial_or_error(path: Path, items: list[Item]) -> tuple[str, object]:
    try:
        return "ok", _plain(read_predictions(path, items))
    except DatasetError as exc:
        return "error", str(exc)


def _ahead_or_error(path: Path, items: list[Item]) -> tuple[str, object]:
    try:
        return "ok", _plain(_ahead(path, items))
    except DatasetError as exc:
        return "error", str(exc)


MIXED = [
    {"item_id": "d1", "scores": {"a": 1, "b": 2.5, "c": -3}},  # the item's order: read ahead
    {"item_id": "d2", "scores": {"y": 1, "x": 2, "z": 3, "w": 4}},  # reordered
    "   ",
    {"item_id": "d3", "scores": {"p\x00q": 1, "r": 0}},
    {"item_id": "d4", "scores": {"é": None, "ü": 7}},  # a null
    {"item_id": "d1", "repeat": 1, "scores": {"a": 1}},  # a subset
    {"item_id": "d2", "repeat": 1, "ranking": ["w", "x"]},
    {"item_id": "d1", "repeat": 2, "ranking": ["c", "b", "a"]},
    "",
    {"item_id": "d2", "repeat": 2, "scores": {"x": 1e300, "y": -0.0, "z": 5, "w": None}},
]


def test_a_mixed_file_reads_as_read_predictions_reads_it(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.jsonl", MIXED)
    ahead = _ahead(path, ITEMS)
    assert _plain(ahead) == _plain(read_predictions(path, ITEMS))
    row = ahead[0]["d1"]
    assert list(row) == ["a", "b", "c"] and row["b"] == 2.5
    assert isinstance(row, ScoreRow) and row.array.base is not None  # a slice: read ahead
    assert ahead[0]["d4"]["é"] is None and ahead[0]["d4"]["ü"] == 7
    assert "b" not in ahead[1]["d1"]  # the subset names only "a"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([MIXED[0], {"item_id": "nope", "scores": {"a": 1}}], "jsonl:2: unknown item id 'nope'"),
        ([MIXED[0], MIXED[0]], "jsonl:2: second prediction for d1 (repeat 0)"),
        ([MIXED[0], {"item_id": "d1", "scores": {"a": 1, "q": 2}}], "jsonl:2: unknown candidate"),
        ([MIXED[0], '{"item_id": "d1", "scores": {"a": true, "b": 1, "c": 2}}'], "jsonl:2:"),
        ([MIXED[0], "{not json"], "jsonl:2:"),
        ([MIXED[0], {"item_id": "d1", "repeat": 5, "scores": {"a": 1}}], "jsonl:2: repeat 5"),
        ([{"item_id": "d1", "ranking": ["a", "a"]}], "jsonl:1: ranking lists ['a']"),
    ],
)
def test_a_bad_line_is_named_as_read_predictions_names_it(
    tmp_path: Path, lines: list[Any], message: str
) -> None:
    path = _write(tmp_path / "p.jsonl", lines)
    with pytest.raises(DatasetError) as serial:
        read_predictions(path, ITEMS)
    with pytest.raises(DatasetError) as ahead:
        _ahead(path, ITEMS)
    assert message in str(serial.value)
    assert str(ahead.value) == str(serial.value)


def test_a_line_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(json.dumps(MIXED[0]).encode() + b"\n" + b'{"item_id": "d\xff"}\n')
    with pytest.raises(DatasetError, match="jsonl:2: not valid UTF-8"):
        _ahead(path, ITEMS)


def test_a_worker_that_dies_leaves_the_reading_to_this_process(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.jsonl", MIXED)
    with PredictionsReadAhead(path, min_bytes=0) as ahead:
        assert ahead.started and ahead.worker_pid is not None
        os.kill(ahead.worker_pid, signal.SIGKILL)
        got = ahead.read(ITEMS)
        assert ahead.fell_back
    assert _plain(got) == _plain(read_predictions(path, ITEMS))


def test_a_small_file_is_read_without_a_worker(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.jsonl", MIXED)
    with PredictionsReadAhead(path) as ahead:  # the default threshold: megabytes
        assert not ahead.started
        assert _plain(ahead.read(ITEMS)) == _plain(read_predictions(path, ITEMS))


def test_a_missing_file_is_named_as_read_predictions_names_it(tmp_path: Path) -> None:
    path = tmp_path / "absent.jsonl"
    with PredictionsReadAhead(path, min_bytes=0) as ahead:
        assert not ahead.started
        with pytest.raises(DatasetError, match="predictions file not found"):
            ahead.read(ITEMS)


def test_the_worker_is_gone_after_the_block(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.jsonl", MIXED)
    with PredictionsReadAhead(path, min_bytes=0) as ahead:
        pid = ahead.worker_pid
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_order_digest_refuses_what_it_cannot_tell_apart() -> None:
    assert order_digest(("a", "b")) == order_digest(["a", "b"])
    assert order_digest(("a", "b")) != order_digest(("b", "a"))
    assert order_digest(("a\x00b",)) is None  # would join as ("a", "b") does
    assert order_digest(("\ud800",)) is None  # a lone surrogate has no UTF-8


_ids = st.sampled_from(["a", "b", "c", "x", "y", "z", "w", "é", "ü", "p\x00q", "r", "zz"])
_score = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False), st.integers(-5, 5))
_line = st.fixed_dictionaries(
    {"item_id": st.sampled_from(["d1", "d2", "d3", "d4", "d9"])},
    optional={"repeat": st.integers(0, 3)},
).flatmap(
    lambda head: st.one_of(
        st.dictionaries(_ids, _score, min_size=0, max_size=5).map(lambda s: {**head, "scores": s}),
        st.lists(_ids, max_size=4).map(lambda r: {**head, "ranking": r}),
        st.sampled_from(
            [item.candidates for item in ITEMS if item.id == head["item_id"]] or [()]
        ).map(lambda cands: {**head, "scores": dict.fromkeys(cands, 1.0)}),
    )
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(st.one_of(_line, st.just("")), min_size=1, max_size=8))
def test_any_file_reads_or_fails_as_read_predictions(
    tmp_path: Path, lines: list[Mapping[str, Any] | str]
) -> None:
    path = _write(tmp_path / "p.jsonl", list(lines))
    assert _ahead_or_error(path, ITEMS) == _serial_or_error(path, ITEMS)
