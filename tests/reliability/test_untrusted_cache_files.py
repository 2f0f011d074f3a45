"""The cache's files read back as untrusted (issue 48): a portable export line nested 100,000
deep or inflating to hundreds of MB is one line naming it, in bounded memory; a row of a seed
cache folder naming a file outside the folder (`../`, an absolute path, a FIFO) is a miss, not
a read of that file or a hang; an old pickled answer holding an integer Python cannot print is
a damaged entry, not a crash of every run; a records.jsonl without a newline is not read whole."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import threading
import tracemalloc
from pathlib import Path

import diskcache
import pytest

from harness.calls.cache import ResponseCache
from harness.calls.portable_cache import (
    CACHE_SCHEMA_VERSION,
    FORMAT,
    FORMAT_VERSION,
    import_cache,
    open_seed,
)
from harness.core.errors import HarnessError
from harness.core.records import read_records

HEADER = {"format": FORMAT, "version": FORMAT_VERSION, "cache_schema": CACHE_SCHEMA_VERSION}
ANSWER = {"text": '{"score": 7.5}', "input_tokens": 12, "output_tokens": 3, "extra": {}}


def _export(path: Path, *lines: bytes) -> Path:
    with gzip.open(path, "wb") as handle:
        handle.write(json.dumps(HEADER).encode() + b"\n")
        for line in lines:
            handle.write(line)
    return path


def _peak(read: object) -> tuple[BaseException | None, int]:
    tracemalloc.start()
    try:
        read()  # type: ignore[operator]
    except BaseException as exc:
        return exc, tracemalloc.get_traced_memory()[1]
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return None, peak


@pytest.mark.parametrize(
    "line",
    [
        b'{"key": "k", "value": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
        b'{"key": "k", "value": {"n": ' + b"9" * 6000 + b"}}\n",
    ],
    ids=["nested_deep", "huge_integer"],
)
def test_an_import_line_past_the_bounds_is_one_line(tmp_path: Path, line: bytes) -> None:
    export = _export(tmp_path / "answers.jsonl.gz", line, b'{"end": true, "entries": 1}\n')
    cache = ResponseCache(tmp_path / "cache")
    with pytest.raises(HarnessError, match=r"answers\.jsonl\.gz:2:") as refused:
        import_cache(cache, export)
    assert "\n" not in str(refused.value)
    assert len(cache) == 0
    cache.close()


def test_an_import_line_that_inflates_past_the_bound_is_refused_in_bounded_memory(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bomb.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=9) as handle:
        handle.write(json.dumps(HEADER).encode() + b"\n" + b'{"key": "k", "value": "')
        chunk = b"a" * (1 << 20)
        for _ in range(200):  # 200 MB of one line, from a few hundred KB
            handle.write(chunk)
    assert path.stat().st_size < 2 << 20
    cache = ResponseCache(tmp_path / "cache")
    error, peak = _peak(lambda: import_cache(cache, path))
    cache.close()
    assert isinstance(error, HarnessError) and "bomb.jsonl.gz:2" in str(error), error
    assert peak < 64 << 20, peak


def _seed_with_a_file_value(folder: Path) -> str:
    """A cache folder whose one answer is large enough to live in a file of its own."""
    cache = ResponseCache(folder)
    cache.set("k", {**ANSWER, "text": "y" * 50_000})
    cache.close()
    return "k"


def _point_row_at(folder: Path, filename: str) -> None:
    with sqlite3.connect(folder / "cache.db") as db:
        db.execute("UPDATE Cache SET filename = ? WHERE key = 'k'", (filename,))


def _get_within(seed_folder: Path, seconds: float) -> object:
    found: list[object] = []

    def ask() -> None:
        seed = open_seed(seed_folder)  # (SQLite: in the thread that asks)
        found.append(seed.get("k"))
        seed.close()

    worker = threading.Thread(target=ask, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "the seed's read hangs"
    return found[0]


@pytest.mark.parametrize("where", ["parent", "absolute", "fifo"])
def test_a_seed_row_naming_a_file_outside_its_folder_is_a_miss(tmp_path: Path, where: str) -> None:
    seed = tmp_path / "seed"
    _seed_with_a_file_value(seed)
    planted = tmp_path / "planted.val"
    planted.write_text(json.dumps({**ANSWER, "text": "planted"}))
    if where == "fifo":
        fifo = seed / "pipe.val"
        os.mkfifo(fifo)
        _point_row_at(seed, "pipe.val")
    else:
        _point_row_at(seed, "../planted.val" if where == "parent" else str(planted))
    assert _get_within(seed, 10) is None


def test_an_old_pickle_holding_an_integer_python_cannot_print_is_a_damaged_entry(
    tmp_path: Path,
) -> None:
    with diskcache.Cache(str(tmp_path / "cache")) as old:  # pickled, as an older harness did
        old.set("k", {**ANSWER, "extra": {"n": 10**6000}})
    cache = ResponseCache(tmp_path / "cache")
    assert cache.get("k", "chat") is None
    assert cache.damaged == {"k"}
    cache.close()


def test_a_records_file_without_a_newline_is_not_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    with path.open("wb") as handle:
        handle.write(b'{"item_id": "d0", "candidates": ["a"], "raw": "')
        for _ in range(100):
            handle.write(b"z" * (1 << 20))
    error, peak = _peak(lambda: list(read_records(path)))
    assert isinstance(error, HarnessError) and "records.jsonl:1" in str(error), error
    assert peak < 48 << 20, peak
