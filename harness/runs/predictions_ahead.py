"""A predictions file read by a second process while this one loads the dataset.

`harness evaluate` on a pool (10,000 items x 500 candidates) spends two thirds of its time
turning JSON lines into objects: the dataset's and the predictions'. Neither needs the other
until the lines are matched to their items, so a forked worker parses the predictions file
while this process loads the dataset: on two cores the whole command takes ~0.8 of the time.

What the worker sends back is flat (no Python object per score): each line's number, byte
offset, item id, repeat, the digest of its candidate ids in the order it lists them, and
its scores, all lines' scores in one float array. A line whose candidates are exactly its
item's, in the item's order (as `write_predictions` and most scorers write them), becomes
its `ScoreRow` with a slice of that array. Every other line (a ranking, a subset, another
order, a bad line, an unknown item) is read again here, from its offset, by
`harness.core.predictions.prediction_line`: one parser, so the same rows and the same errors, at
the same line, as `read_predictions`. The checks run here, in file order.

Anything amiss with the worker (not Linux, one core, killed, out of memory) leaves the
reading to `read_predictions` in this process: slower, never different."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from pydantic import ValidationError

from harness.core.dataset import Item, gc_paused
from harness.core.files import lines, open_file
from harness.core.predictions import (
    PredictionLine,
    Predictions,
    PredictionsCollector,
    ScoreRow,
    prediction_line,
    read_predictions,
)
from harness.core.trec import is_trec_run
from harness.core.workers import ForkedWorker

# Below this a file reads in well under a quarter of a second here; a fork costs more than
# the overlap wins.
AHEAD_MIN_BYTES = 8 * 2**20

# (line number, byte offset, item id or None if this process must read the line, repeat,
#  digest of the candidate ids in the line's order, start and end of its scores)
Entry = tuple[int, int, str | None, int, bytes | None, int, int]


def order_digest(ids: Sequence[str]) -> bytes | None:
    """A digest of the ids in their order; None where two different lists could give the
    same one (an id holding the NUL that separates them) or an id has no UTF-8 form."""
    joined = "\x00".join(ids)
    if ids and joined.count("\x00") != len(ids) - 1:
        return None
    try:
        return hashlib.blake2b(joined.encode(), digest_size=16).digest()
    except UnicodeEncodeError:
        return None


def _parse(path: Path) -> tuple[list[Entry], bytearray]:
    """The entries and every line's scores as float64 bytes, one buffer grown in place (a
    list of arrays joined at the end would hold them twice at once)."""
    entries: list[Entry] = []
    values = bytearray()
    offset = filled = 0
    with gc_paused():
        for line_no, raw in lines(path):
            entry: Entry = (line_no, offset, None, 0, None, 0, 0)
            offset += len(raw)
            try:
                pred = PredictionLine.model_validate_json(raw)
            except ValidationError:
                entries.append(entry)
                continue
            scores = pred.scores
            if scores is None:
                entries.append(entry)
                continue
            try:
                row = np.fromiter(scores.values(), np.float64, len(scores))
            except TypeError:  # a null: NaN, as `score_row` reads it
                row = np.array(list(scores.values()), dtype=np.float64)
            values += row.tobytes()
            start, filled = filled, filled + len(row)
            digest = order_digest(tuple(scores))
            entries.append((line_no, entry[1], pred.item_id, pred.repeat, digest, start, filled))
    return entries, values


def _work(connection: Connection, path: Path) -> None:
    try:
        entries, values = _parse(path)
    except BaseException:  # anything at all: the parent reads the file itself
        entries, values = None, bytearray()
    try:
        connection.send(entries)
        if entries is not None:
            connection.send_bytes(values)
    except OSError:  # the parent stopped listening: nothing left to do
        pass


class PredictionsReadAhead(ForkedWorker):
    """`with PredictionsReadAhead(path) as ahead: items = ...; preds = ahead.read(items)`:
    the worker starts on entering the block, if it can help, and is gone after it."""

    def __init__(self, path: Path, *, min_bytes: int | None = None) -> None:
        super().__init__()
        self.path = path
        self.min_bytes = AHEAD_MIN_BYTES if min_bytes is None else min_bytes

    def __enter__(self) -> PredictionsReadAhead:
        if self._worth_a_worker():
            self.start(_work, self.path)
        return self

    def _worth_a_worker(self) -> bool:
        try:
            if not self.path.is_file() or self.path.stat().st_size < self.min_bytes:
                return False
        except OSError:
            return False
        return not is_trec_run(self.path)

    def read(self, items: Sequence[Item]) -> Predictions:
        """What `read_predictions(path, items)` returns, or the first error it raises."""
        parsed = self._receive()
        if parsed is None:
            self.fell_back = self.started
            return read_predictions(self.path, items)
        with gc_paused():
            return self._merge(*parsed, items)

    def _receive(self) -> tuple[list[Entry], NDArray[np.float64]] | None:
        entries = self.receive()
        if entries is None or self.connection is None:
            return None
        try:
            values = np.frombuffer(self.connection.recv_bytes(), dtype=np.float64)
        except (EOFError, OSError):  # the worker died (killed, out of memory)
            return None
        return entries, values

    def _merge(
        self, entries: list[Entry], values: NDArray[np.float64], items: Sequence[Item]
    ) -> Predictions:
        collector = PredictionsCollector(self.path, items)
        digests: dict[str, bytes | None] = {}
        with open_file(self.path) as handle:
            for line_no, offset, item_id, repeat, digest, start, end in entries:
                if item_id is not None:
                    candidates = collector.candidates.get(item_id)
                    if candidates is not None and len(candidates) == end - start:
                        if item_id not in digests:
                            digests[item_id] = order_digest(candidates)
                        if digest is not None and digests[item_id] == digest:
                            row = ScoreRow(candidates, values[start:end], None)
                            collector.add_row(line_no, item_id, repeat, row)
                            continue
                handle.seek(offset)
                pred = prediction_line(self.path, line_no, handle.readline())
                if pred is not None:
                    collector.add(line_no, pred)
        return collector.predictions()
