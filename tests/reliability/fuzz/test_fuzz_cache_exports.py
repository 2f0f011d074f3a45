"""Fuzz of the files the cache reads back besides its own values (issue 48): a portable cache
export (`harness cache import`, `--seed-cache FILE`), gzip or not, and a shard's shard.json and
a Hugging Face materialisation's source.json: any bytes read back or one HarnessError line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.calls.portable_cache import (
    CACHE_SCHEMA_VERSION,
    FORMAT,
    FORMAT_VERSION,
    read_portable,
)
from harness.core.sharding import SHARD_FILE, read_marker
from harness.interop.hf import SOURCE_FILE, read_source
from tests.reliability.fuzz._contract import SETTINGS, json_lines, json_values, within_contract

HEADER = json.dumps(
    {"format": FORMAT, "version": FORMAT_VERSION, "cache_schema": CACHE_SCHEMA_VERSION}
)
ENTRY_KEYS = ["key", "value", "end", "entries", "format", "version", "cache_schema"]
MARKER_KEYS = ["index", "count", "dataset_items", "items", "dataset_sha256"]


def _entry() -> st.SearchStrategy[dict[str, Any]]:
    answer = st.fixed_dictionaries(
        {"text": st.text(max_size=10)}, optional={"extra": json_values()}
    )
    return st.one_of(
        st.fixed_dictionaries({"key": st.text(max_size=8), "value": answer}),
        st.fixed_dictionaries({"end": st.just(True), "entries": st.integers(-1, 5)}),
    )


def test_any_portable_cache_file_reads_back_or_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "cache.jsonl.gz"

    @SETTINGS
    @given(lines=json_lines(ENTRY_KEYS, _entry), header=st.booleans(), zipped=st.booleans(),
           raw=st.binary(max_size=40))  # fmt: skip
    def check(lines: list[str], header: bool, zipped: bool, raw: bytes) -> None:
        text = "\n".join([HEADER] * header + lines).encode("utf-8", "surrogatepass") + b"\n"
        for data in (gzip.compress(text) if zipped else text, raw):
            path.write_bytes(data)
            got = within_contract(lambda: list(read_portable(path)))
            if not isinstance(got, list):
                assert str(path) in str(got), got

    check()


def test_any_shard_or_source_file_reads_back_or_is_one_line(tmp_path: Path) -> None:
    @SETTINGS
    @given(value=st.dictionaries(st.sampled_from(MARKER_KEYS), json_values(MARKER_KEYS)),
           raw=st.binary(max_size=40))  # fmt: skip
    def check(value: dict[str, Any], raw: bytes) -> None:
        for data in (json.dumps(value).encode(), raw):
            (tmp_path / SHARD_FILE).write_bytes(data)
            (tmp_path / SOURCE_FILE).write_bytes(data)
            got = within_contract(lambda: read_marker(tmp_path))
            assert not isinstance(got, Exception) or SHARD_FILE in str(got), got
            source = within_contract(lambda: read_source(tmp_path))
            assert source is None or isinstance(source, dict)

    check()
