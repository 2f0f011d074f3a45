"""Predictions (repeat -> item -> candidate -> score): made from a run's records, or read
from your own predictions file (JSONL, or a TREC run), so that metrics have one code path for
runs and for `harness evaluate`."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.core.dataset import Item, gc_paused, pydantic_reason
from harness.core.errors import DatasetError
from harness.core.files import decoded_line, lines
from harness.core.records import Record
from harness.core.trec import is_trec_run, read_run

# How an unscored candidate counts: below every scored one, tied (`worst`), or its item dropped.
MissingPolicy = Literal["worst", "exclude"]

# repeat -> item -> candidate -> score (read-only: a file's rows are `ScoreRow`s)
Predictions = Mapping[int, Mapping[str, Mapping[str, float | None]]]


class ScoreRow(Mapping[str, float | None]):
    """An item's scores as read from a predictions file: one float per candidate in candidate
    order (NaN for null or absent), which `build_matrix` takes as it is."""

    __slots__ = ("_position", "array", "candidates", "given")

    def __init__(
        self,
        candidates: tuple[str, ...],
        array: NDArray[np.float64],
        given: NDArray[np.bool_] | None,
    ) -> None:
        array.flags.writeable = False
        self.candidates, self.array = candidates, array
        self.given = given  # which candidates the line names; None: every one
        self._position: dict[str, int] | None = None

    def _index(self, cid: str) -> int:
        if self._position is None:
            self._position = {c: i for i, c in enumerate(self.candidates)}
        i = self._position[cid]
        if self.given is not None and not self.given[i]:
            raise KeyError(cid)
        return i

    def __getitem__(self, cid: str) -> float | None:
        value = float(self.array[self._index(cid)])
        return None if math.isnan(value) else value

    def __iter__(self) -> Iterator[str]:
        if self.given is None:
            return iter(self.candidates)
        return (c for c, g in zip(self.candidates, self.given, strict=True) if g)

    def __len__(self) -> int:
        return len(self.candidates) if self.given is None else int(self.given.sum())

    def __repr__(self) -> str:
        return f"ScoreRow({dict(self)!r})"


def score_row(scores: dict[str, float | None], candidates: tuple[str, ...]) -> ScoreRow | None:
    """`scores` as a row over `candidates`; None if it names another candidate."""
    if len(scores) == len(candidates) and tuple(scores) == candidates:
        # every candidate, in its order (as `write_predictions` writes them): no lookups
        try:
            array = np.fromiter(scores.values(), np.float64, len(candidates))
        except TypeError:  # a null (NaN, as below)
            array = np.array(list(scores.values()), dtype=np.float64)
        return ScoreRow(candidates, array, None)
    # None (null) and absent candidates both become NaN, as build_matrix reads them.
    values = np.array(list(map(scores.get, candidates)), dtype=np.float64)
    given: NDArray[np.bool_] | None = None
    if len(scores) != len(candidates) or np.isnan(values).any():  # not one number each
        if not set(scores) <= set(candidates):
            return None
        given = np.fromiter(map(scores.__contains__, candidates), bool, len(candidates))
        given = None if given.all() else given
    return ScoreRow(candidates, values, given)


class PredictionsBuilder:
    """Records merged, one at a time, into scores per (repeat, item, candidate); a candidate
    scored by several calls gets the mean of its usable scores."""

    def __init__(self) -> None:
        # a candidate's first usable score sits in its row; a list only for those scored twice
        self._seen: dict[int, dict[str, dict[str, float | None]]] = defaultdict(dict)
        self._several: dict[tuple[int, str, str], list[float]] = {}

    def add(self, record: Record) -> None:
        row = self._seen[record.repeat].setdefault(record.item_id, {})
        for name, score in record.scores.items():
            cid = sys.intern(name)  # a run's records name the same clips over and over
            current = row.get(cid)
            if current is None:
                row[cid] = score
            elif score is not None:
                key = (record.repeat, record.item_id, cid)
                self._several.setdefault(key, [current]).append(score)

    def predictions(self) -> Predictions:
        for by_item in self._seen.values():
            for row in by_item.values():
                for cid, value in row.items():
                    if value is not None:
                        row[cid] = sum([value])  # as the mean of one score (0.0 for -0.0)
        for (repeat, item_id, cid), values in self._several.items():
            self._seen[repeat][item_id][cid] = sum(values) / len(values)
        return dict(self._seen)


def predictions_from_records(records: Iterable[Record]) -> Predictions:
    """The records' scores per (repeat, item, candidate) (see `PredictionsBuilder`)."""
    builder = PredictionsBuilder()
    for record in records:
        builder.add(record)
    return builder.predictions()


