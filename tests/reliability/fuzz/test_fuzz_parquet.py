"""Fuzz of a records.parquet read back (`harness.load_run`, issue 48): a records table whose
`extra` cells hold any text, a file cut short, or any bytes, is a table or one HarnessError
line naming the file. Without the contract's memory bound: tracemalloc, started and stopped
around each read, races with the raw allocations of pyarrow's and numpy's threads on Python
3.11 and crashes the process (a test artefact: thousands of these reads without it do not)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.core.errors import HarnessError
from harness.core.records import Record
from harness.interop.parquet import read_records_parquet, records_schema, records_table
from tests.reliability.fuzz._contract import SETTINGS, json_values

pq = pytest.importorskip("pyarrow.parquet")
EXTRA = st.one_of(
    json_values().map(json.dumps), st.text(max_size=30), st.sampled_from(["{", "[1]"])
)


def test_any_records_parquet_reads_back_or_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "records.parquet"
    record = Record(item_id="d0", candidates=["a", "b"], scores={"a": 1.0, "b": 0.0})
    pq.write_table(records_table([record], "run"), path)
    assert len(read_records_parquet(path)) == 1  # (pandas and pyarrow imported before the clock)

    @SETTINGS
    @given(extra=EXTRA, cut=st.integers(0, 4000), raw=st.binary(max_size=40))
    def check(extra: str, cut: int, raw: bytes) -> None:
        table = records_table([record], "run")
        table = table.set_column(records_schema().get_field_index("extra"), "extra", [[extra]])
        pq.write_table(table, path)
        whole = path.read_bytes()
        for data in (whole, whole[:cut], raw):
            path.write_bytes(data)
            try:
                read_records_parquet(path)
            except HarnessError as exc:
                assert str(path) in str(exc) and "\n" not in str(exc), exc

    check()
