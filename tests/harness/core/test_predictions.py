"""Predictions: read from a file compactly (`ScoreRow`, about 8 bytes a score), made from a
run's records (the mean of each candidate's usable scores), and every line validated from
its bytes as its decoded text would be."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from harness.core.dataset import Item, pydantic_reason
from harness.core.errors import DatasetError
from harness.core.predictions import (
    PredictionLine,
    ScoreRow,
    predictions_from_records,
    read_predictions,
)
from harness.core.records import Record
from harness.scoring.metrics import build_matrix


def _pool_items(n_items: int, n_candidates: int) -> list[Item]:
    return [
        Item(
            id=f"q{i}",
            query="calm piano",
            candidates=tuple(f"s{i}_{j}" for j in range(n_candidates)),
            relevant=(f"s{i}_0",),
        )
        for i in range(n_items)
    ]


def _held_by_predictions(tmp_path: Path, n_items: int) -> int:
    items = _pool_items(n_items, 200)
    path = tmp_path / f"pred{n_items}.jsonl"
    lines = [
        {"item_id": it.id, "scores": {c: k / 7 for k, c in enumerate(it.candidates)}}
        for it in items
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    tracemalloc.start()
    try:
        predictions = read_predictions(path, items)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(predictions[0]) == n_items
    return held


def test_predictions_read_from_a_file_hold_about_8_bytes_a_score(tmp_path: Path) -> None:
    """A pool's predictions are most of `harness evaluate`'s memory: each score is kept as
    one float of an array in candidate order, not as a dict entry with a string and a float
    object (~110 bytes). Measured as the growth from 300 to 600 items of 200 candidates
    (pydantic's string cache, at most 16,384 strings whatever the file's size, is full at
    both)."""
    _held_by_predictions(tmp_path, 10)  # imports out of the measurement
    growth = _held_by_predictions(tmp_path, 600) - _held_by_predictions(tmp_path, 300)
    assert growth / (300 * 200) < 12


def test_score_rows_read_as_the_scores_of_the_file(tmp_path: Path) -> None:
    items = _pool_items(3, 3)
    lines = [
        {"item_id": "q0", "scores": {"s0_2": 1.5, "s0_0": 2, "s0_1": -1.0}},
        {"item_id": "q1", "scores": {"s1_0": None, "s1_2": 0.5}},  # null and absent
        {"item_id": "q2", "scores": {}},
        {"item_id": "q0", "repeat": 1, "scores": {"s0_0": 1.0, "s0_1": None, "s0_2": 3.0}},
    ]
    path = tmp_path / "pred.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    predictions = read_predictions(path, items)
    assert predictions == {
        0: {
            "q0": {"s0_0": 2.0, "s0_1": -1.0, "s0_2": 1.5},
            "q1": {"s1_0": None, "s1_2": 0.5},
            "q2": {},
        },
        1: {"q0": {"s0_0": 1.0, "s0_1": None, "s0_2": 3.0}},  # all, in candidate order
    }
    row = predictions[0]["q1"]
    assert isinstance(row, ScoreRow) and len(row) == 2 and list(row) == ["s1_0", "s1_2"]
    assert "s1_1" not in row and row["s1_0"] is None
    with pytest.raises(KeyError):
        row["s1_1"]
    # the matrix is the one the same scores as dicts give, bit for bit
    from_rows = build_matrix(items, predictions[0])
    from_dicts = build_matrix(items, {k: dict(v) for k, v in predictions[0].items()})
    for a, b in zip(from_rows.scores, from_dicts.scores, strict=True):
        assert a.tobytes() == b.tobytes()
    in_order = build_matrix(items, predictions[1]).scores[0]
    assert in_order.tobytes() == np.array([1.0, np.nan, 3.0]).tobytes()


def _scorer_records(n_items: int) -> list[Record]:
    """Records as a scorer run reads them back: fresh strings for every record."""
    return [
        Record.model_validate_json(
            json.dumps(
                {
                    "item_id": f"d{i}",
                    "candidates": [f"c{(4 * i + j) % 400:05d}" for j in range(4)],
                    "scores": {f"c{(4 * i + j) % 400:05d}": (i + j) / 9 for j in range(4)},
                }
            )
        )
        for i in range(n_items)
    ]


def test_merging_a_scorer_runs_records_holds_little_per_score() -> None:
    """A run's predictions are built from its records at the end of the run: a score
    given once (every score of a scorer run) is held as its row's entry, not also under a
    (repeat, item, candidate) key with a list, and the candidate names are shared."""
    records = _scorer_records(2000)
    tracemalloc.start()
    try:
        predictions = predictions_from_records(records)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(predictions[0]) == 2000
    assert peak / (2000 * 4) < 110  # was ~265 bytes a score


scores_st = st.dictionaries(
    st.sampled_from(["a", "b", "c"]),
    st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False, width=32)),
    max_size=3,
)


@given(st.lists(st.tuples(st.integers(0, 1), st.sampled_from(["d0", "d1"]), scores_st)))
def test_merged_scores_are_the_mean_of_each_candidates_usable_scores_in_order(
    lines: list[tuple[int, str, dict[str, float | None]]],
) -> None:
    records = [
        Record(item_id=item, candidates=list(scores), repeat=repeat, scores=scores)
        for repeat, item, scores in lines
    ]
    expected: dict[int, dict[str, dict[str, float | None]]] = {}
    usable: dict[tuple[int, str, str], list[float]] = {}
    for record in records:
        row = expected.setdefault(record.repeat, {}).setdefault(record.item_id, {})
        for cid, score in record.scores.items():
            row.setdefault(cid, None)
            if score is not None:
                usable.setdefault((record.repeat, record.item_id, cid), []).append(score)
    for (repeat, item, cid), values in usable.items():
        expected[repeat][item][cid] = sum(values) / len(values)
    got = predictions_from_records(records)
    assert got == expected
    assert [list(row) for by in got.values() for row in by.values()] == [
        list(row) for by in expected.values() for row in by.values()
    ]
    assert json.dumps(got) == json.dumps(expected)  # -0.0 and 0.0 too


TRICKY_LINES = [
    b'{"item_id": "q\xff0", "scores": {}}\n',  # not UTF-8
    b'\xef\xbb\xbf{"item_id": "q0", "scores": {}}\n',  # a byte order mark
    b'{"item_id": "q0", "scores": {"s0_0": NaN}}\n',
    b'{"item_id": "q0", "scores": {"s0_0": 1e400}}\n',
    b'{"item_id": "q0", "scores": {"s0_0": true}}\n',
    b'{"item_id": "q0", "scores": {"s0_0": "7.5"}}\n',
    b'{"item_id": "q0", "scores": {"s0_0": 1.0}} trailing\n',
    b'{"item_id": "q\\ud800", "scores": {}}\n',  # a lone surrogate
    b'{"item_id": "q0", "scores": {"s0_0": 1.0}, "scores": {"s0_1": 2.0}}\n',
    b'{"item_id": "q0", "scores": {"s0_0": 1.0, "s0_0": 2.0}}\n',
    b'{"item_id": "q0", "scores": {"s0_0": 1.0, "s0_1": 2, "s0_2": -0.0}}\r\n',
    b"   \n",
    b"\x0c\x0b\n",
    b"[1, 2]\n",
    b'{"item_id": "q0", "scores": {}, "repeat": true}\n',
    b'{"item_id": "q0", "scores": {}}',  # no newline at the end
]


@pytest.mark.parametrize("raw", TRICKY_LINES)
def test_a_line_reads_as_its_decoded_text_validates(raw: bytes, tmp_path: Path) -> None:
    """Predictions are validated from the bytes of each line (no copy as text): whatever a
    line holds, it gives the prediction or the one-line error its decoded text gives."""
    items = _pool_items(2, 3)
    path = tmp_path / "pred.jsonl"
    path.write_bytes(b'{"item_id": "q1", "scores": {"s1_0": 0.5}}\n' + raw)
    try:
        text: str | None = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        text, expected = None, f"{path}:2: not valid UTF-8 ({exc.reason})"
    if text is not None and text.strip() == "":
        expected = "blank"
    elif text is not None:
        try:
            line = PredictionLine.model_validate_json(text)
            expected = json.dumps({"item_id": line.item_id, "scores": line.scores})
        except ValidationError as exc:
            expected = f"{path}:2: {pydantic_reason(exc)}"
    try:
        predictions = read_predictions(path, items)
    except DatasetError as exc:
        assert str(exc) == expected
        return
    if expected == "blank":
        assert list(predictions[0]) == ["q1"]
    else:
        assert json.dumps({"item_id": "q0", "scores": dict(predictions[0]["q0"])}) == expected
