"""Fuzz of a run's records.jsonl (read back by `harness report`, `view`, `load_run`): any
lines read back as records or as one HarnessError line naming the file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.core.records import read_records
from tests.reliability.fuzz._contract import SETTINGS, json_lines, json_values, within_contract

KEYS = ["item_id", "candidates", "repeat", "scores", "raw", "error", "parse_error",
        "cache_hit", "latency_s", "input_tokens", "output_tokens", "extra"]  # fmt: skip


def _valid() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "item_id": st.sampled_from(["d0", "d1"]),
            "candidates": st.just(["a", "b"]),
            "scores": st.dictionaries(st.sampled_from(["a", "b"]), st.floats(0, 10)),
        },
        optional={"repeat": st.integers(0, 3), "extra": json_values(KEYS)},
    )


@SETTINGS
@given(lines=json_lines(KEYS, _valid), raw=st.binary(max_size=30))
def test_any_records_file_reads_back_or_is_one_line(
    tmp_path_factory: Any, lines: list[str], raw: bytes
) -> None:
    path: Path = tmp_path_factory.mktemp("run") / "records.jsonl"
    for data in ("\n".join(lines).encode("utf-8", "surrogatepass") + b"\n", raw + b"\n"):
        path.write_bytes(data)
        got = within_contract(lambda: list(read_records(path)))
        if not isinstance(got, list):
            assert str(path) in str(got)
