"""The run folder's batch ledger: jobs are open until collected or abandoned, a job whose id
was never written is still open (to be found by its label), and a torn line is skipped."""

from __future__ import annotations

from pathlib import Path

from harness.calls.batch_ledger import BatchLedger


def test_open_jobs_and_a_torn_last_line(tmp_path: Path) -> None:
    ledger = BatchLedger(tmp_path / "batches.jsonl")
    assert ledger.open_entries() == []
    ledger.submitting("a", ["k1", "k2"], "api")
    ledger.submitted("a", "batch_a")
    ledger.submitting("b", ["k3"], "api")  # killed before its id was written
    ledger.submitting("c", ["k4"], "api")
    ledger.submitted("c", "batch_c")
    ledger.collected("c", "batch_c", {"answered": 1})
    ledger.submitting("d", ["k5"], "api")
    ledger.abandoned("d")
    with ledger.path.open("a") as handle:
        handle.write('{"event": "submitted", "label": "b", "id": "batch_')  # a kill mid-line
    found = {(e.label, e.batch_id, tuple(e.keys)) for e in ledger.open_entries()}
    assert found == {("a", "batch_a", ("k1", "k2")), ("b", None, ("k3",))}
    assert ledger.torn_lines == 1
