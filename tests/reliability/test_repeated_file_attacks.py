"""Issue 48's file attacks repeated, and new ones of the same classes (the scripts and their
table: docs of the round in /work/tools/attacks-files.md): a folder where a file is expected,
a gzip file that inflates a thousand times over many lines, a Parquet file of millions of
repeated rows, a records table with a map key twice, a cache export whose key is a lone
surrogate and an empty qrels file are each one line naming the file, never a traceback, a
hang, a memory blow-up or a figure."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.calls.cache import ResponseCache
from harness.calls.portable_cache import (
    CACHE_SCHEMA_VERSION,
    FORMAT,
    FORMAT_VERSION,
    import_cache,
    read_portable,
)
from harness.cli.main import app
from harness.core import files
from harness.core.errors import DatasetError, HarnessError
from tests.conftest import write_tiny_dataset

HEADER = {"format": FORMAT, "version": FORMAT_VERSION, "cache_schema": CACHE_SCHEMA_VERSION}

READERS: dict[str, Callable[[Path], Any]] = {
    "read_bytes": files.read_bytes,
    "read_text": files.read_text,
    "read_json": files.read_json,
    "lines": lambda path: list(files.lines(path)),
    "read_jsonl": lambda path: list(files.read_jsonl(path)),
    "gzip_lines": lambda path: list(files.gzip_lines(path)),
    "sha256_of": files.sha256_of,
    "read_parquet": files.read_parquet,
}


@pytest.mark.parametrize("reader", READERS)
def test_a_folder_where_a_file_is_expected_is_one_line(tmp_path: Path, reader: str) -> None:
    folder = tmp_path / "records.jsonl"
    folder.mkdir()
    with pytest.raises(DatasetError, match="not a regular file") as refused:
        READERS[reader](folder)
    assert str(folder) in str(refused.value)


@pytest.mark.parametrize(
    "command",
    [
        ["evaluate", "FOLDER", "--dataset", "data"],
        ["evaluate", "run.trec", "--qrels", "FOLDER"],
        ["cache", "import", "FOLDER", "--cache-dir", "cache"],
    ],
    ids=["predictions", "qrels", "cache_import"],
)
def test_a_folder_given_as_a_file_is_one_line_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FOLDER").mkdir()
    write_tiny_dataset(tmp_path / "data", n_items=1)
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n")
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "FOLDER: not a regular file" in result.output


def _bomb(path: Path, lines: int, line_bytes: int) -> Path:
    """A cache export of `lines` answers of `line_bytes` bytes each, all one letter."""
    with gzip.open(path, "wb", compresslevel=9) as handle:
        handle.write(json.dumps(HEADER).encode() + b"\n")
        for i in range(lines):
            text = b"a" * line_bytes
            handle.write(b'{"key": "k%d", "value": {"text": "%s"}}\n' % (i, text))
        handle.write(b'{"end": true, "entries": %d}\n' % lines)
    return path


def test_a_gzip_file_inflating_far_past_its_size_over_many_lines_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (the floor below which any ratio is read, scaled down: the real one is 64 MiB)
    monkeypatch.setattr(files, "MIN_INFLATED_BYTES", 1 << 20)
    path = _bomb(tmp_path / "answers.jsonl.gz", lines=40, line_bytes=100_000)
    assert path.stat().st_size * files.MAX_INFLATION < 4 << 20
    cache = ResponseCache(tmp_path / "cache")
    with pytest.raises(DatasetError, match="inflates to more than") as refused:
        import_cache(cache, path)
    assert "answers.jsonl.gz:" in str(refused.value)
    assert len(cache) == 0
    cache.close()


def test_a_gzip_file_of_ordinary_answers_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "MIN_INFLATED_BYTES", 1 << 10)
    path = tmp_path / "answers.jsonl.gz"
    with gzip.open(path, "wb") as handle:
        handle.write(json.dumps(HEADER).encode() + b"\n")
        for i in range(200):  # keys that differ, as real ones do: a modest ratio
            handle.write(json.dumps({"key": f"{i:064x}", "value": {"text": str(i)}}).encode())
            handle.write(b"\n")
        handle.write(b'{"end": true, "entries": 200}\n')
    assert len(list(read_portable(path))) == 200


def test_a_cache_export_whose_key_is_not_text_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl.gz"
    with gzip.open(path, "wb") as handle:
        handle.write(json.dumps(HEADER).encode() + b"\n")
        handle.write(b'{"key": "k\\ud800", "value": {"text": "x"}}\n')
        handle.write(b'{"end": true, "entries": 1}\n')
    cache = ResponseCache(tmp_path / "cache")
    with pytest.raises(DatasetError, match=r"answers\.jsonl\.gz:2: .*key"):
        import_cache(cache, path)
    assert len(cache) == 0
    cache.close()


pq = pytest.importorskip("pyarrow.parquet")


def _records_table(tmp_path: Path, change: Callable[[Any], Any]) -> Path:
    from harness.core.records import Record
    from harness.interop.parquet import records_table

    record = Record(item_id="d0", candidates=["a", "b"], scores={"a": 1.0, "b": 0.0})
    path = tmp_path / "records.parquet"
    pq.write_table(change(records_table([record] * 3, "run")), path)
    return path


def test_a_records_table_with_a_score_given_twice_is_one_line(tmp_path: Path) -> None:
    import pyarrow as pa

    from harness.interop.parquet import read_records_parquet, records_schema

    def twice(table: Any) -> Any:
        scores = pa.array([[("a", 1.0), ("a", 2.0)]] * 3, records_schema().field("scores").type)
        return table.set_column(records_schema().get_field_index("scores"), "scores", scores)

    path = _records_table(tmp_path, twice)
    with pytest.raises(HarnessError) as refused:
        read_records_parquet(path)
    assert str(path) in str(refused.value) and "\n" not in str(refused.value)


def test_a_parquet_file_of_more_rows_than_the_bound_is_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (scaled down: 50 million repeated rows fit in a 2.7 MB file and exhaust memory)
    monkeypatch.setattr(files, "MAX_TABLE_ROWS", 2)
    path = _records_table(tmp_path, lambda table: table)
    with pytest.raises(DatasetError, match="more than 2 rows") as refused:
        files.read_parquet(path)
    assert str(path) in str(refused.value)


def test_an_empty_qrels_file_is_refused_not_scored_zero(tmp_path: Path) -> None:
    (tmp_path / "qrels.txt").write_text("")
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n")
    result = CliRunner().invoke(
        app, ["evaluate", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "qrels.txt")]
    )
    assert result.exit_code == 2, result.output
    assert "qrels.txt" in result.output and "no judgment" in result.output