def scores_from_ranking(ranking: Sequence[str], candidates: Sequence[str]) -> dict[str, float]:
    """A ranked list (best first, any length) as scores: n-1, n-2, ... for the listed, the
    rest tied below (n = len(candidates))."""
    n = len(candidates)
    below = float(n - 1 - len(ranking))
    position = {cid: i for i, cid in enumerate(ranking)}
    return {cid: float(n - 1 - position[cid]) if cid in position else below for cid in candidates}


class PredictionLine(BaseModel):
    """One line of a predictions file: `scores`, or a `ranking` (best first, any length)."""

    # Strict: a score is a JSON number or null (not `true`, not "7.5"). pydantic's string
    # cache off: a pool's ids rarely repeat within its 16,384 slots.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True, cache_strings=False)
    item_id: str
    scores: dict[str, float | None] | None = None
    ranking: list[str] | None = None
    repeat: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _one_form(self) -> PredictionLine:
        if (self.scores is None) == (self.ranking is None):
            raise ValueError("give either 'scores' or 'ranking'")
        return self


def read_predictions(path: Path, items: Sequence[Item]) -> Predictions:
    """A predictions JSONL (docs/formats.md; `scores` or a `ranking` per line, an optional
    `repeat`, at most one repeat per line) or a TREC run (repeat 0); errors name the line."""
    if is_trec_run(path):
        return read_run(path, items)
    collector = PredictionsCollector(path, items)
    with gc_paused():
        for line_no, raw in lines(path, missing="predictions file not found"):
            pred = prediction_line(path, line_no, raw)
            if pred is not None:
                collector.add(line_no, pred)
        return collector.predictions()


def prediction_line(path: Path, line_no: int, raw: bytes) -> PredictionLine | None:
    """A line's prediction; None if it is blank; DatasetError names the line's problem."""
    try:
        return PredictionLine.model_validate_json(raw)
    except ValidationError:
        line = decoded_line(path, line_no, raw)
        if line is None:
            return None
        try:
            return PredictionLine.model_validate_json(line)
        except ValidationError as exc:
            raise DatasetError(path, line_no, pydantic_reason(exc)) from None


class PredictionsCollector:
    """The checks and the merge of `read_predictions`, a line at a time in file order."""

    def __init__(self, path: Path, items: Sequence[Item]) -> None:
        self.path = path
        self.candidates = {item.id: item.candidates for item in items}
        self._predictions: dict[int, dict[str, Mapping[str, float | None]]] = defaultdict(dict)
        self._n_lines, self._highest = 0, (0, 0)  # (repeat, its line)

    def add(self, line_no: int, pred: PredictionLine) -> None:
        path = self.path
        candidates = self.candidates.get(pred.item_id)
        if candidates is None:
            raise DatasetError(path, line_no, f"unknown item id {pred.item_id!r}")
        row = None if pred.scores is None else score_row(pred.scores, candidates)
        named = pred.scores if pred.scores is not None else pred.ranking or []
        unknown = [] if row is not None else sorted(set(named) - set(candidates))
        if unknown:
            raise DatasetError(
                path, line_no, f"unknown candidate id(s) {unknown} for {pred.item_id}"
            )
        self._check_new(line_no, pred.item_id, pred.repeat)
        if pred.ranking is not None:
            repeated = sorted(c for c, n in Counter(pred.ranking).items() if n > 1)
            if repeated:
                raise DatasetError(path, line_no, f"ranking lists {repeated} more than once")
            scores = scores_from_ranking(pred.ranking, candidates)
            self._predictions[pred.repeat][pred.item_id] = dict(scores)
        else:
            assert row is not None
            self._predictions[pred.repeat][pred.item_id] = row

    def _check_new(self, line_no: int, item_id: str, repeat: int) -> None:
        self._n_lines += 1
        self._highest = max(self._highest, (repeat, line_no), key=lambda pair: pair[0])
        if item_id in self._predictions[repeat]:
            raise DatasetError(
                self.path, line_no, f"second prediction for {item_id} (repeat {repeat})"
            )

    def predictions(self) -> Predictions:
        repeat, line_no = self._highest
        if repeat >= self._n_lines:
            raise DatasetError(
                self.path,
                line_no,
                f"repeat {repeat} is past the file's {self._n_lines} line(s): repeats run "
                "0..R-1, each one without a line counting as every score missing, so a file "
                "names at most as many repeats as it has lines",
            )
        return dict(self._predictions)


def write_predictions(path: Path, predictions: Predictions, items: Sequence[Item]) -> None:
    """Predictions as `harness evaluate` reads them, in dataset order (candidates too)."""
    with path.open("w", encoding="utf-8") as handle:
        for repeat in sorted(predictions):
            for item in items:
                if item.id not in predictions[repeat]:
                    continue
                given = predictions[repeat][item.id]
                scores = {cid: given[cid] for cid in item.candidates if cid in given}
                line: dict[str, Any] = {"item_id": item.id, "scores": scores}
                if repeat:
                    line["repeat"] = repeat
                handle.write(json.dumps(line) + "\n")
