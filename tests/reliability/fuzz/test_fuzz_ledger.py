"""Fuzz of the batch ledger (`batches.jsonl`, issue 27: D13 closed as a class): any lines read
back as the jobs of the well-formed ones, every other line skipped and counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.calls.batch_ledger import BatchLedger
from tests.reliability.fuzz._contract import SETTINGS, json_lines, within_contract

KEYS = ["event", "label", "keys", "api", "id", "at", "answered", "errors"]


def _valid() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "event": st.sampled_from(["submitting", "submitted", "collected", "abandoned"]),
            "label": st.sampled_from(["a", "b"]),
        },
        optional={"keys": st.lists(st.text(max_size=4), max_size=3), "id": st.text(max_size=4)},
    )


@SETTINGS
@given(lines=json_lines(KEYS, _valid), tail=st.binary(max_size=20))
def test_any_ledger_reads_back_as_jobs_and_counted_torn_lines(
    tmp_path_factory: Any, lines: list[str], tail: bytes
) -> None:
    path: Path = tmp_path_factory.mktemp("run") / "batches.jsonl"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass") + b"\n" + tail)
    ledger = BatchLedger(path)
    entries = within_contract(ledger.open_entries)
    assert isinstance(entries, list)
    for entry in entries:
        assert isinstance(entry.label, str) and all(isinstance(k, str) for k in entry.keys)
        assert entry.batch_id is None or isinstance(entry.batch_id, str)
    assert 0 <= ledger.torn_lines <= len(path.read_text("utf-8", "replace").splitlines())
